//! Event-driven YAML parsing with budgets and positions.

use saphyr_parser::{Event, Marker, Parser, ScalarStyle, Span, Tag};
use serde_json::{Map, Number, Value};
use std::collections::HashMap;

/// Budgets that keep a hostile file from costing more than a small, fixed amount of work.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest accepted file, in bytes.
    pub max_bytes: usize,
    /// Deepest accepted nesting of mappings and sequences.
    pub max_depth: usize,
    /// Most nodes, counting every node an alias expands to.
    pub max_nodes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 1 << 20,
            max_depth: 64,
            max_nodes: 100_000,
        }
    }
}

/// A 1-based line and column.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Pos {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub col: usize,
}

impl Pos {
    fn from_marker(m: &Marker) -> Pos {
        Pos {
            line: m.line(),
            col: m.col() + 1,
        }
    }
}

/// A problem in the YAML text itself, with where it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{}: {message}", pos.line, pos.col)]
pub struct YamlError {
    /// Where.
    pub pos: Pos,
    /// What is wrong.
    pub message: String,
}

impl YamlError {
    fn at(pos: Pos, message: impl Into<String>) -> YamlError {
        YamlError {
            pos,
            message: message.into(),
        }
    }
}

/// A top-level key of a block mapping document and where its line starts.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TopKey {
    /// The key.
    pub key: String,
    /// Where the key is.
    pub pos: Pos,
}

/// A parsed document: its value, the position of every node and the top-level keys.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Doc {
    /// The document as JSON.
    pub value: Value,
    /// JSON pointer → position of the node's value (not serialized: the stat cache keeps only
    /// documents whose positions no report needs).
    #[serde(skip)]
    pub value_pos: HashMap<String, Pos>,
    /// JSON pointer → position of the mapping key naming the node (not serialized either).
    #[serde(skip)]
    pub key_pos: HashMap<String, Pos>,
    /// Top-level keys in order, when the root is a block mapping.
    pub top_keys: Vec<TopKey>,
    /// Whether the root is a block (not flow) mapping, which is what splicing needs.
    pub block_root: bool,
}

impl Doc {
    /// Returns the best position for a JSON pointer: the node's key, its value, or the nearest
    /// ancestor that has one.
    pub fn pos_of(&self, pointer: &str, prefer_key: bool) -> Pos {
        let mut p = pointer.to_string();
        loop {
            let found = if prefer_key {
                self.key_pos.get(&p).or_else(|| self.value_pos.get(&p))
            } else {
                self.value_pos.get(&p).or_else(|| self.key_pos.get(&p))
            };
            if let Some(pos) = found {
                return *pos;
            }
            match p.rfind('/') {
                Some(i) => p.truncate(i),
                None => return Pos { line: 1, col: 1 },
            }
        }
    }
}

/// Parses raw bytes: checks the size limit and UTF-8 before any YAML work.
pub fn parse_bytes(bytes: &[u8], limits: &Limits) -> Result<Doc, YamlError> {
    if bytes.len() > limits.max_bytes {
        return Err(YamlError::at(
            Pos { line: 1, col: 1 },
            format!(
                "file is larger than the {} byte limit; split it or move large data elsewhere",
                limits.max_bytes
            ),
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let before = &bytes[..e.valid_up_to()];
        let line = before.iter().filter(|b| **b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let col = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count()
            + 1;
        YamlError::at(
            Pos { line, col },
            "file is not valid UTF-8; save it as UTF-8",
        )
    })?;
    parse(text, limits)
}

/// Parses one YAML document into JSON with positions, within `limits`.
pub fn parse(text: &str, limits: &Limits) -> Result<Doc, YamlError> {
    if text.len() > limits.max_bytes {
        return parse_bytes(text.as_bytes(), limits);
    }
    let mut b = Builder::new(text, limits);
    let mut parser = Parser::new_from_str(text);
    while let Some(next) = parser.next_event() {
        let (event, span) = next.map_err(|e| syntax_error(text, e.marker(), e.info(), limits))?;
        if b.event(event, span)? {
            break;
        }
    }
    Ok(b.finish())
}

fn syntax_error(text: &str, at: &Marker, info: &str, limits: &Limits) -> YamlError {
    if info.contains("recursion limit") {
        let message = format!(
            "nesting deeper than {} levels; flatten the document",
            limits.max_depth
        );
        return YamlError::at(Pos::from_marker(at), message);
    }
    if let Some(line) = conflict_marker(text) {
        return YamlError::at(
            Pos { line, col: 1 },
            "YAML syntax: an unresolved git merge conflict (a line starting with <<<<<<<, ======= or >>>>>>>); keep one version and delete the marker lines",
        );
    }
    YamlError::at(
        Pos::from_marker(at),
        format!("YAML syntax: {}", in_words(info)),
    )
}

/// Returns the 1-based line of the first git conflict marker in `text`.
fn conflict_marker(text: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            l.starts_with("<<<<<<< ") || l.starts_with(">>>>>>> ") || l.trim_end() == "======="
        })
        .map(|i| i + 1)
}

