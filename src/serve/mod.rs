//! `coord serve`: one process answering HTTP on one address: the REST API under `/v1`
//! ([`api`]), server-sent events and Prometheus metrics ([`events`]), the live board at `/`
//! ([`html`], what its cards show in [`cards`], people's actions posted from it in [`forms`]),
//! the MCP server over streamable HTTP at `/mcp` ([`mcp`]), all behind the same checks
//! ([`guard`]). Handlers read the hub's snapshot
//! ([`hub`]) and write through the same operations as the command line. axum on a small tokio
//! runtime; the page's script and style are embedded in the binary.

pub mod agent;
pub mod api;
pub mod cards;
pub mod events;
pub mod forms;
pub mod guard;
pub mod html;
pub mod hub;
pub mod hubmode;
pub mod mcp;
pub mod metrics;
pub mod problem;
pub mod ticker;

use crate::error::{CliError, Exit};
use crate::ops::Opener;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How long a stopping server waits for the requests still running (a write under way).
const STOP_WAIT: Duration = Duration::from_secs(2);

/// The largest request body accepted (a task, a result).
pub const BODY_LIMIT: usize = 1024 * 1024;

/// How long a write waits for another coordinator's lock before answering 503.
pub const WRITE_WAIT: Duration = Duration::from_secs(2);

/// How long a hub's write waits for the lock (held by its own batch, or a person's command
/// in its clone) before answering 503.
pub const HUB_WRITE_WAIT: Duration = Duration::from_secs(30);

/// How long a connection may take to send a request's headers (the first one, or the next
/// on a kept-alive connection) before it is closed: a client that never finishes them holds
/// nothing for longer.
pub const HEADER_READ: Duration = Duration::from_secs(10);

/// How many `/v1/events` streams may be open at once; past it the server answers 503.
pub const MAX_STREAMS: usize = 256;

/// The shortest token accepted.
pub const MIN_TOKEN: usize = 16;

