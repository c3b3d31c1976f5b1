//! The tick as a state machine: random drops, results, hand moves, cancels and clock steps
//! (leases expire, backoffs pass, circuits open and half-open), with the board's invariants
//! checked after every tick; then the agents fall silent and every task must reach a final
//! state (docs/behaviour.md; STYLE "Tests").

use super::harness::{summaries, Sim};
use crate::check;
use crate::engine::commands::{self, CommandError};
use crate::engine::{Op, Plan, Transition};
use crate::model::State;
use jiff::SignedDuration;
use proptest::prelude::*;
use serde_json::json;
use std::collections::{BTreeMap, HashSet};

const AGENTS: [(&str, &str, usize); 3] = [
    ("alice", "capabilities: [code]\nmax_active: 2\n", 2),
    ("bob", "capabilities: [code, review]\n", 1),
    ("carol", "capabilities: [review]\n", 1),
];
const PRIORITIES: [&str; 4] = ["low", "normal", "high", "critical"];
const CAPABILITIES: [&str; 3] = ["code", "review", "legal"];

#[derive(Debug, Clone)]
enum Handoff {
    One(usize),
    FanOut,
}

#[derive(Debug, Clone)]
enum Action {
    Drop {
        priority: usize,
        capability: Option<usize>,
        agent: Option<usize>,
        dep: Option<usize>,
        handoff: Option<Handoff>,
        /// Seconds from now to the task's `due` time.
        due: Option<i64>,
    },
    Result {
        pick: usize,
        success: bool,
        retryable: bool,
    },
    HandMove {
        pick: usize,
        agent: usize,
    },
    Cancel {
        pick: usize,
    },
    Advance(i64),
    Tick,
}

fn action() -> impl Strategy<Value = Action> {
    let handoff = prop_oneof![(0..3usize).prop_map(Handoff::One), Just(Handoff::FanOut)];
    let drop = (
        0..4usize,
        proptest::option::of(0..3usize),
        proptest::option::weighted(0.3, 0..3usize),
        proptest::option::weighted(0.3, any::<usize>()),
        proptest::option::weighted(0.3, handoff),
        proptest::option::weighted(0.3, -3600..7200i64),
    )
        .prop_map(
            |(priority, capability, agent, dep, handoff, due)| Action::Drop {
                priority,
                capability,
                agent,
                dep,
                handoff,
                due,
            },
        );
    let result = (any::<usize>(), any::<bool>(), proptest::bool::weighted(0.8)).prop_map(
        |(pick, success, retryable)| Action::Result {
            pick,
            success,
            retryable,
        },
    );
    let hand =
        (any::<usize>(), 0..3usize).prop_map(|(pick, agent)| Action::HandMove { pick, agent });
    let cancel = any::<usize>().prop_map(|pick| Action::Cancel { pick });
    prop_oneof![
        3 => drop,
        3 => result,
        1 => hand,
        1 => cancel,
        2 => (0..7200i64).prop_map(Action::Advance),
        4 => Just(Action::Tick),
    ]
}

/// What a dropped task has besides its priority, capability, agent and dependency.
struct Extra<'a> {
    handoff: Option<&'a Handoff>,
    due: Option<i64>,
}

/// What the run has seen so far.
struct Run {
    sim: Sim,
    dropped: Vec<String>,
    created: usize,
    attempts: HashSet<(String, u32)>,
}

impl Run {
    fn new() -> Run {
        let mut sim = Sim::new();
        sim.config.backoff.base = crate::model::Duration::from_secs(60);
        sim.config.backoff.max = crate::model::Duration::from_secs(600);
        for (name, profile, _) in AGENTS {
            sim.add_agent(name, profile);
        }
        Run {
            sim,
            dropped: Vec::new(),
            created: 0,
            attempts: HashSet::new(),
        }
    }

    fn step(&mut self, a: &Action) {
        match a {
            Action::Drop {
                priority,
                capability,
                agent,
                dep,
                handoff,
                due,
            } => {
                let extra = Extra {
                    handoff: handoff.as_ref(),
                    due: *due,
                };
                self.drop_task(*priority, *capability, *agent, *dep, extra)
            }
            Action::Result {
                pick,
                success,
                retryable,
            } => {
                let assigned = self.in_folders(|d| d.starts_with("assigned/"));
                if let Some(id) = nth(&assigned, *pick) {
                    let result = if *success {
                        json!({"status": "success", "output": {"from": id}})
                    } else {
                        json!({"status": "failure", "error": {"message": "no", "retryable": retryable}})
                    };
                    match self.sim.try_report(&id, result) {
                        Ok(_) => {}
                        // Moved in by hand and not adopted yet: the agent is told to wait.
                        Err(CommandError::WrongState { .. }) => {}
                        // A result already waits for the tick: a second one needs --replace.
                        Err(CommandError::ResultPending(_)) => {}
                        Err(e) => panic!("report on {id}: {e}"),
                    }
                }
            }
            Action::HandMove { pick, agent } => {
                let movable = self.in_folders(|d| d == "ready" || d.starts_with("assigned/"));
                if let Some(id) = nth(&movable, *pick) {
                    let from = self.sim.path_of(&id);
                    let to = if from.starts_with("ready/") {
                        format!("assigned/{}/{id}.yaml", AGENTS[*agent].0)
                    } else {
                        format!("ready/{id}.yaml")
                    };
                    self.sim.hand_move(&from, &to);
                }
            }
            Action::Cancel { pick } => {
                let open = self.in_folders(|d| {
                    d == "ready" || d == "blocked" || d == "review" || d.starts_with("assigned/")
                });
                if let Some(id) = nth(&open, *pick) {
                    let id = crate::model::TaskId::new(&id).expect("generated ids are valid");
                    self.sim
                        .command(|b, i| commands::cancel(b, i, &id, "not needed"))
                        .expect("cancel an open task");
                }
            }
            Action::Advance(secs) => self.sim.now += SignedDuration::from_secs(*secs),
            Action::Tick => self.tick(),
        }
    }

