//! Task files a pass left where they were because a file operation on them failed (the file
//! is immutable or unreadable, its folder is on another mount, the disk is full): the pass
//! goes on without them, and the tick records them in `.git/coord/skipped.json` so `status`
//! and `doctor` can name them until a tick moves them. Does I/O (that one file).

use super::{io_err, Session, StoreError};
use crate::board::Problem;
use crate::fsx::write_private;
use std::collections::BTreeMap;
use std::fs;

const SKIPPED_FILE: &str = "skipped.json";

impl Session<'_> {
    /// Remembers, for the rest of this run, that a file operation on the task file at `path`
    /// failed with `why`: later loads read it as unreadable, so plans leave it alone.
    pub(super) fn skip_file(&self, path: &str, why: &str) {
        self.skipped
            .borrow_mut()
            .insert(path.to_string(), why.to_string());
    }

    /// Returns how many task files this run skipped after a failed file operation.
    pub fn skipped_count(&self) -> usize {
        self.skipped.borrow().len()
    }

    /// Returns the first file this run skipped and why, if any.
    pub fn first_skipped(&self) -> Option<(String, String)> {
        let skipped = self.skipped.borrow();
        skipped.iter().next().map(|(p, w)| (p.clone(), w.clone()))
    }

    /// Returns why this run skipped a file of task `id` (a file named `<id>.yaml` or
    /// `<id>.yml`), if it did.
    pub(super) fn skipped_task(&self, id: &str) -> Option<String> {
        let named = |path: &str| {
            let name = path.rsplit('/').next().unwrap_or(path);
            name.strip_suffix(".yaml")
                .or_else(|| name.strip_suffix(".yml"))
                == Some(id)
        };
        let skipped = self.skipped.borrow();
        skipped
            .iter()
            .find(|(p, _)| named(p))
            .map(|(p, why)| format!("{p} was left where it is ({why})"))
    }

    /// Returns why this run skipped the task file at `path`, if it did.
    pub(super) fn skipped_because(&self, path: &str) -> Option<String> {
        self.skipped.borrow().get(path).cloned()
    }

    /// Records the files this run skipped as the tick's findings (removing the record when
    /// there are none), for `status` and `doctor`.
    pub fn save_skipped(&self) -> Result<(), StoreError> {
        let path = self.private_dir().join(SKIPPED_FILE);
        let skipped = self.skipped.borrow();
        if skipped.is_empty() {
            return match fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err(&path)(e)),
                _ => Ok(()),
            };
        }
        let text = serde_json::to_vec_pretty(&*skipped).unwrap_or_default();
        write_private(&path, &text, false).map_err(io_err(&path))
    }

    /// Returns a problem for each task file the last tick skipped that is still there.
    pub(super) fn skipped_problems(&self, present: &dyn Fn(&str) -> bool) -> Vec<Problem> {
        let recorded: BTreeMap<String, String> =
            crate::fsx::read_private(&self.private_dir().join(SKIPPED_FILE))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default();
        recorded
            .into_iter()
            .filter(|(path, _)| present(path))
            .map(|(path, why)| Problem {
                path,
                message: format!(
                    "left where it is by the last tick: {why}; fix the file or its folder \
                     (permissions, immutable flag, mount, free space), the next tick retries it"
                ),
            })
            .collect()
    }
}
