//! No task is silent: on generated boards — tasks in every state, results good,
//! malformed, stale or uneditable, files broken by hand or still being written, agents full,
//! disabled, pull-only or with broken profiles, the clock anywhere — every task that is not
//! final is, after a tick, acted on by the next tick, or named in `coord status --json` with
//! what it waits for (waiting, held, blocked, settling, duplicates) or under `problems`.

use super::harness::Sim;
use crate::engine::{AcceptAll, Inputs, NoHistory};
use crate::view::board as board_view;
use jiff::SignedDuration;
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};

const AGENTS: [&str; 3] = ["alice", "bob", "carol"];
const PROFILES: [&str; 5] = [
    "capabilities: [code]\nmax_active: 2\n",
    "enabled: false\n",
    "max_active: lots\n",
    "assign: pull\n",
    "capabilities: [review]\n",
];

#[derive(Debug, Clone)]
enum Act {
    Drop {
        kind: usize,
        agent: Option<usize>,
        dep: Option<usize>,
        ask: bool,
    },
    Result {
        pick: usize,
        kind: usize,
    },
    HandMove {
        pick: usize,
        agent: usize,
    },
    Cancel {
        pick: usize,
    },
    Approve {
        pick: usize,
    },
    Break {
        pick: usize,
    },
    Settle {
        pick: usize,
    },
    Unsettle,
    Profile {
        agent: usize,
        kind: usize,
    },
    Advance(i64),
    Tick,
}

fn act() -> impl Strategy<Value = Act> {
    let drop = (
        0..9usize,
        proptest::option::of(0..4usize),
        proptest::option::weighted(0.4, any::<usize>()),
        proptest::bool::weighted(0.2),
    )
        .prop_map(|(kind, agent, dep, ask)| Act::Drop {
            kind,
            agent,
            dep,
            ask,
        });
    prop_oneof![
        4 => drop,
        4 => (any::<usize>(), 0..RESULTS.len()).prop_map(|(pick, kind)| Act::Result { pick, kind }),
        1 => (any::<usize>(), 0..3usize).prop_map(|(pick, agent)| Act::HandMove { pick, agent }),
        1 => any::<usize>().prop_map(|pick| Act::Cancel { pick }),
        1 => any::<usize>().prop_map(|pick| Act::Approve { pick }),
        1 => any::<usize>().prop_map(|pick| Act::Break { pick }),
        1 => any::<usize>().prop_map(|pick| Act::Settle { pick }),
        1 => Just(Act::Unsettle),
        1 => (0..3usize, 0..5usize).prop_map(|(agent, kind)| Act::Profile { agent, kind }),
        2 => (-3600..7200i64).prop_map(Act::Advance),
        4 => Just(Act::Tick),
    ]
}

struct Run {
    sim: Sim,
    dropped: Vec<String>,
}

impl Run {
    fn new(start: i64) -> Run {
        let mut sim = Sim::new();
        sim.now += SignedDuration::from_secs(start);
        for (a, p) in AGENTS.iter().zip(PROFILES) {
            sim.add_agent(a, p);
        }
        Run {
            sim,
            dropped: Vec::new(),
        }
    }

    fn step(&mut self, a: &Act) {
        match a {
            Act::Drop {
                kind,
                agent,
                dep,
                ask,
            } => self.drop_task(*kind, *agent, *dep, *ask),
            Act::Result { pick, kind } => {
                if let Some(path) = self.pick(*pick, |d| d.starts_with("assigned/")) {
                    self.append(&path, RESULTS[*kind]);
                }
            }
            Act::HandMove { pick, agent } => {
                if let Some(path) = self.pick(*pick, |d| d == "ready" || d.starts_with("assigned/"))
                {
                    let name = path.rsplit('/').next().unwrap_or_default().to_string();
                    let to = if path.starts_with("ready/") {
                        format!("assigned/{}/{name}", AGENTS[*agent])
                    } else {
                        format!("ready/{name}")
                    };
                    if !self.sim.files.contains_key(&to) {
                        self.sim.hand_move(&path, &to);
                    }
                }
            }
            Act::Cancel { pick } => self.command(*pick, |b, i, id| {
                crate::engine::commands::cancel(b, i, id, "not needed")
            }),
            Act::Approve { pick } => self.command(*pick, crate::engine::commands::approve),
            Act::Break { pick } => {
                if let Some(path) = self.pick(*pick, |d| d != "inbox") {
                    self.sim.files.insert(path, b"title: [broken\n".to_vec());
                }
            }
            Act::Settle { pick } => {
                if let Some(path) = self.pick(*pick, |_| true) {
                    self.sim.settling.insert(path);
                }
            }
            Act::Unsettle => self.sim.settling.clear(),
            Act::Profile { agent, kind } => self.sim.add_agent(AGENTS[*agent], PROFILES[*kind]),
            Act::Advance(secs) => self.sim.now += SignedDuration::from_secs(*secs),
            Act::Tick => self.tick(),
        }
    }

    fn drop_task(&mut self, kind: usize, agent: Option<usize>, dep: Option<usize>, ask: bool) {
        let id = format!("t{}", self.dropped.len());
        let mut y = DROPS[kind].replace("ID", &id);
        if kind < 4 {
            if let Some(a) = agent {
                let name = AGENTS.get(a).copied().unwrap_or("nobody");
                y.push_str(&format!("agent: {name}\n"));
            }
            if let Some(d) = dep.and_then(|d| nth(&self.dropped, d)) {
                y.push_str(&format!("depends_on: [{d}]\n"));
            }
            if ask {
                y.push_str("authority: ask_me_first\n");
            }
        }
        let path = format!("inbox/{id}.yaml");
        self.sim.files.entry(path).or_insert_with(|| y.into_bytes());
        self.dropped.push(id);
    }

