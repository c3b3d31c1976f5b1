//! The MCP server: the repo served to an MCP client (an LLM agent's host), on the official Rust
//! SDK `rmcp`, behind two front ends: `coord mcp` over stdio ([`serve_stdio`]) and `coord serve`
//! at `/mcp` over streamable HTTP, which gives each call its [`Caller`] and runs its writes
//! through a [`Writes`] of its own. Tools for the board (status, list, show, log), for creating
//! tasks (new) and for the agent loop (claim, heartbeat, complete, fail); resources for the
//! board and for one task. Each tool calls the operation its CLI command calls, so errors are
//! the CLI's: a tool error carries the message, a code (`stale`, `locked`, `not_found`, ...) and
//! the exit code the CLI would give. "Nothing to claim" is an answer, not an error. Over stdio,
//! stdout carries the protocol only. The client is told of its agents' tasks as they change
//! ([`notices`]).

mod lines;
mod notices;

use crate::error::{CliError, Exit, UsageError};
use crate::model::metrics::Metrics;
use crate::model::{AgentName, Authority, Duration, Priority, State, TaskId};
use crate::ops::Fence;
use crate::ops::{self, Coord, Opener, Verdict};
use anyhow::Context;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::ServiceExt;
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The version the server names itself with.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), env!("COORD_BUILD_COMMIT"));

/// Who makes a call. A front end serving HTTP puts it in each request's extensions; a call
/// without one (stdio) is a person's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A person or program with the server's token (or anyone, when it has none).
    Person,
    /// An agent with a token of its own: it acts as that agent only, and may not run a
    /// person's commands (approve, reject, cancel, retry, reassign).
    Agent(AgentName),
}

/// How a front end runs the server's writes: in the order its other writes go (a hub's write
/// queue), and what it does once one is made.
pub trait Writes: Send + Sync {
    /// Runs `write` once now, or refuses it saying why (nothing is written then).
    fn write(&self, write: &mut dyn FnMut()) -> Result<(), String>;
    /// Called after each write ran: the front end reads the repository again.
    fn written(&self);
}

/// Serves `server` over stdin and stdout until the client closes stdin.
pub fn serve_stdio(server: Server) -> Result<(), CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the MCP server's runtime")?;
    let served = runtime.block_on(async {
        let io = lines::split(tokio::io::stdin(), tokio::io::stdout());
        tokio::spawn(io.reading);
        let writing = tokio::spawn(io.writing);
        let service = server
            .serve((io.reader, io.writer))
            .await
            .context("the MCP client did not initialize")?;
        service.waiting().await.context("the MCP session failed")?;
        writing.await.context("the MCP server's output failed")?;
        Ok::<(), anyhow::Error>(())
    });
    // A read of stdin still waiting must not hold the process open.
    runtime.shutdown_background();
    Ok(served?)
}

/// The MCP server of one client session: how each call opens the repo (a fresh opening per
/// call, so the clock is read at each call unless it was fixed), the agents the client is
/// told about, and the front end's writes.
#[derive(Clone)]
pub struct Server {
    opener: Opener,
    /// The agents the client is told about.
    agents: notices::Agents,
    /// How writes run; each runs at once without.
    writes: Option<Arc<dyn Writes>>,
}

impl Server {
    /// Returns a server opening the repo with `opener`, telling the client about `agent`'s
    /// tasks (when given), running its writes through `writes` (when given).
    pub fn new(
        opener: Opener,
        agent: Option<AgentName>,
        writes: Option<Arc<dyn Writes>>,
    ) -> Server {
        Server {
            opener,
            agents: notices::Agents::new(agent),
            writes,
        }
    }
}

/// What a tool answers: structured content on success, a tool error otherwise.
type Answer = Result<CallToolResult, ErrorData>;

/// Arguments of `status`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct StatusParams {
    /// Only this agent's tasks and profile.
    #[schemars(with = "Option<String>")]
    agent: Option<AgentName>,
    /// The whole board (every list, each agent's tasks) instead of the summary; it grows
    /// with the number of tasks.
    #[serde(default)]
    full: bool,
}

