//! Handoffs after success (docs/behaviour.md `rules`): a child task for each next agent, with
//! deterministic ids so a repeated tick never creates two, the parent's output passed in
//! `input.previous` (bounded), and a join task for fan-in.

use super::world::{Entry, World};
use crate::check::Task;
use crate::hash::fnv1a;
use crate::model::{AgentName, CoordBlock, Folder, NextAgent, State, TaskId};
use crate::yaml;
use serde_json::{json, Map, Value};

/// Largest output copied into a child's input; bigger outputs are referenced.
pub const MAX_PREVIOUS: usize = 100 * 1024;

/// Returns the agents to hand off to: `result.next_agent`, else the task's `next_agent`,
/// plus the agents of every matching rule, without repeats.
pub fn targets(w: &World<'_>, e: &Entry) -> Vec<AgentName> {
    let explicit = e
        .task
        .result
        .as_ref()
        .and_then(|r| r.next_agent.clone())
        .or_else(|| e.task.spec.next_agent.clone());
    let mut out: Vec<AgentName> = explicit.map(|n| n.agents()).unwrap_or_default();
    for rule in &w.config.rules {
        if rule_matches(e, &rule.when) && !out.contains(&rule.then) {
            out.push(rule.then.clone());
        }
    }
    out
}

fn rule_matches(e: &Entry, when: &crate::config::RuleWhen) -> bool {
    // After a do_it_and_show_me approval the task sits in review/, not in the agent's
    // folder: the agent that did the work is the one the coord block names.
    let agent = e
        .folder
        .agent
        .as_ref()
        .or(e.task.coord.assigned_to.as_ref());
    let agent_ok = when.agent.as_ref().is_none_or(|a| agent == Some(a));
    let label_ok = when
        .label
        .as_ref()
        .is_none_or(|l| e.task.spec.labels.contains(l));
    let output_ok = when.output_contains.as_ref().is_none_or(|needle| {
        let out = e.task.result.as_ref().and_then(|r| r.output.as_ref());
        out.is_some_and(|o| {
            o.to_string()
                .to_lowercase()
                .contains(&needle.to_lowercase())
        })
    });
    agent_ok && label_ok && output_ok
}

/// Returns the deterministic id of `parent`'s child for `agent` (suffix `.join` for fan-in).
pub fn child_id(parent: &TaskId, suffix: &str) -> TaskId {
    let plain = format!("{parent}.{suffix}");
    if let Ok(id) = TaskId::new(&plain) {
        return id;
    }
    let head: String = parent.as_str().chars().take(100).collect();
    // A cut right after a `.` would make `..`, which no id may hold.
    let head = head.trim_end_matches('.');
    let hashed = format!("{head}.{:016x}", fnv1a(plain.as_bytes()));
    TaskId::new(&hashed).unwrap_or_else(|_| parent.clone())
}

