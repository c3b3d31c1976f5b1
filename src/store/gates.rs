//! The answers to the gates of waiting tasks that need the repository (`wait_for`,
//! docs/files.md): refs, merges and paths, read from the local refs when the planner asks.
//! Does I/O (git).

use super::Store;
use crate::model::gate::{Gate, GateAnswers};

impl GateAnswers for Store {
    fn open(&self, gate: &Gate) -> Option<bool> {
        match gate {
            Gate::Time(_) => None,
            Gate::Ref(name) => Some(self.repo.ref_commit(name).is_some()),
            Gate::Merged { reference, into } => self.repo.is_merged(reference, into),
            Gate::Path { branch, path } => self.repo.path_at(branch, path),
        }
    }
}
