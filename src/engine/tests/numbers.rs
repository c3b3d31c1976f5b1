//! Big numbers: any duration the parser takes and any clock never make the
//! planner panic. The CLI keeps clocks in [`crate::clock::RANGE`] and durations up to
//! [`Duration::MAX`], where every sum fits; the planner's arithmetic is checked anyway, so the
//! property runs it at every instant a timestamp can hold.

use super::harness::{tid, Sim};
use crate::engine::{archive, commands, Clock};
use crate::model::{Duration, State};
use jiff::Timestamp;
use proptest::prelude::*;
use serde_json::json;

/// Returns a duration string: digits and a unit mostly, anything sometimes.
fn duration_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[0-9]{1,20}[smhd]",
        1 => Just(Duration::MAX.to_string()),
        1 => ".{0,12}",
    ]
}

/// Returns an instant anywhere a timestamp can be, the ends of coord's range included.
fn instant() -> impl Strategy<Value = Timestamp> {
    let (lo, hi) = (Timestamp::MIN.as_second(), Timestamp::MAX.as_second());
    let end = crate::clock::RANGE.end;
    prop_oneof![
        3 => lo..=hi,
        2 => crate::clock::RANGE,
        1 => prop::sample::select(vec![lo, hi, 0, end - 1, end, hi - 1]),
    ]
    .prop_map(|s| Timestamp::from_second(s).expect("in range"))
}

/// Runs a task through assignment, a heartbeat, a timeout, a retry, a failure that opens
/// the circuit, success and archiving with every duration set to `d`, starting at `now`.
fn run_everything(d: Duration, text: &str, now: Timestamp) {
    let mut s = Sim::new();
    s.config.defaults.timeout = d;
    s.config.backoff.base = d;
    s.config.backoff.max = d;
    s.config.circuit_breaker.open_for = d;
    s.config.circuit_breaker.failure_threshold = 1;
    s.config.archive_after = d;
    s.add_agent("alice", "");
    s.drop_task("t", &format!("title: x\ntimeout: {text}\n"));
    s.drop_task("u", "title: y\n");
    s.tick(now);
    let id = tid("u");
    let _ = s.command(|b, i| commands::heartbeat(b, i, &id, &Default::default()));
    let later = Clock::new(now).after(d.to_signed());
    for t in [
        later,
        Clock::new(later).after(d.to_signed()),
        Timestamp::MAX,
    ] {
        s.tick(t);
    }
    if s.ids_in("assigned/alice").contains(&"u".to_string()) {
        let _ = s.try_report("u", json!({"status": "success"}));
    }
    let end = s.now;
    s.tick(end);
    let _ = s.plan_at(Timestamp::MIN);
    let inputs = crate::engine::Inputs {
        config: &s.config,
        now: end,
        verifier: &crate::engine::AcceptAll,
        attempts: &crate::engine::NoHistory,
        sightings: &crate::engine::sighting::NoSightings,
        gates: &super::harness::NoGates,
        epoch: None,
    };
    let _ = archive::plan(&s.board(), &inputs, d);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn no_duration_or_clock_the_parsers_take_panics_the_planner(
        text in duration_text(),
        now in instant(),
    ) {
        let formatted = now.to_string();
        let accepted = crate::clock::now(Some(&formatted));
        prop_assert_eq!(
            accepted.is_ok(),
            crate::clock::RANGE.contains(&now.as_second()),
            "--now {} taken: {:?}", formatted, accepted
        );
        if let Ok(d) = Duration::parse(&text) {
            prop_assert!(d <= Duration::MAX);
            run_everything(d, &text, now);
        }
    }
}

#[test]
fn a_task_with_a_timeout_past_the_limit_is_quarantined_with_the_reason() {
    let mut s = Sim::new();
    s.add_agent("alice", "");
    s.drop_task("big", "title: big\ntimeout: 3000000d\n");
    s.drop_task("ok", "title: fine\n");
    s.tick(super::harness::at(0));
    s.tick(super::harness::at(1));
    assert_eq!(s.path_of("big"), "invalid/big.yaml");
    let errors = s.text("invalid/big.yaml.errors");
    assert!(
        errors.contains("work/invalid/big.yaml:2:10: timeout: \"3000000d\" is out of range"),
        "{errors}"
    );
    assert_eq!(
        s.path_of("ok"),
        "assigned/alice/ok.yaml",
        "the others go on"
    );
}

/// Pads task `id`'s description so its file is `room` bytes short of the size limit.
fn fill_to_the_limit(s: &mut Sim, id: &str, room: usize) -> String {
    let path = s.path_of(id);
    let text = s.text(&path);
    let limit = crate::yaml::Limits::default().max_bytes;
    let pad = "x".repeat(limit - room - text.len() + 1);
    let text = text.replacen("description: x\n", &format!("description: {pad}\n"), 1);
    assert_eq!(text.len(), limit - room);
    s.files.insert(path, text.clone().into_bytes());
    text
}

#[test]
fn a_timeout_that_cannot_be_written_fails_the_task_as_too_large_and_counts_for_nobody() {
    let mut s = Sim::new();
    s.config.circuit_breaker.failure_threshold = 1;
    s.add_agent("alice", "");
    s.drop_task(
        "big",
        "title: big\nagent: alice\ntimeout: 10m\ndescription: x\n",
    );
    s.tick(super::harness::at(0));
    s.tick(super::harness::at(1));
    assert_eq!(s.path_of("big"), "assigned/alice/big.yaml");
    let text = fill_to_the_limit(&mut s, "big", 50);
    let people = &text[..text.find("\ncoord:").expect("coord block")];
    let plan = s.tick(super::harness::at(600));
    assert_eq!(
        super::harness::summaries(&plan),
        ["fail big: too_large (the file cannot take coord's entry)"],
        "no breaker update: the timeout was never recorded"
    );
    assert_eq!(s.path_of("big"), "failed/big.yaml");
    let after = s.text("failed/big.yaml");
    assert!(after.starts_with(people), "people's bytes are kept");
    let c = s.coord("big");
    assert_eq!(c.state, Some(State::Failed));
    assert_eq!(c.error.and_then(|e| e.code).as_deref(), Some("too_large"));
    assert!(
        !s.text("agents/alice.yaml").contains("coord:"),
        "breaker untouched"
    );
    assert!(s.tick(super::harness::at(700)).is_empty(), "settled");
}
