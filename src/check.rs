//! Validation of task files: one file on its own (YAML syntax and budgets, schema, `id:` equal
//! to the file stem, readable `result:`) and a task among the others (known agents,
//! dependencies that exist, no cycles, expressions naming only dependencies). Pure, but for
//! the read of a task's text the stat cache keeps, when the task is first parsed
//! ([`crate::text`]).

use crate::expr;
use crate::model::metrics::{Metrics, Spent};
use crate::model::{
    AgentName, CoordBlock, Duration, Priority, State, TaskId, TaskResult, TaskSpec,
};
use crate::schema::{Schema, Violation};
use crate::text::Text;
use crate::yaml::{parse_bytes, Doc, Limits};
use std::collections::HashSet;
use std::sync::OnceLock;

/// A task file that parsed and passed the per-file checks.
#[derive(Debug, Clone)]
pub struct TaskDoc {
    /// The exact text of the file.
    pub text: String,
    /// The parsed document with positions.
    pub doc: Doc,
    /// Person-owned fields.
    pub spec: TaskSpec,
    /// The agent's result, when written and readable.
    pub result: Option<TaskResult>,
    /// Why a written `result:` cannot be accepted (`path`-less `line:col: message`), when it
    /// cannot: the attempt fails with `bad_result` instead of the file being unreadable.
    pub bad_result: Option<String>,
    /// The coordinator's block (default when absent).
    pub coord: CoordBlock,
}

/// Parses and checks one task file on its own; `stem` is its file name without extension.
pub fn read_task(
    stem: &str,
    bytes: &[u8],
    schema: &Schema,
    limits: &Limits,
) -> Result<TaskDoc, Vec<Violation>> {
    let doc = parse_bytes(bytes, limits).map_err(|e| vec![Violation::at(e.pos, e.message)])?;
    if doc.value.is_null() {
        return Err(vec![Violation::file(
            "the file is empty; a task needs at least a line 'title: ...'",
        )]);
    }
    let (mut found, in_result) = schema.validate_split(&doc, "result");
    if let Some(id) = doc.value.get("id").and_then(|v| v.as_str()) {
        if id != stem {
            found.push(Violation::at(
                doc.pos_of("/id", false),
                format!("id '{id}' does not match the file name '{stem}'; rename the file or fix the id"),
            ));
        }
    }
    if let Some(due) = doc.value.get("due").and_then(|v| v.as_str()) {
        if found.is_empty() && crate::model::due_instant(due).is_none() {
            found.push(Violation::at(
                doc.pos_of("/due", false),
                format!("due: '{due}' is not a real date; write e.g. 2026-12-01 or 2026-12-01T17:00:00Z"),
            ));
        }
    }
    if let Some(t) = doc.value.get("timeout").and_then(|v| v.as_str()) {
        if let Err(e @ crate::model::DurationError::TooLong(_)) = Duration::parse_checked(t) {
            found.push(Violation::at(
                doc.pos_of("/timeout", false),
                format!("timeout: {e}"),
            ));
        }
    }
    if doc.value.is_object() && !doc.block_root {
        found.push(Violation::file(
            "write the task as 'key: value' lines, not as one '{...}' flow mapping",
        ));
    }
    if !found.is_empty() {
        found.sort();
        return Err(found);
    }
    let spec: TaskSpec = serde_json::from_value(doc.value.clone())
        .map_err(|e| vec![Violation::file(format!("cannot read the task: {e}"))])?;
    let (mut result, mut bad_result) = read_result(&doc);
    if let Some(v) = in_result.first() {
        let (line, col) = (v.pos.line, v.pos.col);
        bad_result = Some(format!("{line}:{col}: {}", v.message));
        result = None;
    }
    let coord = CoordBlock::from_value(doc.value.get("coord"));
    let text = String::from_utf8_lossy(bytes).into_owned();
    Ok(TaskDoc {
        text,
        doc,
        spec,
        result,
        bad_result,
        coord,
    })
}

