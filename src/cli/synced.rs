//! The `--sync [REMOTE]` flag of the agent commands. The steps against a remote, and which
//! assignments are tentative until a push lands, live in [`crate::ops`].

use super::Ctx;
use crate::error::CliError;

/// Returns the remote to sync with: `--sync`'s value, else `sync.remote` of coord.yaml.
pub fn remote(ctx: &Ctx, flag: Option<String>) -> Result<Option<String>, CliError> {
    match flag {
        Some(r) => Ok(Some(r)),
        None => Ok(ctx.store()?.config.sync.remote),
    }
}

/// `--sync [REMOTE]` of the agent commands.
#[derive(Debug, clap::Args)]
pub struct SyncArg {
    /// Fetch REMOTE (default origin) first and succeed only once the change is pushed there;
    /// `sync.remote` in coord.yaml turns this on for every run
    #[arg(long, value_name = "REMOTE", num_args = 0..=1, default_missing_value = "origin")]
    pub sync: Option<String>,
}
