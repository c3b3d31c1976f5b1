//! `seed_demo`: the sample repository of `coord demo`: six agents, a three-step pipeline, a
//! fan-out of three with a join, a task that depends on both, two small agent scripts and a
//! coord.yaml, committed in one commit.

use super::{Coord, Error, AGENT_WAIT};
use crate::engine::{Op, Plan, Transition};
use crate::model::{Endpoint, State};
use crate::store::Origin;

/// The echo agent: answers who did which task, in YAML.
pub const ECHO: &str = "bin/echo-agent.sh";
/// The reviewer: fails its first attempt, approves the next.
const REVIEWER: &str = "bin/reviewer-agent.sh";

const SCRIPTS: &[(&str, &str)] = &[
    (ECHO, include_str!("../../templates/demo/echo-agent.sh")),
    (
        REVIEWER,
        include_str!("../../templates/demo/reviewer-agent.sh"),
    ),
];

/// coord.yaml of the demo: retries after a second, and the writer's draft of the research goes
/// on to the editor (the third step of the pipeline).
const CONFIG: &str = "\
# The demo's coord.yaml: a failed attempt is retried after a second (default 1m).
backoff: {base: 1s, max: 1s}
rules:
  - when: {agent: writer, output_contains: market-research}
    then: editor
";

/// The agents, their profiles, and the script `coord run` drives for each.
pub const AGENTS: &[(&str, &str, &str)] = &[
    (
        "researcher",
        "capabilities: [research]\nmax_active: 1\n",
        ECHO,
    ),
    ("writer", "capabilities: [writing]\nmax_active: 2\n", ECHO),
    ("editor", "capabilities: [editing]\nmax_active: 1\n", ECHO),
    ("legal", "capabilities: [review]\nmax_active: 1\n", ECHO),
    (
        "security",
        "capabilities: [review]\nmax_active: 1\n",
        REVIEWER,
    ),
    ("pm", "capabilities: [planning]\nmax_active: 1\n", ECHO),
];

const TASKS: &[(&str, &str)] = &[
    (
        "market-research",
        "# Step 1 of a pipeline: research -> writer -> editor.\ntitle: Research the market for coord\nagent: researcher\npriority: high\nnext_agent: writer\nlabels: [launch]\n",
    ),
    (
        "launch-plan",
        "# A fan-out to three reviewers, joined by the pm.\ntitle: Review the launch plan\nagent: pm\nnext_agent: [legal, security, writer]\njoin_agent: pm\n",
    ),
    (
        "announce",
        "title: Announce the launch\ncapabilities: [writing]\ndepends_on: [market-research, launch-plan]\ninput:\n  summary: ${tasks.market-research.result.output.summary ?? \"no research\"}\n",
    ),
];

impl Coord {
    /// Writes the demo's agents, tasks, scripts and coord.yaml into this (freshly
    /// initialized) repository and commits them.
    pub fn seed_demo(&self) -> Result<(), Error> {
        let session = self.session(AGENT_WAIT)?;
        let wd = self.store().work_dir();
        let mut ops: Vec<Op> = AGENTS
            .iter()
            .map(|(n, p, _)| Op::Write {
                path: format!("{wd}/agents/{n}.yaml"),
                text: p.to_string(),
            })
            .collect();
        ops.extend(TASKS.iter().map(|(id, t)| Op::Write {
            path: format!("{wd}/inbox/{id}.yaml"),
            text: t.to_string(),
        }));
        ops.extend(SCRIPTS.iter().map(|(path, text)| Op::Write {
            path: path.to_string(),
            text: text.to_string(),
        }));
        ops.push(Op::Write {
            path: "coord.yaml".into(),
            text: CONFIG.into(),
        });
        let t = Transition {
            subject: "demo".into(),
            from: Endpoint::New,
            to: State::Inbox.into(),
            summary: "demo: six agents, three tasks, two agent scripts".into(),
            ops,
            guard: vec![],
            op: None,
        };
        self.apply(session, &Plan::one(t), Origin::Command)?;
        Ok(())
    }
}
