//! Task files renamed by hand outside the inbox. A task's id is its file name, fixed once
//! coord took the task in: tasks name it in `depends_on`, handoffs and expressions. A person's
//! uncommitted rename of such a file (`mv work/ready/a.yaml work/ready/b.yaml`, the bytes and
//! the `coord:` block kept) is undone before the change is recorded: the file goes back to its
//! id's name, in the folder it was moved to. Does I/O (the work tree, HEAD's tree).

use super::{io_err, Store, StoreError};
use crate::model::{State, TaskId};
use crate::yaml::{parse_bytes, Limits};
use serde_json::Value;
use std::fs;

/// A task file's place: its repo-relative path, folder and id.
struct Place {
    path: String,
    dir: String,
    id: TaskId,
}

impl Store {
    /// Undoes every hand rename among the `changed` paths under `prefix` (`work/`): a new task
    /// file outside the inbox whose `coord:` block is that of a task file HEAD has and the
    /// work tree lost, under another id. Returns the paths to record and one line per rename
    /// undone.
    pub(super) fn undo_renames(
        &self,
        mut changed: Vec<String>,
        prefix: &str,
    ) -> Result<(Vec<String>, Vec<String>), StoreError> {
        let (mut added, mut lost) = (Vec::new(), Vec::new());
        for p in &changed {
            let Some(place) = taken_in(p, prefix) else {
                continue;
            };
            match fs::read(self.abs(p)) {
                Ok(bytes) if !self.in_head(p) => added.push((place, coord_of(&bytes))),
                Ok(_) => {}
                Err(_) => {
                    let head = self.repo.read_head_file(p).ok().flatten();
                    lost.push((place, head.as_deref().and_then(coord_of)));
                }
            }
        }
        let mut lines = Vec::new();
        for (new, coord) in added {
            let Some(coord) = coord else { continue };
            let Some(at) = lost
                .iter()
                .position(|(old, c)| old.id != new.id && c.as_ref() == Some(&coord))
            else {
                continue;
            };
            let (old, _) = lost.remove(at);
            let back = format!("{}/{}", new.dir, file_name(&old.path));
            if self.abs(&back).symlink_metadata().is_ok() {
                continue;
            }
            fs::rename(self.abs(&new.path), self.abs(&back)).map_err(io_err(&self.abs(&back)))?;
            lines.push(format!(
                "{} is task '{}' renamed by hand: moved back to {back} (a task's id is fixed once coord took it in; to give it another, 'coord new' a task and cancel this one)",
                new.path, old.id
            ));
            changed.retain(|p| p != &new.path);
            if !changed.contains(&back) {
                changed.push(back);
            }
        }
        changed.sort();
        Ok((changed, lines))
    }

    fn in_head(&self, path: &str) -> bool {
        self.repo.read_head_file(path).is_ok_and(|f| f.is_some())
    }
}

/// Returns the place of a task file coord has taken in (any folder but `inbox/`, `invalid/`
/// and the archive).
fn taken_in(path: &str, prefix: &str) -> Option<Place> {
    let rel = path.strip_prefix(prefix)?;
    let (folder, id) = crate::board::task_at(rel)?;
    let open = !matches!(
        folder.state,
        State::Inbox | State::Invalid | State::Archived
    );
    open.then(|| Place {
        path: path.to_string(),
        dir: format!("{prefix}{}", folder.rel_dir()),
        id,
    })
}

/// Returns the `coord:` block of a task file's bytes when it has one coord wrote (with
/// `created_at`).
fn coord_of(bytes: &[u8]) -> Option<Value> {
    let doc = parse_bytes(bytes, &Limits::default()).ok()?;
    let coord = doc.value.get("coord")?;
    coord.get("created_at")?;
    Some(coord.clone())
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
