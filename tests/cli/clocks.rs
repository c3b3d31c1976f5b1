//! Clones whose clocks disagree: leases, backoffs and circuits that one clone writes are
//! measured by each clone that reads them with its own clock (docs/sync.md, "Clocks"), so a
//! clock hours fast or half an hour slow neither expires a lease early nor freezes a task.

use crate::harness::{Net, TestRepo, T0};
use jiff::{SignedDuration, Timestamp};

/// A clone whose clock is `offset` from the true time of the run.
struct Clone {
    repo: TestRepo,
    offset: SignedDuration,
}

impl Clone {
    /// Sets the clone's clock to `minute` minutes of true time after [`T0`], plus its offset.
    fn at(&mut self, minute: i64) -> &TestRepo {
        let t0: Timestamp = T0.parse().expect("time");
        let now = t0 + SignedDuration::from_mins(minute) + self.offset;
        self.repo.at(&now.to_string());
        &self.repo
    }
}

/// What went wrong in a run, read from the remote's tip.
#[derive(Debug, Default, PartialEq, Eq)]
struct Harm {
    /// Attempts failed with `timeout` although their agent was still working.
    expiries: usize,
    /// Results set aside as `stale_result`.
    stale: usize,
}

/// Returns the harm the remote's tip records, and where `id` is there.
fn harm_on(net: &Net, ids: &[&str]) -> (Harm, Vec<String>) {
    let check = net.clone();
    let mut harm = Harm::default();
    let mut places = Vec::new();
    for id in ids {
        let at = check.where_is(id);
        let text = check.read(&at);
        harm.expiries += text.matches("code: timeout").count();
        harm.stale += text.matches("event: stale_result").count();
        places.push(at);
    }
    (harm, places)
}

/// Three clones sync one remote with push agent `alice`: `slow` grants leases, `fast` and
/// `control` (a true clock) keep syncing while alice works, then alice (a true clock too, in a
/// clone that synced right after the grant) reports one result and one failure, which `fast`
/// records; from then on only `control` and `slow` tick. Returns the harm, and where the tasks are at the end.
fn run(slow: SignedDuration, fast: SignedDuration) -> (Harm, Vec<String>) {
    let net = Net::new(&["alice"]);
    let config = net
        .seed
        .read("coord.yaml")
        .replace("failure_threshold: 5", "failure_threshold: 1");
    net.seed
        .commit_file("coord.yaml", &config, "trip on one failure");
    net.seed.git(&["push", "-q", "origin", "main"]);
    let clone = |offset| Clone {
        repo: net.clone(),
        offset,
    };
    let (mut slow, mut fast) = (clone(slow), clone(fast));
    let (mut control, mut agent) = (clone(SignedDuration::ZERO), clone(SignedDuration::ZERO));
    for c in [&mut slow, &mut fast, &mut control] {
        c.at(0).ok(&["sync"]);
    }
    net.person_adds("x", 2);
    slow.at(1).ok(&["sync"]);
    agent.at(1).git(&["pull", "-q", "origin", "main"]);
    for minute in 2..12 {
        fast.at(minute).ok(&["sync"]);
        control.at(minute).ok(&["sync"]);
    }
    let a = agent.at(12);
    a.write("out.yaml", "answer: 42\n");
    a.ok(&["complete", "x-0", "--output", "out.yaml"]);
    a.ok(&["fail", "x-1", "--error", "flaky"]);
    a.ok(&["sync"]);
    fast.at(13).ok(&["sync"]);
    for minute in 14..30 {
        control.at(minute).ok(&["sync"]);
        slow.at(minute).ok(&["sync"]);
    }
    harm_on(&net, &["x-0", "x-1"])
}

#[test]
fn clones_two_hours_fast_and_half_an_hour_slow_expire_no_lease_early_and_freeze_nothing() {
    let skewed = run(
        SignedDuration::from_mins(-30),
        SignedDuration::from_hours(2),
    );
    let control = run(SignedDuration::ZERO, SignedDuration::ZERO);
    let expected = (
        Harm::default(),
        vec![
            "work/done/x-0.yaml".to_string(),
            "work/assigned/alice/x-1.yaml".to_string(),
        ],
    );
    assert_eq!(control, expected, "true clocks");
    assert_eq!(skewed, expected, "+2h and -30min");
}