/// How `coord serve` runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// The token every request must carry (`COORD_SERVE_TOKEN`).
    pub token: Option<String>,
    /// Run `coord watch`'s loop in the server too (`--tick`), with these options.
    pub tick: Option<crate::watch::Options>,
    /// The names (`name` or `name:port`, as clients put them in `Host`) the server also
    /// answers to besides its loopback names; only with a token.
    pub public_hosts: Vec<String>,
    /// The file of each agent's token (`--agent-tokens`); only with the server's token.
    pub agent_tokens: Option<std::path::PathBuf>,
    /// Run as a fleet's hub (`--hub`) with `hub:` of coord.yaml.
    pub hub: bool,
}

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback address without a token.
    #[error("listening on {0} (not loopback) needs a token")]
    NeedsToken(SocketAddr),
    /// A token too short to resist guessing.
    #[error("COORD_SERVE_TOKEN is {0} characters; a token needs at least {MIN_TOKEN} characters")]
    ShortToken(usize),
    /// A public name without a token.
    #[error("--public-host needs a token (COORD_SERVE_TOKEN)")]
    PublicHostNeedsToken,
    /// A non-loopback address without a name clients reach it by.
    #[error("listening on {0} (not loopback) needs --public-host")]
    NeedsPublicHost(SocketAddr),
    /// The address could not be bound or served.
    #[error("cannot serve on {addr}: {source}")]
    Io {
        /// The address.
        addr: SocketAddr,
        /// What the OS reported.
        source: std::io::Error,
    },
    /// The repository could not be read.
    #[error("{0}")]
    Repo(#[from] hub::HubError),
    /// Agent tokens without the server's token.
    #[error("--agent-tokens needs the server's token (COORD_SERVE_TOKEN)")]
    AgentTokensNeedToken,
    /// The agent tokens file cannot be used.
    #[error("--agent-tokens {0}")]
    AgentTokens(#[from] guard::TokensError),
    /// Hub mode could not take the lease, or could not start.
    #[error("coord serve --hub: {0}")]
    Hub(crate::ops::Error),
    /// A newer hub took the lease over: this one stopped.
    #[error("coord serve --hub: {0}")]
    Superseded(String),
    /// `hub.lease` is too short for the time between pushes.
    #[error("hub.lease ({lease}s) must be at least three times the time between two pushes ({every}s at hub.pushes_per_minute)")]
    ShortLease {
        /// The lease, in seconds.
        lease: u64,
        /// The time between pushes, in seconds.
        every: u64,
    },
    /// The tick loop (`--tick`) could not start.
    #[error("coord serve --tick: {0}")]
    Tick(#[from] crate::watch::WatchError),
}

impl ServeError {
    /// Returns what to do about it, when there is something to do.
    pub fn hint(&self) -> Option<String> {
        match self {
            ServeError::NeedsToken(_) => Some(
                "set COORD_SERVE_TOKEN to the token clients must send, or listen on a loopback \
                 address"
                    .into(),
            ),
            ServeError::ShortToken(_) => {
                Some("make one with `openssl rand -hex 16` (32 characters)".into())
            }
            ServeError::PublicHostNeedsToken => Some(
                "set COORD_SERVE_TOKEN, or leave --public-host out to answer on loopback \
                 names only"
                    .into(),
            ),
            ServeError::NeedsPublicHost(_) => {
                Some("pass --public-host NAME[:PORT], the host clients put in their URLs".into())
            }
            ServeError::AgentTokensNeedToken => {
                Some("set COORD_SERVE_TOKEN too: without it every request acts as a person".into())
            }
            ServeError::Tick(e) => e.hint(),
            _ => None,
        }
    }
}

/// What every handler gets.
pub struct App {
    /// The snapshot, events and counters.
    pub hub: Arc<hub::Hub>,
    /// The token, when one is set.
    pub token: Option<String>,
    /// The exact `Host` values (lowercase) this server answers to.
    pub hosts: Vec<String>,
    /// One permit per open event stream.
    pub streams: Arc<tokio::sync::Semaphore>,
    /// Each agent's token (`--agent-tokens`): a request with one acts as that agent only.
    pub agent_tokens: guard::AgentTokens,
    /// The answers of agent writes by idempotency key.
    pub replies: agent::Replies,
    /// Hub mode, when the server runs as a fleet's hub.
    pub mode: Option<Arc<hubmode::HubMode>>,
}

impl App {
    /// Returns the state of a server on `addr` with this token and these public names.
    pub fn new(
        hub: Arc<hub::Hub>,
        token: Option<String>,
        addr: SocketAddr,
        public_hosts: &[String],
    ) -> App {
        App {
            hub,
            token,
            hosts: guard::hosts_of(addr, public_hosts),
            streams: Arc::new(tokio::sync::Semaphore::new(MAX_STREAMS)),
            agent_tokens: guard::AgentTokens::default(),
            replies: agent::Replies::default(),
            mode: None,
        }
    }
}

/// Returns the whole router: the API under `/v1`, `/metrics` and `/healthz`, the MCP server
/// at `/mcp`, the board's pages and its embedded assets.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/v1/tasks", get(api::list).post(api::create))
        .route("/v1/tasks/{id}", get(api::one))
        .route("/v1/tasks/{id}/log", get(api::task_log))
        .route("/v1/tasks/{id}/{action}", post(api::act))
        .route("/v1/board", get(api::board))
        .route("/v1/agents", get(api::agents))
        .route("/v1/agents/{agent}/claim", post(agent::claim))
        .route("/v1/agents/{agent}/work", get(agent::work))
        .route("/v1/agents/{agent}/tasks/{id}/lost", get(agent::lost))
        .route("/v1/agents/{agent}/tasks/{id}/{action}", post(agent::act))
        .route("/v1/openapi.json", get(api::openapi))
        .route("/v1/events", get(events::events))
        .route("/metrics", get(events::metrics))
        .route("/healthz", get(api::health))
        .route_service(mcp::PATH, mcp::service(&app))
        .route("/", get(html::page))
        .route("/board", get(html::fragment))
        .route("/agents", get(html::agents))
        .route("/column/{state}", get(html::column))
        .route("/tasks", post(forms::new_task))
        .route("/tasks/{id}", get(html::task))
        .route("/tasks/{id}/{action}", post(forms::act))
        .route("/assets/board.js", get(html::script))
        .route("/assets/board.css", get(html::style))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            guard::check,
        ))
        .with_state(app)
}

