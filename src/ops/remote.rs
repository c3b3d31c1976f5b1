//! Running a step of an agent command under the lock: here, or against a remote (`--sync
//! [REMOTE]` or `sync.remote` in coord.yaml) — fetch, act on the remote's tip, push, and
//! succeed only once the push landed; a rejected push undoes the step and redoes it on the
//! newer tip. The fetch, replay and push live in [`crate::sync`].

use super::{Coord, Error, Event, AGENT_WAIT};
use crate::store::Session;
use crate::sync::{self, SyncError, TickError};

/// How many times a step is redone after a rejected push before giving up.
const RETRIES: u32 = 30;

/// A step: acts on the store it is given (the lock held) and returns its commits.
pub(crate) type Step<'s> = dyn FnMut(&Session<'_>) -> Result<usize, Error> + 's;

impl Coord {
    /// Returns the remote an agent command syncs with: `flag` when given, else `sync.remote`
    /// of coord.yaml; None to act here only (always, when opened [`super::Options::local`]).
    pub fn remote<'a>(&'a self, flag: Option<&'a str>) -> Option<&'a str> {
        if self.local {
            return None;
        }
        flag.or(self.store.config.sync.remote.as_deref())
    }

    /// Runs a `coord sync` with `remote` now: what the next sync would do for a step left in
    /// this clone (a sync here committed while its push ran), replayed by the sync's rules.
    pub(crate) fn sync_now(&self, remote: &str) -> Result<(), Error> {
        self.sync(&self.step_options(remote, false)).map(drop)
    }

    /// The sync options of an agent's step on `remote`: `redo_on_reject` redoes the step on
    /// the remote's newer tip when its push is rejected.
    fn step_options(&self, remote: &str, redo_on_reject: bool) -> sync::Options {
        sync::Options {
            remote: remote.to_string(),
            branch: None,
            max_retries: RETRIES,
            wait: self.wait.unwrap_or(AGENT_WAIT),
            now: self.now,
            redo_on_reject,
            drop_edits: Vec::new(),
            with_ref: None,
            ticks: sync::Ticks::Redo,
        }
    }

    /// Runs `step` under the lock after recording people's changes: on this repository, or on
    /// the tip of `remote` and pushed there (redone after each rejected push). The step's own
    /// error comes back as it was.
    pub(crate) fn run_step(&self, remote: Option<&str>, step: &mut Step<'_>) -> Result<(), Error> {
        let Some(remote) = remote else {
            let session = self.session(AGENT_WAIT)?;
            step(&session)?;
            return Ok(session.finish()?);
        };
        let opts = self.step_options(remote, true);
        let mut boxed = |store: &Session<'_>| step(store).map_err(|e| Box::new(e) as TickError);
        let mut say = |line: &str| self.emit(Event::Status(line));
        match sync::run(self.store.root(), &opts, &mut boxed, &mut say) {
            Ok(_) => Ok(()),
            Err(SyncError::Tick(e)) => Err(match e.downcast::<Error>() {
                Ok(e) => *e,
                Err(e) => Error::Sync(SyncError::Tick(e)),
            }),
            Err(e) => Err(e.into()),
        }
    }
}
