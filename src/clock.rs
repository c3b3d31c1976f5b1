//! The coordinator's clock: `--now` or `COORD_NOW` when given (reproducible runs and tests),
//! else the system time, in whole seconds.

use jiff::Timestamp;

/// The clocks coord runs with, as seconds since the Unix epoch: from 1970-01-01T00:00:00Z to
/// before 9000-01-01T00:00:00Z. Any such clock plus or minus [`crate::model::Duration::MAX`]
/// is a time coord can compute, write and read back.
pub const RANGE: std::ops::Range<i64> = 0..221_845_392_000;

/// Returns the time to use: the override when given, else now. An override outside
/// [`RANGE`] is refused.
pub fn now(overridden: Option<&str>) -> Result<Timestamp, String> {
    let t = match overridden {
        Some(s) => s.trim().parse::<Timestamp>().map_err(|e| {
            format!("--now {s:?} is not an RFC 3339 time (e.g. 2026-11-22T10:00:00Z): {e}")
        })?,
        None => whole_seconds(Timestamp::now()),
    };
    if !RANGE.contains(&t.as_second()) {
        return Err(format!(
            "--now {t} is out of range: use a time from 1970-01-01T00:00:00Z to before 9000-01-01T00:00:00Z"
        ));
    }
    Ok(t)
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
        let edge = Timestamp::from_second(RANGE.end - 1).expect("in jiff's range");
        assert_eq!(edge.to_string(), "8999-12-31T23:59:59Z");
        assert!(now(Some("8999-12-31T23:59:59Z")).is_ok());
        for out in [
            "9000-01-01T00:00:00Z",
            "9999-12-30T21:00:00Z",
            "1969-12-31T23:59:59Z",
        ] {
            let err = now(Some(out)).expect_err(out);
            assert!(err.contains("out of range"), "{err}");
        }
        assert_eq!(now(None).expect("now").subsec_nanosecond(), 0);
    }
}
