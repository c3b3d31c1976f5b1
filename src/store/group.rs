//! Group commits: the commands a session applies between [`Session::begin_group`] and
//! [`Session::commit_group`] are carried out on disk one after another, each planned from
//! the files the ones before it left, and recorded in ONE commit after one sync of the
//! folders they changed (what a hub does with the writes that queued up while it committed
//! the last group). The journal holds every transition of the group until its commit, so a
//! run killed midway is finished by the next one, as a plan of its own would be.

use super::apply::{with_op_id, Applied, Resume, CURSOR, JOURNAL};
use super::{io_err, Session, StoreError};
use crate::engine::Transition;
use crate::fsx::write_private;
use jiff::Timestamp;
use std::collections::BTreeSet;

/// The state of a group being gathered.
#[derive(Default)]
pub(crate) struct Grouped {
    /// The transitions carried out so far, in order: the group's commit.
    done: Vec<Transition>,
    /// A plan whose file operations failed midway (left in the journal for the next run to
    /// finish, as a plan of its own would be): nothing more joins the group.
    broken: Option<Vec<Transition>>,
}

impl Session<'_> {
    /// Starts gathering a group commit: until [`Session::commit_group`], the commands' plans
    /// this session applies are carried out on disk and committed together.
    pub fn begin_group(&self) {
        *self.grouped.borrow_mut() = Some(Grouped::default());
        *self.unsynced.borrow_mut() = Some(BTreeSet::new());
    }

    /// Returns whether a plan of the group failed midway: then nothing more may join it.
    pub fn group_broken(&self) -> bool {
        self.grouped
            .borrow()
            .as_ref()
            .is_some_and(|g| g.broken.is_some())
    }

    /// Returns whether the group gathered so far wrote `path` (repo-relative): its bytes
    /// there are coord's own, not yet committed.
    pub fn group_wrote(&self, path: &str) -> bool {
        self.grouped
            .borrow()
            .as_ref()
            .is_some_and(|g| g.done.iter().any(|t| t.paths().iter().any(|p| p == path)))
    }

    /// Ends the group: syncs every folder its plans changed, once each, commits every
    /// transition done in one commit, and clears the journal (a plan that failed midway
    /// stays in it, for the next run to finish). Returns the transitions committed.
    pub fn commit_group(&self, now: Timestamp) -> Result<usize, StoreError> {
        let group = self.grouped.borrow_mut().take().unwrap_or_default();
        self.sync_group()?;
        if !group.done.is_empty() {
            let done: Vec<&Transition> = group.done.iter().collect();
            self.commit(&done, now, super::Origin::Command)?;
        }
        match &group.broken {
            None => self.clear_journal()?,
            Some(rest) => self.journal(&[], rest)?,
        }
        Ok(group.done.len())
    }

    /// Applies a command's plan in the group: journaled after the group's transitions done
    /// so far, carried out on disk up to the first file operation that failed; calls `each`
    /// with every outcome.
    pub(super) fn apply_in_group(
        &self,
        plan: &[&Transition],
        each: &mut dyn FnMut(&Transition, Applied),
    ) -> Result<(), StoreError> {
        if plan.is_empty() {
            return Ok(());
        }
        self.hold_index()?;
        let plan = with_op_id(plan);
        let mut group = self.grouped.borrow_mut().take().unwrap_or_default();
        let ran = self.run_in_group(&mut group, &plan, each);
        if ran.is_err() {
            group.broken = Some(plan);
        }
        *self.grouped.borrow_mut() = Some(group);
        ran
    }

    fn run_in_group(
        &self,
        group: &mut Grouped,
        plan: &[Transition],
        each: &mut dyn FnMut(&Transition, Applied),
    ) -> Result<(), StoreError> {
        self.journal(&group.done, plan)?;
        for (t, applied) in self.run_group(plan, Resume::No)? {
            if matches!(applied, Applied::Committed | Applied::LeftAsFound(_)) {
                group.done.push(t.clone());
            }
            each(t, applied);
        }
        self.journal(&group.done, &[])
    }

    /// Writes the journal: the group's transitions done, then the plan under way.
    fn journal(&self, done: &[Transition], plan: &[Transition]) -> Result<(), StoreError> {
        let journal = self.private_dir().join(JOURNAL);
        let cursor = self.private_dir().join(CURSOR);
        let all: Vec<&Transition> = done.iter().chain(plan).collect();
        let text = serde_json::to_vec(&all).unwrap_or_default();
        write_private(&cursor, b"0", false).map_err(io_err(&cursor))?;
        write_private(&journal, &text, false).map_err(io_err(&journal))
    }
}
