//! The task and agent JSON Schemas: the copies compiled into the binary, the repo's own copy
//! when present (the extension point), and validation that reports every violation as a
//! position in the YAML source. Pure apart from reading the repo's schema file.

use crate::yaml::{pointer_token, Doc, Pos};
use jsonschema::error::ValidationErrorKind;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The task schema shipped with coord.
pub const TASK_SCHEMA: &str = include_str!("../schemas/task.schema.json");
/// The agent profile schema shipped with coord.
pub const AGENT_SCHEMA: &str = include_str!("../schemas/agent.schema.json");

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

/// A compiled schema.
pub struct Schema {
    validator: jsonschema::Validator,
}

impl Schema {
    /// Compiles schema text; `path` names it in errors.
    pub fn compile(text: &str, path: &Path) -> Result<Schema, SchemaError> {
        let invalid = |message: String| SchemaError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let json: Value = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        let validator = jsonschema::validator_for(&json).map_err(|e| invalid(e.to_string()))?;
        Ok(Schema { validator })
    }

    /// Returns the repo's task schema at `path` when the file exists, else the built-in one.
    pub fn task_for_repo(path: &Path) -> Result<Schema, SchemaError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Schema::compile(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Schema::builtin_task()),
            Err(source) => Err(SchemaError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Returns the built-in task schema.
    pub fn builtin_task() -> Schema {
        Schema::compile(TASK_SCHEMA, Path::new("schemas/task.schema.json"))
            .expect("the built-in task schema is valid (tested)")
    }

    /// Returns the built-in agent profile schema.
    pub fn builtin_agent() -> Schema {
        Schema::compile(AGENT_SCHEMA, Path::new("schemas/agent.schema.json"))
            .expect("the built-in agent schema is valid (tested)")
    }

    /// Returns every violation of `doc`, each placed at the offending key or value.
    pub fn validate(&self, doc: &Doc) -> Vec<Violation> {
        let mut out: Vec<Violation> = self
            .validator
            .iter_errors(&doc.value)
            .flat_map(|e| violations(doc, e.instance_path().as_str(), e.kind(), &e.to_string()))
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

fn violations(doc: &Doc, pointer: &str, kind: &ValidationErrorKind, text: &str) -> Vec<Violation> {
    let field = field_name(pointer);
    match kind {
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
        _ => vec![Violation::at(
            doc.pos_of(pointer, false),
            match field {
                Some(f) => format!("{f}: {text}"),
                None => text.to_string(),
            },
        )],
    }
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
        let _ = Schema::builtin_task();
        let _ = Schema::builtin_agent();
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

    #[test]
    fn missing_title_points_at_document() {
        let v = check("priority: high\n");
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].pos, Pos { line: 1, col: 1 });
        assert!(v[0].message.contains("'title'"));
    }
}