/// What a result coord can accept looks like: the fix named after a `bad_result`.
const RESULT_HINT: &str =
    "a result is 'status: success' with 'output:', or 'status: failure' with 'error:'";

/// Returns the line that reports a `result:` coord cannot accept: `path:line:col: why` (`why`
/// as [`TaskDoc::bad_result`] holds it) and what a good result looks like.
pub fn bad_result_line(path: &str, why: &str) -> String {
    format!("{path}:{why}; {RESULT_HINT}")
}

/// Returns the document's `result:` when it reads, or why it does not.
fn read_result(doc: &Doc) -> (Option<TaskResult>, Option<String>) {
    match doc.value.get("result") {
        None | Some(serde_json::Value::Null) => (None, None),
        Some(r) => match serde_json::from_value(r.clone()) {
            Ok(r) => (Some(r), None),
            Err(e) => {
                let pos = doc.pos_of("/result", false);
                (None, Some(format!("{}:{}: result: {e}", pos.line, pos.col)))
            }
        },
    }
}

/// Re-reads text the coordinator wrote (no schema check: the repo's schema may differ from
/// the built-in one, and the person-owned fields were validated at intake).
pub fn reread(text: &str) -> Option<TaskDoc> {
    let doc = crate::yaml::parse(text, &Limits::default()).ok()?;
    from_parsed(text.to_string(), doc)
}

/// Rebuilds a task from its text and the document parsed from it, both known to have passed
/// the per-file checks (text the coordinator wrote, or a stat cache entry's).
pub fn from_parsed(text: String, doc: Doc) -> Option<TaskDoc> {
    let spec: TaskSpec = serde_json::from_value(doc.value.clone()).ok()?;
    let (result, bad_result) = read_result(&doc);
    let coord = CoordBlock::from_value(doc.value.get("coord"));
    Some(TaskDoc {
        text,
        doc,
        spec,
        result,
        bad_result,
        coord,
    })
}

/// What planning needs of every task without parsing it in full: the recorded state and
/// agent (adoption, dependency states), the idempotency key (`coord new`), what a board
/// shows and filters on ([`Shown`]) and, for a task that has not started, what orders and
/// places it (assignment, dependencies). Kept in the stat cache next to the text.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Summary {
    /// `coord.state`; none when absent or not a state's name.
    pub state: Option<State>,
    /// `coord.assigned_to`.
    pub assigned_to: Option<AgentName>,
    /// `idempotency_key`.
    pub idempotency_key: Option<String>,
    /// For a task recorded as not started (inbox, blocked, ready): what the assignment queue
    /// and the dependency step read of it, so a ready folder of 50,000 tasks is ordered
    /// without parsing any. None for other states (those tasks are parsed when read).
    pub waiting: Option<Box<Waiting>>,
    /// What a board's filters read of it.
    pub shown: Shown,
    /// What the task's results cost (`result.metrics`, its own and those kept in its
    /// history): totals and budgets read these without parsing the task.
    pub spent: Vec<Spent>,
}

/// What the board of `coord serve` filters and searches on, for every task: kept in the
/// summary so that a filtered board of 10,000 tasks parses none of them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Shown {
    /// `title`.
    pub title: String,
    /// `labels`.
    pub labels: Vec<String>,
    /// `priority` (the config default applies when absent).
    pub priority: Option<Priority>,
    /// `agent`: the explicit assignee.
    pub agent: Option<AgentName>,
}

impl Shown {
    /// Returns what the board reads of a parsed task.
    pub fn of(task: &TaskDoc) -> Shown {
        Shown {
            title: task.spec.title.clone(),
            labels: task.spec.labels.clone(),
            priority: task.spec.priority,
            agent: task.spec.agent.clone(),
        }
    }
}

impl Summary {
    /// Returns the summary of a parsed task.
    pub fn of(task: &TaskDoc) -> Summary {
        let not_started = matches!(
            task.coord.state,
            Some(State::Inbox | State::Blocked | State::Ready)
        );
        Summary {
            state: task.coord.state,
            assigned_to: task.coord.assigned_to.clone(),
            idempotency_key: task.spec.idempotency_key.clone(),
            waiting: not_started.then(|| Box::new(Waiting::of(task))),
            shown: Shown::of(task),
            spent: spends_of(task),
        }
    }
}

