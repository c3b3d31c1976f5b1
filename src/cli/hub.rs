//! The `--hub URL` flag of the agent commands (`claim`, `complete`, `fail`, `heartbeat`, `new`,
//! `run`): which `coord serve` to ask instead of the local repository, from the flag, else
//! `COORD_HUB`, else `hub.url` in the coord.yaml of the folder (or the nearest folder above it
//! that has one); the token from `COORD_HUB_TOKEN`.

use super::Ctx;
use crate::client::Hub;
use crate::config::Config;
use crate::error::{CliError, UsageError};
use std::path::Path;

/// The variable holding the token sent to the hub.
pub const TOKEN_VAR: &str = "COORD_HUB_TOKEN";

/// How long a write to the hub is sent again after a network error or a busy answer, unless
/// `--wait` says otherwise (as long as an agent command waits for the local lock).
const RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(10);

/// `--hub URL` of the agent commands.
#[derive(Debug, Clone, clap::Args)]
pub struct HubArg {
    /// Ask the coord serve at URL instead of this repository (COORD_HUB, or hub.url in
    /// coord.yaml, sets it too); its token from COORD_HUB_TOKEN
    #[arg(long, env = "COORD_HUB", value_name = "URL", value_hint = clap::ValueHint::Url)]
    pub hub: Option<String>,
}

/// Returns the hub the command asks, if any: `--hub` or `COORD_HUB`, else `hub.url` of
/// coord.yaml; refused together with `--sync`.
pub fn of(ctx: &Ctx, arg: &HubArg, sync: Option<&str>) -> Result<Option<Hub>, CliError> {
    let url = match arg.hub.as_deref().filter(|u| !u.is_empty()) {
        Some(u) => Some(u.to_string()),
        None => configured(&ctx.dir)?,
    };
    let Some(url) = url else {
        return Ok(None);
    };
    if sync.is_some() {
        return Err(UsageError(format!(
            "--sync and a hub ({url}) exclude each other: the hub pushes to the remote itself"
        ))
        .into());
    }
    let token = std::env::var(TOKEN_VAR).ok();
    let retry_for = ctx.wait.unwrap_or(RETRY_FOR);
    Ok(Some(Hub::new(&url, token, retry_for)?))
}

/// Returns `hub.url` of the coord.yaml in `dir` or the nearest folder above it that has one,
/// looking no higher than a repository's root.
fn configured(dir: &Path) -> Result<Option<String>, CliError> {
    for d in dir.ancestors() {
        let file = d.join("coord.yaml");
        if file.is_file() {
            let config = Config::load(&file).map_err(anyhow::Error::from)?;
            return Ok(config.hub.url);
        }
        if d.join(".git").exists() {
            break;
        }
    }
    Ok(None)
}