    fn drop_task(
        &mut self,
        priority: usize,
        capability: Option<usize>,
        agent: Option<usize>,
        dep: Option<usize>,
        extra: Extra<'_>,
    ) {
        let id = format!("t{}", self.dropped.len());
        let mut y = format!("title: task {id}\npriority: {}\n", PRIORITIES[priority]);
        if let Some(c) = capability {
            y.push_str(&format!("capabilities: [{}]\n", CAPABILITIES[c]));
        }
        if let Some(a) = agent {
            y.push_str(&format!("agent: {}\n", AGENTS[a].0));
        }
        if let Some(d) = dep.and_then(|d| nth(&self.dropped, d)) {
            y.push_str(&format!("depends_on: [{d}]\n"));
        }
        if let Some(secs) = extra.due {
            let due = self.sim.now + SignedDuration::from_secs(secs);
            y.push_str(&format!("due: {due}\n"));
        }
        match extra.handoff {
            Some(Handoff::One(a)) => y.push_str(&format!("next_agent: {}\n", AGENTS[*a].0)),
            Some(Handoff::FanOut) => y.push_str("next_agent: [alice, bob]\njoin_agent: carol\n"),
            None => {}
        }
        self.sim.drop_task(&id, &y);
        self.dropped.push(id);
    }

    /// Lets time pass with every agent silent, ticking, until nothing changes; then every task
    /// is final, except those no agent can ever take (capability `legal`) and their dependents.
    fn drain(&mut self) {
        for _ in 0..300 {
            self.sim.now += SignedDuration::from_secs(2 * 3600);
            let now = self.sim.now;
            let plan = self.sim.tick(now);
            self.check(&plan);
            if plan.is_empty() && self.in_folders(|d| d.starts_with("assigned/")).is_empty() {
                break;
            }
        }
        let stuck = self.in_folders(|d| !matches!(d, "done" | "failed" | "cancelled"));
        for id in stuck {
            let dir = self.sim.path_of(&id);
            let spec = self.sim.task(&id).spec;
            let unservable = spec.capabilities.iter().any(|c| c == "legal");
            let waits_on_open = spec.depends_on.iter().any(|d| {
                !matches!(
                    self.sim.path_of(d.as_str()).split('/').next(),
                    Some("done" | "failed" | "cancelled")
                )
            });
            assert!(
                (dir.starts_with("ready/") && unservable)
                    || (dir.starts_with("blocked/") && waits_on_open),
                "{id} never reached a final state: {dir}"
            );
        }
    }

    /// Returns the ids of task files whose folder passes `keep`, sorted.
    fn in_folders(&self, keep: impl Fn(&str) -> bool) -> Vec<String> {
        task_files(&self.sim)
            .into_iter()
            .filter(|(dir, _)| keep(dir))
            .map(|(_, id)| id)
            .collect()
    }

    fn tick(&mut self) {
        let now = self.sim.now;
        let plan = self.sim.tick(now);
        self.check(&plan);
        let again = self.sim.tick(now);
        assert!(
            again.is_empty(),
            "(c) a tick right after a tick changed things: {:?}\nafter {:?}",
            summaries(&again),
            summaries(&plan)
        );
        self.check_quiet_until_deadline(&again);
        self.check_view_until();
    }

    /// (g) The board view of a board with nothing to do reads the same until the instant it
    /// reports (or a month later, without one): `coord status` shows the view a quiet tick
    /// saved until then.
    fn check_view_until(&self) {
        let board = self.sim.board();
        let reasons = BTreeMap::new();
        let at = |now| {
            let plan = self.sim.plan_board(&board, now);
            crate::view::board::planned(&board, &plan, now, &reasons)
        };
        let now = self.sim.now;
        let shown = at(now);
        let later = match shown.until {
            Some(until) => {
                assert!(until > now, "(g) the view's instant already passed");
                until - SignedDuration::from_nanos(1)
            }
            None => now + SignedDuration::from_hours(24 * 30),
        };
        assert_eq!(
            shown.view,
            at(later).view,
            "(g) the view at {now} (until {:?}) differs at {later}",
            shown.until
        );
    }

