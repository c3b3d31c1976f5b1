//! One operation's state over an opened [`Store`]: what a session walked, loaded, committed and
//! skipped, git's index lock while it holds it, when it packs, and the coordinator lock when it
//! took one. [`Store::session`] starts one; the load, record and apply methods live on it
//! (load.rs, apply.rs, clean.rs); [`Session::finish`] ends it, consuming it.

use super::apply::Packing;
use super::load::PendingHistory;
use super::walk::Walk;
use super::{attempts, clean, sightings, Store, StoreError, INBOX_WINDOW};
use crate::lock::CoordLock;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

/// One operation over a store. The planner reads it through shared references while the
/// same pass applies (`engine::Inputs` borrows it), so its state sits in cells; a session is
/// never shared between threads or operations.
#[must_use = "a session holds the coordinator lock until it is finished or dropped"]
pub struct Session<'s> {
    store: &'s Store,
    /// The paths committed since git's index was last written for them.
    pub(super) touched: RefCell<Vec<String>>,
    /// From a recording that found `work/` clean to the end of the operation: what the
    /// vouch it leaves for the next one is made from (`clean::Base`).
    pub(super) base: RefCell<Option<clean::Base>>,
    /// The walk the session's recording was checked against, for its load.
    pub(super) kept_walk: RefCell<Option<Walk>>,
    /// The history-folder record the last walk made, saved only once a recording of people's
    /// changes has shown which of its folders hold none ([`Session::record_external_changes`]).
    pub(super) history: RefCell<Option<PendingHistory>>,
    /// git's index lock, held from the first commit of `touched` until the index is written
    /// for them.
    pub(super) index_hold: RefCell<Option<crate::git::IndexHold>>,
    /// The number of files in the fullest folder of `work/` at the last walk: a big plan's
    /// commits are sized by it.
    pub(super) fullest: Cell<usize>,
    /// How many inbox files one window of a tick takes ([`INBOX_WINDOW`]; smaller in tests).
    pub(super) inbox_window: Cell<usize>,
    /// When writing the index packs the loose objects.
    pub(super) packing: Cell<Packing>,
    /// While a group of transitions is applied: the folders its writes and moves changed,
    /// synced once each before its commit instead of after every rename.
    pub(super) unsynced: RefCell<Option<BTreeSet<String>>>,
    /// While the session gathers a group commit ([`Session::begin_group`]): the transitions
    /// done so far, and whether a plan's file operations failed midway.
    pub(super) grouped: RefCell<Option<super::group::Grouped>>,
    /// Task files this session left where they were after a file operation on them failed.
    pub(super) skipped: RefCell<BTreeMap<String, String>>,
    /// The task files (repo-relative) the last recording of people's changes held back as
    /// still being written, deletions held with a move's new file included.
    pub(super) held_back: RefCell<Vec<String>>,
    /// The attempt high-water marks read so far (HEAD may move between two plans).
    pub(super) marks: RefCell<Option<attempts::Marks>>,
    /// The sightings of deadlines as read or last recorded.
    pub(super) sightings: RefCell<Option<sightings::Record>>,
    /// The way to deepen a shallow clone, until it was used: a command's own (sync's), else
    /// the repository's (a fetch from the remote its branch tracks).
    pub(super) deepen: RefCell<Option<Option<attempts::Deepen>>>,
    /// The coordinator lock, when the operation took it: released when the session ends,
    /// after git's index lock (fields drop in order).
    lock: Option<CoordLock>,
}

impl Store {
    /// Starts an operation's session: holding `lock` (the coordinator lock) for one that
    /// writes, without it for one that only reads.
    pub fn session(&self, lock: Option<CoordLock>) -> Session<'_> {
        Session {
            store: self,
            lock,
            touched: RefCell::default(),
            base: RefCell::default(),
            kept_walk: RefCell::default(),
            history: RefCell::default(),
            index_hold: RefCell::default(),
            fullest: Cell::new(0),
            inbox_window: Cell::new(INBOX_WINDOW),
            packing: Cell::default(),
            unsynced: RefCell::default(),
            grouped: RefCell::default(),
            skipped: RefCell::default(),
            held_back: RefCell::default(),
            marks: RefCell::new(None),
            sightings: RefCell::new(None),
            deepen: RefCell::new(Some(None)),
        }
    }
}

impl Session<'_> {
    /// Returns the store under the session.
    pub fn store(&self) -> &Store {
        self.store
    }

    /// Returns whether the coordinator lock's previous holder was killed.
    pub fn previous_killed(&self) -> bool {
        self.lock.as_ref().is_some_and(CoordLock::previous_killed)
    }

    /// Ends the session: brings git's index in line for every path it committed, then lets
    /// go of git's index lock and of the coordinator lock.
    pub fn finish(self) -> Result<(), StoreError> {
        self.write_index()
    }
}

impl std::ops::Deref for Session<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.store
    }
}
