//! Schema violations in the words of someone writing a YAML file: "a list", "a whole number",
//! "is not one of: low, normal", never the JSON Schema keyword that failed. Pure.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::JsonType;
use serde_json::Value;

/// Returns what is wrong with `value` under `kind`; `whole_file` when the value is the
/// document itself.
pub fn problem(kind: &ValidationErrorKind, value: &Value, whole_file: bool) -> String {
    let shown = shown(value);
    match kind {
        ValidationErrorKind::Type { kind } if whole_file => format!(
            "the file holds {}, but must be {}",
            noun(value),
            expected(kind)
        ),
        ValidationErrorKind::Type { kind } => {
            format!("{shown} is {}, but must be {}", noun(value), expected(kind))
        }
        ValidationErrorKind::Enum { options } => {
            format!("{shown} is not one of: {}", list(options))
        }
        ValidationErrorKind::Constant { expected_value } => {
            format!("{shown} must be {}", self::shown(expected_value))
        }
        ValidationErrorKind::MinLength { limit: 1 } => "is empty".to_string(),
        ValidationErrorKind::MinLength { limit } => {
            format!("{shown} is shorter than {limit} characters")
        }
        ValidationErrorKind::MaxLength { limit } => {
            format!("is longer than {limit} characters; shorten it")
        }
        ValidationErrorKind::Minimum { limit }
        | ValidationErrorKind::ExclusiveMinimum { limit } => {
            format!("{shown} is too small (the least allowed is {limit})")
        }
        ValidationErrorKind::Maximum { limit }
        | ValidationErrorKind::ExclusiveMaximum { limit } => {
            format!("{shown} is too large (the most allowed is {limit})")
        }
        ValidationErrorKind::MinItems { limit } => {
            format!("needs at least {limit} item(s)")
        }
        ValidationErrorKind::MaxItems { limit } => format!("has more than {limit} item(s)"),
        ValidationErrorKind::UniqueItems => "lists the same item twice; remove the repeat".into(),
        ValidationErrorKind::MinProperties { limit } => format!("needs at least {limit} key(s)"),
        ValidationErrorKind::MaxProperties { limit } => format!("has more than {limit} key(s)"),
        _ => format!("{shown} {GENERIC}"),
    }
}

/// The end of the message for a value that breaks a rule this module has no words for; such a
/// message is dropped when a more precise one stands at the same place.
pub const GENERIC: &str = "is not valid here";

/// Returns a value as a person wrote it, cut short when long.
fn shown(value: &Value) -> String {
    let text = match value {
        Value::String(s) => format!("'{s}'"),
        other => other.to_string(),
    };
    if text.chars().count() > 60 {
        let cut: String = text.chars().take(57).collect();
        format!("{cut}...")
    } else {
        text
    }
}

/// Returns what kind of YAML value `value` is.
fn noun(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "true/false",
        Value::Number(n) if n.is_i64() || n.is_u64() => "a whole number",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn type_word(t: JsonType) -> &'static str {
    match t {
        JsonType::Array => "a list",
        JsonType::Boolean => "true or false",
        JsonType::Integer => "a whole number",
        JsonType::Null => "empty",
        JsonType::Number => "a number",
        JsonType::Object => "a mapping of 'key: value' lines",
        JsonType::String => "text",
    }
}

fn expected(kind: &TypeKind) -> String {
    match kind {
        TypeKind::Single(t) => type_word(*t).to_string(),
        TypeKind::Multiple(set) => {
            let words: Vec<&str> = set.iter().map(type_word).collect();
            words.join(" or ")
        }
    }
}

fn list(options: &Value) -> String {
    match options {
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}
