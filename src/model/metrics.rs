//! What an attempt cost (`result.metrics`: tokens in and out, cost, model, duration), the
//! spends a task records (its result and the results kept in its history, each with its agent
//! and when it was recorded), totals of them, and an agent's budget (`budget:` in its
//! profile) with the periods it counts over (UTC days and months). Pure.

use super::AgentName;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// `result.metrics`: what one attempt cost, as its agent reports it.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Metrics {
    /// Tokens the model read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_in: Option<u64>,
    /// Tokens the model wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_out: Option<u64>,
    /// What the attempt cost, in the team's currency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// The model that did the work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How long the attempt took, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
}

/// Why a `--metrics` list does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metrics {0}; write key=value pairs separated by commas, keys tokens_in, tokens_out, cost, model, duration_s (e.g. tokens_in=700,cost=0.12)")]
pub struct MetricsError(String);

impl std::str::FromStr for Metrics {
    type Err = MetricsError;

    /// Reads `tokens_in=700,tokens_out=120,cost=0.12,model=m,duration_s=30`.
    fn from_str(s: &str) -> Result<Metrics, MetricsError> {
        let mut m = Metrics::default();
        for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| MetricsError(format!("{pair:?} has no '='")))?;
            let bad = || MetricsError(format!("{key}={value:?} is not a number of that kind"));
            match key.trim() {
                "tokens_in" => m.tokens_in = Some(value.trim().parse().map_err(|_| bad())?),
                "tokens_out" => m.tokens_out = Some(value.trim().parse().map_err(|_| bad())?),
                "cost" => m.cost = Some(non_negative(value).ok_or_else(bad)?),
                "duration_s" => m.duration_s = Some(non_negative(value).ok_or_else(bad)?),
                "model" => m.model = Some(value.trim().to_string()),
                other => return Err(MetricsError(format!("key {other:?} is not known"))),
            }
        }
        Ok(m)
    }
}

fn non_negative(s: &str) -> Option<f64> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
}

impl Metrics {
    /// Returns the metrics of a `result:` value, if it has a `metrics:` map that reads.
    pub fn of_result(result: &serde_json::Value) -> Option<Metrics> {
        serde_json::from_value(result.get("metrics")?.clone()).ok()
    }

    /// Returns the tokens in and out together.
    pub fn tokens(&self) -> u64 {
        self.tokens_in
            .unwrap_or(0)
            .saturating_add(self.tokens_out.unwrap_or(0))
    }
}

/// One recorded spend: the metrics of one result a task holds, with its agent and when it
/// was recorded (None for a result still waiting for the tick: it counts as now).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Spent {
    /// The agent the result names (or the task's agent).
    pub agent: Option<AgentName>,
    /// When it was recorded.
    #[serde(default, with = "super::time::recorded")]
    pub at: Option<Timestamp>,
    /// What it cost.
    pub metrics: Metrics,
}

/// Sums of spends.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, schemars::JsonSchema)]
pub struct Totals {
    /// Results counted.
    pub results: u64,
    /// Tokens read.
    pub tokens_in: u64,
    /// Tokens written.
    pub tokens_out: u64,
    /// Cost.
    pub cost: f64,
    /// Seconds of work.
    pub duration_s: f64,
}

impl Totals {
    /// Adds one spend's metrics.
    pub fn add(&mut self, m: &Metrics) {
        self.results += 1;
        self.tokens_in = self.tokens_in.saturating_add(m.tokens_in.unwrap_or(0));
        self.tokens_out = self.tokens_out.saturating_add(m.tokens_out.unwrap_or(0));
        self.cost += m.cost.unwrap_or(0.0);
        self.duration_s += m.duration_s.unwrap_or(0.0);
    }

    /// Returns the tokens in and out together.
    pub fn tokens(&self) -> u64 {
        self.tokens_in.saturating_add(self.tokens_out)
    }

    /// Returns the totals of `spends`.
    pub fn of<'s>(spends: impl IntoIterator<Item = &'s Spent>) -> Totals {
        let mut t = Totals::default();
        for s in spends {
            t.add(&s.metrics);
        }
        t
    }
}

/// `budget:` in an agent's profile: limits per UTC day and month, in tokens (in and out
/// together) or cost.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Tokens a day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_day: Option<u64>,
    /// Tokens a month.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_month: Option<u64>,
    /// Cost a day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_day: Option<f64>,
    /// Cost a month.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_month: Option<f64>,
}