    fn append(&mut self, path: &str, text: &str) {
        let mut bytes = self.sim.files.get(path).cloned().unwrap_or_default();
        bytes.extend_from_slice(text.as_bytes());
        self.sim.files.insert(path.to_string(), bytes);
    }

    fn command<T: super::harness::HasPlan>(
        &mut self,
        pick: usize,
        f: impl FnOnce(
            &crate::board::Board,
            &Inputs<'_>,
            &crate::model::TaskId,
        ) -> Result<T, crate::engine::commands::CommandError>,
    ) {
        let Some(path) = self.pick(pick, |d| d != "inbox") else {
            return;
        };
        let stem = path
            .rsplit('/')
            .next()
            .and_then(|n| n.strip_suffix(".yaml"));
        let Some(id) = stem.and_then(|s| crate::model::TaskId::new(s).ok()) else {
            return;
        };
        // A refusal (wrong state, unreadable file, ...) is the command's answer; the board
        // is what matters here.
        let _ = self.sim.command(|b, i| f(b, i, &id));
    }

    /// Returns the `pick`th task file (path under `work/`) whose folder passes `keep`.
    fn pick(&self, pick: usize, keep: impl Fn(&str) -> bool) -> Option<String> {
        let paths: Vec<String> = self
            .sim
            .files
            .keys()
            .filter(|p| !p.starts_with("agents/") && !p.ends_with(".errors"))
            .filter(|p| p.rsplit_once('/').is_some_and(|(d, _)| keep(d)))
            .cloned()
            .collect();
        nth(&paths, pick)
    }

    fn tick(&mut self) {
        let now = self.sim.now;
        self.sim.tick(now);
        self.check_none_silent();
    }

    /// The property: every task file not in a final folder, and every file still being
    /// written, is acted on by the next plan or named by the status view.
    fn check_none_silent(&self) {
        let board = self.sim.board();
        let inputs = Inputs {
            config: &self.sim.config,
            now: self.sim.now,
            verifier: &AcceptAll,
            attempts: &NoHistory,
            sightings: &crate::engine::sighting::NoSightings,
            gates: &super::harness::NoGates,
            epoch: None,
        };
        let plan = crate::engine::plan(&board, &inputs);
        let view = board_view::view(&board, &inputs, &BTreeMap::new());
        let acted: HashSet<&str> = plan
            .transitions
            .iter()
            .map(|t| t.subject.as_str())
            .collect();
        let named = |key: &str, field: &str| -> HashSet<String> {
            view[key]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x[field].as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        let ids: HashSet<String> = ["waiting", "held", "blocked", "duplicates"]
            .into_iter()
            .flat_map(|k| named(k, "id"))
            .collect();
        let paths: HashSet<String> = ["problems", "settling"]
            .into_iter()
            .flat_map(|k| named(k, "path"))
            .collect();
        for t in board.tasks.iter().filter(|t| !t.folder.state.is_final()) {
            let seen = acted.contains(t.id.as_str())
                || ids.contains(t.id.as_str())
                || paths.contains(&t.path);
            assert!(
                seen,
                "{} ({}) is silent: not acted on and not named by status\nplan: {:?}\nview: {}",
                t.path,
                t.folder.state,
                plan.transitions
                    .iter()
                    .map(|t| &t.summary)
                    .collect::<Vec<_>>(),
                json!({"waiting": view["waiting"], "held": view["held"], "blocked": view["blocked"], "problems": view["problems"], "settling": view["settling"]})
            );
        }
        for s in &board.settling {
            assert!(paths.contains(&s.path), "{} settles silently", s.path);
        }
        let _: &Value = &view;
    }
}

/// Inbox files: valid ones (options added), then kinds coord must quarantine or take.
const DROPS: [&str; 9] = [
    "title: ID\n",
    "title: ID\ncapabilities: [code]\n",
    "title: ID\ncapabilities: [legal]\npriority: high\n",
    "title: ID\nnext_agent: [alice, bob]\njoin_agent: carol\n",
    "title: [ID\n",
    "title: ID\n...\n",
    "coord:\n  state: ready\ntitle: ID\n",
    "{title: ID}\n",
    "title: ID\nmax_attempts: 0\n",
];

/// Results agents append: good, failing, malformed, stale, handing off to an agent that does
/// not exist, or in a file coord cannot edit.
const RESULTS: [&str; 8] = [
    "result:\n  status: success\n  output: {n: 1}\n",
    "result:\n  status: failure\n  error: {message: no}\n",
    "result:\n  status: weird\n",
    "result:\n  status: success\n  extra: 1\n",
    "result:\n  status: success\n  attempt: 99\n",
    "result:\n  status: success\n...\n",
    "result:\n  status: [half\n",
    "result:\n  status: success\n  next_agent: [bob, ghost]\n",
];

fn nth(items: &[String], pick: usize) -> Option<String> {
    (!items.is_empty()).then(|| items[pick % items.len()].clone())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn no_task_is_silent(start in -86_400i64..86_400 * 365, acts in proptest::collection::vec(act(), 1..40)) {
        let mut run = Run::new(start);
        for a in &acts {
            run.step(a);
        }
        run.tick();
    }
}