/// Returns the spends a task records: its result's metrics (recorded when the task
/// finished; a result still waiting counts as now) and those of the results its history
/// keeps (recorded when set aside), each with the agent the result names or the task's.
fn spends_of(task: &TaskDoc) -> Vec<Spent> {
    let agent_of = |r: &serde_json::Value, fallback: Option<&AgentName>| {
        r.get("agent")
            .and_then(|a| serde_json::from_value(a.clone()).ok())
            .or_else(|| fallback.cloned())
    };
    let own = task.doc.value.get("result").and_then(|r| {
        Some(Spent {
            agent: agent_of(r, task.coord.assigned_to.as_ref()),
            at: task.coord.finished_at,
            metrics: Metrics::of_result(r)?,
        })
    });
    let kept = task.coord.history.iter().filter_map(|h| {
        let r = h.result()?;
        let v = h.to_value();
        let fallback = v
            .get("agent")
            .and_then(|a| serde_json::from_value(a.clone()).ok());
        Some(Spent {
            agent: agent_of(r, fallback.as_ref().or(task.coord.assigned_to.as_ref())),
            at: v
                .get("at")
                .and_then(serde_json::Value::as_str)
                .and_then(|t| t.parse().ok()),
            metrics: Metrics::of_result(r)?,
        })
    });
    kept.chain(own).collect()
}

/// What the assignment queue (priority, due, creation), the choice of an agent (agent,
/// capabilities), the backoff and the dependency step read of a task waiting to start.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Waiting {
    /// `priority` (the config default applies when absent).
    pub priority: Option<Priority>,
    /// `due`, as written.
    pub due: Option<String>,
    /// `coord.created_at`.
    pub created_at: Option<jiff::Timestamp>,
    /// `coord.not_before`: the end of a backoff.
    pub not_before: Option<jiff::Timestamp>,
    /// `agent`: the explicit assignee.
    pub agent: Option<AgentName>,
    /// `capabilities`.
    pub capabilities: Vec<String>,
    /// `depends_on`.
    pub depends_on: Vec<TaskId>,
    /// `wait_for`.
    pub wait_for: Vec<crate::model::gate::Gate>,
}

impl Waiting {
    /// Returns what the planner reads of a parsed task waiting to start.
    pub fn of(task: &TaskDoc) -> Waiting {
        Waiting {
            priority: task.spec.priority,
            due: task.spec.due.clone(),
            created_at: task.coord.created_at,
            not_before: task.coord.not_before,
            agent: task.spec.agent.clone(),
            capabilities: task.spec.capabilities.clone(),
            depends_on: task.spec.depends_on.clone(),
            wait_for: task.spec.wait_for.clone(),
        }
    }

    /// Returns the instant the task is due, when it has a readable `due:`.
    pub fn due_at(&self) -> Option<jiff::Timestamp> {
        self.due.as_deref().and_then(crate::model::due_instant)
    }
}

/// A task file that passed the per-file checks: its text and summary, and the parsed task,
/// made from the text in memory on first use (dereferencing) when the stat cache gave only
/// the text, so a tick parses only the tasks it looks at.
#[derive(Debug, Clone)]
pub struct Task {
    /// Held, or left in the stat cache file (read when parsed).
    text: Text,
    summary: Summary,
    /// Boxed: most tasks of a board are never parsed, and a parsed document is large.
    full: OnceLock<Box<TaskDoc>>,
    /// Counts the tasks this thread holds (tests of what a pass keeps in memory).
    #[cfg(test)]
    _live: live::Live,
}

/// A count of the [`Task`] values a thread holds, for tests of what a pass keeps in memory:
/// each task carries a [`live::Live`], counted when made or cloned and uncounted when dropped.
#[cfg(test)]
pub mod live {
    use std::cell::Cell;

    thread_local! {
        static LIVE: Cell<usize> = const { Cell::new(0) };
        static PARSES: Cell<usize> = const { Cell::new(0) };
    }

