//! `coord serve`: the REST API, the live board and the metrics over HTTP (see `crate::serve`).

use super::Ctx;
use crate::error::{CliError, UsageError};
use std::net::SocketAddr;

/// Arguments of `coord serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The address to listen on (port 0 picks a free port; the address is printed)
    #[arg(long, default_value = "127.0.0.1:8088", value_name = "ADDR")]
    listen: SocketAddr,
    /// The token every request must carry; required to listen on a non-loopback address
    #[arg(long, env = "COORD_SERVE_TOKEN", hide_env_values = true, hide = true)]
    token: Option<String>,
    /// With a token: a host name (NAME or NAME:PORT, as clients write it in their URLs) the
    /// server answers to besides localhost; repeatable
    #[arg(long = "public-host", value_name = "HOST")]
    public_host: Vec<String>,
    /// With a token: a YAML file of agent tokens (AGENT: TOKEN, owner-only) outside git; a
    /// request with one acts as that agent only
    #[arg(long = "agent-tokens", value_name = "FILE")]
    agent_tokens: Option<std::path::PathBuf>,
    /// Also run the loop of `coord watch` in this process: tick on every change and interval
    #[arg(long)]
    tick: bool,
    /// With --tick: time between periodic ticks, for leases and backoff (e.g. 60s, 5m)
    #[arg(long, default_value = "60s", requires = "tick")]
    interval: super::wait::FlagDuration,
    /// Run as a fleet's hub: the only writer of this clone, pushing in batches to `hub.remote`
    /// under a lease (coord.yaml's `hub:`, docs/fleet.md)
    #[arg(long)]
    hub: bool,
    /// With --tick: poll the file system instead of using change events (NFS, WSL)
    #[arg(long, requires = "tick")]
    poll: bool,
}

/// Runs `coord serve`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    limit_malloc_arenas(ctx);
    let token = args.token.filter(|t| !t.is_empty());
    if args.interval.get().as_secs() < 1 {
        return Err(UsageError("--interval must be at least 1s".to_string()).into());
    }
    let tick = args.tick.then(|| crate::watch::Options {
        interval: args.interval.get(),
        poll: args.poll,
        ..crate::watch::Options::default()
    });
    crate::serve::run(
        ctx.opener(),
        crate::serve::Options {
            listen: args.listen,
            token,
            tick,
            public_hosts: args.public_host,
            agent_tokens: args.agent_tokens.map(|f| ctx.dir.join(f)),
            hub: args.hub,
        },
    )?;
    Ok(())
}

/// Starts coord again with `MALLOC_ARENA_MAX=2` unless it is set: glibc gives each thread
/// that allocates a heap of its own (up to eight per core), and the server's threads
/// (workers, reloads, the watcher) kept about 20 MB more than the heap holds at 10,000
/// tasks (70 MB against the 64 MB goal; 53 MB with two arenas, docs/performance.md).
fn limit_malloc_arenas(ctx: &Ctx) {
    super::exec_again_with(ctx, &[("MALLOC_ARENA_MAX", "2")]);
}
