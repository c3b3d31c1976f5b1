//! Retry timing and the per-agent circuit breaker (docs/behaviour.md): exponential backoff with
//! full jitter, deterministic for a task and attempt so plans are reproducible. Pure.

use crate::config::{Backoff, CircuitBreaker};
use crate::hash::fnv1a;
use crate::model::time::whole_second;
use crate::model::{AgentCoord, Circuit};
use jiff::{SignedDuration, Timestamp};

/// Returns the delay before attempt `attempt + 1` of task `id`:
/// `random(0, min(max, base * 2^(attempt-1)))`, the random draw seeded by (id, attempt).
pub fn backoff(id: &str, attempt: u32, cfg: &Backoff) -> SignedDuration {
    let exp = attempt.saturating_sub(1).min(40);
    let ceiling = cfg
        .base
        .as_secs()
        .saturating_mul(1i64 << exp)
        .min(cfg.max.as_secs())
        .max(0);
    let fraction = jitter(id, attempt);
    SignedDuration::from_secs((ceiling as f64 * fraction).floor() as i64)
}

/// Returns a number in [0, 1) derived from the task and attempt (FNV-1a, then scaled).
fn jitter(id: &str, attempt: u32) -> f64 {
    let h = fnv1a(format!("{id}#{attempt}").as_bytes());
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Returns the breaker after a failed attempt.
pub fn after_failure(c: &AgentCoord, cfg: &CircuitBreaker, now: Timestamp) -> AgentCoord {
    let failures = c.consecutive_failures.saturating_add(1);
    let trip = c.circuit == Circuit::HalfOpen || failures >= cfg.failure_threshold;
    if trip {
        let until = now
            .checked_add(cfg.open_for.to_signed())
            .unwrap_or(Timestamp::MAX);
        AgentCoord {
            consecutive_failures: failures,
            circuit: Circuit::Open,
            open_until: Some(whole_second(until)),
        }
    } else {
        AgentCoord {
            consecutive_failures: failures,
            ..c.clone()
        }
    }
}

/// Returns the breaker after a successful attempt.
pub fn after_success() -> AgentCoord {
    AgentCoord::default()
}

/// Whether an agent's breaker lets it take a task now, and whether that task is the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Closed: take work.
    Open,
    /// Open past its time: one probe task.
    Probe,
    /// No new work.
    Shut,
}

/// Returns what the breaker allows, `reopened` telling whether its `open_until` has come.
pub fn gate(c: &AgentCoord, reopened: impl FnOnce(Timestamp) -> bool) -> Gate {
    match c.circuit {
        Circuit::Closed => Gate::Open,
        Circuit::HalfOpen => Gate::Shut,
        Circuit::Open => match c.open_until {
            Some(t) if !reopened(t) => Gate::Shut,
            _ => Gate::Probe,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Clock;
    use crate::model::Duration;

    #[test]
    fn backoff_stays_within_full_jitter_bounds() {
        let cfg = Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(10),
        };
        for attempt in 1..=6u32 {
            let ceiling = (1i64 << (attempt - 1)).min(10);
            for id in ["a", "b", "task-7", "x.y"] {
                let d = backoff(id, attempt, &cfg).as_secs();
                assert!(
                    (0..=ceiling).contains(&d),
                    "{id} #{attempt}: {d} > {ceiling}"
                );
                assert_eq!(d, backoff(id, attempt, &cfg).as_secs(), "deterministic");
            }
        }
    }

    #[test]
    fn breaker_opens_at_threshold_and_reopens_from_half_open() {
        let cfg = CircuitBreaker {
            failure_threshold: 2,
            open_for: Duration::from_secs(600),
        };
        let now: Timestamp = "2026-11-22T10:00:00Z".parse().expect("time");
        let one = after_failure(&AgentCoord::default(), &cfg, now);
        assert_eq!(one.circuit, Circuit::Closed);
        let two = after_failure(&one, &cfg, now);
        assert_eq!(two.circuit, Circuit::Open);
        let clock = Clock::new(now);
        assert_eq!(gate(&two, |t| clock.reached(t)), Gate::Shut);
        assert_eq!(
            clock.deadline(),
            Some(now + SignedDuration::from_secs(600)),
            "the shut breaker waits on its reopening"
        );
        let later = now + SignedDuration::from_secs(601);
        assert_eq!(gate(&two, |t| Clock::new(later).reached(t)), Gate::Probe);
        let probing = AgentCoord {
            circuit: Circuit::HalfOpen,
            ..two.clone()
        };
        assert_eq!(gate(&probing, |t| Clock::new(later).reached(t)), Gate::Shut);
        assert_eq!(after_failure(&probing, &cfg, later).circuit, Circuit::Open);
    }
}