    /// Returns how many task texts this thread has parsed so far.
    pub fn parses() -> usize {
        PARSES.with(Cell::get)
    }

    /// Counts one parse of a task's text.
    pub(super) fn parsed() {
        PARSES.with(|n| n.set(n.get() + 1));
    }

    /// Returns how many tasks this thread holds now.
    pub fn tasks() -> usize {
        LIVE.with(Cell::get)
    }

    /// One counted task.
    #[derive(Debug)]
    pub struct Live(());

    impl Live {
        /// Counts one more task.
        pub fn count() -> Live {
            LIVE.with(|n| n.set(n.get() + 1));
            Live(())
        }
    }

    impl Clone for Live {
        fn clone(&self) -> Live {
            Live::count()
        }
    }

    impl Drop for Live {
        fn drop(&mut self) {
            LIVE.with(|n| n.set(n.get().saturating_sub(1)));
        }
    }
}

impl Task {
    /// Wraps a task already parsed.
    pub fn parsed(doc: TaskDoc) -> Task {
        Task {
            text: Text::Held(doc.text.clone()),
            summary: Summary::of(&doc),
            full: OnceLock::from(Box::new(doc)),
            #[cfg(test)]
            _live: live::Live::count(),
        }
    }

    /// Wraps the text of a task that passed the per-file checks, with its summary; parsed on
    /// first use.
    pub fn unparsed(text: Text, summary: Summary) -> Task {
        Task {
            text,
            summary,
            full: OnceLock::new(),
            #[cfg(test)]
            _live: live::Live::count(),
        }
    }

    /// Returns the exact text of the file, held or stored (see [`Text`]).
    pub fn text(&self) -> &Text {
        &self.text
    }

    /// Returns the summary (no parsing).
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// Returns what the planner reads of a task waiting to start: from the summary when it
    /// holds it (no parsing), else from the parsed task.
    pub fn waiting(&self) -> std::borrow::Cow<'_, Waiting> {
        match &self.summary.waiting {
            Some(w) => std::borrow::Cow::Borrowed(w),
            None => std::borrow::Cow::Owned(Waiting::of(self)),
        }
    }

    /// Returns whether the parsed task is held (it was parsed, or read and kept parsed).
    #[cfg(test)]
    pub fn is_parsed(&self) -> bool {
        self.full.get().is_some()
    }

    /// Wraps a task just parsed without keeping the parse: its text and summary, parsed
    /// again on use. For tasks that are seldom read again (finished ones, most of a big
    /// board), whose parse (~10 KB) would otherwise stay as long as the board does.
    pub fn summarised(doc: TaskDoc) -> Task {
        let summary = Summary::of(&doc);
        Task::unparsed(Text::Held(doc.text), summary)
    }

    /// Wraps a task just read or written in a folder of `state`: parsed for a task in an
    /// agent's hands, in review or in the inbox (the planner reads those in full), text and
    /// summary alone for a finished one or one waiting to start (seldom read in full again,
    /// and most of a big board: a burst leaves tens of thousands in `ready/`), as the stat
    /// cache gives them.
    pub fn kept(state: State, doc: TaskDoc) -> Task {
        if state.is_final() || matches!(state, State::Ready | State::Blocked) {
            Task::summarised(doc)
        } else {
            Task::parsed(doc)
        }
    }

    /// Runs `f` on the parsed task; when the task was not parsed yet, parses it for this call
    /// only and keeps nothing, so that reading through a long-lived board (coord serve
    /// listing or filtering 10,000 tasks) does not leave a parse of every task behind.
    pub fn peek<R>(&self, f: impl FnOnce(&TaskDoc) -> R) -> R {
        match self.full.get() {
            Some(doc) => f(doc),
            None => f(&self.parse()),
        }
    }

    /// Parses the text (reading it first when the stat cache keeps it). Text that no longer
    /// parses or reads (a stat cache edited by hand, damaged by a crash of the machine since
    /// it was written, or changed under an open file on a network file system) gives a task
    /// whose document is a bare `false`, which every splice refuses, so no transition can
    /// rewrite the file from it; the damaged cache is removed, so the next load reads the
    /// task's file again.
    fn parse(&self) -> Box<TaskDoc> {
        #[cfg(test)]
        live::parsed();
        let text = self.text.read();
        Box::new(text.as_deref().and_then(reread).unwrap_or_else(|| TaskDoc {
            text: text.map(|t| t.into_owned()).unwrap_or_default(),
            doc: Doc {
                value: serde_json::Value::Bool(false),
                value_pos: Default::default(),
                key_pos: Default::default(),
                top_keys: Vec::new(),
                block_root: false,
            },
            spec: TaskSpec::default(),
            result: None,
            bad_result: None,
            coord: CoordBlock {
                state: self.summary.state,
                assigned_to: self.summary.assigned_to.clone(),
                ..CoordBlock::default()
            },
        }))
    }
}