/// Returns the YAML parser's complaint as what went wrong and how to fix it; the parser's own
/// text, with a general hint, when it is not one of the common mistakes.
fn in_words(info: &str) -> String {
    const KNOWN: [(&str, &str); 10] = [
        ("mapping values are not allowed", "a ': ' inside a value, or a line indented under a value; put the value in quotes (title: \"a: b\") or fix the indentation"),
        ("found a tab", "a tab in the indentation; indent with spaces only"),
        ("flow sequence", "a '[' list is not closed; add the missing ']', or put an item holding ',' or ']' in quotes"),
        ("flow mapping", "a '{' mapping is not closed; add the missing '}', or put a value holding ',' or '}' in quotes"),
        ("trailing content after", "text after a closing quote; inside single quotes write '' for one quote ('it''s'), or put the whole value in double quotes"),
        ("quoted scalar", "a quoted value is not closed; add the closing quote"),
        ("unexpected character", "a value cannot start with this character (@ or `); put the value in quotes"),
        ("unknown anchor", "'*' refers to an '&' anchor that is not defined; put the value in quotes if you meant a '*'"),
        ("expected '-'", "list items do not line up; start each item with '- ' in the same column"),
        ("block mapping", "keys do not line up; keys of one mapping start in the same column"),
    ];
    KNOWN
        .iter()
        .find(|(said, _)| info.contains(said))
        .map_or_else(
            || format!("{info}; check the quoting and indentation here and on the line before"),
            |(_, words)| (*words).to_string(),
        )
}

enum Frame {
    Seq {
        items: Vec<Value>,
        pointer: String,
        anchor: usize,
    },
    Map {
        map: Map<String, Value>,
        pointer: String,
        anchor: usize,
        key: Option<String>,
    },
}

struct Builder<'a> {
    text: &'a str,
    limits: Limits,
    stack: Vec<Frame>,
    root: Option<Value>,
    docs: usize,
    nodes: usize,
    anchors: HashMap<usize, (Value, usize)>,
    value_pos: HashMap<String, Pos>,
    key_pos: HashMap<String, Pos>,
    top_keys: Vec<TopKey>,
    block_root: bool,
}

impl<'a> Builder<'a> {
    fn new(text: &'a str, limits: &Limits) -> Self {
        Builder {
            text,
            limits: *limits,
            stack: Vec::new(),
            root: None,
            docs: 0,
            nodes: 0,
            anchors: HashMap::new(),
            value_pos: HashMap::new(),
            key_pos: HashMap::new(),
            top_keys: Vec::new(),
            block_root: false,
        }
    }

    fn finish(self) -> Doc {
        Doc {
            value: self.root.unwrap_or(Value::Null),
            value_pos: self.value_pos,
            key_pos: self.key_pos,
            top_keys: self.top_keys,
            block_root: self.block_root,
        }
    }