/// Arguments of `list`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListParams {
    /// Only tasks in this state.
    state: Option<State>,
    /// Only tasks of this agent (in its folder, or naming it in `agent:`).
    #[schemars(with = "Option<String>")]
    agent: Option<AgentName>,
    /// At most this many tasks (default 100).
    #[schemars(range(min = 1, max = 1000))]
    limit: Option<usize>,
    /// Where to go on: the next_cursor of the last answer (none for the first page).
    cursor: Option<String>,
}

/// The tasks a `list` answers when it names no limit.
const LIST_LIMIT: usize = 100;
/// The most tasks one `list` answers.
const LIST_MAX: usize = 1000;

/// Arguments of `show`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ShowParams {
    /// The task's id.
    #[schemars(with = "String")]
    id: TaskId,
}

/// Arguments of `log`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct LogParams {
    /// Only this task's transitions.
    #[schemars(with = "Option<String>")]
    id: Option<TaskId>,
    /// At most this many transitions, newest first (default 50).
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

/// How much a person wants to be asked about a task.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
enum AuthorityParam {
    /// Assign and finish without asking (the default).
    JustDoIt,
    /// Hold a success result in review before done and handoff.
    DoItAndShowMe,
    /// Wait in review before assignment.
    AskMeFirst,
}

/// Arguments of `new`: the fields of `coord new`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct NewParams {
    /// The task's title.
    title: String,
    /// Longer text for whoever does the task.
    description: Option<String>,
    /// The agent to give it to (else the best agent with the capabilities).
    #[schemars(with = "Option<String>")]
    agent: Option<AgentName>,
    /// Capabilities the agent must have.
    #[serde(default)]
    capabilities: Vec<String>,
    /// The priority (default normal).
    priority: Option<Priority>,
    /// Ids of tasks that must be done first.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    depends_on: Vec<TaskId>,
    /// Agents to hand off to after success (several: a fan-out).
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    next_agent: Vec<AgentName>,
    /// With next_agent: the agent of a join task that depends on every handoff child.
    #[schemars(with = "Option<String>")]
    join_agent: Option<AgentName>,
    /// Approval gating (default just_do_it).
    authority: Option<AuthorityParam>,
    /// When the task should be done by (RFC 3339, e.g. 2026-12-01T17:00:00Z, or a date).
    due: Option<String>,
    /// The lease per attempt (e.g. 30m, 2h; default from coord.yaml).
    #[schemars(with = "Option<String>")]
    timeout: Option<Duration>,
    /// Attempts before the task fails (1 to 100; default from coord.yaml).
    #[schemars(range(min = 1, max = 100))]
    max_attempts: Option<u32>,
    /// Free-form labels.
    #[serde(default)]
    labels: Vec<String>,
    /// The agent's input.
    #[serde(default)]
    input: Map<String, Value>,
    /// An id to use instead of a generated one.
    id: Option<String>,
    /// A second `new` with the same key and fields creates nothing and answers the first
    /// task; with other fields it is refused (code conflict).
    idempotency_key: Option<String>,
}

/// Arguments of `claim`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ClaimParams {
    /// The (pull) agent taking work.
    #[schemars(with = "String")]
    agent: AgentName,
}

/// The task and attempt an agent reports for, as `claim` granted them.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct HeartbeatParams {
    /// The task's id.
    #[schemars(with = "String")]
    id: TaskId,
    /// The agent working on it.
    #[schemars(with = "String")]
    agent: AgentName,
    /// The attempt worked on.
    attempt: u32,
    /// The epoch of the hub that granted the attempt, when a hub granted it (the claim's
    /// answer has it).
    #[serde(default)]
    epoch: Option<u64>,
}

