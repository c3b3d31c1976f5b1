//! `new`: writes a task into `work/inbox/` with a readable, collision-resistant id and commits
//! it; the same idempotency key twice gives the same id and one file. The task is checked as
//! the tick will check it (schema, names, dependencies) before anything is written.

use super::{Coord, Error, AGENT_WAIT};
use crate::board::{Board, Checks};
use crate::engine::commands::known_agent;
use crate::engine::{Op, OpKind, Operation, Plan, Transition};
use crate::model::{AgentName, Authority, Duration, Endpoint, Priority, State, TaskId};
use crate::store::{Origin, Session};
use crate::yaml::emit_block;
use serde_json::{json, Map, Value};

/// The task `new` writes: the fields a person gives on the command line, the MCP tool `new`
/// or the body of `POST /v1/tasks`.
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct NewTask {
    /// The title (not empty).
    pub title: String,
    /// Longer text for whoever does the task.
    pub description: Option<String>,
    /// An explicit assignee.
    pub agent: Option<AgentName>,
    /// Capabilities the agent must have.
    pub capabilities: Vec<String>,
    /// The priority.
    pub priority: Option<Priority>,
    /// Ids that must be done first.
    pub depends_on: Vec<TaskId>,
    /// Agents to hand off to after success (several: a fan-out).
    #[serde(rename = "next_agent")]
    pub next_agents: Vec<AgentName>,
    /// With next agents: the agent of a join task that depends on all their children.
    pub join_agent: Option<AgentName>,
    /// Approval gating (`just_do_it` when not given).
    pub authority: Option<Authority>,
    /// The lease per attempt (coord.yaml's default when not given).
    pub timeout: Option<Duration>,
    /// Attempts before the task fails (coord.yaml's default when not given).
    pub max_attempts: Option<u32>,
    /// When the task should be done by (RFC 3339, or a date).
    pub due: Option<String>,
    /// Free-form labels.
    pub labels: Vec<String>,
    /// Input for the agent.
    pub input: Map<String, Value>,
    /// The id to use instead of a generated one.
    pub id: Option<TaskId>,
    /// A second `new` with the same key does nothing and returns the first task.
    pub idempotency_key: Option<String>,
}

/// What `new` did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Created {
    /// The task's id.
    pub id: TaskId,
    /// Its file, repo-relative.
    pub path: String,
    /// False when a task with the same idempotency key existed (nothing was written).
    pub created: bool,
    /// Whether that task has the fields asked for (true when created).
    #[serde(skip)]
    pub same: bool,
}

impl Coord {
    /// Writes a new task into the inbox and commits it; with an idempotency key a task already
    /// has, returns that task instead.
    pub fn new_task(&self, task: &NewTask) -> Result<Created, Error> {
        if task.title.trim().is_empty() {
            return Err(Error::Usage(
                "the title is empty; give the task a title".into(),
            ));
        }
        if task.idempotency_key.is_none() && task.depends_on.is_empty() {
            if let Some(created) = self.new_in_scope(task)? {
                return Ok(created);
            }
        }
        let session = self.session(AGENT_WAIT)?;
        let (board, _) = session.load()?;
        if let Some(existing) = same_key(&board, task) {
            return Ok(existing);
        }
        let (plan, created) = self.plan_new(&board, task)?;
        self.write_new(session, &plan)?;
        Ok(created)
    }

    /// Writes a task without dependencies or idempotency key reading only the profiles (the
    /// task files by name: its id must be new), without recording anyone's changes: done
    /// when nothing is at the new file's path, on disk, in HEAD or in the index; None
    /// (nothing done, the lock let go) when `new` must go the whole way.
    fn new_in_scope(&self, task: &NewTask) -> Result<Option<Created>, Error> {
        let session = self.lock(AGENT_WAIT)?;
        let board = session.load_scoped(&|rel| rel.starts_with("agents/"))?;
        let Ok((plan, created)) = self.plan_new(&board, task) else {
            return Ok(None);
        };
        if !session.plan_stays_in_scope(&board, &plan)? {
            return Ok(None);
        }
        self.emit(super::Event::Detail(
            "read the profiles and the task files' names only; nothing to record",
        ));
        self.write_new(session, &plan)?;
        Ok(Some(created))
    }