impl std::ops::Deref for Task {
    type Target = TaskDoc;

    /// Returns the parsed task, parsing the text now if needed (see `parse`); the parse is
    /// kept.
    fn deref(&self) -> &TaskDoc {
        self.full.get_or_init(|| self.parse())
    }
}

/// What the rest of the board knows, for the checks across tasks.
pub trait Context {
    /// Returns whether a task with this id exists anywhere under `work/` (archive included).
    fn task_exists(&self, id: &TaskId) -> bool;
    /// Returns whether the agent has a profile or a folder.
    fn agent_exists(&self, agent: &AgentName) -> bool;
    /// Returns the `depends_on` of a known, readable task.
    fn deps_of(&self, id: &TaskId) -> Option<Vec<TaskId>>;
}

/// How serious a finding of the cross-task checks is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Fatal at intake; a warning for `coord validate`, since the agent may be added later.
    UnknownAgent,
    /// Always fatal.
    Error,
}

/// Returns the findings of the checks across tasks for task `id`.
pub fn check_in_context(
    id: &TaskId,
    task: &TaskDoc,
    ctx: &dyn Context,
) -> Vec<(Severity, Violation)> {
    let task = &*with_positions(task);
    let mut out = Vec::new();
    agents(task, ctx, &mut out);
    dependencies(id, task, ctx, &mut out);
    expressions(task, &mut out);
    out
}

/// Returns the task with node positions, re-parsing its text when they were left out (tasks
/// read from the stat cache carry none), so findings point at the right line.
fn with_positions(task: &TaskDoc) -> std::borrow::Cow<'_, TaskDoc> {
    if !task.doc.value_pos.is_empty() {
        return std::borrow::Cow::Borrowed(task);
    }
    crate::yaml::parse(&task.text, &Limits::default())
        .ok()
        .and_then(|doc| from_parsed(task.text.clone(), doc))
        .map_or(std::borrow::Cow::Borrowed(task), std::borrow::Cow::Owned)
}

/// Returns a finding for each agent that the task's written `result.next_agent` names and that
/// does not exist: the tick does not accept such a result (`bad_result`), so no task is handed
/// to an agent nobody runs.
pub fn unknown_result_agents(task: &TaskDoc, ctx: &dyn Context) -> Vec<Violation> {
    let Some(next) = task.result.as_ref().and_then(|r| r.next_agent.as_ref()) else {
        return Vec::new();
    };
    let many = matches!(next, crate::model::NextAgent::Many(_));
    let unknown: Vec<(usize, AgentName)> = next
        .agents()
        .into_iter()
        .enumerate()
        .filter(|(_, a)| !ctx.agent_exists(a))
        .collect();
    if unknown.is_empty() {
        return Vec::new();
    }
    let task = &*with_positions(task);
    unknown
        .into_iter()
        .map(|(i, a)| {
            let ptr = if many {
                format!("/result/next_agent/{i}")
            } else {
                "/result/next_agent".to_string()
            };
            Violation::at(
                task.doc.pos_of(&ptr, false),
                format!("result.next_agent names unknown agent '{a}'; add it with 'coord agents add {a}' or name an agent that exists"),
            )
        })
        .collect()
}

