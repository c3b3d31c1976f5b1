//! Replaces or removes one top-level block of a block-mapping document by editing lines, so
//! every byte outside that block stays as it was; each edit is re-parsed and checked.

use super::{emit_block, parse, Doc, Limits};
use serde_json::Value;

/// Why a block could not be written safely.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpliceError {
    /// The document's root is not a block mapping (e.g. `{title: x}` on one line).
    #[error("the top level is not a block mapping ('key: value' lines); rewrite it that way")]
    NotBlockMapping,
    /// The document uses an explicit end marker `...`.
    #[error("the file has a '...' document end marker; remove it")]
    EndMarker,
    /// The edited text did not read back as intended.
    #[error("editing the '{0}' block would change other fields; fix the file by hand")]
    Unsafe(String),
}

/// Returns `text` with the top-level `key` set to `value`: replaced in place when present,
/// else inserted before `coord:` (or at the end; `coord` itself always goes last).
pub fn set_block(text: &str, doc: &Doc, key: &str, value: &Value) -> Result<String, SpliceError> {
    let lines = check(text, doc)?;
    let indent = doc.top_keys.first().map_or(0, |k| k.pos.col - 1);
    let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let block = emit_block(key, value, indent).replace('\n', eol);
    let (start, end) = match block_range(&lines, doc, key) {
        Some(range) => range,
        None => {
            let at = insertion_line(&lines, doc, key);
            (at, at)
        }
    };
    let mut out = String::with_capacity(text.len() + block.len());
    for l in &lines[..start] {
        out.push_str(l);
    }
    if start > 0 && start == lines.len() && !out.ends_with('\n') {
        out.push_str(eol);
    }
    out.push_str(&block);
    for l in &lines[end..] {
        out.push_str(l);
    }
    verify(doc, &out, key, Some(value))?;
    Ok(out)
}

/// Returns `text` without the top-level `key` block (unchanged when absent).
pub fn remove_block(text: &str, doc: &Doc, key: &str) -> Result<String, SpliceError> {
    let lines = check(text, doc)?;
    let Some((start, end)) = block_range(&lines, doc, key) else {
        return Ok(text.to_string());
    };
    let out: String = lines[..start]
        .iter()
        .chain(&lines[end..])
        .copied()
        .collect();
    verify(doc, &out, key, None)?;
    Ok(out)
}

fn check<'t>(text: &'t str, doc: &Doc) -> Result<Vec<&'t str>, SpliceError> {
    let empty_doc = doc.value.is_null() || doc.value.as_object().is_some_and(|m| m.is_empty());
    if !doc.block_root && !empty_doc {
        return Err(SpliceError::NotBlockMapping);
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    if lines.iter().any(|l| l.trim_end() == "...") {
        return Err(SpliceError::EndMarker);
    }
    Ok(lines)
}

/// Returns the 0-based line range [start, end) of `key`'s block, leaving trailing blank lines
/// and top-level comments (which belong to what follows) outside it.
fn block_range(lines: &[&str], doc: &Doc, key: &str) -> Option<(usize, usize)> {
    let i = doc.top_keys.iter().position(|k| k.key == key)?;
    let start = doc.top_keys[i].pos.line - 1;
    let indent = doc.top_keys[i].pos.col - 1;
    let mut end = doc
        .top_keys
        .get(i + 1)
        .map_or(lines.len(), |next| next.pos.line - 1);
    while end > start + 1 && is_trailing_filler(lines[end - 1], indent) {
        end -= 1;
    }
    Some((start, end))
}

fn is_trailing_filler(line: &str, indent: usize) -> bool {
    let trimmed = line.trim_start();
    let col = line.len() - trimmed.len();
    trimmed.trim().is_empty() || (trimmed.starts_with('#') && col <= indent)
}

fn insertion_line(lines: &[&str], doc: &Doc, key: &str) -> usize {
    if key != "coord" {
        if let Some(c) = doc.top_keys.iter().find(|k| k.key == "coord") {
            return c.pos.line - 1;
        }
    }
    lines.len()
}

