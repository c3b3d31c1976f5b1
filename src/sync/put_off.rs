//! The record of commits a sync's replay put off until after its tick
//! ([`super::replay::Defer::BlockedClaims`]), kept in `.git/coord/sync-put-off` from before
//! the branch moves without them until the branch holds them again, so a sync killed in
//! between loses none: the next sync replays them after its own tick. Once their replay is
//! made, its commit is written to the record before the branch moves onto it, so a sync
//! killed after that move never replays them twice. Does file I/O under `.git/coord/` only.

use crate::fsx;
use crate::git::Oid;
use crate::store::{io_err, StoreError};
use std::path::{Path, PathBuf};

/// The record, relative to the git directory.
const PATH: &str = "coord/sync-put-off";
/// Its first line: the format.
const MAGIC: &str = "coord sync put-off 1";
/// The line naming the commit that holds the replayed commits.
const MADE: &str = "made ";
/// The line naming the tip the branch moved onto without them.
const ONTO: &str = "onto ";

/// The commits put off, oldest first, and the commit their replay made, once made.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PutOff {
    /// The local commits to replay after the tick.
    pub commits: Vec<Oid>,
    /// The tip their replay made, written before the branch moves onto it.
    pub made: Option<Oid>,
    /// The tip the branch moved onto without them: a branch that no longer holds it was
    /// moved elsewhere since (a `git reset`), and what was put off is not replayed.
    pub onto: Option<Oid>,
}

fn path(git_dir: &Path) -> PathBuf {
    git_dir.join(PATH)
}

impl PutOff {
    /// Reads the record; an empty one when there is none. A record that does not read (cut
    /// short by a full disk) counts as none: its commits are lost as claims, as before.
    pub fn read(git_dir: &Path) -> PutOff {
        let text = fsx::read_private_text(&path(git_dir)).unwrap_or_default();
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) || !text.ends_with('\n') {
            return PutOff::default();
        }
        let mut out = PutOff::default();
        for line in lines {
            if let Some(made) = line.strip_prefix(MADE) {
                out.made = Oid::from_str(made).ok();
            } else if let Some(onto) = line.strip_prefix(ONTO) {
                out.onto = Oid::from_str(onto).ok();
            } else {
                out.commits.extend(Oid::from_str(line).ok());
            }
        }
        out
    }

    /// Writes the record durably (it must hold before the branch moves).
    pub fn write(&self, git_dir: &Path) -> Result<(), StoreError> {
        let mut text = format!("{MAGIC}\n");
        for oid in &self.commits {
            text.push_str(&format!("{oid}\n"));
        }
        if let Some(made) = self.made {
            text.push_str(&format!("{MADE}{made}\n"));
        }
        if let Some(onto) = self.onto {
            text.push_str(&format!("{ONTO}{onto}\n"));
        }
        let at = path(git_dir);
        fsx::write_private(&at, text.as_bytes(), true).map_err(io_err(&at))
    }

    /// Removes the record, once the branch holds what it names.
    pub fn remove(git_dir: &Path) -> Result<(), StoreError> {
        let at = path(git_dir);
        match std::fs::remove_file(&at) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err(&at)(e)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_and_one_cut_short_reads_as_none() {
        let dir = tempfile::tempdir().expect("temp dir");
        let git_dir = dir.path();
        assert_eq!(PutOff::read(git_dir), PutOff::default());
        let oid = |n: u8| Oid::from_bytes(&[n; 20]).expect("oid");
        let record = PutOff {
            commits: vec![oid(1), oid(2)],
            made: Some(oid(3)),
            onto: Some(oid(4)),
        };
        record.write(git_dir).expect("written");
        assert_eq!(PutOff::read(git_dir), record);
        let text = std::fs::read_to_string(path(git_dir)).expect("read");
        std::fs::write(path(git_dir), &text[..text.len() - 1]).expect("cut");
        assert_eq!(PutOff::read(git_dir), PutOff::default());
        PutOff::remove(git_dir).expect("removed");
        PutOff::remove(git_dir).expect("none is fine");
        assert_eq!(PutOff::read(git_dir), PutOff::default());
    }
}
