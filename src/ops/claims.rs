//! A claim against a remote without a hub: the claim is planned on the remote's tip and made
//! the agent's by creating its claim ref on the remote ([`crate::sync::claims`]) before it is
//! committed; a task another clone's ref holds is passed over at once for the next ready one.
//! Also fills a board's [`Board::claimed`] for a tick, so no clone assigns a task a claim ref
//! holds.

use super::{Coord, Error, Event};
use crate::board::Board;
use crate::engine::commands::{self, CommandError};
use crate::model::AgentName;
use crate::store::Session;
use crate::sync::claims::{self, ClaimRef, Took};

/// Returns the system clock in ms (claim refs are timed by the clone that reads them).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Marks on `board` the ready tasks that claim refs of `refs` hold (see
/// [`claims::holding`]).
fn hold(store: &Session<'_>, board: &mut Board, refs: &[ClaimRef]) {
    let default =
        std::time::Duration::from_secs(store.config.defaults.timeout.as_secs().max(0) as u64);
    board.claimed = claims::holding(store.repo.git_dir(), board, refs, default, now_ms());
}

/// Marks on `board` the ready tasks the claim refs this clone fetched from any remote hold,
/// for a tick to leave alone.
pub(super) fn hold_fetched(store: &Session<'_>, board: &mut Board) -> Result<(), Error> {
    let refs = claims::fetched_everywhere(&store.repo)?;
    if !refs.is_empty() {
        hold(store, board, &refs);
    }
    Ok(())
}

/// Returns whether the remote's tip (as fetched) has claim ref `c`'s task as this clone's
/// branch has it, so that what the board says of the ref holds on the remote too: a claim of
/// this clone still on its way to the branch keeps its ref.
fn as_on_remote(store: &Session<'_>, board: &Board, remote: &str, c: &ClaimRef) -> bool {
    let repo = &store.repo;
    let Ok(head) = repo.head() else {
        return false;
    };
    let tracking = format!("refs/remotes/{remote}/{}", head.branch.unwrap_or_default());
    let (Some(head), Ok(Some(tip))) = (head.oid, repo.ref_target(&tracking)) else {
        return false;
    };
    board.find(&c.id).iter().all(|f| {
        matches!(
            (repo.blob_at(head, &f.path), repo.blob_at(tip, &f.path)),
            (Ok(here), Ok(there)) if here == there
        )
    })
}

impl Coord {
    /// Plans a claim for `agent` on `store` (the remote's tip, locked) and makes it the
    /// agent's by creating its claim ref on `remote`; a task whose ref another clone created
    /// first is passed over for the next. With nothing to claim, runs one tick and plans
    /// again when it committed. Refs whose task moved on are pruned in the same push. Returns
    /// the claim and the tick's commits; `withdrawn` is asked before each ref is made.
    pub(super) fn claim_by_ref(
        &self,
        store: &Session<'_>,
        agent: &AgentName,
        remote: &str,
        withdrawn: &dyn Fn() -> bool,
    ) -> Result<(commands::Claim, usize), Error> {
        let refs = claims::fetched(&store.repo, remote)?;
        let mut ticked = 0;
        let (mut board, _) = store.load()?;
        hold(store, &mut board, &refs);
        let mut prune: Vec<ClaimRef> = refs
            .iter()
            .filter(|c| !claims::holds(&board, c) && as_on_remote(store, &board, remote, c))
            .cloned()
            .collect();
        let mut spread = Spread::default();
        loop {
            let claim = match commands::claim(&board, &self.inputs(store), agent, self.claim_key())
            {
                Err(CommandError::NothingToClaim { .. }) if !spread.passed.is_empty() => {
                    spread.take_back(&mut board);
                    continue;
                }
                Err(nothing @ CommandError::NothingToClaim { .. }) if ticked == 0 => {
                    let lost = std::mem::take(&mut board.claimed);
                    drop(board);
                    ticked = self.tick_on(store)?.commits;
                    if ticked == 0 {
                        return Err(nothing.into());
                    }
                    (board, _) = store.load()?;
                    hold(store, &mut board, &refs);
                    board.claimed.extend(lost);
                    continue;
                }
                other => other?,
            };
            if spread.passes(&mut board, &claim.receipt.id) {
                continue;
            }
            if withdrawn() {
                return Err(super::agent::withdrawn_before(agent));
            }
            let (id, attempt) = (&claim.receipt.id, claim.receipt.attempt);
            let old = refs
                .iter()
                .find(|c| &c.id == id && c.attempt == attempt)
                .map(|c| c.oid);
            prune.retain(|c| !(&c.id == id && c.attempt == attempt));
            let took = claims::take(
                store.root(),
                &store.repo,
                remote,
                (id, attempt, agent),
                old,
                &std::mem::take(&mut prune),
            )?;
            match took {
                Took::Won => return Ok((claim, ticked)),
                Took::Taken => {
                    self.emit(Event::Status(&format!(
                        "coord: another clone claimed {id} first; taking the next ready task"
                    )));
                    board.claimed.push(id.clone());
                    spread.lost();
                }
            }
        }
    }
}

/// How a claim that lost claim refs spreads over the queue: after its n-th lost ref it passes
/// over up to n of the next ready tasks, at random, so that clones that lost the head of the
/// queue together do not all race for the next task again.
#[derive(Default)]
struct Spread {
    /// Claim refs lost so far.
    losses: u64,
    /// Tasks still to pass over before the next try.
    skip: u64,
    /// The tasks passed over (held back on the board).
    passed: Vec<crate::model::TaskId>,
}

impl Spread {
    /// Notes a lost claim ref and draws how many tasks the next try passes over.
    fn lost(&mut self) {
        self.losses += 1;
        self.skip = getrandom::u64().unwrap_or(0) % (self.losses + 1);
    }

    /// Returns whether to pass over `id`, the best ready task now (held back on `board`).
    fn passes(&mut self, board: &mut Board, id: &crate::model::TaskId) -> bool {
        if self.skip == 0 {
            return false;
        }
        self.skip -= 1;
        self.passed.push(id.clone());
        board.claimed.push(id.clone());
        true
    }

    /// Puts the tasks passed over back on `board`: nothing else was left.
    fn take_back(&mut self, board: &mut Board) {
        board.claimed.retain(|id| !self.passed.contains(id));
        self.passed.clear();
        self.skip = 0;
    }
}
