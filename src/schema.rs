//! The task, agent and schedule JSON Schemas: the copies compiled into the binary, the repo's own copy
//! when present (the extension point), and validation that reports every violation as a
//! position in the YAML source. Pure apart from reading the repo's schema file.

use crate::yaml::{pointer_token, Doc, Pos};

mod words;
use jsonschema::error::ValidationErrorKind;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The task schema shipped with coord.
pub const TASK_SCHEMA: &str = include_str!("../schemas/task.schema.json");
/// The agent profile schema shipped with coord.
pub const AGENT_SCHEMA: &str = include_str!("../schemas/agent.schema.json");
/// The schedule schema shipped with coord.
pub const SCHEDULE_SCHEMA: &str = include_str!("../schemas/schedule.schema.json");

/// One problem in a file, with where it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    /// Where in the file.
    pub pos: Pos,
    /// What is wrong, for people.
    pub message: String,
}

impl Violation {
    /// Returns a violation at `pos`.
    pub fn at(pos: Pos, message: impl Into<String>) -> Violation {
        Violation {
            pos,
            message: message.into(),
        }
    }

    /// Returns a violation about the whole file (1:1).
    pub fn file(message: impl Into<String>) -> Violation {
        Violation::at(Pos { line: 1, col: 1 }, message)
    }

    /// Returns `path:line:column: message`.
    pub fn render(&self, path: &str) -> String {
        format!(
            "{path}:{}:{}: {}",
            self.pos.line, self.pos.col, self.message
        )
    }
}