/// A period a budget counts over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    /// The UTC day.
    Day,
    /// The UTC month.
    Month,
}

impl Period {
    /// Returns the period's start and the next one's, around `now` (UTC).
    pub fn bounds(self, now: Timestamp) -> (Timestamp, Timestamp) {
        let date = now.to_zoned(jiff::tz::TimeZone::UTC).date();
        let (start, next) = match self {
            Period::Day => (date, date.tomorrow().unwrap_or(date)),
            Period::Month => {
                let first = date.first_of_month();
                (first, first.last_of_month().tomorrow().unwrap_or(first))
            }
        };
        let at = |d: jiff::civil::Date| {
            d.to_zoned(jiff::tz::TimeZone::UTC)
                .map_or(now, |z| z.timestamp())
        };
        (at(start), at(next))
    }

    /// Returns the period's word in a reason: `today`, `this month`.
    fn word(self) -> &'static str {
        match self {
            Period::Day => "today",
            Period::Month => "this month",
        }
    }
}

impl Budget {
    /// Returns why the budget is spent at `now` given an agent's `spends` (the first limit
    /// reached, as `budget: 1,020 of 1,000 tokens today`), with the instant the period ends;
    /// None while every limit has room.
    pub fn spent(&self, spends: &[&Spent], now: Timestamp) -> Option<(String, Timestamp)> {
        for period in [Period::Day, Period::Month] {
            let (start, next) = period.bounds(now);
            let within = spends
                .iter()
                .filter(|s| s.at.is_none_or(|at| at >= start && at < next));
            let totals = Totals::of(within.copied());
            let (tokens, cost) = match period {
                Period::Day => (self.tokens_per_day, self.cost_per_day),
                Period::Month => (self.tokens_per_month, self.cost_per_month),
            };
            if let Some(limit) = tokens.filter(|l| totals.tokens() >= *l) {
                let why = format!(
                    "budget: {} of {} tokens {}",
                    grouped(totals.tokens()),
                    grouped(limit),
                    period.word()
                );
                return Some((why, next));
            }
            if let Some(limit) = cost.filter(|l| totals.cost >= *l) {
                let why = format!(
                    "budget: cost {:.2} of {:.2} {}",
                    totals.cost,
                    limit,
                    period.word()
                );
                return Some((why, next));
            }
        }
        None
    }
}

/// Returns `n` with thousands separated by commas (`1,020`).
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_metrics_list_reads_and_names_what_is_wrong() {
        let m: Metrics = "tokens_in=700, cost=0.12,model=m1".parse().unwrap();
        assert_eq!(m.tokens_in, Some(700));
        assert_eq!(m.cost, Some(0.12));
        assert_eq!(m.model.as_deref(), Some("m1"));
        let e = "tokens=700".parse::<Metrics>().unwrap_err().to_string();
        assert!(e.contains("key \"tokens\" is not known"), "{e}");
        assert!("cost=-1".parse::<Metrics>().is_err());
        assert!("tokens_in=1.5".parse::<Metrics>().is_err());
    }

    #[test]
    fn a_budget_is_spent_within_its_period_only() {
        let now: Timestamp = "2026-11-28T12:00:00Z".parse().unwrap();
        let spend = |at: &str, tokens: u64| Spent {
            agent: None,
            at: Some(at.parse().unwrap()),
            metrics: Metrics {
                tokens_in: Some(tokens),
                ..Metrics::default()
            },
        };
        let yesterday = spend("2026-11-27T23:00:00Z", 5000);
        let today = spend("2026-11-28T01:00:00Z", 1020);
        let budget = Budget {
            tokens_per_day: Some(1000),
            ..Budget::default()
        };
        let (why, next) = budget.spent(&[&yesterday, &today], now).unwrap();
        assert_eq!(why, "budget: 1,020 of 1,000 tokens today");
        assert_eq!(next, "2026-11-29T00:00:00Z".parse::<Timestamp>().unwrap());
        assert_eq!(budget.spent(&[&yesterday], now), None);
        let monthly = Budget {
            cost_per_month: Some(1.0),
            ..Budget::default()
        };
        let costly = Spent {
            metrics: Metrics {
                cost: Some(1.5),
                ..Metrics::default()
            },
            ..yesterday
        };
        let (why, next) = monthly.spent(&[&costly], now).unwrap();
        assert_eq!(why, "budget: cost 1.50 of 1.00 this month");
        assert_eq!(next, "2026-12-01T00:00:00Z".parse::<Timestamp>().unwrap());
    }
}