    /// Handles one event; returns true at the end of the stream.
    fn event(&mut self, event: Event<'_>, span: Span) -> Result<bool, YamlError> {
        let pos = Pos::from_marker(&span.start);
        match event {
            Event::StreamEnd => return Ok(true),
            Event::DocumentStart(_) => {
                self.docs += 1;
                if self.docs > 1 {
                    return Err(YamlError::at(
                        pos,
                        "a task file holds one YAML document; remove the second '---' document",
                    ));
                }
            }
            Event::Alias(id) => self.alias(id, pos)?,
            Event::Scalar(text, style, anchor, tag) => {
                self.scalar(&text, style, anchor, tag.as_deref(), pos)?
            }
            Event::SequenceStart(anchor, tag) => {
                self.check_tag(tag.as_deref(), pos)?;
                self.open(pos)?;
                let pointer = self.child_pointer(pos)?;
                self.stack.push(Frame::Seq {
                    items: Vec::new(),
                    pointer,
                    anchor,
                });
            }
            Event::MappingStart(anchor, tag) => {
                self.check_tag(tag.as_deref(), pos)?;
                if self.stack.is_empty() {
                    self.block_root = !self.starts_with_brace(&span.start);
                }
                self.open(pos)?;
                let pointer = self.child_pointer(pos)?;
                self.stack.push(Frame::Map {
                    map: Map::new(),
                    pointer,
                    anchor,
                    key: None,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => self.close()?,
            Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
        }
        Ok(false)
    }

    fn starts_with_brace(&self, m: &Marker) -> bool {
        self.text
            .lines()
            .nth(m.line().saturating_sub(1))
            .and_then(|l| l.chars().nth(m.col()))
            == Some('{')
    }

    fn count(&mut self, n: usize, pos: Pos) -> Result<(), YamlError> {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > self.limits.max_nodes {
            return Err(YamlError::at(
                pos,
                format!(
                    "document expands to over {} nodes (alias bomb or huge file); simplify it",
                    self.limits.max_nodes
                ),
            ));
        }
        Ok(())
    }

    fn open(&mut self, pos: Pos) -> Result<(), YamlError> {
        self.count(1, pos)?;
        if self.stack.len() >= self.limits.max_depth {
            return Err(YamlError::at(
                pos,
                format!(
                    "nesting deeper than {} levels; flatten the document",
                    self.limits.max_depth
                ),
            ));
        }
        Ok(())
    }

    fn check_tag(&self, tag: Option<&Tag>, pos: Pos) -> Result<(), YamlError> {
        match tag {
            Some(t)
                if !(t.is_yaml_core_schema()
                    && ["str", "int", "float", "bool", "null", "map", "seq"]
                        .contains(&t.suffix.as_str())) =>
            {
                Err(YamlError::at(
                    pos,
                    format!("custom tag '{t}' is not allowed in task files; remove it"),
                ))
            }
            _ => Ok(()),
        }
    }

    /// Returns the pointer of the node that starts now, recording its position; for a mapping
    /// awaiting a key, `None` means this node is the key.
    fn child_pointer(&mut self, pos: Pos) -> Result<String, YamlError> {
        let pointer = match self.stack.last() {
            None => String::new(),
            Some(Frame::Seq { items, pointer, .. }) => format!("{pointer}/{}", items.len()),
            Some(Frame::Map {
                key: Some(k),
                pointer,
                ..
            }) => format!("{pointer}/{}", super::pointer_token(k)),
            Some(Frame::Map { key: None, .. }) => {
                return Err(YamlError::at(
                    pos,
                    "complex mapping keys are not supported; use a plain string key",
                ))
            }
        };
        self.value_pos.insert(pointer.clone(), pos);
        Ok(pointer)
    }

    fn scalar(
        &mut self,
        text: &str,
        style: ScalarStyle,
        anchor: usize,
        tag: Option<&Tag>,
        pos: Pos,
    ) -> Result<(), YamlError> {
        self.check_tag(tag, pos)?;
        self.count(1, pos)?;
        if self.awaiting_key() {
            return self.key(text, pos);
        }
        self.child_pointer(pos)?;
        let forced_str = tag.is_some_and(|t| t.suffix == "str");
        let value = if style == ScalarStyle::Plain && !forced_str {
            resolve_plain(text)
        } else {
            Value::String(text.to_string())
        };
        self.remember(anchor, &value, 1);
        self.push_value(value);
        Ok(())
    }

    fn awaiting_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }

    fn key(&mut self, text: &str, pos: Pos) -> Result<(), YamlError> {
        let depth = self.stack.len();
        let Some(Frame::Map {
            map, pointer, key, ..
        }) = self.stack.last_mut()
        else {
            return Ok(());
        };
        if map.contains_key(text) {
            return Err(YamlError::at(pos, format!("duplicate key '{text}'")));
        }
        self.key_pos
            .insert(format!("{pointer}/{}", super::pointer_token(text)), pos);
        *key = Some(text.to_string());
        if depth == 1 {
            self.top_keys.push(TopKey {
                key: text.to_string(),
                pos,
            });
        }
        Ok(())
    }

    fn alias(&mut self, id: usize, pos: Pos) -> Result<(), YamlError> {
        let (value, size) = self
            .anchors
            .get(&id)
            .cloned()
            .ok_or_else(|| YamlError::at(pos, "alias to an unknown anchor"))?;
        self.count(size, pos)?;
        if let Some(Frame::Map { key: None, .. }) = self.stack.last() {
            return Err(YamlError::at(pos, "an alias cannot be a mapping key"));
        }
        self.child_pointer(pos)?;
        self.push_value(value);
        Ok(())
    }

    fn remember(&mut self, anchor: usize, value: &Value, size: usize) {
        if anchor != 0 {
            self.anchors.insert(anchor, (value.clone(), size));
        }
    }

    fn close(&mut self) -> Result<(), YamlError> {
        let (value, anchor) = match self.stack.pop() {
            Some(Frame::Seq { items, anchor, .. }) => (Value::Array(items), anchor),
            Some(Frame::Map { map, anchor, .. }) => (Value::Object(map), anchor),
            None => return Ok(()),
        };
        self.remember(anchor, &value, node_count(&value).max(1));
        self.push_value(value);
        Ok(())
    }

    fn push_value(&mut self, value: Value) {
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map { map, key, .. }) => {
                if let Some(k) = key.take() {
                    map.insert(k, value);
                }
            }
        }
    }
}

