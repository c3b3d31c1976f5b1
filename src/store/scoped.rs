//! Scoped single-task commands: a command that acts on one task plans on a load of only the
//! folders it acts on (`Session::load_scoped`), records nobody's changes, and commits only
//! when every file its plan touches is exactly as committed (docs/internals.md "Single-task
//! commands read only what they act on"). Reads the touched files and the index.

use super::{Session, StoreError};
use crate::board::Board;
use crate::engine::Plan;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;

impl Session<'_> {
    /// Returns whether `plan`, made on a scoped load's `board`, may be applied as it is: no
    /// task it acts on has a copy among the files the load left unread, and every file it
    /// touches is in the work tree exactly as HEAD has it and as the index stages it (absent
    /// from all three for a file it creates), or as the group commit under way wrote it.
    /// Otherwise the command goes the whole way:
    /// people's changes recorded first, every folder read. When it may, the vouch the last
    /// operation left is carried over it (`Session::carry_vouch`).
    pub fn plan_stays_in_scope(&self, board: &Board, plan: &Plan) -> Result<bool, StoreError> {
        let copied = plan
            .transitions
            .iter()
            .any(|t| board.unread.iter().any(|id| id.as_str() == t.subject));
        if copied {
            return Ok(false);
        }
        let paths: Vec<String> = plan.transitions.iter().flat_map(|t| t.paths()).collect();
        let mut files = Vec::with_capacity(paths.len());
        // In a group commit, a file the group wrote is as coord left it, not committed yet.
        for path in paths.iter().filter(|p| !self.group_wrote(p)) {
            match self.disk_file(path) {
                Ok(found) => files.push((path.as_str(), found)),
                Err(_) => return Ok(false),
            }
        }
        let files: Vec<_> = files
            .iter()
            .map(|(p, f)| (*p, f.as_ref().map(|(b, x)| (&b[..], *x))))
            .collect();
        if !self.repo.as_committed(&files)? {
            return Ok(false);
        }
        self.carry_vouch(&paths);
        Ok(true)
    }

    /// Returns a repo-relative file's bytes and whether its owner may execute it, None when
    /// there is no file; an error for anything else (a symlink, a folder, a read error).
    fn disk_file(&self, rel: &str) -> std::io::Result<Option<(Vec<u8>, bool)>> {
        let mut file = match crate::fsx::open_read(self.root(), rel) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let executable = file.metadata()?.permissions().mode() & 0o100 != 0;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(Some((bytes, executable)))
    }
}
