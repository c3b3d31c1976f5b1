//! `coord new`: writes a task into `work/inbox/` with a readable, collision-resistant id and
//! commits it; the same idempotency key twice gives the same id and one file.

use super::validate::BoardCtx;
use super::{Ctx, AGENT_WAIT};
use crate::board::Board;
use crate::engine::commands::known_agent;
use crate::engine::{Op, Plan, Transition};
use crate::error::UsageError;
use crate::model::{AgentName, Priority, TaskId};
use crate::store::Store;
use crate::yaml::emit_block;
use anyhow::{bail, Result};
use serde_json::{json, Map, Value};

/// Arguments of `coord new`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The task's title
    title: String,
    /// Explicit assignee
    #[arg(long)]
    agent: Option<AgentName>,
    /// A capability the agent must have (repeatable)
    #[arg(long = "capability", value_name = "CAP")]
    capabilities: Vec<String>,
    /// low, normal, high or critical
    #[arg(long)]
    priority: Option<Priority>,
    /// An id that must be done first (repeatable)
    #[arg(long = "depends-on", value_name = "ID")]
    depends_on: Vec<TaskId>,
    /// Hand off to this agent after success (repeat for a fan-out)
    #[arg(long = "next-agent", value_name = "AGENT")]
    next_agent: Vec<AgentName>,
    /// Input for the agent as key=value (repeatable; the value is read as JSON when it parses)
    #[arg(long = "input", value_name = "KEY=VALUE")]
    input: Vec<String>,
    /// Use this id instead of a generated one
    #[arg(long)]
    id: Option<String>,
    /// A second `coord new` with the same key does nothing and prints the first id
    #[arg(long = "idempotency-key", value_name = "KEY")]
    idempotency_key: Option<String>,
}

/// A task to create, as `coord new`, the MCP tool `new` and `POST /v1/tasks` describe it.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NewTask {
    /// The title.
    pub title: String,
    /// The explicit assignee.
    pub agent: Option<AgentName>,
    /// Capabilities the agent must have.
    pub capabilities: Vec<String>,
    /// The priority.
    pub priority: Option<Priority>,
    /// Ids that must be done first.
    pub depends_on: Vec<TaskId>,
    /// Agents to hand off to after success.
    pub next_agent: Vec<AgentName>,
    /// The agent's input.
    pub input: Map<String, Value>,
    /// The id to use instead of a generated one.
    pub id: Option<String>,
    /// A key that makes a second creation return the first task.
    pub idempotency_key: Option<String>,
}

/// The task `coord new` made or found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Created {
    /// Its id.
    pub id: TaskId,
    /// Its file, relative to the repo root.
    pub path: String,
    /// False when the idempotency key named a task that already existed.
    pub created: bool,
    /// Whether that task has the fields asked for (true when created).
    #[serde(skip)]
    pub same: bool,
}

/// A task `create` refuses to write because of what was asked (exit 1, HTTP 400).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// Runs `coord new`.
pub fn run(ctx: &Ctx, args: Args) -> Result<()> {
    let task = NewTask {
        title: args.title,
        agent: args.agent,
        capabilities: args.capabilities,
        priority: args.priority,
        depends_on: args.depends_on,
        next_agent: args.next_agent,
        input: parse_input(&args.input)?,
        id: args.id,
        idempotency_key: args.idempotency_key,
    };
    let made = create(ctx, &task)?;
    if ctx.json {
        super::print_json(&json!(made));
    } else {
        out!("{}", made.id);
    }
    Ok(())
}

/// Writes `task` into the inbox and commits it; with an idempotency key already used, returns
/// that task instead.
pub fn create(ctx: &Ctx, task: &NewTask) -> Result<Created> {
    let fixed_id = match &task.id {
        Some(s) => Some(
            TaskId::new(s)
                .map_err(|e| UsageError(format!("--id {s:?} {e}; nothing was written")))?,
        ),
        None => None,
    };
    if task.title.trim().is_empty() {
        return Err(UsageError("the title is empty; give the task a title".into()).into());
    }
    let (coord, _lock) = ctx.session(AGENT_WAIT)?;
    let store = coord.store();
    let (board, _) = store.load()?;
    if let Some(key) = &task.idempotency_key {
        if let Some(existing) = board.tasks.iter().find(|t| {
            t.read
                .as_ref()
                .is_ok_and(|d| d.summary().idempotency_key.as_deref() == Some(key))
        }) {
            let fields = task_fields(task);
            let same = existing
                .read
                .as_ref()
                .is_ok_and(|d| fields.iter().all(|(k, v)| d.doc.value.get(*k) == Some(v)));
            return Ok(Created {
                id: existing.id.clone(),
                path: existing.path.clone(),
                created: false,
                same,
            });
        }
    }
    let id = match fixed_id {
        Some(id) if !board.find(&id).is_empty() => {
            let taken = format!("a task with id '{id}' already exists; pick another --id");
            return Err(Refused(taken).into());
        }
        Some(id) => id,
        None => fresh_id(&task.title, |id| !board.find(id).is_empty())?,
    };
    check_names(&board, task)?;
    let path = format!("{}/inbox/{id}.yaml", store.work_dir());
    let text = task_text(task);
    check_text(store, &board, &id, &text)?;
    let t = Transition {
        subject: id.to_string(),
        from: "new".into(),
        to: "inbox".into(),
        summary: format!("new task {id}: {}", task.title),
        ops: vec![Op::Write {
            path: path.clone(),
            text,
        }],
        guard: Vec::new(),
        op: Some(crate::engine::Operation {
            kind: crate::engine::OpKind::New,
            id: None,
            by: None,
            pre: None,
        }),
    };
    let quiet = Ctx {
        quiet: true,
        ..ctx.clone()
    };
    quiet.apply(store, &Plan::one(t))?;
    Ok(Created {
        id,
        path,
        created: true,
        same: true,
    })
}

