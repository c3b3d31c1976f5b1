//! Making task-supplied text safe to show: one line, no control characters or terminal
//! escapes (so a title cannot forge commit trailers or terminal output), and secrets shown
//! as `[REDACTED]`. Pure.

use serde_json::Value;

/// The replacement for secret values.
pub const REDACTED: &str = "[REDACTED]";

/// The keys that count tokens rather than hold one (`result.metrics`, `budget:`).
const TOKEN_COUNTS: [&str; 4] = [
    "tokens_in",
    "tokens_out",
    "tokens_per_day",
    "tokens_per_month",
];

/// Returns whether a key names a secret (token, secret, password, api_key, authorization);
/// the keys that count tokens do not.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase().replace('-', "_");
    if TOKEN_COUNTS.contains(&k.as_str()) {
        return false;
    }
    [
        "token",
        "secret",
        "password",
        "passwd",
        "api_key",
        "apikey",
        "authorization",
        "private_key",
    ]
    .iter()
    .any(|s| k.contains(s))
}

/// Returns whether a string looks like a well-known credential.
pub fn looks_like_token(s: &str) -> bool {
    let t = s.trim();
    let prefixed = [
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        "glpat-",
        "xoxb-",
        "xoxp-",
        "sk-",
    ]
    .iter()
    .any(|p| t.starts_with(p) && t.len() >= p.len() + 16);
    let aws = t.len() == 20
        && t.starts_with("AKIA")
        && t.bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    let jwt = t.starts_with("eyJ") && t.split('.').count() == 3 && t.len() > 30;
    prefixed || aws || jwt
}

/// Returns `s` with credential-shaped words (anywhere, also inside quotes) and the values of
/// secret-named keys written as `key=value` or `key: value` replaced.
pub fn redact_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut secret_next = false;
    while let Some(start) = rest.find(is_word_char) {
        let (gap, tail) = rest.split_at(start);
        let end = tail.find(|c| !is_word_char(c)).unwrap_or(tail.len());
        let (word, after) = tail.split_at(end);
        out.push_str(gap);
        let gap_joins = gap
            .trim_matches(|c| c == ' ' || c == '"' || c == '\'')
            .len()
            <= 1
            && !gap.contains(',');
        let core = word.trim_end_matches('.');
        if (secret_next && gap_joins && !gap.is_empty()) || looks_like_token(core) {
            out.push_str(REDACTED);
            out.push_str(&word[core.len()..]);
        } else {
            out.push_str(word);
        }
        secret_next = is_secret_key(word)
            && after
                .trim_start_matches(['"', '\''])
                .trim_start()
                .starts_with([':', '=']);
        rest = after;
    }
    out.push_str(rest);
    out
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '+')
}

/// Returns a copy of `v` with secret keys' values and token-shaped strings redacted.
pub fn redact_value(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| {
                    let x = if is_secret_key(k) {
                        Value::String(REDACTED.to_string())
                    } else {
                        redact_value(x)
                    };
                    (k.clone(), x)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(redact_value).collect()),
        Value::String(s) => Value::String(redact_text(s)),
        other => other.clone(),
    }
}

/// Returns `s` on one line for summaries: control characters (newlines, ESC, ...) become
/// spaces, secrets are redacted, and the length is capped at 200 characters.
pub fn one_line(s: &str) -> String {
    capped_line(s, 200)
}

/// Returns `s` as one error line: like [`one_line`] with a cap of 2000 characters.
pub fn error_line(s: &str) -> String {
    capped_line(s, 2000)
}

fn capped_line(s: &str, cap: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(cap)
        .collect();
    redact_text(&flat)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flattens_and_strips_escapes() {
        assert_eq!(
            one_line("a\nCoord-To: done\x1b[31m"),
            "a Coord-To: done [31m"
        );
    }

    #[test]
    fn redacts_keys_and_tokens() {
        let v = json!({"api_key": "x", "nested": {"Password": 1}, "note": "use ghp_abcdefghijklmnopqrstuvwxyz now"});
        let r = redact_value(&v);
        assert_eq!(r["api_key"], json!(REDACTED));
        assert_eq!(r["nested"]["Password"], json!(REDACTED));
        assert_eq!(r["note"], json!("use [REDACTED] now"));
        assert!(looks_like_token("AKIAABCDEFGHIJKLMNOP"));
        assert!(!is_secret_key("tokens_in") && is_secret_key("tokens"));
        assert_eq!(
            redact_text(r#"value "ghp_abcdefghijklmnopqrstuvwxyz" is not one of"#),
            r#"value "[REDACTED]" is not one of"#
        );
        assert_eq!(
            redact_text("--input api_key=canary-XYZ, token: 'abc' and AKIAABCDEFGHIJKLMNOP."),
            "--input api_key=[REDACTED], token: '[REDACTED]' and [REDACTED]."
        );
        assert_eq!(redact_text("tokens: 3 left"), "tokens: [REDACTED] left");
        assert_eq!(redact_text("the token is fine"), "the token is fine");
        assert!(!looks_like_token("hello"));
    }
}
