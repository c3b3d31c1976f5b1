//! The answers to the gates of waiting tasks that need the repository or GitHub (`wait_for`,
//! docs/files.md): refs, merges and paths, read from the local refs when the planner asks;
//! pull requests and runs, asked of `gh` (see `gh.rs`). Does I/O (git, gh).

use super::Store;
use crate::model::gate::{Gate, GateAnswers};

impl GateAnswers for Store {
    fn open(&self, gate: &Gate, now: jiff::Timestamp) -> Option<bool> {
        match gate {
            Gate::Time(_) => None,
            Gate::PrMerged(_) | Gate::RunSucceeded(_) => self.gh.open(gate, now),
            Gate::Ref(name) => Some(self.repo.ref_commit(name).is_some()),
            Gate::Merged { reference, into } => self.repo.is_merged(reference, into),
            Gate::Path { branch, path } => self.repo.path_at(branch, path),
        }
    }

    fn last_answer(&self, gate: &Gate) -> Option<String> {
        gate.asks_gh().then(|| self.gh.last_answer(gate)).flatten()
    }
}