/// A schema that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The schema file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a usable JSON Schema.
    #[error("{}: not a valid JSON Schema: {message}; fix it or delete it to use the built-in schema", path.display())]
    Invalid {
        /// The schema file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// A schema, compiled on first use: a tick whose files all come from the stat cache validates
/// nothing and so never pays for compiling it (which includes checking it against the draft
/// 2020-12 meta-schema).
pub struct Schema {
    json: Value,
    path: PathBuf,
    validator: OnceLock<Result<jsonschema::Validator, String>>,
}

impl Schema {
    /// Compiles schema text now; `path` names it in errors.
    pub fn compile(text: &str, path: &Path) -> Result<Schema, SchemaError> {
        let schema = Schema::deferred(text, path)?;
        match schema.validator() {
            Ok(_) => Ok(schema),
            Err(message) => Err(schema.invalid(message.clone())),
        }
    }

    /// Reads schema text whose compilation is known to succeed (the built-in schemas, or a
    /// repo's copy that compiled before) and compiles it when it is first used. Should it
    /// fail after all, every file it checks gets that failure as its violation.
    pub fn deferred(text: &str, path: &Path) -> Result<Schema, SchemaError> {
        let json = serde_json::from_str(text).map_err(|e| SchemaError::Invalid {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Ok(Schema {
            json,
            path: path.to_path_buf(),
            validator: OnceLock::new(),
        })
    }

    fn invalid(&self, message: String) -> SchemaError {
        SchemaError::Invalid {
            path: self.path.clone(),
            message,
        }
    }

    fn validator(&self) -> Result<&jsonschema::Validator, &String> {
        self.validator
            .get_or_init(|| jsonschema::validator_for(&self.json).map_err(|e| e.to_string()))
            .as_ref()
    }

    /// Returns the task schema in force: the repo's copy `text` (read from `path`) when there
    /// is one, else the built-in one. The repo's copy is compiled now, so a broken one is
    /// reported at once, unless it is the built-in text or `proven` (these bytes compiled
    /// before).
    pub fn task_for_repo(
        text: Option<&str>,
        path: &Path,
        proven: bool,
    ) -> Result<Schema, SchemaError> {
        match text {
            None => Ok(Schema::builtin_task()),
            Some(text) if proven || text == TASK_SCHEMA => Schema::deferred(text, path),
            Some(text) => Schema::compile(text, path),
        }
    }

    /// Reads the repo's schema file at `path`; None when there is none.
    pub fn read_repo_file(path: &Path) -> Result<Option<String>, SchemaError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(SchemaError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Returns the built-in task schema.
    pub fn builtin_task() -> Schema {
        Schema::deferred(TASK_SCHEMA, Path::new("schemas/task.schema.json"))
            .expect("the built-in task schema is JSON (tested)")
    }

    /// Returns the built-in agent profile schema.
    pub fn builtin_agent() -> Schema {
        Schema::deferred(AGENT_SCHEMA, Path::new("schemas/agent.schema.json"))
            .expect("the built-in agent schema is JSON (tested)")
    }

    /// Returns the built-in schedule schema.
    pub fn builtin_schedule() -> Schema {
        Schema::deferred(SCHEDULE_SCHEMA, Path::new("schemas/schedule.schema.json"))
            .expect("the built-in schedule schema is JSON (tested)")
    }

    /// Returns every violation of `doc`, each placed at the offending key or value.
    pub fn validate(&self, doc: &Doc) -> Vec<Violation> {
        self.validate_split(doc, "").0
    }

    /// Returns every violation of `doc`, split into those outside the top-level `key` and those
    /// inside it (an agent's malformed `result:` is not a malformed task). An empty `key` puts
    /// every violation in the first list.
    pub fn validate_split(&self, doc: &Doc, key: &str) -> (Vec<Violation>, Vec<Violation>) {
        let validator = match self.validator() {
            Ok(v) => v,
            Err(message) => {
                let why = self.invalid(message.clone());
                return (vec![Violation::file(why.to_string())], Vec::new());
            }
        };
        let inside = format!("/{key}");
        let (mut outside, mut under) = (Vec::new(), Vec::new());
        for e in validator.iter_errors(&doc.value) {
            let pointer = e.instance_path().as_str();
            let is_under = !key.is_empty()
                && (pointer == inside || pointer.starts_with(&format!("{inside}/")));
            let found = violations(doc, &self.json, &e);
            if is_under { &mut under } else { &mut outside }.extend(found);
        }
        (tidy(outside), tidy(under))
    }
}

fn violations(doc: &Doc, schema: &Value, e: &jsonschema::ValidationError<'_>) -> Vec<Violation> {
    let pointer = e.instance_path().as_str();
    let field = field_name(pointer);
    match e.kind() {
        ValidationErrorKind::AdditionalProperties { unexpected } => unexpected
            .iter()
            .map(|k| {
                let at = format!("{pointer}/{}", pointer_token(k));
                Violation::at(
                    doc.pos_of(&at, true),
                    format!("unknown key '{k}'{}; check the spelling", in_field(&field)),
                )
            })
            .collect(),
        ValidationErrorKind::Required { property } => {
            let key = property.as_str().unwrap_or_default();
            vec![Violation::at(
                doc.pos_of(pointer, false),
                format!("missing required key '{key}'{}", in_field(&field)),
            )]
        }
        kind => {
            let problem = words::problem(kind, e.instance(), field.is_none());
            let help = description(schema, e.schema_path().as_str());
            let message = match (field, help) {
                (Some(f), Some(h)) => format!("{f}: {problem}; {h}"),
                (Some(f), None) => format!("{f}: {problem}"),
                (None, _) => problem,
            };
            vec![Violation::at(doc.pos_of(pointer, false), message)]
        }
    }
}

/// Returns the description nearest to the failing keyword at `schema_path` (canonical, `$ref`
/// already resolved), short of the schema's own, with its first letter in lowercase unless it
/// starts an abbreviation: what the value should be, in the schema author's words.
fn description(schema: &Value, schema_path: &str) -> Option<String> {
    let mut p = schema_path;
    while let Some((parent, _)) = p.rsplit_once('/') {
        p = parent;
        if p.is_empty() {
            return None;
        }
        if let Some(d) = schema
            .pointer(p)
            .and_then(|s| s.get("description"))
            .and_then(Value::as_str)
        {
            let d = d.trim_end_matches('.');
            let mut chars = d.chars();
            let first = chars.next()?;
            let acronym = chars.next().is_some_and(char::is_uppercase);
            return Some(if acronym {
                d.to_string()
            } else {
                first.to_lowercase().chain(chars_from(d, 1)).collect()
            });
        }
    }
    None
}

fn chars_from(s: &str, n: usize) -> std::str::Chars<'_> {
    let at = s.char_indices().nth(n).map_or(s.len(), |(i, _)| i);
    s[at..].chars()
}

/// Sorts violations, drops repeats, and drops a generic one where a precise one stands at the
/// same place.
fn tidy(mut out: Vec<Violation>) -> Vec<Violation> {
    out.sort();
    out.dedup();
    let precise: Vec<Pos> = out
        .iter()
        .filter(|v| !is_generic(v))
        .map(|v| v.pos)
        .collect();
    out.retain(|v| !is_generic(v) || !precise.contains(&v.pos));
    out
}

fn is_generic(v: &Violation) -> bool {
    v.message.contains(words::GENERIC)
}

fn field_name(pointer: &str) -> Option<String> {
    (!pointer.is_empty()).then(|| {
        pointer
            .trim_start_matches('/')
            .replace('/', ".")
            .replace("~1", "/")
            .replace("~0", "~")
    })
}

fn in_field(field: &Option<String>) -> String {
    field
        .as_ref()
        .map(|f| format!(" in {f}"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::{parse, Limits};

    fn check(src: &str) -> Vec<Violation> {
        let doc = parse(src, &Limits::default()).expect("valid yaml");
        Schema::builtin_task().validate(&doc)
    }

    #[test]
    fn builtin_schemas_compile() {
        for schema in [Schema::builtin_task(), Schema::builtin_agent()] {
            assert!(schema.validator().is_ok(), "{}", schema.path.display());
        }
    }

    #[test]
    fn a_deferred_schema_that_fails_to_compile_reports_it_on_every_file() {
        let path = Path::new("schemas/task.schema.json");
        let text = r#"{"type": "no-such-type"}"#;
        assert!(Schema::compile(text, path).is_err());
        let schema = Schema::deferred(text, path).expect("JSON");
        let doc = parse("title: x\n", &Limits::default()).expect("valid yaml");
        let v = schema.validate(&doc);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].message.contains("not a valid JSON Schema"), "{v:?}");
    }

    #[test]
    fn minimal_task_is_valid() {
        assert_eq!(check("title: Fix the login bug\n"), vec![]);
    }

    #[test]
    fn places_each_violation() {
        let v = check("title: x\npriority: urgent\npriorty: high\nmax_attempts: three\n");
        let at: Vec<(usize, usize)> = v.iter().map(|v| (v.pos.line, v.pos.col)).collect();
        assert_eq!(at, vec![(2, 11), (3, 1), (4, 15)], "{v:?}");
        assert!(v[1].message.contains("unknown key 'priorty'"));
        assert!(v[0].message.starts_with("priority:"));
    }

    fn messages(src: &str) -> Vec<String> {
        check(src).into_iter().map(|v| v.message).collect()
    }

    #[test]
    fn messages_say_what_to_write_without_schema_words() {
        let cases = [
            ("title: x\ndue: 2026-12-1\n", "2026-12-01T17:00:00Z"),
            ("title: x\ntimeout: 5 minutes\n", "30m"),
            (
                "title: x\npriority: urgent\n",
                "low, normal, high, critical",
            ),
            ("title: x\nnext_agent: 5\n", "list of distinct agent names"),
            ("title: x\nmax_attempts: three\n", "whole number"),
            ("title: x\nmax_attempts: 0\n", "least allowed is 1"),
            ("title: ''\n", "empty"),
            ("- title: x\n", "'key: value' lines"),
        ];
        for (src, want) in cases {
            let m = messages(src);
            assert_eq!(m.len(), 1, "{src:?}: {m:?}");
            assert!(m[0].contains(want), "{src:?}: {m:?}");
            for jargon in [
                "oneOf",
                "anyOf",
                "schemas listed",
                "does not match \"^",
                "is not of type",
                "{0,",
            ] {
                assert!(!m[0].contains(jargon), "{src:?}: {m:?}");
            }
        }
    }

    #[test]
    fn a_date_alone_is_a_valid_due() {
        assert_eq!(check("title: x\ndue: 2026-12-01\n"), vec![]);
    }

    #[test]
    fn missing_title_points_at_document() {
        let v = check("priority: high\n");
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].pos, Pos { line: 1, col: 1 });
        assert!(v[0].message.contains("'title'"));
    }
}