/// Arguments of `complete`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct CompleteParams {
    /// The task's id.
    #[schemars(with = "String")]
    id: TaskId,
    /// The agent that worked on it.
    #[schemars(with = "String")]
    agent: AgentName,
    /// The attempt worked on.
    attempt: u32,
    /// The epoch of the hub that granted the attempt, when a hub granted it (the claim's
    /// answer has it).
    #[serde(default)]
    epoch: Option<u64>,
    /// The output: any JSON value (the next step gets it as input.previous).
    output: Option<Value>,
    /// Hand off to these agents instead of the task's next_agent.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    next_agent: Vec<AgentName>,
    /// Overwrite a result of this attempt already waiting (the old one is kept in
    /// coord.history).
    #[serde(default)]
    replace: bool,
    /// What the attempt cost: {tokens_in, tokens_out, cost, model, duration_s}, each
    /// optional.
    #[serde(default)]
    #[schemars(with = "Option<Map<String, Value>>")]
    metrics: Option<Metrics>,
}

/// Arguments of `fail`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct FailParams {
    /// The task's id.
    #[schemars(with = "String")]
    id: TaskId,
    /// The agent that worked on it.
    #[schemars(with = "String")]
    agent: AgentName,
    /// The attempt worked on.
    attempt: u32,
    /// The epoch of the hub that granted the attempt, when a hub granted it (the claim's
    /// answer has it).
    #[serde(default)]
    epoch: Option<u64>,
    /// What went wrong.
    error: String,
    /// Another attempt cannot help: do not retry.
    #[serde(default)]
    fatal: bool,
    /// Overwrite a result of this attempt already waiting (the old one is kept in
    /// coord.history).
    #[serde(default)]
    replace: bool,
    /// What the attempt cost: {tokens_in, tokens_out, cost, model, duration_s}, each
    /// optional.
    #[serde(default)]
    #[schemars(with = "Option<Map<String, Value>>")]
    metrics: Option<Metrics>,
}

/// Arguments of `approve` and `retry`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct IdParams {
    /// The task's id.
    #[schemars(with = "String")]
    id: TaskId,
}

/// Arguments of `reassign`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReassignParams {
    /// The task's id.
    #[schemars(with = "String")]
    id: TaskId,
    /// The agent to give it to.
    #[schemars(with = "String")]
    agent: AgentName,
}

/// Arguments of `reject`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RejectParams {
    /// The task's id.
    #[schemars(with = "String")]
    id: TaskId,
    /// Why it is rejected.
    reason: String,
}

/// Arguments of `cancel`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct CancelParams {
    /// The task's id.
    #[schemars(with = "String")]
    id: TaskId,
    /// Why it is cancelled.
    #[serde(default)]
    reason: String,
}

#[tool_router]
impl Server {
    #[tool(
        description = "The board's summary: counts per state, each agent with its load, \
                          circuit and task_counts, the oldest ready task and how many entries \
                          each list (review, waiting, blocked, ...) holds. With full: true, \
                          the whole board with every list (as `coord status --json`)",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn status(&self, Parameters(p): Parameters<StatusParams>) -> Answer {
        self.answer(move |coord| {
            let board = coord.status(p.agent.as_ref())?.board;
            Ok(match p.full {
                true => board,
                false => crate::view::board::summary(&board),
            })
        })
        .await
    }

    #[tool(
        description = "Tasks in id order, one object each (id, state, agent, title, \
                          priority, attempt, lease_expires_at, path), filtered by state and \
                          agent, a page at a time: {tasks, next_cursor}; pass next_cursor \
                          back as cursor for the next page (null on the last)",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list(&self, Parameters(p): Parameters<ListParams>) -> Answer {
        let filter = ops::TaskFilter {
            state: p.state,
            agent: p.agent,
            ..ops::TaskFilter::default()
        };
        let limit = p.limit.unwrap_or(LIST_LIMIT).clamp(1, LIST_MAX);
        self.answer(move |coord| {
            let after = p.cursor.as_deref().map(ops::Cursor::decode).transpose()?;
            Ok(json!(coord.list_page(&filter, after.as_ref(), limit)?))
        })
        .await
    }

    #[tool(
        description = "One task: state, folder, fields, result, coord block and history \
                          (as `coord show --json`)",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn show(&self, Parameters(p): Parameters<ShowParams>) -> Answer {
        self.answer(move |coord| Ok(json!(coord.show(&p.id)?)))
            .await
    }