async fn not_found(uri: axum::http::Uri) -> problem::Problem {
    problem::Problem::not_found(format!("nothing at {}", uri.path()))
}

/// Serves until SIGINT or SIGTERM; prints the address it listens on (`http://…`) on stdout
/// once it accepts connections (and, with `tick`, once its tick loop watches).
pub fn run(mut opener: Opener, opts: Options) -> Result<(), ServeError> {
    check_options(&opts)?;
    let agent_tokens = match (&opts.agent_tokens, &opts.token) {
        (None, _) => guard::AgentTokens::default(),
        (Some(_), None) => return Err(ServeError::AgentTokensNeedToken),
        (Some(path), Some(token)) => guard::AgentTokens::load(path, token)?,
    };
    opener.options.wait.get_or_insert(WRITE_WAIT);
    let dir = opener.dir.clone();
    let settings = match opts.hub {
        true => Some(hub_settings(&mut opener)?),
        false => None,
    };
    let taken = match &settings {
        Some(s) => Some(hubmode::take(&opener, s).map_err(ServeError::Hub)?),
        None => None,
    };
    // Every attempt the hub starts (a claim, its tick's assignments) records its epoch.
    opener.options.epoch = taken.as_ref().map(|(mode, _)| mode.epoch);
    let hub = hub::Hub::open(opener.clone())?;
    warn_of_tokens_without_profiles(&hub, &agent_tokens);
    hub.watch()?;
    crate::ops::webhooks::start(
        &dir,
        Box::new(|line| crate::term::write_err(format_args!("{line}"))),
    )
    .map_err(|e| ServeError::Repo(e.into()))?;
    let io = |source| ServeError::Io {
        addr: opts.listen,
        source,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(io)?;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(opts.listen))
        .map_err(io)?;
    let addr = listener.local_addr().map_err(io)?;
    let ticking = match opts.tick {
        Some(w) => Some(ticker::start(Arc::clone(&hub), w)?),
        None => None,
    };
    let (lost_tx, lost_rx) = tokio::sync::oneshot::channel();
    let mut pushing = None;
    let mut app = App {
        agent_tokens,
        ..App::new(Arc::clone(&hub), opts.token, addr, &opts.public_hosts)
    };
    if let (Some((mode, held)), Some(s)) = (taken, settings) {
        crate::term::write_err(format_args!(
            "coord: hub of {} in epoch {}, pushing at most {} times a minute",
            s.remote, mode.epoch, s.pushes_per_minute
        ));
        hubmode::start_writing(Arc::clone(&mode), opener.clone()).map_err(io)?;
        let seen = Arc::clone(&hub);
        let pusher = hubmode::start_pushing(
            Arc::clone(&mode),
            held,
            opener,
            s,
            move || seen.changed(),
            lost_tx,
        )
        .map_err(io)?;
        app.mode = Some(mode);
        pushing = Some(pusher);
    }
    let app = Arc::new(app);
    crate::term::write_out(format_args!("http://{addr}"));
    crate::term::write_err(format_args!(
        "coord: serving the board on http://{addr}/ and the API under /v1; Ctrl-C stops"
    ));
    let lost = async {
        match lost_rx.await {
            Ok(why) => why,
            Err(_) => std::future::pending().await,
        }
    };
    // Not a graceful shutdown: event streams never end by themselves, and every write is
    // committed before its answer, so nothing is lost by stopping at once. A hub pushes what
    // it committed first, for at most a few seconds.
    let mode = app.mode.clone();
    let served = rt.block_on(async move {
        tokio::select! {
            served = serve(listener, router(app)) => served.map_err(io),
            () = stopped() => Ok(()),
            why = lost => Err(ServeError::Superseded(why)),
        }
    });
    if let (Some(pusher), Some(mode), Ok(())) = (pushing, mode, &served) {
        crate::term::write_err(format_args!("{}", pusher.stop(&mode)));
    }
    // A hub's writes still waiting for their turn were refused.
    rt.shutdown_timeout(STOP_WAIT);
    served?;
    // The same signal stops the tick loop after the tick in progress.
    if let Some(t) = ticking {
        let _ = t.join();
    }
    Ok(())
}

