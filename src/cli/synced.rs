//! `claim`, `complete` and `fail` against a remote (`--sync [REMOTE]` or `sync.remote` in
//! coord.yaml): fetch, act on the remote's tip, push, and report success only once the push
//! landed; a rejected push undoes the step and redoes it on the newer tip. The steps live in
//! [`crate::sync`]; this file picks the remote and maps the outcome.

use super::Ctx;
use crate::board::Board;
use crate::engine::commands::{self, CommandError, Receipt};
use crate::model::{AgentName, State};
use crate::store::Store;
use crate::sync::{self, Options, SyncError, TickError};
use anyhow::Result;

/// How many times a step is redone after a rejected push before giving up.
const RETRIES: u32 = 30;

/// Returns the remote to sync with: `--sync`'s value, else `sync.remote` of coord.yaml.
pub fn remote(ctx: &Ctx, flag: Option<String>) -> Result<Option<String>> {
    match flag {
        Some(r) => Ok(Some(r)),
        None => Ok(ctx.store()?.config.sync.remote),
    }
}

/// Runs `step` (under the lock, on the remote's tip) and pushes its commits; redoes it after
/// each rejected push. Returns once the push landed.
pub fn run(
    ctx: &Ctx,
    remote: String,
    step: &mut dyn FnMut(&Store) -> Result<usize, TickError>,
) -> Result<sync::Report> {
    let opts = Options {
        remote,
        branch: None,
        max_retries: RETRIES,
        wait: ctx.wait.unwrap_or(std::time::Duration::from_secs(
            super::AGENT_WAIT.as_secs().max(0).unsigned_abs(),
        )),
        now: ctx.now,
        redo_on_reject: true,
        drop_edits: Vec::new(),
    };
    let mut say = |line: &str| ctx.status(line);
    match sync::run(&ctx.dir, &opts, step, &mut say) {
        Ok(r) => Ok(r),
        Err(SyncError::Lock(e)) => Err(e.into()),
        Err(SyncError::Tick(e)) => Err(step_error(e)),
        Err(e) => Err(e.into()),
    }
}

/// The step's own error, unwrapped so that its exit code applies (4: nothing to claim).
fn step_error(e: TickError) -> anyhow::Error {
    match e.downcast::<CommandError>() {
        Ok(c) => (*c).into(),
        Err(e) => anyhow::anyhow!("{e}"),
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

/// Claims the best ready task on the remote's tip for `agent`; after a lost race, the next
/// best. Returns the task once the claim is on the remote.
pub fn claim(ctx: &Ctx, remote: String, agent: &AgentName) -> Result<Receipt> {
    let mut claimed = None;
    let mut step = |store: &Store| -> Result<usize, TickError> {
        let (board, _) = store.load()?;
        let claim = commands::claim(&board, &ctx.inputs(store), agent)?;
        let n = ctx.apply(store, &claim.plan)?;
        claimed = Some(claim.receipt);
        Ok(n)
    };
    run(ctx, remote, &mut step)?;
    claimed.ok_or_else(|| anyhow::anyhow!("the claim made no commit; run coord claim again"))
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
