//! The entries of a task's `coord.history` (docs/files.md): failed attempts and the events that set
//! a result or an error aside. An entry of any other shape — written by hand, or by another
//! version of coord — is kept verbatim, so nothing a person wrote is lost. Pure.

use super::time::format;
use super::{AgentName, ErrorInfo};
use jiff::Timestamp;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{json, Value};

/// One entry of `coord.history`.
#[derive(Debug, Clone, PartialEq)]
pub enum HistoryEntry {
    /// A failed attempt (written without an `event`): `{at, attempt, agent, error}`, and the
    /// `result` it left when the task was retried with one.
    FailedAttempt {
        /// When it was recorded.
        at: Timestamp,
        /// The attempt's number.
        attempt: u32,
        /// The agent it was assigned to, if any.
        agent: Option<AgentName>,
        /// Why it failed.
        error: ErrorInfo,
        /// The result it left, when it had one.
        result: Option<Value>,
    },
    /// `stale_result`: a result that answered an attempt that is not the current one (a
    /// zombie's), set aside; null when the file had none left.
    StaleResult {
        /// When it was set aside.
        at: Timestamp,
        /// The result as reported.
        result: Value,
    },
    /// `replaced_result`: a result still waiting for the tick that `--replace` overwrote.
    ReplacedResult {
        /// When it was replaced.
        at: Timestamp,
        /// The old result.
        result: Value,
    },
    /// `result before retry`: the `result:` block a task had when `coord retry` sent it back.
    ResultBeforeRetry {
        /// When intake took the task again.
        at: Timestamp,
        /// The old result.
        result: Value,
    },
    /// `error before retry`: the `coord.error` a task had when `coord retry` sent it back.
    ErrorBeforeRetry {
        /// When intake took the task again.
        at: Timestamp,
        /// The old error.
        error: ErrorInfo,
    },
    /// An entry of any other shape, kept exactly as it was read.
    Other(Value),
}

impl HistoryEntry {
    /// The `event` names coord writes, in the order docs/errors.md lists them.
    pub const EVENTS: [&'static str; 4] = [
        "stale_result",
        "replaced_result",
        "result before retry",
        "error before retry",
    ];

    /// Returns the entry's `event`, if it has one.
    pub fn event(&self) -> Option<&str> {
        match self {
            HistoryEntry::FailedAttempt { .. } => None,
            HistoryEntry::StaleResult { .. } => Some(Self::EVENTS[0]),
            HistoryEntry::ReplacedResult { .. } => Some(Self::EVENTS[1]),
            HistoryEntry::ResultBeforeRetry { .. } => Some(Self::EVENTS[2]),
            HistoryEntry::ErrorBeforeRetry { .. } => Some(Self::EVENTS[3]),
            HistoryEntry::Other(v) => v.get("event").and_then(Value::as_str),
        }
    }

    /// Returns the result the entry keeps, if any.
    pub fn result(&self) -> Option<&Value> {
        match self {
            HistoryEntry::FailedAttempt { result, .. } => result.as_ref(),
            HistoryEntry::StaleResult { result, .. }
            | HistoryEntry::ReplacedResult { result, .. }
            | HistoryEntry::ResultBeforeRetry { result, .. } => Some(result),
            HistoryEntry::ErrorBeforeRetry { .. } => None,
            HistoryEntry::Other(v) => v.get("result"),
        }
    }

    /// Returns the error the entry keeps, if any.
    pub fn error(&self) -> Option<&ErrorInfo> {
        match self {
            HistoryEntry::FailedAttempt { error, .. }
            | HistoryEntry::ErrorBeforeRetry { error, .. } => Some(error),
            _ => None,
        }
    }

    /// Returns the entry as written in the task file, keys in coord's order.
    pub fn to_value(&self) -> Value {
        let event = |at: &Timestamp, key: &str, v: Value| {
            let mut m = serde_json::Map::new();
            m.insert("at".into(), json!(format(*at)));
            m.insert("event".into(), json!(self.event()));
            m.insert(key.into(), v);
            Value::Object(m)
        };
        match self {
            HistoryEntry::FailedAttempt {
                at,
                attempt,
                agent,
                error,
                result,
            } => {
                let mut v =
                    json!({"at": format(*at), "attempt": attempt, "agent": agent, "error": error});
                if let Some(r) = result {
                    v["result"] = r.clone();
                }
                v
            }
            HistoryEntry::StaleResult { at, result }
            | HistoryEntry::ReplacedResult { at, result }
            | HistoryEntry::ResultBeforeRetry { at, result } => event(at, "result", result.clone()),
            HistoryEntry::ErrorBeforeRetry { at, error } => event(at, "error", json!(error)),
            HistoryEntry::Other(v) => v.clone(),
        }
    }