    /// Returns the plan writing `task` into the inbox under a fresh id (or its own), checked
    /// as the tick will check it, and what it creates.
    fn plan_new(&self, board: &Board, task: &NewTask) -> Result<(Plan, Created), Error> {
        let id = match &task.id {
            Some(id) if board.has_id(id) => {
                return Err(Error::Refused(format!(
                    "a task with id '{id}' already exists; pick another --id"
                )))
            }
            Some(id) => id.clone(),
            None => fresh_id(&task.title, |id| board.has_id(id))?,
        };
        check_names(board, task)?;
        let path = format!("{}/inbox/{id}.yaml", self.store.work_dir());
        let text = task_text(task);
        self.check_text(board, &id, &text)?;
        let t = Transition {
            subject: id.to_string(),
            from: Endpoint::New,
            to: State::Inbox.into(),
            summary: format!("new task {id}: {}", task.title),
            ops: vec![Op::Write {
                path: path.clone(),
                text,
            }],
            guard: Vec::new(),
            op: Some(Operation::of(OpKind::New)),
        };
        let created = Created {
            id,
            path,
            created: true,
            same: true,
        };
        Ok((Plan::one(t), created))
    }

    /// Applies the plan of a new task in `session` (which holds the lock) and ends it.
    fn write_new(&self, session: Session<'_>, plan: &Plan) -> Result<(), Error> {
        let silent: super::Sink = Box::new(|_| {});
        super::apply(&session, &silent, plan, self.now, Origin::Command)?;
        Ok(session.finish()?)
    }

    /// Refuses a task the schema or the cross-task checks would reject.
    fn check_text(&self, board: &Board, id: &TaskId, text: &str) -> Result<(), Error> {
        let limits = crate::yaml::Limits::default();
        let schema = self.store.task_schema();
        let task = crate::check::read_task(id.as_str(), text.as_bytes(), schema, &limits).map_err(
            |errors| {
                let lines: Vec<String> = errors.iter().map(|v| v.message.clone()).collect();
                Error::Usage(format!("the task would be invalid: {}", lines.join("; ")))
            },
        )?;
        let found = crate::check::check_in_context(id, &task, &Checks::new(board));
        match found.first() {
            Some((_, v)) => Err(Error::Refused(format!(
                "the task would be rejected: {}; nothing was written",
                v.message
            ))),
            None => Ok(()),
        }
    }
}

/// Returns the task that has `task`'s idempotency key, if one does, and whether it has the
/// fields `task` asks for.
fn same_key(board: &Board, task: &NewTask) -> Option<Created> {
    let key = task.idempotency_key.as_deref()?;
    let t = board.tasks.iter().find(|t| {
        t.read
            .as_ref()
            .is_ok_and(|d| d.summary().idempotency_key.as_deref() == Some(key))
    })?;
    let fields = task_fields(task);
    let same = t
        .read
        .as_ref()
        .is_ok_and(|d| fields.iter().all(|(k, v)| d.doc.value.get(*k) == Some(v)));
    Some(Created {
        id: t.id.clone(),
        path: t.path.clone(),
        created: false,
        same,
    })
}

/// Refuses agents and dependencies that do not exist: the tick would reject the task.
fn check_names(board: &Board, task: &NewTask) -> Result<(), Error> {
    if task.join_agent.is_some() && task.next_agents.is_empty() {
        return Err(Error::Usage(
            "a join agent joins a fan-out: give the agents to fan out to as next agents too".into(),
        ));
    }
    for a in task
        .agent
        .iter()
        .chain(&task.next_agents)
        .chain(&task.join_agent)
    {
        known_agent(board, a)?;
    }
    match task.depends_on.iter().find(|d| board.find(d).is_empty()) {
        Some(dep) => Err(Error::Refused(format!(
            "--depends-on '{dep}': no task has this id; nothing was written ('coord status' lists the tasks)"
        ))),
        None => Ok(()),
    }
}