/// Warns, one line each, of agents the tokens file names that have no profile: their tokens
/// act for an agent that can claim nothing until its profile is added.
fn warn_of_tokens_without_profiles(hub: &hub::Hub, tokens: &guard::AgentTokens) {
    let Ok(coord) = hub.opener().open() else {
        return;
    };
    let store = coord.store();
    let agents = format!("{}/agents", store.config.work_dir);
    for agent in tokens.agents() {
        let profile = format!("{agents}/{agent}.yaml");
        if !store.abs(&profile).is_file() {
            crate::term::write_err(format_args!(
                "coord: warning: --agent-tokens names agent {agent}, which has no profile ({profile}): its token can claim nothing until one is added ('coord agents add {agent}')"
            ));
        }
    }
}

/// Returns the hub's settings from coord.yaml and makes `opener` act on the clone alone
/// (the hub pushes in batches of its own).
fn hub_settings(opener: &mut Opener) -> Result<hubmode::Settings, ServeError> {
    opener.options.local = true;
    // Writes queue in the hub one at a time; the one at the head waits out a batch.
    opener.options.wait = Some(HUB_WRITE_WAIT);
    let coord = opener.open().map_err(ServeError::Hub)?;
    let s = hubmode::Settings::of(&coord.store().config.hub);
    let every = 60 / u64::from(s.pushes_per_minute);
    if s.lease.as_secs() < 3 * every {
        return Err(ServeError::ShortLease {
            lease: s.lease.as_secs(),
            every,
        });
    }
    Ok(s)
}

/// Refuses what cannot be served safely: a non-loopback address without a token or a public
/// name, a short token, a public name without a token.
fn check_options(opts: &Options) -> Result<(), ServeError> {
    let loopback = opts.listen.ip().is_loopback();
    match &opts.token {
        None if !loopback => Err(ServeError::NeedsToken(opts.listen)),
        None if !opts.public_hosts.is_empty() => Err(ServeError::PublicHostNeedsToken),
        Some(t) if t.chars().count() < MIN_TOKEN => Err(ServeError::ShortToken(t.chars().count())),
        Some(_) if !loopback && opts.public_hosts.is_empty() => {
            Err(ServeError::NeedsPublicHost(opts.listen))
        }
        _ => Ok(()),
    }
}

/// Accepts connections and serves each on a task of its own, HTTP/1.1 with a bound on the
/// time a request's headers may take ([`HEADER_READ`]). A failed accept (too many open
/// files) is waited out instead of ending the server.
async fn serve(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::service::TowerToHyperService;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ);
            // A connection that ends badly (reset, timed out) concerns only its client.
            let _ = http.serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

/// Resolves on SIGINT or SIGTERM.
async fn stopped() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

/// How the command line reports a server that could not run.
impl From<ServeError> for CliError {
    fn from(e: ServeError) -> CliError {
        let hint = e.hint();
        CliError::new(e.into(), Exit::Problem, "problem").with_hints(hint)
    }
}