    /// Reads an entry: typed when writing it back gives the same text, else kept verbatim.
    pub fn from_value(v: Value) -> HistoryEntry {
        match typed(&v) {
            Some(e) if same_text(&e.to_value(), &v) => e,
            _ => HistoryEntry::Other(v),
        }
    }
}

/// Returns whether two values are written the same, keys in the same order (`Value`'s own
/// equality ignores the order).
fn same_text(a: &Value, b: &Value) -> bool {
    serde_json::to_string(a).ok() == serde_json::to_string(b).ok()
}

/// Reads the typed form of an entry, if it has one's keys and values.
fn typed(v: &Value) -> Option<HistoryEntry> {
    let at: Timestamp = v.get("at")?.as_str()?.parse().ok()?;
    let result = || v.get("result").cloned();
    let error = || serde_json::from_value::<ErrorInfo>(v.get("error")?.clone()).ok();
    let Some(event) = v.get("event") else {
        return Some(HistoryEntry::FailedAttempt {
            at,
            attempt: u32::try_from(v.get("attempt")?.as_u64()?).ok()?,
            agent: serde_json::from_value(v.get("agent")?.clone()).ok()?,
            error: error()?,
            result: result(),
        });
    };
    Some(match event.as_str()? {
        "stale_result" => HistoryEntry::StaleResult {
            at,
            result: result()?,
        },
        "replaced_result" => HistoryEntry::ReplacedResult {
            at,
            result: result()?,
        },
        "result before retry" => HistoryEntry::ResultBeforeRetry {
            at,
            result: result()?,
        },
        "error before retry" => HistoryEntry::ErrorBeforeRetry {
            at,
            error: error()?,
        },
        _ => return None,
    })
}

impl Serialize for HistoryEntry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for HistoryEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<HistoryEntry, D::Error> {
        Value::deserialize(d).map(HistoryEntry::from_value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> HistoryEntry {
        HistoryEntry::from_value(serde_json::from_str(text).expect("json"))
    }

    #[test]
    fn entries_coord_writes_read_typed_and_write_back_the_same_text() {
        let texts = [
            r#"{"at":"2026-11-22T10:00:00Z","attempt":2,"agent":"alice","error":{"code":"timeout","message":"no result","retryable":true}}"#,
            r#"{"at":"2026-11-22T10:00:00Z","attempt":1,"agent":null,"error":{"message":"x"},"result":{"status":"failure"}}"#,
            r#"{"at":"2026-11-22T10:00:00Z","event":"stale_result","result":null}"#,
            r#"{"at":"2026-11-22T10:00:00Z","event":"replaced_result","result":{"status":"success"}}"#,
            r#"{"at":"2026-11-22T10:00:00Z","event":"result before retry","result":{"status":"weird"}}"#,
            r#"{"at":"2026-11-22T10:00:00Z","event":"error before retry","error":{"code":"cancelled","message":"by bob","retryable":false}}"#,
        ];
        for text in texts {
            let e = read(text);
            assert!(!matches!(e, HistoryEntry::Other(_)), "{text}");
            assert_eq!(serde_json::to_string(&e).expect("json"), text);
        }
        assert_eq!(read(texts[2]).event(), Some("stale_result"));
        assert_eq!(
            read(texts[0]).error().and_then(|e| e.code.as_deref()),
            Some("timeout")
        );
    }

    #[test]
    fn any_other_entry_is_kept_verbatim() {
        let texts = [
            r#"{"note":"a: b\n- c"}"#,
            r#""checked by hand""#,
            r#"{"at":"2026-11-22T11:00:00+01:00","event":"stale_result","result":null}"#,
            r#"{"at":"2026-11-22T10:00:00Z","event":"stale_result","result":null,"why":"mine"}"#,
            r#"{"event":"stale_result","at":"2026-11-22T10:00:00Z","result":null}"#,
            r#"{"at":"2026-11-22T10:00:00Z","event":"looked at","result":1}"#,
            r#"{"at":"2026-11-22T10:00:00Z","attempt":-1,"agent":"alice","error":{"message":"x"}}"#,
            r#"{"at":"2026-11-22T10:00:00Z","attempt":1,"agent":"alice","error":{"message":"x","extra":1}}"#,
        ];
        for text in texts {
            let e = read(text);
            assert!(matches!(e, HistoryEntry::Other(_)), "{text}");
            assert_eq!(serde_json::to_string(&e).expect("json"), text);
        }
    }

    #[test]
    fn docs_errors_lists_every_history_event() {
        let doc = include_str!("../../docs/errors.md");
        let section = doc.split("## History events").nth(1).expect("the section");
        for event in HistoryEntry::EVENTS {
            assert!(section.contains(&format!("`{event}`")), "{event}");
        }
    }
}
