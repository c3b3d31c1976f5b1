//! `coord serve`: the REST API, the live board and the metrics over HTTP (see `crate::serve`).

use super::Ctx;
use anyhow::Result;
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
}

/// Runs `coord serve`.
pub fn run(ctx: &Ctx, args: Args) -> Result<()> {
    let token = args.token.filter(|t| !t.is_empty());
    crate::serve::run(
        ctx,
        crate::serve::Options {
            listen: args.listen,
            token,
        },
    )?;
    Ok(())
}