/// One step a handoff makes of a parent: the child for an agent, or the join task of a
/// fan-out (which waits on the children, and no child does).
#[derive(Clone, Copy)]
enum StepOf<'s> {
    Child(&'s AgentName),
    Join(&'s AgentName),
}

/// Returns the id of `parent`'s step `step` (id suffix `suffix`) and whether that step exists
/// already. The candidates are the plain id ([`child_id`]) then `<id>.2`, `<id>.3`, …: a
/// task among them that is this step (see [`is_step`]) is the step, wherever it is in the
/// run of taken candidates after the plain id; else the first free candidate is the new
/// step's id (a person may have named a task like the step). The same board gives the same
/// answer, so a repeated pass finds the step it made. None only if the candidates run out.
fn step_id(
    w: &World<'_>,
    parent: &TaskId,
    suffix: &str,
    step: StepOf<'_>,
) -> Option<(TaskId, bool)> {
    let mut free = None;
    for n in 1..=w.id_count() + 1 {
        let id = match n {
            1 => child_id(parent, suffix),
            n => child_id(parent, &format!("{suffix}.{n}")),
        };
        if !w.id_taken(&id) {
            if n > 1 {
                return Some((free.unwrap_or(id), false));
            }
            free = Some(id);
        } else if is_step(w, &id, parent, step) {
            return Some((id, true));
        }
    }
    free.map(|id| (id, false))
}

/// Returns whether a file of `id` (planned this pass, or on the board) is `parent`'s `step`:
/// its `coord.parent` names the parent, its `agent` is the step's, and it waits on other
/// tasks exactly when the step is a join.
fn is_step(w: &World<'_>, id: &TaskId, parent: &TaskId, step: StepOf<'_>) -> bool {
    let (agent, join) = match step {
        StepOf::Child(a) => (a, false),
        StepOf::Join(a) => (a, true),
    };
    let is = |task: &Task| {
        task.coord.parent.as_ref() == Some(parent)
            && task.spec.agent.as_ref() == Some(agent)
            && task.spec.depends_on.is_empty() != join
    };
    w.entry(id).is_some_and(|e| is(&e.task))
        || w.board
            .find(id)
            .iter()
            .any(|f| f.read.as_ref().is_ok_and(|task| is(task)))
}

/// Creates the children (and join task) of a task that just finished successfully.
pub fn create_children(w: &mut World<'_>, e: &Entry, targets: &[AgentName]) {
    let mut created = Vec::new();
    for agent in targets {
        let Some((id, exists)) = step_id(w, &e.id, agent.as_str(), StepOf::Child(agent)) else {
            continue;
        };
        created.push(id.clone());
        if exists {
            continue;
        }
        let by = e
            .folder
            .agent
            .as_ref()
            .or(e.task.coord.assigned_to.as_ref());
        let step = Step {
            agent,
            title: step_title(&e.task.spec.title, &format!(": next step, by {agent}")),
            description: format!(
                "Handed off{} when task {} ({}) succeeded; its output is in input.previous.",
                by.map(|a| format!(" by {a}")).unwrap_or_default(),
                e.id,
                e.task.spec.title.trim()
            ),
            input: json!({ "previous": previous(e) }),
            depends_on: &[],
            state: State::Ready,
        };
        let text = child_text(w, e, step);
        w.create(
            &id,
            Folder::of(State::Ready),
            text,
            format!("hand off {} to {agent} as {id}", e.id),
        );
    }
    let fan_out = matches!(e.task.spec.next_agent, Some(NextAgent::Many(_)));
    if let (Some(join), true) = (&e.task.spec.join_agent, fan_out) {
        create_join(w, e, join, &created);
    }
}

fn create_join(w: &mut World<'_>, e: &Entry, join: &AgentName, children: &[TaskId]) {
    let Some((id, false)) = step_id(w, &e.id, "join", StepOf::Join(join)) else {
        return;
    };
    let results: Map<String, Value> = children
        .iter()
        .map(|c| {
            (
                c.to_string(),
                json!(format!("${{tasks.{c}.result.output ?? \"\"}}")),
            )
        })
        .collect();
    let ids: Vec<&str> = children.iter().map(TaskId::as_str).collect();
    let step = Step {
        agent: join,
        title: step_title(
            &e.task.spec.title,
            &format!(": join the results of {}, by {join}", ids.join(", ")),
        ),
        description: format!(
            "Joins the fan-out of task {} ({}) once {} are done; their outputs are in input.results.",
            e.id,
            e.task.spec.title.trim(),
            ids.join(", ")
        ),
        input: json!({ "results": results }),
        depends_on: children,
        state: State::Blocked,
    };
    let text = child_text(w, e, step);
    w.create(
        &id,
        Folder::of(State::Blocked),
        text,
        format!("create join task {id} for {join}"),
    );
}

/// Returns the parent's output, or a reference to it when it is too large to copy.
fn previous(e: &Entry) -> Value {
    let out = e
        .task
        .result
        .as_ref()
        .and_then(|r| r.output.clone())
        .unwrap_or(Value::Null);
    let size = serde_json::to_string(&out).map_or(usize::MAX, |s| s.len());
    if size <= MAX_PREVIOUS {
        return out;
    }
    json!({
        "task": e.id,
        "note": format!("output of {size} bytes is larger than {MAX_PREVIOUS}; read result.output of task {}", e.id),
    })
}

/// One step a handoff creates: a child for the next agent, or the join task of a fan-out.
struct Step<'a> {
    agent: &'a AgentName,
    /// The step's own title (the parent's, with what this step is).
    title: String,
    /// What the step is and where its input comes from.
    description: String,
    input: Value,
    depends_on: &'a [TaskId],
    state: State,
}

/// Returns the parent's title with `step` after it, within the schema's 500 characters (the
/// parent's part is cut short when needed).
fn step_title(parent: &str, step: &str) -> String {
    const MAX: usize = 500;
    let room = MAX.saturating_sub(step.chars().count());
    let head: String = parent.trim().chars().take(room).collect();
    let title = format!("{head}{step}");
    title.chars().take(MAX).collect()
}

fn child_text(w: &World<'_>, parent: &Entry, step: Step<'_>) -> String {
    let Step {
        agent,
        title,
        description,
        input,
        depends_on,
        state,
    } = step;
    let spec = &parent.task.spec;
    let mut fields = Map::new();
    fields.insert("title".into(), json!(title));
    fields.insert("description".into(), json!(description));
    fields.insert("agent".into(), json!(agent));
    if let Some(p) = spec.priority {
        fields.insert("priority".into(), json!(p));
    }
    if !spec.labels.is_empty() {
        fields.insert("labels".into(), json!(spec.labels));
    }
    if !depends_on.is_empty() {
        fields.insert("depends_on".into(), json!(depends_on));
    }
    fields.insert("input".into(), input);
    let pc = &parent.task.coord;
    let mut chain = pc.chain.clone();
    chain.push(parent.id.clone());
    let coord = CoordBlock {
        state: Some(state),
        created_at: Some(w.now()),
        parent: Some(parent.id.clone()),
        workflow: Some(pc.workflow.clone().unwrap_or_else(|| parent.id.clone())),
        chain,
        ..CoordBlock::default()
    };
    let mut text = String::from("# Created by coord as a handoff; edit freely.\n");
    for (k, v) in &fields {
        text.push_str(&yaml::emit_block(k, v, 0));
    }
    text.push_str(&yaml::emit_block("coord", &coord.to_value(), 0));
    text
}

#[cfg(test)]
mod tests {
    use super::step_title;

    #[test]
    fn a_step_title_stays_within_the_schemas_500_characters() {
        assert_eq!(
            step_title(" Draft ", ": next step, by b"),
            "Draft: next step, by b"
        );
        let long = "é".repeat(500);
        let title = step_title(&long, ": next step, by b");
        assert_eq!(title.chars().count(), 500);
        assert!(title.ends_with(": next step, by b"), "{title}");
    }
}