    #[tool(
        description = "Transitions from git history, newest first (as `coord log --json`)",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn log(&self, Parameters(p): Parameters<LogParams>) -> Answer {
        let limit = Some(p.limit.unwrap_or(50));
        self.answer(move |coord| {
            let entries = coord.log(p.id.as_ref(), limit)?;
            Ok(json!(ops::Log { entries }))
        })
        .await
    }

    #[tool(
        name = "new",
        description = "Create a task in the inbox and commit it (as `coord new`, with the \
                       same fields); answers its id and path",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn create(
        &self,
        Parameters(p): Parameters<NewParams>,
        request: RequestContext<RoleServer>,
    ) -> Answer {
        self.write(&request, Acts::AsAnyone, move |coord| {
            let id = match &p.id {
                Some(s) => Some(
                    TaskId::new(s)
                        .map_err(|e| UsageError(format!("id {s:?} {e}; nothing was written")))?,
                ),
                None => None,
            };
            let task = ops::NewTask {
                title: p.title.clone(),
                description: p.description.clone(),
                agent: p.agent.clone(),
                capabilities: p.capabilities.clone(),
                priority: p.priority,
                depends_on: p.depends_on.clone(),
                next_agents: p.next_agent.clone(),
                join_agent: p.join_agent.clone(),
                authority: p.authority.map(authority),
                timeout: p.timeout,
                max_attempts: p.max_attempts,
                due: p.due.clone(),
                labels: p.labels.clone(),
                input: p.input.clone(),
                id,
                idempotency_key: p.idempotency_key.clone(),
            };
            let created = coord.new_task(&task)?;
            Ok(json!(crate::error::same_fields(created, &task)?))
        })
        .await
    }

