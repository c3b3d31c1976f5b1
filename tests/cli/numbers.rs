//! Big numbers end to end: a task with an out-of-range duration is
//! quarantined and the tick goes on; an out-of-range coord.yaml value, flag or clock is a
//! usage error (exit 2) on one line naming it; the edges of the ranges work. Never a panic,
//! for any duration and any clock (a property test through the binary).

use crate::harness::TestRepo;
use crate::steps::{config, state};
use proptest::prelude::*;

fn no_panic(err: &str) {
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
}

#[test]
fn a_task_with_a_huge_timeout_is_quarantined_and_the_others_go_on() {
    let r = TestRepo::with_agents(&["alice"]);
    r.task("big", "title: big\ntimeout: 3000000d\n");
    r.task("fine", "title: fine\n");
    for _ in 0..2 {
        let (_, err) = r.code(&["tick"], 0);
        no_panic(&err);
    }
    assert_eq!(r.where_is("big"), "work/invalid/big.yaml");
    let errors = r.read("work/invalid/big.yaml.errors");
    assert!(
        errors.contains("big.yaml:2:10: timeout: \"3000000d\" is out of range"),
        "{errors}"
    );
    assert_eq!(state(&r, "fine"), "assigned");
    let (_, err) = r.code(&["status"], 0);
    no_panic(&err);
}

