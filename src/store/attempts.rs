//! Attempt high-water marks (docs/security.md): the highest attempt coord ever granted per task,
//! read
//! from the assignment commits in HEAD's history (`git::Repo::granted_attempts`), so a revert
//! or a hand edit of a `coord:` block never lets an attempt number be granted twice. Kept in
//! `.git/coord/attempt-marks.json` with the HEAD they were read at, so a command reads only
//! the commits since (all of history again when HEAD moved to a commit that does not descend
//! from it); deleting the file is always safe. A shallow clone (the workflow's `fetch-depth:
//! 1`) does not hold the assignment commits below its boundary: before it numbers an attempt,
//! it fetches the rest of the history once, the way the command gave it
//! ([`Session::deepen_with`]; sync does), else from the remote its branch tracks (a plain
//! tick). Does I/O (git, `.git/coord/`).

use super::Session;
use crate::fsx;
use crate::model::{CoordBlock, TaskId};
use crate::yaml::{parse_bytes, Limits};
use std::collections::BTreeMap;

const FILE: &str = "attempt-marks.json";

/// The marks as last read, with the HEAD they were read at.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct Marks {
    head: Option<String>,
    marks: BTreeMap<String, u32>,
    /// Set once a fetch deepened the clone: the next read walks a repository opened again.
    #[serde(skip)]
    deepened: bool,
}

/// Fetches the history a shallow clone lacks; true when it did.
pub type Deepen = Box<dyn FnOnce() -> bool + Send>;

impl crate::engine::AttemptFloor for Session<'_> {
    fn floor(&self, id: &TaskId) -> u32 {
        self.deepen_once();
        self.refresh_marks();
        self.marks
            .borrow()
            .as_ref()
            .and_then(|m| m.marks.get(id.as_str()).copied())
            .unwrap_or(0)
    }
}

impl Session<'_> {
    /// Gives this store a way to fetch the history a shallow clone lacks, used once, the
    /// first time an attempt is numbered in a shallow clone.
    pub fn deepen_with(&self, deepen: Deepen) {
        *self.deepen.borrow_mut() = Some(Some(deepen));
    }

    /// In a shallow clone, fetches the missing history (once) and reads the marks again from
    /// all of it.
    pub(super) fn deepen_once(&self) {
        if !self.repo.is_shallow() {
            return;
        }
        let Some(given) = self.deepen.borrow_mut().take() else {
            return;
        };
        let deepened = match given {
            Some(deepen) => deepen(),
            None => self.repo.unshallow(),
        };
        if deepened {
            *self.marks.borrow_mut() = Some(Marks {
                deepened: true,
                ..Marks::default()
            });
        }
    }

    /// Brings the marks up to HEAD: from memory, else from the file, plus the commits since.
    /// A failure to read history keeps what is known (the file's marks).
    fn refresh_marks(&self) {
        let head = self
            .repo
            .head()
            .ok()
            .and_then(|h| h.oid)
            .map(|o| o.to_string());
        let mut cell = self.marks.borrow_mut();
        if cell.as_ref().is_some_and(|m| m.head == head) {
            return;
        }
        let path = self.private_dir().join(FILE);
        let mut known = cell.take().unwrap_or_else(|| {
            crate::fsx::read_private(&path)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default()
        });
        let assigned = format!("{}/assigned", self.config.work_dir);
        let read = self
            .repo
            .granted_attempts(&assigned, known.head.as_deref(), known.deepened);
        known.deepened = false;
        if let Ok(granted) = read {
            if !granted.incremental {
                known.marks.clear();
            }
            for (id, bytes) in granted.files {
                let attempt = attempt_in(&bytes);
                let mark = known.marks.entry(id).or_default();
                *mark = (*mark).max(attempt);
            }
            known.head = granted.head;
            if let Ok(bytes) = serde_json::to_vec(&known) {
                let _ = fsx::write_private(&path, &bytes, false);
            }
        }
        *cell = Some(known);
    }
}

/// Returns `coord.attempt` of a task file's bytes (0 when it does not read).
fn attempt_in(bytes: &[u8]) -> u32 {
    parse_bytes(bytes, &Limits::default())
        .map(|doc| CoordBlock::from_value(doc.value.get("coord")).attempt)
        .unwrap_or(0)
}
