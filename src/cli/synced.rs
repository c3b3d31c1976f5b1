//! The `--sync [REMOTE]` flag of the agent commands, and which assignments are tentative until
//! a push lands (for `status`). The steps against a remote live in [`crate::ops`].

use super::Ctx;
use crate::board::Board;
use crate::model::State;
use crate::store::Store;
use anyhow::Result;

/// Returns the remote to sync with: `--sync`'s value, else `sync.remote` of coord.yaml.
pub fn remote(ctx: &Ctx, flag: Option<String>) -> Result<Option<String>> {
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

/// Returns the remote-tracking branch and the tasks assigned in this clone's `work/` that it
/// does not have in the same folder: assignments that are tentative until a push lands
/// (another clone may have won them). None without a remote-tracking branch.
pub fn tentative(store: &Store, board: &Board) -> Result<Option<(String, Vec<String>)>> {
    let remote = store.config.sync.remote.as_deref().unwrap_or("origin");
    let Some(branch) = store.repo.head()?.branch else {
        return Ok(None);
    };
    let tracking = format!("{remote}/{branch}");
    let Some(tip) = store.repo.ref_target(&format!("refs/remotes/{tracking}"))? else {
        return Ok(None);
    };
    let mut ids = Vec::new();
    for t in board
        .tasks
        .iter()
        .filter(|t| t.folder.state == State::Assigned)
    {
        if store.repo.blob_at(tip, &t.path)?.is_none() {
            ids.push(t.id.to_string());
        }
    }
    Ok(Some((tracking, ids)))
}
