//! The coordinator's clock: `--now` or `COORD_NOW` when given (reproducible runs and tests),
//! else the system time, in whole seconds.

use jiff::Timestamp;

/// Returns the time to use: the override when given, else now.
pub fn now(overridden: Option<&str>) -> Result<Timestamp, String> {
    match overridden {
        Some(s) => s.trim().parse::<Timestamp>().map_err(|e| {
            format!("--now {s:?} is not an RFC 3339 time (e.g. 2026-11-22T10:00:00Z): {e}")
        }),
        None => Ok(whole_seconds(Timestamp::now())),
    }
}

fn whole_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_override() {
        let t = now(Some("2026-11-22T10:00:00Z")).expect("valid");
        assert_eq!(t.to_string(), "2026-11-22T10:00:00Z");
        assert!(now(Some("yesterday")).is_err());
        assert_eq!(now(None).expect("now").subsec_nanosecond(), 0);
    }
}