/// Re-parses the edit: every other top-level value must be unchanged, `key` must hold `value`
/// (or be gone), and `coord` must stay last when it was last (a `result:` appended after it
/// by `cat >>` stays where its writer put it: the splice owns only the block it edits).
fn verify(before: &Doc, text: &str, key: &str, value: Option<&Value>) -> Result<(), SpliceError> {
    let unsafe_edit = || SpliceError::Unsafe(key.to_string());
    let unlimited = Limits {
        max_bytes: usize::MAX,
        ..Limits::default()
    };
    let after = parse(text, &unlimited).map_err(|_| unsafe_edit())?;
    let empty = serde_json::Map::new();
    let old = before.value.as_object().unwrap_or(&empty);
    let new = after.value.as_object().unwrap_or(&empty);
    let others_same = old
        .iter()
        .filter(|(k, _)| k.as_str() != key)
        .all(|(k, v)| new.get(k) == Some(v))
        && new.keys().filter(|k| k.as_str() != key).count()
            == old.keys().filter(|k| k.as_str() != key).count();
    let coord_last = |d: &Doc| {
        d.top_keys
            .iter()
            .position(|k| k.key == "coord")
            .is_none_or(|i| i + 1 == d.top_keys.len())
    };
    let coord_last = coord_last(&after) || !coord_last(before);
    if others_same && coord_last && new.get(key) == value {
        Ok(())
    } else {
        Err(unsafe_edit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(s: &str) -> Doc {
        parse(s, &Limits::default()).expect("valid")
    }

    #[test]
    fn appends_coord_keeping_every_byte() {
        let src = "# keep me\ntitle:   Fix it   # odd spacing\nlabels: [a,  b]\n";
        let out = set_block(src, &doc(src), "coord", &json!({"state": "ready"})).expect("ok");
        assert_eq!(out, format!("{src}coord:\n  state: ready\n"));
    }

    #[test]
    fn replaces_coord_in_place() {
        let src = "title: x\ncoord:\n  state: ready\n  attempt: 0\n";
        let out = set_block(src, &doc(src), "coord", &json!({"state": "done"})).expect("ok");
        assert_eq!(out, "title: x\ncoord:\n  state: done\n");
    }

    #[test]
    fn inserts_result_before_coord_and_keeps_comments() {
        let src = "title: x\n# about coord\ncoord:\n  state: assigned\n";
        let out = set_block(src, &doc(src), "result", &json!({"status": "success"})).expect("ok");
        assert_eq!(
            out,
            "title: x\n# about coord\nresult:\n  status: success\ncoord:\n  state: assigned\n"
        );
    }

    #[test]
    fn removes_result_but_not_following_comment() {
        let src =
            "title: x\nresult:\n  status: failure # bad\n\n# people's note\ncoord:\n  attempt: 1\n";
        let out = remove_block(src, &doc(src), "result").expect("ok");
        assert_eq!(out, "title: x\n\n# people's note\ncoord:\n  attempt: 1\n");
    }

    #[test]
    fn handles_missing_final_newline_and_crlf() {
        let src = "title: x";
        let out = set_block(src, &doc(src), "coord", &json!({"a": 1})).expect("ok");
        assert_eq!(out, "title: x\ncoord:\n  a: 1\n");
        let src = "title: x\r\n";
        let out = set_block(src, &doc(src), "coord", &json!({"a": 1})).expect("ok");
        assert_eq!(out, "title: x\r\ncoord:\r\n  a: 1\r\n");
    }

    #[test]
    fn keeps_indented_root() {
        let src = "  title: x\n  labels: [a]\n";
        let out = set_block(src, &doc(src), "coord", &json!({"a": 1})).expect("ok");
        assert_eq!(out, "  title: x\n  labels: [a]\n  coord:\n    a: 1\n");
    }

    #[test]
    fn edits_coord_and_result_when_result_follows_coord() {
        let src = "title: x\ncoord:\n  state: assigned\nresult:\n  status: success\n";
        let out = set_block(src, &doc(src), "coord", &json!({"state": "done"})).expect("coord");
        assert_eq!(
            out,
            "title: x\ncoord:\n  state: done\nresult:\n  status: success\n"
        );
        let out = remove_block(src, &doc(src), "result").expect("result");
        assert_eq!(out, "title: x\ncoord:\n  state: assigned\n");
    }

    #[test]
    fn refuses_flow_root() {
        let src = "{title: x}\n";
        assert_eq!(
            set_block(src, &doc(src), "coord", &json!({})),
            Err(SpliceError::NotBlockMapping)
        );
    }
}