#[test]
fn out_of_range_config_durations_are_usage_errors_naming_the_key() {
    let r = TestRepo::with_agents(&["alice"]);
    r.task("t", "title: t\n");
    let keys = [
        ("defaults: {timeout: 999999999d}\n", "defaults.timeout"),
        ("backoff: {max: 999999999d}\n", "backoff.max"),
        (
            "circuit_breaker: {open_for: 999999999d}\n",
            "circuit_breaker.open_for",
        ),
        ("archive_after: 999999999d\n", "archive_after"),
    ];
    for (yaml, key) in keys {
        config(&r, yaml);
        for cmd in [&["tick"][..], &["status"], &["archive"]] {
            let (_, err) = r.code(cmd, 2);
            assert!(
                err.contains("coord.yaml") && err.contains(key) && err.contains("out of range"),
                "{cmd:?} with {yaml}: {err}"
            );
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }
}

#[test]
fn out_of_range_flags_and_clocks_are_usage_errors() {
    let r = TestRepo::with_agents(&["alice"]);
    let (_, err) = r.code(&["archive", "--older-than", "999999999d"], 2);
    assert!(
        err.contains("--older-than") && err.contains("out of range"),
        "{err}"
    );
    for now in [
        "9999-12-30T21:00:00Z",
        "9000-01-01T00:00:00Z",
        "1969-12-31T23:59:59Z",
    ] {
        let (_, err) = r.code(&["--now", now, "tick"], 2);
        assert!(
            err.contains("--now") && err.contains("out of range"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn the_edges_of_the_ranges_work() {
    let mut r = TestRepo::with_agents(&["alice"]);
    config(
        &r,
        "defaults: {timeout: 36500d}\nbackoff: {base: 36500d, max: 36500d}\ncircuit_breaker: {failure_threshold: 1, open_for: 36500d}\n",
    );
    r.task("t", "title: t\ntimeout: 36500d\n");
    r.at("8999-12-31T23:59:59Z");
    r.ok(&["tick"]);
    assert_eq!(state(&r, "t"), "assigned");
    r.ok(&["heartbeat", "t"]);
    r.ok(&["fail", "t", "--error", "boom"]);
    r.ok(&["tick"]);
    assert_eq!(state(&r, "t"), "ready", "backing off");
    r.ok(&["status"]);
    r.ok(&["archive", "--older-than", "36500d"]);
    r.at("1970-01-01T00:00:00Z");
    let (_, err) = r.code(&["tick"], 0);
    no_panic(&err);
}

#[test]
fn a_timeout_that_cannot_be_written_fails_the_task_as_too_large() {
    let mut r = TestRepo::with_agents(&["alice"]);
    config(&r, "circuit_breaker: {failure_threshold: 1}\n");
    r.task(
        "big",
        "title: big\nagent: alice\ntimeout: 10m\ndescription: x\n",
    );
    r.ok(&["tick"]);
    let path = "work/assigned/alice/big.yaml";
    let text = r.read(path);
    let limit = 1 << 20;
    let pad = "x".repeat(limit - 50 - text.len() + 1);
    let text = text.replacen("description: x\n", &format!("description: {pad}\n"), 1);
    r.write(path, &text);
    let people = &text[..text.find("\ncoord:").expect("coord block")];
    for at in [
        "2026-11-22T10:11:00Z",
        "2026-11-22T10:11:00Z",
        "2026-11-22T10:12:00Z",
    ] {
        r.at(at);
        r.ok(&["tick"]);
    }
    assert_eq!(r.where_is("big"), "work/failed/big.yaml");
    assert!(r.read("work/failed/big.yaml").starts_with(people));
    assert_eq!(state(&r, "big"), "failed");
    let log = r.git(&["log", "--format=%s"]);
    assert!(!log.contains("failed attempt"), "{log}");
    assert!(log.contains("coord: fail big: too_large"), "{log}");
    assert!(!r
        .read("work/agents/alice.yaml")
        .contains("consecutive_failures"));
    assert_eq!(r.git_status(), "");
}

/// The durations a generated case uses: small, at and past the 100-year edge, and any u64,
/// in every unit some parser accepts (`ms` only flags take).
fn any_duration() -> impl Strategy<Value = String> {
    let n = prop_oneof![
        0u64..1_000,
        Just(36_500),
        Just(36_501),
        Just(3_153_600_000_000),
        Just(u64::MAX),
        any::<u64>(),
    ];
    let unit = prop::sample::select(vec!["ms", "s", "m", "h", "d"]);
    (n, unit).prop_map(|(n, unit)| format!("{n}{unit}"))
}

/// Any instant jiff can print, in RFC 3339, with its edges and coord's range's edges.
fn any_clock() -> impl Strategy<Value = String> {
    let (min, max) = (
        jiff::Timestamp::MIN.as_second(),
        jiff::Timestamp::MAX.as_second(),
    );
    let secs = prop_oneof![
        Just(min),
        Just(max),
        Just(0),
        Just(-1),
        Just(253_402_207_200),
        min..=max,
    ];
    secs.prop_map(|s| {
        jiff::Timestamp::from_second(s)
            .expect("in jiff's range")
            .to_string()
    })
}

/// Runs `coord <args>` and fails the case on a panic (exit 101, a backtrace) or on a usage
/// error that does not start with `error:` (with `--json`: that is not one JSON error object
/// with exit code 2, docs/json.md).
fn never_panics(r: &TestRepo, args: &[&str]) -> Result<(), TestCaseError> {
    let out = r.run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    prop_assert_ne!(out.status.code(), Some(101), "{:?}: {}", args, err);
    prop_assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{:?}: {}",
        args,
        err
    );
    if out.status.code() == Some(2) {
        if args.contains(&"--json") && err.starts_with('{') {
            let json: serde_json::Value = serde_json::from_str(err.trim())
                .map_err(|e| TestCaseError::fail(format!("{args:?}: {e}: {err}")))?;
            prop_assert_eq!(
                &json["error"]["exit_code"],
                &serde_json::json!(2),
                "{}",
                err
            );
        } else {
            prop_assert!(err.starts_with("error: "), "{:?}: {}", args, err);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 8,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Any duration string and any `--now` the parsers see never panics a
    /// command (all but `watch`, which runs until stopped), whether the duration is in a task,
    /// in coord.yaml or in a flag.
    #[test]
    fn any_duration_and_any_clock_never_panic_any_command(d in any_duration(), now in any_clock()) {
        let r = TestRepo::with_agents(&["alice"]);
        r.task("t", &format!("title: t\ntimeout: {d}\n"));
        r.task("u", "title: u\n");
        let commands: [&[&str]; 11] = [
            &["tick"],
            &["tick", "--dry-run"],
            &["status"],
            &["--json", "status"],
            &["claim", "--agent", "alice"],
            &["heartbeat", "u"],
            &["complete", "u"],
            &["show", "t"],
            &["log", "t"],
            &["doctor"],
            &["archive", "--older-than", &d],
        ];
        for yaml in ["", &format!("defaults: {{timeout: {d}}}\nbackoff: {{base: {d}, max: {d}}}\ncircuit_breaker: {{open_for: {d}}}\narchive_after: {d}\nsettle: {d}\n")] {
            if !yaml.is_empty() {
                config(&r, yaml);
            }
            for args in commands {
                // `=` keeps a clock before year 0 (`-000001-…`) from reading as a flag.
                let (now, wait) = (format!("--now={now}"), format!("--wait={d}"));
                let mut with = vec![now.as_str(), wait.as_str()];
                with.extend_from_slice(args);
                never_panics(&r, &with)?;
            }
        }
    }
}