fn agents(task: &TaskDoc, ctx: &dyn Context, out: &mut Vec<(Severity, Violation)>) {
    let spec = &task.spec;
    let mut named: Vec<(String, AgentName)> = Vec::new();
    if let Some(a) = &spec.agent {
        named.push(("/agent".into(), a.clone()));
    }
    if let Some(n) = &spec.next_agent {
        let many = matches!(n, crate::model::NextAgent::Many(_));
        for (i, a) in n.agents().into_iter().enumerate() {
            let ptr = if many {
                format!("/next_agent/{i}")
            } else {
                "/next_agent".into()
            };
            named.push((ptr, a));
        }
    }
    if let Some(a) = &spec.join_agent {
        named.push(("/join_agent".into(), a.clone()));
        if !matches!(spec.next_agent, Some(crate::model::NextAgent::Many(_))) {
            out.push((
                Severity::Error,
                Violation::at(
                    task.doc.pos_of("/join_agent", true),
                    "join_agent needs a next_agent list to join; add one or remove join_agent",
                ),
            ));
        }
    }
    for (ptr, a) in named {
        if !ctx.agent_exists(&a) {
            out.push((
                Severity::UnknownAgent,
                Violation::at(
                    task.doc.pos_of(&ptr, false),
                    format!("unknown agent '{a}'; add it with 'coord agents add {a}'"),
                ),
            ));
        }
    }
}

fn dependencies(
    id: &TaskId,
    task: &TaskDoc,
    ctx: &dyn Context,
    out: &mut Vec<(Severity, Violation)>,
) {
    for (i, dep) in task.spec.depends_on.iter().enumerate() {
        if dep != id && !ctx.task_exists(dep) {
            let pos = task.doc.pos_of(&format!("/depends_on/{i}"), false);
            out.push((
                Severity::Error,
                Violation::at(pos, format!("depends on unknown task '{dep}'")),
            ));
        } else if let Some(v) = cycle_at(id, task, i, ctx) {
            out.push((Severity::Error, v));
        }
    }
}

/// Returns a finding for each dependency of task `id` that leads back to it, with the cycle
/// spelled out (`a -> b -> a`). Used at intake and for tasks edited by hand in blocked/.
pub fn cycles(id: &TaskId, task: &TaskDoc, ctx: &dyn Context) -> Vec<Violation> {
    let task = &*with_positions(task);
    (0..task.spec.depends_on.len())
        .filter_map(|i| cycle_at(id, task, i, ctx))
        .collect()
}

fn cycle_at(id: &TaskId, task: &TaskDoc, i: usize, ctx: &dyn Context) -> Option<Violation> {
    let dep = task.spec.depends_on.get(i)?;
    let pos = task.doc.pos_of(&format!("/depends_on/{i}"), false);
    if dep == id {
        return Some(Violation::at(
            pos,
            format!("task depends on itself: {id} -> {id}"),
        ));
    }
    let cycle = find_cycle(id, dep, ctx)?;
    Some(Violation::at(pos, format!("dependency cycle: {cycle}")))
}

/// Returns `id -> dep -> ... -> id` when `dep` leads back to `id`.
fn find_cycle(id: &TaskId, dep: &TaskId, ctx: &dyn Context) -> Option<String> {
    let mut seen = HashSet::new();
    let mut path = vec![id.clone(), dep.clone()];
    if dfs(id, ctx, &mut path, &mut seen) {
        Some(
            path.iter()
                .map(TaskId::as_str)
                .collect::<Vec<_>>()
                .join(" -> "),
        )
    } else {
        None
    }
}

fn dfs(
    target: &TaskId,
    ctx: &dyn Context,
    path: &mut Vec<TaskId>,
    seen: &mut HashSet<TaskId>,
) -> bool {
    let Some(cur) = path.last().cloned() else {
        return false;
    };
    if !seen.insert(cur.clone()) {
        return false;
    }
    for next in ctx.deps_of(&cur).unwrap_or_default() {
        path.push(next.clone());
        if &next == target || dfs(target, ctx, path, seen) {
            return true;
        }
        path.pop();
    }
    false
}

