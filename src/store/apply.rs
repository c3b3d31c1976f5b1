//! Carrying out transitions: each is written to a journal under `.git/coord/` first, its file
//! operations are idempotent, and it ends in one commit of exactly the touched paths. After a
//! crash, `recover` finishes the journaled transition, removes temp files, and commits what
//! people changed under `work/` as `coord: record external changes`.

use super::fsutil::{rename_noreplace, write_atomic, TEMP_SUFFIX};
use super::{io_err, Store, StoreError};
use crate::board::content_hash;
use crate::engine::{Op, Transition};
use jiff::Timestamp;
use std::fs;
use std::io::ErrorKind;

const JOURNAL: &str = "journal.json";

/// What happened to one transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Done and committed.
    Committed,
    /// A file changed since the plan was made; left for the next tick.
    Skipped,
}

impl Store {
    /// Applies one transition and commits it.
    pub fn apply(&self, t: &Transition, now: Timestamp) -> Result<Applied, StoreError> {
        if !self.guard_holds(t) {
            return Ok(Applied::Skipped);
        }
        let journal = self.private_dir().join(JOURNAL);
        let text = serde_json::to_vec(t).unwrap_or_default();
        write_atomic(&journal, &text).map_err(io_err(&journal))?;
        self.run_ops(t)?;
        self.commit(t, now)?;
        fs::remove_file(&journal).map_err(io_err(&journal))?;
        Ok(Applied::Committed)
    }

    fn guard_holds(&self, t: &Transition) -> bool {
        t.guard
            .iter()
            .all(|(path, hash)| fs::read(self.abs(path)).is_ok_and(|b| content_hash(&b) == *hash))
    }

    fn run_ops(&self, t: &Transition) -> Result<(), StoreError> {
        for op in &t.ops {
            match op {
                Op::Move { from, to } => self.do_move(from, to)?,
                Op::Write { path, text } => {
                    let p = self.abs(path);
                    let same = fs::read(&p).is_ok_and(|b| b == text.as_bytes());
                    if !same {
                        write_atomic(&p, text.as_bytes()).map_err(io_err(&p))?;
                    }
                }
                Op::Remove { path } => {
                    let p = self.abs(path);
                    match fs::remove_file(&p) {
                        Err(e) if e.kind() != ErrorKind::NotFound => return Err(io_err(&p)(e)),
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }

    /// Moves a file unless the move already happened (recovery).
    fn do_move(&self, from: &str, to: &str) -> Result<(), StoreError> {
        let (src, dst) = (self.abs(from), self.abs(to));
        if src.symlink_metadata().is_err() && dst.symlink_metadata().is_ok() {
            return Ok(());
        }
        rename_noreplace(&src, &dst).map_err(io_err(&dst))
    }

    fn commit(&self, t: &Transition, now: Timestamp) -> Result<(), StoreError> {
        let paths = t.paths();
        let mut message = t.message();
        if self.tick_commits.get() {
            message.push_str(super::TICK_TRAILER);
            message.push('\n');
        }
        self.repo
            .commit_paths_no_index(&paths, &message, &self.identity, now)?;
        self.touched.borrow_mut().extend(paths);
        Ok(())
    }

    /// Brings the index in line for every path committed since the last call.
    pub fn finish(&self) -> Result<(), StoreError> {
        let mut touched = self.touched.borrow_mut();
        if !touched.is_empty() {
            touched.sort();
            touched.dedup();
            self.repo.update_index(&touched)?;
            touched.clear();
        }
        Ok(())
    }

    /// Finishes what an interrupted run left: the journaled transition, temp files, and
    /// uncommitted changes under `work/`. Returns the summaries of the commits it made.
    pub fn recover(&self, now: Timestamp) -> Result<Vec<String>, StoreError> {
        let mut done = Vec::new();
        self.remove_temp_files()?;
        let journal = self.private_dir().join(JOURNAL);
        match fs::read(&journal) {
            Ok(bytes) => {
                let t: Transition =
                    serde_json::from_slice(&bytes).map_err(|e| StoreError::Journal {
                        path: journal.clone(),
                        message: e.to_string(),
                    })?;
                self.run_ops(&t)?;
                self.commit(&t, now)?;
                fs::remove_file(&journal).map_err(io_err(&journal))?;
                done.push(format!("finished interrupted: {}", t.summary));
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&journal)(e)),
        }
        if let Some(n) = self.record_external(now)? {
            done.push(format!("record external changes ({n} paths)"));
        }
        self.finish()?;
        Ok(done)
    }

    /// Commits uncommitted changes under `work/` as `coord: record external changes`.
    fn record_external(&self, now: Timestamp) -> Result<Option<usize>, StoreError> {
        let prefix = format!("{}/", self.work_dir());
        let changed: Vec<String> = self
            .repo
            .changed_paths(&prefix)?
            .into_iter()
            .filter(|p| !p.ends_with(TEMP_SUFFIX))
            .filter(|p| {
                !self
                    .abs(p)
                    .symlink_metadata()
                    .is_ok_and(|m| m.file_type().is_symlink())
            })
            .collect();
        if changed.is_empty() {
            return Ok(None);
        }
        let mut message = String::from("coord: record external changes\n\n");
        for p in &changed {
            message.push_str(&format!("  {}\n", crate::redact::one_line(p)));
        }
        let made = self
            .repo
            .commit_paths_no_index(&changed, &message, &self.identity, now)?;
        self.touched.borrow_mut().extend(changed.iter().cloned());
        Ok(made.map(|_| changed.len()))
    }

    fn remove_temp_files(&self) -> Result<(), StoreError> {
        let work = self.abs(self.work_dir());
        let mut stack = vec![work];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.filter_map(Result::ok) {
                let ft = e.file_type().map_err(io_err(&e.path()))?;
                if ft.is_dir() {
                    stack.push(e.path());
                } else if e.file_name().to_string_lossy().ends_with(TEMP_SUFFIX) {
                    fs::remove_file(e.path()).map_err(io_err(&e.path()))?;
                }
            }
        }
        Ok(())
    }
}