    #[tool(
        description = "Take the best ready task for a pull agent (as `coord claim`). \
                          Answers {claimed: true, id, agent, attempt, lease_expires_at, path}, \
                          or {claimed: false, agent, why} when there is nothing to claim. Report \
                          with the agent and attempt given here.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn claim(
        &self,
        Parameters(p): Parameters<ClaimParams>,
        request: RequestContext<RoleServer>,
    ) -> Answer {
        // A cancelled request takes nothing, or gives back what it took.
        let ct = request.ct.clone();
        self.agents.add(&p.agent);
        let agent = p.agent.clone();
        self.write(&request, Acts::As(&agent), move |coord| {
            let withdrawn = || ct.is_cancelled();
            Ok(json!(coord
                .claim_unless(&p.agent, None, &withdrawn)?
                .answer()))
        })
        .await
    }

    #[tool(
        description = "Extend the lease of a task you work on (as `coord heartbeat`); \
                          refused with code 'stale' when the attempt is no longer yours \
                          (stop working on it)",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn heartbeat(
        &self,
        Parameters(p): Parameters<HeartbeatParams>,
        request: RequestContext<RoleServer>,
    ) -> Answer {
        self.agents.add(&p.agent);
        let acts = p.agent.clone();
        let fence = fence(p.agent, p.attempt, p.epoch);
        self.write(&request, Acts::As(&acts), move |coord| {
            Ok(json!(coord.heartbeat(&p.id, &fence, None)?))
        })
        .await
    }

    #[tool(
        description = "Whether an attempt still holds its task: {id, agent, attempt, held, \
                          lost (why not: cancelled, lease_lost), why, lease_expires_at}. Read \
                          only: the lease is not extended (heartbeat does that)",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn lease_status(
        &self,
        Parameters(p): Parameters<HeartbeatParams>,
        request: RequestContext<RoleServer>,
    ) -> Answer {
        if let Err(e) = may(&request, Acts::As(&p.agent)) {
            return Ok(refused(e));
        }
        self.agents.add(&p.agent);
        self.answer(move |coord| Ok(json!(coord.lease_status(&p.id, &p.agent, p.attempt)?)))
            .await
    }

    #[tool(
        description = "Report success with an output (as `coord complete`); refused with \
                          code 'stale' when the attempt is no longer current (the result is \
                          kept in the task's history as stale_result)",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn complete(
        &self,
        Parameters(p): Parameters<CompleteParams>,
        request: RequestContext<RoleServer>,
    ) -> Answer {
        let verdict = Verdict::Success {
            output: p.output,
            next_agents: p.next_agent,
        };
        let how = written(fence(p.agent, p.attempt, p.epoch), p.replace, p.metrics);
        self.report(&request, p.id, verdict, how).await
    }

    #[tool(
        description = "Report failure (as `coord fail`): retried unless fatal; refused \
                          with code 'stale' when the attempt is no longer current",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn fail(
        &self,
        Parameters(p): Parameters<FailParams>,
        request: RequestContext<RoleServer>,
    ) -> Answer {
        let verdict = Verdict::Failure {
            message: p.error,
            retryable: !p.fatal,
        };
        let how = written(fence(p.agent, p.attempt, p.epoch), p.replace, p.metrics);
        self.report(&request, p.id, verdict, how).await
    }

    #[tool(
        description = "Approve a task waiting in review, before its start or its result \
                       (as `coord approve`); answers {op, id, commits, state}",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn approve(
        &self,
        Parameters(p): Parameters<IdParams>,
        request: RequestContext<RoleServer>,
    ) -> Answer {
        self.person(&request, ops::PersonOp::Approve, p.id, |coord, id| {
            coord.approve(id)
        })
        .await
    }

    #[tool(
        description = "Reject a task waiting in review, saying why (as `coord reject`); \
                       answers {op, id, commits, state}",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn reject(
        &self,
        Parameters(p): Parameters<RejectParams>,
        request: RequestContext<RoleServer>,
    ) -> Answer {
        self.person(&request, ops::PersonOp::Reject, p.id, move |coord, id| {
            coord.reject(id, &p.reason)
        })
        .await
    }

    #[tool(
        description = "Cancel a task that is not finished, saying why (as `coord cancel`); \
                       answers {op, id, commits, state}",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn cancel(
        &self,
        Parameters(p): Parameters<CancelParams>,
        request: RequestContext<RoleServer>,
    ) -> Answer {
        self.person(&request, ops::PersonOp::Cancel, p.id, move |coord, id| {
            coord.cancel(id, &p.reason)
        })
        .await
    }

    #[tool(
        description = "Send a failed, invalid or cancelled task back to the inbox (as \
                       `coord retry`); answers {op, id, commits, state}",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn retry(
        &self,
        Parameters(p): Parameters<IdParams>,
        request: RequestContext<RoleServer>,
    ) -> Answer {
        self.person(&request, ops::PersonOp::Retry, p.id, |coord, id| {
            coord.retry(id)
        })
        .await
    }

    #[tool(
        description = "Give a task to another agent (as `coord reassign`): one an agent holds \
                       ends that attempt (its late result is set aside) and starts a new one \
                       for the agent named; answers {op, id, commits, state}",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn reassign(
        &self,
        Parameters(p): Parameters<ReassignParams>,
        request: RequestContext<RoleServer>,
    ) -> Answer {
        self.person(&request, ops::PersonOp::Reassign, p.id, move |coord, id| {
            coord.reassign(id, &p.agent)
        })
        .await
    }
}

/// What a call acts as, for what its caller may do ([`may`]).
#[derive(Clone, Copy)]
enum Acts<'a> {
    /// Reads, and adding a task: anyone may.
    AsAnyone,
    /// As this agent: a person, or the agent itself.
    As(&'a AgentName),
    /// A person's command: not an agent's token.
    AsPerson,
}

/// Returns who makes the call `request` is: what the front end put in the HTTP request's
/// extensions, else a person.
fn caller(request: &RequestContext<RoleServer>) -> Caller {
    request
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
        .unwrap_or(Caller::Person)
}

