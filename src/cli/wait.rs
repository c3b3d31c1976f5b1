//! Durations given on the command line (`--wait 500ms`, `--interval 5m`, `--older-than 7d`):
//! a whole number and one unit, `ms`, `s`, `m`, `h` or `d`, up to 100 years. Pure.

use std::time::Duration;

/// The longest duration a flag accepts: 100 years, far from any clock's limit.
const MAX_SECS: u64 = 100 * 365 * 86_400;

/// A duration flag, with millisecond precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlagDuration(pub Duration);

impl FlagDuration {
    /// Returns the duration.
    pub fn get(self) -> Duration {
        self.0
    }

    /// Returns the duration in whole seconds, rounded up (a task age, a lease).
    pub fn ceil_secs(self) -> i64 {
        let d = self.0;
        let up = u64::from(d.subsec_nanos() > 0);
        i64::try_from(d.as_secs() + up).unwrap_or(i64::MAX)
    }
}

impl std::str::FromStr for FlagDuration {
    type Err = String;

    fn from_str(s: &str) -> Result<FlagDuration, String> {
        let bad = || {
            format!(
                "{s:?} is not a duration: use a number and ms, s, m, h or d (e.g. 500ms, 30s, 5m)"
            )
        };
        let s = s.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let (digits, unit) = s.split_at(split);
        let n: u64 = digits.parse().map_err(|_| bad())?;
        let ms_per_unit: u64 = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        let ms = n
            .checked_mul(ms_per_unit)
            .filter(|ms| *ms / 1_000 <= MAX_SECS)
            .ok_or_else(|| format!("{s:?} is out of range: at most 100 years"))?;
        Ok(FlagDuration(Duration::from_millis(ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<FlagDuration, String> {
        s.parse()
    }

    #[test]
    fn accepts_milliseconds_and_every_unit() {
        let ms = |n| Ok(FlagDuration(Duration::from_millis(n)));
        assert_eq!(parse("500ms"), ms(500));
        assert_eq!(parse("0s"), ms(0));
        assert_eq!(parse("30s"), ms(30_000));
        assert_eq!(parse("5m"), ms(300_000));
        assert_eq!(parse("2h"), ms(7_200_000));
        assert_eq!(parse("7d"), ms(604_800_000));
    }

    #[test]
    fn refuses_nonsense_and_huge_values_without_panicking() {
        for s in [
            "",
            "ms",
            "5",
            "-5s",
            "+5s",
            "1.5s",
            "5w",
            "5 s",
            "99999999999999999999d",
        ] {
            assert!(parse(s).is_err(), "{s}");
        }
        assert!(parse("36500d").is_ok());
        let err = parse("36501d").expect_err("too long");
        assert!(err.contains("out of range"), "{err}");
        assert!(parse("18446744073709551615ms").is_err());
    }

    #[test]
    fn rounds_up_to_whole_seconds() {
        assert_eq!(parse("500ms").map(FlagDuration::ceil_secs), Ok(1));
        assert_eq!(parse("2s").map(FlagDuration::ceil_secs), Ok(2));
    }
}