fn task_text(task: &NewTask) -> String {
    task_fields(task)
        .iter()
        .map(|(k, v)| emit_block(k, v, 0))
        .collect()
}

/// Returns the fields the task file gets, in order.
fn task_fields(task: &NewTask) -> Vec<(&'static str, Value)> {
    let mut fields: Vec<(&str, Value)> = vec![("title", json!(task.title))];
    if let Some(d) = &task.description {
        fields.push(("description", json!(d)));
    }
    if let Some(a) = &task.agent {
        fields.push(("agent", json!(a)));
    }
    if !task.capabilities.is_empty() {
        fields.push(("capabilities", json!(task.capabilities)));
    }
    if let Some(p) = task.priority {
        fields.push(("priority", json!(p)));
    }
    if !task.depends_on.is_empty() {
        fields.push(("depends_on", json!(task.depends_on)));
    }
    match (task.next_agents.as_slice(), &task.join_agent) {
        ([], _) => {}
        ([one], None) => fields.push(("next_agent", json!(one))),
        (many, _) => fields.push(("next_agent", json!(many))),
    }
    if let Some(j) = &task.join_agent {
        fields.push(("join_agent", json!(j)));
    }
    if let Some(a) = task.authority {
        fields.push(("authority", json!(a)));
    }
    if let Some(t) = task.timeout {
        fields.push(("timeout", json!(t.to_string())));
    }
    if let Some(n) = task.max_attempts {
        fields.push(("max_attempts", json!(n)));
    }
    if let Some(d) = &task.due {
        fields.push(("due", json!(d)));
    }
    if !task.labels.is_empty() {
        fields.push(("labels", json!(task.labels)));
    }
    if !task.input.is_empty() {
        fields.push(("input", Value::Object(task.input.clone())));
    }
    if let Some(k) = &task.idempotency_key {
        fields.push(("idempotency_key", json!(k)));
    }
    fields
}

/// Returns `<slug-of-title>-<6 random base32 chars>`, unused on the board.
fn fresh_id(title: &str, taken: impl Fn(&TaskId) -> bool) -> Result<TaskId, Error> {
    let slug = slug(&crate::redact::one_line(title));
    for _ in 0..16 {
        let candidate = format!("{slug}-{}", random_suffix()?);
        if let Ok(id) = TaskId::new(&candidate) {
            if !taken(&id) {
                return Ok(id);
            }
        }
    }
    Err(Error::Refused(
        "could not find a free task id; pass --id".into(),
    ))
}

/// Returns the title in lowercase words joined by '-', at most 40 characters; Latin letters
/// with accents keep their base letter ("Überprüfung" gives "uberprufung").
fn slug(title: &str) -> String {
    let mut out = String::new();
    for word in crate::model::translit::to_ascii(title)
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if out.len() + word.len() + 1 > 40 {
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&word.to_ascii_lowercase());
    }
    if out.is_empty() {
        out.push_str("task");
    }
    out
}

fn random_suffix() -> Result<String, Error> {
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyz23456789";
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::Refused(format!("no randomness available: {e}")))?;
    Ok(bytes
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_titles() {
        assert_eq!(slug("Fix the login bug"), "fix-the-login-bug");
        assert_eq!(slug("¿¿??"), "task");
        assert_eq!(slug("Überprüfung der Daten"), "uberprufung-der-daten");
        assert!(slug(&"word ".repeat(30)).len() <= 40);
    }

    #[test]
    fn fresh_ids_are_valid_and_differ() {
        let a = fresh_id("Fix it", |_| false).expect("id");
        let b = fresh_id("Fix it", |_| false).expect("id");
        assert!(a.as_str().starts_with("fix-it-"));
        assert_ne!(a, b);
    }
}