/// Refuses (code `forbidden`) a call an agent's token may not make: acting as another agent,
/// or a person's command.
fn may(request: &RequestContext<RoleServer>, acts: Acts<'_>) -> Result<(), CliError> {
    let Caller::Agent(agent) = caller(request) else {
        return Ok(());
    };
    let why = match acts {
        Acts::AsAnyone => return Ok(()),
        Acts::As(other) if *other == agent => return Ok(()),
        Acts::As(other) => format!("the token of agent {agent} cannot act as agent {other}"),
        Acts::AsPerson => {
            format!("the token of agent {agent} may not approve, reject, cancel, retry or reassign")
        }
    };
    Err(CliError::new(
        anyhow::anyhow!("{why}; nothing was written"),
        Exit::Problem,
        "forbidden",
    )
    .with_hint("call as this agent, or connect with the server's token (COORD_SERVE_TOKEN)"))
}

/// Returns a tool error: the error as the CLI reports it in `--json` mode.
fn refused(e: CliError) -> CallToolResult {
    CallToolResult::structured_error(tool_error(e))
}

impl Server {
    /// Opens the repo for one call, at the time of the call.
    fn open(&self) -> Result<Coord, CliError> {
        Ok(self.opener.open()?)
    }

    /// Runs `f` on a fresh opening on a thread of its own (so a call that waits, for the
    /// lock or for git, holds up no other request); its value is the tool's structured answer,
    /// its error a tool error.
    async fn answer(
        &self,
        f: impl FnOnce(&Coord) -> Result<Value, CliError> + Send + 'static,
    ) -> Answer {
        Ok(
            match self.blocking(move |s| s.open().and_then(|c| f(&c))).await? {
                Ok(v) => CallToolResult::structured(v),
                Err(e) => refused(e),
            },
        )
    }

    /// Runs the write `f` as [`Server::answer`] runs a read, once its caller may make it
    /// (`acts`), through the front end's [`Writes`].
    async fn write(
        &self,
        request: &RequestContext<RoleServer>,
        acts: Acts<'_>,
        f: impl FnOnce(&Coord) -> Result<Value, CliError> + Send + 'static,
    ) -> Answer {
        if let Err(e) = may(request, acts) {
            return Ok(refused(e));
        }
        let Some(writes) = self.writes.clone() else {
            return self.answer(f).await;
        };
        let answered = self.blocking(move |s| {
            let (mut f, mut out) = (Some(f), None);
            let ran = writes.write(&mut || {
                if let Some(f) = f.take() {
                    out = Some(s.open().and_then(|c| f(&c)));
                }
            });
            writes.written();
            match (ran, out) {
                (Err(why), _) => Err(unavailable(why)),
                (Ok(()), Some(out)) => out,
                (Ok(()), None) => Err(unavailable("the write did not run".into())),
            }
        });
        Ok(match answered.await? {
            Ok(v) => CallToolResult::structured(v),
            Err(e) => refused(e),
        })
    }

    /// Runs `f` on the runtime's blocking threads; a panic in it is an internal error.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Server) -> T + Send + 'static,
    ) -> Result<T, ErrorData> {
        let server = self.clone();
        tokio::task::spawn_blocking(move || f(&server))
            .await
            .map_err(|e| ErrorData::internal_error(format!("the call failed: {e}"), None))
    }

    /// Writes a result as `coord complete`/`fail --agent --attempt` do.
    async fn report(
        &self,
        request: &RequestContext<RoleServer>,
        id: TaskId,
        verdict: Verdict,
        how: ops::How,
    ) -> Answer {
        let agent = how.fence.agent.clone();
        let acts = agent.as_ref().map_or(Acts::AsPerson, Acts::As);
        self.write(request, acts, move |coord| {
            let answer = coord
                .report_answer(&id, &verdict, &how, None)
                .map_err(|e| crate::error::replace_hint(e, REPLACE_HINT))?;
            Ok(json!(answer))
        })
        .await
    }

    /// Runs a person's command `act` on task `id` and answers what it did, as the command's
    /// `--json` does.
    async fn person(
        &self,
        request: &RequestContext<RoleServer>,
        op: ops::PersonOp,
        id: TaskId,
        act: impl FnOnce(&Coord, &TaskId) -> Result<usize, ops::Error> + Send + 'static,
    ) -> Answer {
        self.write(request, Acts::AsPerson, move |coord| {
            let commits = act(coord, &id)?;
            Ok(json!(coord.acted(op, &id, commits)?))
        })
        .await
    }

    /// Returns the board or one task as a resource's text.
    fn resource(&self, uri: &str) -> Result<Option<Value>, CliError> {
        let coord = self.open()?;
        if uri == BOARD_URI {
            let board = coord.status(None)?.board;
            return Ok(Some(crate::view::board::summary(&board)));
        }
        let Some(id) = uri.strip_prefix(TASK_URI_PREFIX) else {
            return Ok(None);
        };
        let Ok(id) = TaskId::new(id) else {
            return Ok(None);
        };
        Ok(Some(json!(coord.show(&id)?)))
    }
}

