//! Durations as people write them in task files and coord.yaml: `90s`, `30m`, `2h`, `7d`.

use serde::{Deserialize, Deserializer};
use std::fmt;

/// Why a duration was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not a number and a unit.
    #[error("{0:?} is not a duration: use a number and s, m, h or d (e.g. 30m)")]
    Malformed(String),
    /// Longer than [`Duration::MAX`].
    #[error("{0:?} is out of range: coord takes durations up to 36500d (100 years)")]
    TooLong(String),
}

/// A whole number of seconds, written with one unit suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Duration {
    secs: i64,
}

impl Duration {
    /// Returns a duration of `secs` seconds.
    pub const fn from_secs(secs: i64) -> Duration {
        Duration { secs }
    }

    /// Returns the length in seconds.
    pub const fn as_secs(self) -> i64 {
        self.secs
    }

    /// The longest duration coord takes: 36500 days (100 years). Every time coord computes
    /// (now plus a lease, a backoff or a circuit's open time; now minus an archive age) stays
    /// representable with any clock coord takes (1970 to before the year 9000).
    pub const MAX: Duration = Duration::from_secs(36_500 * 86_400);

    /// Parses `90s`, `30m`, `2h` or `7d` (a day is 24 hours), at most [`Duration::MAX`].
    pub fn parse(s: &str) -> Result<Duration, String> {
        Duration::parse_checked(s).map_err(|e| e.to_string())
    }

    /// Parses like [`Duration::parse`], telling a malformed duration from one out of range.
    pub fn parse_checked(s: &str) -> Result<Duration, DurationError> {
        let s = s.trim();
        let last = s.char_indices().last().map_or(0, |(i, _)| i);
        let (digits, unit) = s.split_at(last);
        let malformed = || DurationError::Malformed(s.to_string());
        let mult: i64 = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            _ => return Err(malformed()),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(malformed());
        }
        digits
            .parse::<i64>()
            .ok()
            .and_then(|n| n.checked_mul(mult))
            .filter(|secs| *secs <= Duration::MAX.secs)
            .map(Duration::from_secs)
            .ok_or_else(|| DurationError::TooLong(s.to_string()))
    }

    /// Returns the duration as a jiff span for timestamp arithmetic.
    pub fn to_signed(self) -> jiff::SignedDuration {
        jiff::SignedDuration::from_secs(self.secs)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.secs;
        match s {
            0 => write!(f, "0s"),
            _ if s % 86_400 == 0 => write!(f, "{}d", s / 86_400),
            _ if s % 3600 == 0 => write!(f, "{}h", s / 3600),
            _ if s % 60 == 0 => write!(f, "{}m", s / 60),
            _ => write!(f, "{s}s"),
        }
    }
}

impl std::str::FromStr for Duration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Duration::parse(s)
    }
}

impl serde::Serialize for Duration {
    /// Writes the duration as it reads back (`30m`).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Duration::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(Duration::parse("90s").map(Duration::as_secs), Ok(90));
        assert_eq!(Duration::parse("30m").map(Duration::as_secs), Ok(1800));
        assert_eq!(Duration::parse("2h").map(Duration::as_secs), Ok(7200));
        assert_eq!(Duration::parse("7d").map(Duration::as_secs), Ok(604_800));
    }

    #[test]
    fn rejects_nonsense() {
        for s in [
            "",
            "m",
            "30",
            "30 minutes",
            "-5m",
            "+5m",
            "1.5h",
            "5w",
            "99999999999d",
            "٣m",
            "5é",
            "é",
        ] {
            assert!(Duration::parse(s).is_err(), "{s}");
        }
    }

    #[test]
    fn refuses_more_than_a_hundred_years_as_out_of_range() {
        assert_eq!(Duration::parse("36500d"), Ok(Duration::MAX));
        assert_eq!(Duration::parse("876000h"), Ok(Duration::MAX));
        for s in ["36501d", "3000000d", "999999999d", "9223372036854775807s"] {
            assert_eq!(
                Duration::parse_checked(s),
                Err(DurationError::TooLong(s.to_string())),
                "{s}"
            );
        }
        assert_eq!(
            Duration::parse_checked("12x"),
            Err(DurationError::Malformed("12x".to_string()))
        );
    }

    #[test]
    fn displays_in_largest_unit() {
        assert_eq!(Duration::from_secs(604_800).to_string(), "7d");
        assert_eq!(Duration::from_secs(5400).to_string(), "90m");
        assert_eq!(Duration::from_secs(61).to_string(), "61s");
    }
}
