//! How values look to a person at a terminal: colour (`--color`, `NO_COLOR`), and times in the
//! local zone with how long ago they were ("2026-11-22 11:00 (3 min ago)"). Output that is not
//! a terminal's keeps RFC 3339 UTC times and no colour, so scripts read the same text
//! whatever the terminal; `--utc` keeps UTC times on a terminal too.

use jiff::{tz::TimeZone, Timestamp};

/// When to colour (`--color`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set and not empty
    #[default]
    Auto,
    /// Always, also into a pipe or a file
    Always,
    /// Never
    Never,
}

impl ColorChoice {
    /// Returns whether to colour output that goes to a terminal when `terminal`.
    pub fn colour(self, terminal: bool) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        }
    }
}

/// How times are shown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Times {
    /// As stored: RFC 3339 in UTC.
    #[default]
    Utc,
    /// In the local zone, with how long before or after `now` they are.
    Local {
        /// The clock the relative part counts from.
        now: Timestamp,
    },
}

impl Times {
    /// Returns local times counted from `now` for a terminal (`local`), else UTC ones.
    pub fn at_terminal(local: bool, now: Timestamp) -> Times {
        if local {
            Times::Local { now }
        } else {
            Times::Utc
        }
    }
}

/// How values look: colour and times.
#[derive(Debug, Clone, Copy, Default)]
pub struct Look {
    /// Colours (ANSI escapes).
    pub colour: bool,
    /// How times are shown.
    pub times: Times,
}

impl Look {
    /// Returns `text` in the SGR colour `code` when colouring.
    pub fn paint(&self, code: &str, text: &str) -> String {
        if self.colour && !text.is_empty() {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    /// Returns a task state in its colour: green when done, red when failed or invalid,
    /// yellow when waiting for a person, blue when assigned.
    pub fn state(&self, state: &str) -> String {
        let code = match state {
            "done" => "32",
            "failed" | "invalid" => "31",
            "review" | "blocked" => "33",
            "assigned" => "34",
            "cancelled" => "2",
            _ => return state.to_string(),
        };
        self.paint(code, state)
    }

    /// Returns a time as this look shows it.
    pub fn time(&self, t: Timestamp) -> String {
        match self.times {
            Times::Utc => t.to_string(),
            Times::Local { now } => {
                let local = t.to_zoned(TimeZone::system());
                format!(
                    "{} ({})",
                    local.strftime("%Y-%m-%d %H:%M %Z"),
                    relative(t, now)
                )
            }
        }
    }

    /// Returns `text` with its time shown as [`Look::time`] does, when it is one (RFC 3339);
    /// any other text as it is.
    pub fn time_text(&self, text: &str) -> String {
        match (self.times, text.parse::<Timestamp>()) {
            (Times::Local { .. }, Ok(t)) => self.time(t),
            _ => text.to_string(),
        }
    }
}

/// Returns how long before or after `now` time `t` is: "3 min ago", "in 2 h", "just now".
pub fn relative(t: Timestamp, now: Timestamp) -> String {
    let secs = now.as_second() - t.as_second();
    let n = secs.unsigned_abs();
    let amount = match n {
        0..=9 => return "just now".to_string(),
        10..=59 => format!("{n} s"),
        60..=3_599 => format!("{} min", n / 60),
        3_600..=172_799 => format!("{} h", n / 3_600),
        172_800..=7_775_999 => format!("{} days", n / 86_400),
        _ if n < 2 * 365 * 86_400 => format!("{} months", n / (30 * 86_400)),
        _ => format!("{} years", n / (365 * 86_400)),
    };
    if secs >= 0 {
        format!("{amount} ago")
    } else {
        format!("in {amount}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().expect("time")
    }

    #[test]
    fn relative_times_read_as_a_person_says_them() {
        let now = at("2026-11-22T10:00:00Z");
        let cases = [
            ("2026-11-22T09:59:55Z", "just now"),
            ("2026-11-22T09:59:30Z", "30 s ago"),
            ("2026-11-22T09:57:00Z", "3 min ago"),
            ("2026-11-22T07:00:00Z", "3 h ago"),
            ("2026-11-19T10:00:00Z", "3 days ago"),
            ("2026-06-22T10:00:00Z", "5 months ago"),
            ("2023-11-22T10:00:00Z", "3 years ago"),
            ("2026-11-22T10:20:00Z", "in 20 min"),
        ];
        for (t, want) in cases {
            assert_eq!(relative(at(t), now), want, "{t}");
        }
    }

    #[test]
    fn utc_times_and_plain_text_stay_as_they_are() {
        let look = Look::default();
        assert_eq!(
            look.time_text("2026-11-22T10:00:00Z"),
            "2026-11-22T10:00:00Z"
        );
        let local = Look {
            times: Times::Local {
                now: at("2026-11-22T10:03:00Z"),
            },
            ..Look::default()
        };
        assert_eq!(local.time_text("not a time"), "not a time");
        assert!(local
            .time_text("2026-11-22T10:00:00Z")
            .ends_with("(3 min ago)"));
    }

    #[test]
    fn colour_follows_the_choice_and_the_terminal() {
        assert!(ColorChoice::Always.colour(false));
        assert!(!ColorChoice::Never.colour(true));
        assert!(!ColorChoice::Auto.colour(false));
        let look = Look {
            colour: true,
            ..Look::default()
        };
        assert_eq!(look.state("done"), "\x1b[32mdone\x1b[0m");
        assert_eq!(look.state("ready"), "ready");
    }
}