fn expressions(task: &TaskDoc, out: &mut Vec<(Severity, Violation)>) {
    let Some(input) = &task.spec.input else {
        return;
    };
    match expr::collect(input) {
        Err((ptr, msg)) => out.push((
            Severity::Error,
            Violation::at(task.doc.pos_of(&format!("/input{ptr}"), false), msg),
        )),
        Ok(found) => {
            for (ptr, e) in found {
                if !task.spec.depends_on.contains(&e.task) {
                    out.push((
                        Severity::Error,
                        Violation::at(
                            task.doc.pos_of(&format!("/input{ptr}"), false),
                            format!(
                                "expression reads task '{}', which is not in depends_on; add it there",
                                e.task
                            ),
                        ),
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn a_summarised_task_is_parsed_for_a_peek_only_and_kept_once_dereferenced() {
        let doc = reread("title: Write\ncoord:\n  state: done\n").expect("reads");
        let t = Task::summarised(doc);
        assert_eq!(t.summary().state, Some(State::Done));
        assert!(t.full.get().is_none());
        assert_eq!(t.peek(|d| d.spec.title.clone()), "Write");
        assert!(t.full.get().is_none(), "a peek keeps no parse");
        assert_eq!(t.spec.title, "Write");
        assert!(t.full.get().is_some(), "dereferencing keeps the parse");
        assert_eq!(t.peek(|d| d.spec.title.clone()), "Write");
    }

    struct Fake {
        deps: HashMap<&'static str, Vec<&'static str>>,
        agents: Vec<&'static str>,
    }

    impl Context for Fake {
        fn task_exists(&self, id: &TaskId) -> bool {
            self.deps.contains_key(id.as_str())
        }
        fn agent_exists(&self, a: &AgentName) -> bool {
            self.agents.contains(&a.as_str())
        }
        fn deps_of(&self, id: &TaskId) -> Option<Vec<TaskId>> {
            self.deps
                .get(id.as_str())
                .map(|v| v.iter().filter_map(|s| TaskId::new(s).ok()).collect())
        }
    }

    fn task(stem: &str, src: &str) -> Result<TaskDoc, Vec<Violation>> {
        read_task(
            stem,
            src.as_bytes(),
            &Schema::builtin_task(),
            &Limits::default(),
        )
    }

    fn tid(s: &str) -> TaskId {
        TaskId::new(s).expect("valid id")
    }

    #[test]
    fn id_must_match_stem() {
        let err = task("a", "title: x\nid: b\n").expect_err("mismatch");
        assert_eq!((err[0].pos.line, err[0].pos.col), (2, 5));
    }

    #[test]
    fn empty_file_is_invalid() {
        assert!(task("a", "").is_err());
        assert!(task("a", "# only a comment\n").is_err());
    }

    #[test]
    fn finds_cycles_and_unknowns() {
        let ctx = Fake {
            deps: HashMap::from([("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a"])]),
            agents: vec!["alice"],
        };
        let t = task("a", "title: x\ndepends_on: [b]\nagent: bob\n").expect("valid");
        let found = check_in_context(&tid("a"), &t, &ctx);
        let msgs: Vec<&str> = found.iter().map(|(_, v)| v.message.as_str()).collect();
        assert!(
            msgs.contains(&"dependency cycle: a -> b -> c -> a"),
            "{msgs:?}"
        );
        assert!(found.iter().any(|(s, _)| *s == Severity::UnknownAgent));
    }

    #[test]
    fn expressions_must_name_dependencies() {
        let ctx = Fake {
            deps: HashMap::from([("r", vec![]), ("a", vec![])]),
            agents: vec![],
        };
        let t = task("a", "title: x\ndepends_on: [r]\ninput:\n  ok: ${tasks.r.result.output.s}\n  bad: ${tasks.z.result.output.s}\n")
            .expect("valid");
        let found = check_in_context(&tid("a"), &t, &ctx);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].1.pos.line, 5);
    }
}