    /// (f) A plan with nothing to do stays so until its deadline: planning the same files at
    /// the last instant before it (or a month later, without one) finds nothing either, so
    /// the tick may skip planning an unchanged board until then.
    fn check_quiet_until_deadline(&self, quiet: &Plan) {
        let later = match quiet.deadline {
            Some(deadline) => {
                assert!(deadline > self.sim.now, "(f) a deadline already passed");
                deadline - SignedDuration::from_nanos(1)
            }
            None => self.sim.now + SignedDuration::from_hours(24 * 30),
        };
        let plan = self.sim.plan_at(later);
        assert!(
            plan.is_empty(),
            "(f) quiet at {} with deadline {:?}, but at {later}: {:?}",
            self.sim.now,
            quiet.deadline,
            summaries(&plan)
        );
    }

    fn check(&mut self, plan: &Plan) {
        let files = task_files(&self.sim);
        // (a) every id in exactly one place.
        let mut places: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (dir, id) in &files {
            places.entry(id).or_default().push(dir);
        }
        for (id, dirs) in &places {
            assert_eq!(dirs.len(), 1, "(a) {id} is in {dirs:?}");
        }
        // (b) an attempt is started once per task, ever.
        for t in &plan.transitions {
            if let Some(attempt) = started_attempt(t) {
                assert!(
                    self.attempts.insert((t.subject.clone(), attempt)),
                    "(b) {} started attempt {attempt} twice: {}",
                    t.subject,
                    t.summary
                );
            }
        }
        // (e) no task file appears or vanishes except drops and coord-created tasks.
        self.created += plan.transitions.iter().filter(|t| t.from == "new").count();
        assert_eq!(
            files.len(),
            self.dropped.len() + self.created,
            "(e) task files: {files:?}"
        );
        // The folder and the coord block agree after a tick.
        for (dir, id) in &files {
            let c = self.sim.coord(id);
            let state = dir.split('/').next().unwrap_or(dir);
            assert_eq!(
                c.state,
                State::parse(state),
                "{id} in {dir} records {:?}",
                c.state
            );
            if let Some(agent) = dir.strip_prefix("assigned/") {
                assert_eq!(
                    c.assigned_to.as_ref().map(|a| a.as_str()),
                    Some(agent),
                    "{id}"
                );
            }
        }
        // The planner never assigns past a WIP limit (hand moves may).
        for (name, _, limit) in AGENTS {
            let assigned_now = plan.transitions.iter().any(|t| {
                t.summary.starts_with("assign ") && t.summary.ends_with(&format!(" to {name}"))
            });
            let load = files
                .iter()
                .filter(|(d, _)| *d == format!("assigned/{name}"))
                .count();
            assert!(
                !assigned_now || load <= limit,
                "{name} given work at {load}/{limit}"
            );
        }
    }
}

/// Returns the attempt a transition starts: an assignment, or a hand move adopted into an
/// agent's folder.
fn started_attempt(t: &Transition) -> Option<u32> {
    if t.to != "assigned" || (t.from == "assigned" && !t.summary.starts_with("adopt ")) {
        return None;
    }
    let text = t.ops.iter().find_map(|op| match op {
        Op::Write { text, .. } | Op::Edit { text, .. } => Some(text),
        _ => None,
    });
    let text = text.unwrap_or_else(|| panic!("{} starts an attempt without a write", t.summary));
    Some(
        check::reread(text)
            .expect("coord writes readable tasks")
            .coord
            .attempt,
    )
}

/// Returns (folder, id) of every task file, sorted by path.
fn task_files(sim: &Sim) -> Vec<(String, String)> {
    sim.files
        .keys()
        .filter(|p| !p.starts_with("agents/"))
        .filter_map(|p| {
            let (dir, name) = p.rsplit_once('/')?;
            Some((dir.to_string(), name.strip_suffix(".yaml")?.to_string()))
        })
        .collect()
}

fn nth(items: &[String], pick: usize) -> Option<String> {
    (!items.is_empty()).then(|| items[pick % items.len()].clone())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn tick_keeps_the_board_consistent(actions in proptest::collection::vec(action(), 1..40)) {
        let mut run = Run::new();
        for a in &actions {
            run.step(a);
        }
        run.tick();
        run.drain();
    }
}

#[test]
fn move_helper_refuses_to_replace_a_file() {
    let mut s = Sim::new();
    s.files
        .insert("ready/a.yaml".into(), b"title: a\n".to_vec());
    s.files.insert("done/a.yaml".into(), b"title: a\n".to_vec());
    let plan = Plan::one(Transition {
        subject: "a".into(),
        from: crate::model::State::Ready.into(),
        to: crate::model::State::Done.into(),
        summary: "x".into(),
        ops: vec![Op::Move {
            from: "work/ready/a.yaml".into(),
            to: "work/done/a.yaml".into(),
        }],
        guard: vec![],
        op: None,
    });
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.apply(&plan)));
    assert!(
        outcome.is_err(),
        "(d) the harness must fail a move onto an existing file"
    );
}