/// Refuses agents and dependencies that do not exist: the tick would reject the task.
fn check_names(board: &Board, args: &NewTask) -> Result<()> {
    for a in args.agent.iter().chain(&args.next_agent) {
        known_agent(board, a)?;
    }
    if let Some(dep) = args.depends_on.iter().find(|d| board.find(d).is_empty()) {
        return Err(Refused(format!(
            "--depends-on '{dep}': no task has this id; nothing was written ('coord status' lists the tasks)"
        ))
        .into());
    }
    Ok(())
}

fn check_text(store: &Store, board: &Board, id: &TaskId, text: &str) -> Result<()> {
    let limits = crate::yaml::Limits::default();
    let task = crate::check::read_task(id.as_str(), text.as_bytes(), store.task_schema(), &limits)
        .map_err(|errors| {
            let lines: Vec<String> = errors.iter().map(|v| v.message.clone()).collect();
            UsageError(format!("the task would be invalid: {}", lines.join("; ")))
        })?;
    let found = crate::check::check_in_context(id, &task, &BoardCtx::new(board));
    if let Some((_, v)) = found.first() {
        return Err(Refused(format!(
            "the task would be rejected: {}; nothing was written",
            v.message
        ))
        .into());
    }
    Ok(())
}

fn task_text(args: &NewTask) -> String {
    task_fields(args)
        .iter()
        .map(|(k, v)| emit_block(k, v, 0))
        .collect()
}

/// Returns the fields the task file gets, in order.
fn task_fields(args: &NewTask) -> Vec<(&'static str, Value)> {
    let mut fields: Vec<(&str, Value)> = vec![("title", json!(args.title))];
    if let Some(a) = &args.agent {
        fields.push(("agent", json!(a)));
    }
    if !args.capabilities.is_empty() {
        fields.push(("capabilities", json!(args.capabilities)));
    }
    if let Some(p) = args.priority {
        fields.push(("priority", json!(p)));
    }
    if !args.depends_on.is_empty() {
        fields.push(("depends_on", json!(args.depends_on)));
    }
    match args.next_agent.as_slice() {
        [] => {}
        [one] => fields.push(("next_agent", json!(one))),
        many => fields.push(("next_agent", json!(many))),
    }
    if !args.input.is_empty() {
        fields.push(("input", Value::Object(args.input.clone())));
    }
    if let Some(k) = &args.idempotency_key {
        fields.push(("idempotency_key", json!(k)));
    }
    fields
}

fn parse_input(pairs: &[String]) -> Result<Map<String, Value>> {
    pairs
        .iter()
        .map(|p| {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| UsageError(format!("--input {p:?} is not key=value")))?;
            let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
            Ok((k.to_string(), value))
        })
        .collect()
}

/// Returns `<slug-of-title>-<6 random base32 chars>`, unused on the board.
fn fresh_id(title: &str, taken: impl Fn(&TaskId) -> bool) -> Result<TaskId> {
    let slug = slug(&crate::redact::one_line(title));
    for _ in 0..16 {
        let candidate = format!("{slug}-{}", random_suffix()?);
        if let Ok(id) = TaskId::new(&candidate) {
            if !taken(&id) {
                return Ok(id);
            }
        }
    }
    bail!("could not find a free task id; pass --id")
}

/// Returns the title in lowercase words joined by '-', at most 40 characters; Latin letters
/// with accents keep their base letter ("Überprüfung" gives "uberprufung").
pub fn slug(title: &str) -> String {
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

fn random_suffix() -> Result<String> {
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyz23456789";
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness available: {e}"))?;
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