/// A write the front end refused (a hub that no longer holds its lease): code `unavailable`.
fn unavailable(why: String) -> CliError {
    CliError::new(anyhow::anyhow!(why), Exit::Problem, "unavailable")
}

/// What to do about a result already waiting, through the tool's arguments.
const REPLACE_HINT: &str =
    "call the tool again with replace: true to overwrite it (the old one is kept in coord.history)";

const BOARD_URI: &str = "coord://board";
const TASK_URI_PREFIX: &str = "coord://task/";

#[tool_handler]
impl ServerHandler for Server {
    // Logging, which the SDK marks deprecated, carries the notices to the client ([`notices`]).
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_logging()
                .build(),
        )
        .with_server_info(rmcp::model::Implementation::new("coord", VERSION))
        .with_instructions(
            "coord coordinates tasks (YAML files in a git repo) between agents and people. \
             Read the board with status/list/show/log; add work with new. As an agent: claim \
             (pull agents), heartbeat while you work, then complete or fail naming the agent \
             and attempt claim gave you. A 'stale' error means the task moved on: drop your \
             work on it. Log messages (logger 'coord') tell of your tasks: assigned, \
             lease_lost, cancelled; lease_status asks.",
        )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        tokio::spawn(notices::tell(self.clone(), context.peer));
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let board = Resource::new(BOARD_URI, "board")
            .with_description("The board's summary, as the status tool answers it")
            .with_mime_type("application/json");
        Ok(ListResourcesResult::with_all_items(vec![board]))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let task = ResourceTemplate::new(format!("{TASK_URI_PREFIX}{{id}}"), "task")
            .with_description("One task, as coord show --json prints it")
            .with_mime_type("application/json");
        Ok(ListResourceTemplatesResult::with_all_items(vec![task]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let read = uri.clone();
        match self.blocking(move |s| s.resource(&read)).await? {
            Ok(Some(v)) => {
                let text = serde_json::to_string_pretty(&v).unwrap_or_default();
                let contents = ResourceContents::text(text, uri).with_mime_type("application/json");
                Ok(ReadResourceResult::new(vec![contents]).into())
            }
            Ok(None) => Err(ErrorData::resource_not_found(
                format!("no resource {uri}; try {BOARD_URI} or {TASK_URI_PREFIX}<id>"),
                None,
            )),
            Err(e) => Err(ErrorData::internal_error(e.one_line(), Some(tool_error(e)))),
        }
    }
}

/// Returns a tool error as the CLI reports it in `--json` mode: the message, its causes, a
/// code naming the kind, hints and the CLI's exit code.
fn tool_error(e: CliError) -> Value {
    e.to_json()
}

fn fence(agent: AgentName, attempt: u32, epoch: Option<u64>) -> Fence {
    Fence {
        agent: Some(agent),
        attempt: Some(attempt),
        epoch,
    }
}

/// How a result an agent reports over MCP is written: fenced, with its metrics.
fn written(fence: Fence, replace: bool, metrics: Option<Metrics>) -> ops::How {
    ops::How {
        fence,
        replace,
        metrics,
        ..ops::How::default()
    }
}

fn authority(a: AuthorityParam) -> Authority {
    match a {
        AuthorityParam::JustDoIt => Authority::JustDoIt,
        AuthorityParam::DoItAndShowMe => Authority::DoItAndShowMe,
        AuthorityParam::AskMeFirst => Authority::AskMeFirst,
    }
}