fn node_count(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(node_count).sum::<usize>(),
        Value::Object(m) => 1 + m.values().map(node_count).sum::<usize>(),
        _ => 1,
    }
}

/// Resolves a plain scalar by the YAML 1.2 core schema.
pub(super) fn resolve_plain(s: &str) -> Value {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    if let Some(n) = parse_int(s) {
        return Value::Number(n.into());
    }
    if looks_like_float(s) {
        if let Some(n) = s.parse::<f64>().ok().and_then(Number::from_f64) {
            return Value::Number(n);
        }
    }
    Value::String(s.to_string())
}

fn parse_int(s: &str) -> Option<i64> {
    if let Some(hex) = s.strip_prefix("0x") {
        return i64::from_str_radix(hex, 16).ok();
    }
    if let Some(oct) = s.strip_prefix("0o") {
        return i64::from_str_radix(oct, 8).ok();
    }
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn looks_like_float(s: &str) -> bool {
    let body = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let mantissa_ok = !mantissa.is_empty()
        && mantissa != "."
        && mantissa.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && mantissa.bytes().filter(|b| *b == b'.').count() <= 1;
    let exp_ok = exp.is_none_or(|e| {
        let d = e.strip_prefix(['-', '+']).unwrap_or(e);
        !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())
    });
    mantissa_ok && exp_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(s: &str) -> Result<Doc, YamlError> {
        parse(s, &Limits::default())
    }

    #[test]
    fn parses_minimal_task() {
        let d = p("title: Fix the login bug\n").expect("valid");
        assert_eq!(d.value, json!({"title": "Fix the login bug"}));
        assert!(d.block_root);
        assert_eq!(d.top_keys[0].key, "title");
        assert_eq!(d.value_pos["/title"], Pos { line: 1, col: 8 });
    }

    #[test]
    fn resolves_core_schema_scalars() {
        let d = p("a: 1\nb: -2.5\nc: true\nd: ~\ne: '1'\nf: 0x10\ng: 1e3\nh: 2026-12-01T17:00:00Z\ni: 1.2.3\n")
            .expect("valid");
        assert_eq!(
            d.value,
            json!({"a":1,"b":-2.5,"c":true,"d":null,"e":"1","f":16,"g":1000.0,"h":"2026-12-01T17:00:00Z","i":"1.2.3"})
        );
    }

    #[test]
    fn records_nested_positions() {
        let d = p("title: x\nlabels:\n  - a\n  - b\ninput: {k: [1, 2]}\n").expect("valid");
        assert_eq!(d.value_pos["/labels/1"], Pos { line: 4, col: 5 });
        assert_eq!(d.key_pos["/labels"], Pos { line: 2, col: 1 });
        assert_eq!(d.value_pos["/input/k/1"].line, 5);
        assert_eq!(
            d.pos_of("/labels/9", false),
            Pos { line: 2, col: 1 }.max(d.value_pos["/labels"])
        );
    }

    #[test]
    fn rejects_alias_bomb_quickly() {
        let mut s = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let prev = (b'a' + i - 1) as char;
            let cur = (b'a' + i) as char;
            s.push_str(&format!("{cur}: &{cur} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
        }
        let err = p(&s).expect_err("bomb");
        assert!(err.message.contains("nodes"), "{err}");
    }

    #[test]
    fn rejects_deep_nesting() {
        let s = "[".repeat(100_000) + &"]".repeat(100_000);
        let err = p(&s).expect_err("deep");
        assert!(err.message.contains("nesting"), "{err}");
    }

    #[test]
    fn rejects_oversize_and_bad_utf8() {
        let big = vec![b'a'; (1 << 20) + 1];
        assert!(parse_bytes(&big, &Limits::default()).is_err());
        let err = parse_bytes(b"title: caf\xe9\n", &Limits::default()).expect_err("latin1");
        assert_eq!(err.pos, Pos { line: 1, col: 11 });
    }

    #[test]
    fn rejects_custom_tags_multi_docs_and_duplicates() {
        assert!(p("title: !!python/object:os.system x\n").is_err());
        assert!(p("title: !custom x\n").is_err());
        assert!(p("title: a\n---\ntitle: b\n").is_err());
        let err = p("title: a\ntitle: b\n").expect_err("dup");
        assert_eq!(err.pos.line, 2);
    }

    #[test]
    fn reports_syntax_errors_with_position() {
        let err = p("title: x\nlabels: [a, b\n").expect_err("syntax");
        assert!(err.message.starts_with("YAML syntax"), "{err}");
        assert!(err.pos.line >= 2);
    }

    #[test]
    fn sees_flow_root() {
        let d = p("{title: x}\n").expect("valid");
        assert!(!d.block_root);
    }
}
