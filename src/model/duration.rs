//! Durations as people write them in task files and coord.yaml: `90s`, `30m`, `2h`, `7d`.

use serde::{Deserialize, Deserializer};
use std::fmt;

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

    /// Parses `90s`, `30m`, `2h` or `7d` (a day is 24 hours).
    pub fn parse(s: &str) -> Result<Duration, String> {
        let s = s.trim();
        let (digits, unit) = s.split_at(s.len().saturating_sub(1));
        let mult = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            _ => {
                return Err(format!(
                    "{s:?} is not a duration: use a number and s, m, h or d (e.g. 30m)"
                ))
            }
        };
        let n: i64 = digits
            .parse()
            .ok()
            .filter(|n| (0..=1_000_000_000).contains(n) && !digits.starts_with('+'))
            .ok_or_else(|| {
                format!("{s:?} is not a duration: use a number and s, m, h or d (e.g. 30m)")
            })?;
        Ok(Duration { secs: n * mult })
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
        ] {
            assert!(Duration::parse(s).is_err(), "{s}");
        }
    }

    #[test]
    fn displays_in_largest_unit() {
        assert_eq!(Duration::from_secs(604_800).to_string(), "7d");
        assert_eq!(Duration::from_secs(5400).to_string(), "90m");
        assert_eq!(Duration::from_secs(61).to_string(), "61s");
    }
}
