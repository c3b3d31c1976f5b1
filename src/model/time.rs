//! Instants as a `coord:` block records them: `jiff` timestamps in whole seconds, written in
//! UTC (`2026-11-22T10:00:00Z`). A value a person made unreadable reads as none and leaves the
//! rest of the block readable. Pure.

use jiff::Timestamp;

/// Returns `t` without its fraction of a second, the precision coord records.
pub fn whole_second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// Returns `t` as coord writes it: UTC, whole seconds (`2026-11-22T10:00:00Z`).
pub fn format(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Returns the JSON Schema of an optional instant as [`recorded`] writes it: whole seconds in
/// UTC, or null.
pub(crate) fn recorded_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "anyOf": [
            {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$"},
            {"type": "null"}
        ]
    })
}

/// (De)serializes an optional instant of a `coord:` block: written with [`format`]; read from
/// any RFC 3339 text, anything else reading as none.
pub(crate) mod recorded {
    use jiff::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the instant as coord writes it; callers skip none.
    pub fn serialize<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&super::format(*t)),
            None => s.serialize_none(),
        }
    }

    /// Reads an RFC 3339 instant; anything else reads as none.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        Ok(v.as_str().and_then(|s| s.parse().ok()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_is_written_in_utc_whole_seconds() {
        let t: Timestamp = "2026-11-22T11:00:00.75+01:00".parse().expect("time");
        assert_eq!(format(t), "2026-11-22T10:00:00Z");
        assert_eq!(whole_second(t).to_string(), "2026-11-22T10:00:00Z");
        assert_eq!(format(whole_second(t)), whole_second(t).to_string());
    }
}
