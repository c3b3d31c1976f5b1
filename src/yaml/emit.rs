//! Writes JSON values as readable block YAML that the parser reads back to the same value.

use serde_json::Value;

/// Returns `key: value` as block YAML at `indent` spaces, each line ending in `\n`.
pub fn emit_block(key: &str, value: &Value, indent: usize) -> String {
    let mut out = String::new();
    entry(&mut out, key, value, indent);
    out
}

/// Returns a value on one line: plain where that reads back the same, else JSON (valid YAML flow).
pub fn emit_scalar(value: &Value) -> String {
    match value {
        Value::String(s) if plain_safe(s) => s.clone(),
        other => serde_json::to_string(other).unwrap_or_else(|_| "null".to_string()),
    }
}

fn entry(out: &mut String, key: &str, value: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    let key = emit_scalar(&Value::String(key.to_string()));
    match value {
        Value::Object(m) if !m.is_empty() => {
            out.push_str(&format!("{pad}{key}:\n"));
            for (k, v) in m {
                entry(out, k, v, indent + 2);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            out.push_str(&format!("{pad}{key}:\n"));
            for item in a {
                list_item(out, item, indent + 2);
            }
        }
        other => out.push_str(&format!("{pad}{key}: {}\n", emit_scalar(other))),
    }
}

fn list_item(out: &mut String, item: &Value, indent: usize) {
    let pad = " ".repeat(indent);
    match item {
        Value::Object(m) if !m.is_empty() => {
            let mut first = true;
            for (k, v) in m {
                let mut sub = String::new();
                entry(&mut sub, k, v, indent + 2);
                if first {
                    out.push_str(&format!("{pad}- {}", &sub[indent + 2..]));
                    first = false;
                } else {
                    out.push_str(&sub);
                }
            }
        }
        other => out.push_str(&format!("{pad}- {}\n", emit_scalar(other))),
    }
}

/// Returns whether `s` can be written as a plain scalar and read back as the same string.
fn plain_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    let chars_ok = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || " _./@+-:".contains(c));
    chars_ok
        && (first.is_ascii_alphanumeric() || first == '_' || first == '/')
        && !s.ends_with([' ', ':'])
        && !s.contains(": ")
        && !s.contains(" #")
        && super::parse::resolve_plain(s) == Value::String(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::{parse, Limits};
    use serde_json::json;

    fn round_trip(v: Value) {
        let text = emit_block("k", &v, 0);
        let doc = parse(&text, &Limits::default()).expect("emitted YAML parses");
        assert_eq!(doc.value, json!({ "k": v }), "{text}");
    }

    #[test]
    fn round_trips_awkward_values() {
        round_trip(json!("2026-11-22T10:00:00Z"));
        round_trip(json!("true"));
        round_trip(json!("12"));
        round_trip(json!("a: b # c"));
        round_trip(json!("multi\nline\ttext \"quoted\" \u{1F600}"));
        round_trip(json!(""));
        round_trip(json!({"a": [1, {"b": null, "c": [[]]}, "x"], "d": {}, "e": []}));
        round_trip(json!([{"status": "failure", "error": {"message": "- no"}}, [1, [2]]]));
        round_trip(json!({"weird key: #": 1, "-": 2}));
    }

    #[test]
    fn writes_plain_where_safe() {
        let text = emit_block("coord", &json!({"state": "ready", "attempt": 0}), 0);
        assert_eq!(text, "coord:\n  state: ready\n  attempt: 0\n");
    }
}
