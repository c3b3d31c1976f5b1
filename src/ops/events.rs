//! The clone's event journal in `.git/coord/events/`: every event published to listeners
//! (`/v1/events`) with its id, and how far along the branch's history it has read.
//!
//! An event id is the position of the event in this journal: 1 for the first transition the
//! clone published, then one more per event, kept across restarts. Each event names the commit
//! that records it. When HEAD moves, the journal reads the transitions of the commits between
//! the position it last read and HEAD (from their merge base on both sides) and publishes
//! only the transitions HEAD's side adds that the other side does not also hold: a
//! transition is the task, where it started and where it ended, so a commit rewritten to an
//! equivalent one (`commit --amend`, a rebase, a sync's replay, a force-push) publishes
//! nothing again, and a reset publishes nothing. The first reading of a clone publishes
//! nothing: it only marks where the journal starts. Does I/O under `.git/coord/events/` and
//! reads git history.

use super::LogEntry;
use crate::git::{GitError, Oid, Repo};
use serde_json::Value;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Errors of reading or writing the journal.
#[derive(thiserror::Error, Debug)]
pub enum JournalError {
    /// A file of the journal could not be read or written.
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What the OS reported.
        #[source]
        source: io::Error,
    },
    /// History could not be read.
    #[error("{0}")]
    Git(#[from] GitError),
}

/// One published event as the journal keeps it (a line of `log.jsonl`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Logged {
    /// Its position in the journal, from 1.
    pub id: u64,
    /// The transition, as `/v1/events` sends it.
    pub data: Value,
}

/// How far the journal has read (`mark.json`): HEAD's commit, the last id, and the length of
/// the log when that id was written (a longer log holds lines a killed writer left).
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
struct Mark {
    head: Option<String>,
    last: u64,
    bytes: u64,
}

/// The transitions between two positions of the branch, oldest first on each side.
#[derive(Debug, Default, Clone)]
pub struct Change {
    /// The transitions of the commits only the new position holds.
    pub added: Vec<LogEntry>,
    /// The transitions of the commits only the old position held (a reset, a rewrite).
    pub removed: Vec<LogEntry>,
}

/// What makes two transitions the same one: the task, where it started and where it ended
/// (not the commit, which a rewrite changes, nor the operation, which a person who rewrites
/// coord's commit without its trailers drops).
type Key = (String, String, String);

fn key(e: &LogEntry) -> Key {
    let end = |p: &Option<crate::model::Endpoint>| p.map_or_else(String::new, |p| p.to_string());
    (e.subject.clone(), end(&e.from), end(&e.to))
}

impl Change {
    /// Returns the transitions of [`Change::added`] that have no equivalent in
    /// [`Change::removed`]: the ones that really happened, each once.
    pub fn real(&self) -> Vec<&LogEntry> {
        let mut gone: HashMap<Key, usize> = HashMap::new();
        for e in &self.removed {
            *gone.entry(key(e)).or_default() += 1;
        }
        self.added
            .iter()
            .filter(|e| match gone.get_mut(&key(e)) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    false
                }
                _ => true,
            })
            .collect()
    }

    /// Returns the tasks the change concerns, on either side.
    pub fn subjects(&self) -> impl Iterator<Item = &str> {
        self.added
            .iter()
            .chain(&self.removed)
            .map(|e| e.subject.as_str())
    }
}

/// Returns the transitions between the branch at `old` and at `new` (either None: an unborn
/// branch); None when `old` is no longer in the repository (garbage-collected after a reset).
pub fn change(
    repo: &Repo,
    work_dir: &str,
    old: Option<Oid>,
    new: Option<Oid>,
) -> Result<Option<Change>, GitError> {
    if old == new {
        return Ok(Some(Change::default()));
    }
    if old.is_some_and(|o| !repo.has_commit(o)) {
        return Ok(None);
    }
    let base = match (old, new) {
        (Some(o), Some(n)) => repo.merge_base(o, n)?,
        _ => None,
    };
    let side = |tip: Option<Oid>| match tip {
        Some(tip) => transitions(repo, work_dir, tip, base),
        None => Ok(Vec::new()),
    };
    Ok(Some(Change {
        added: side(new)?,
        removed: side(old)?,
    }))
}

/// Returns the transitions of the commits reachable from `tip` and not from `base`, oldest
/// first: coord's from their trailers, a person's from the task files their commit moved;
/// none for a heartbeat, a result written or coord adopting a file a person moved.
fn transitions(
    repo: &Repo,
    work_dir: &str,
    tip: Oid,
    base: Option<Oid>,
) -> Result<Vec<LogEntry>, GitError> {
    let mut found = Vec::new();
    for c in repo.log_range(tip, base)? {
        let mut entries = LogEntry::all(&c);
        if entries.is_empty() && !LogEntry::is_coords(&c) {
            entries = LogEntry::moves(&c, &repo.touched(&c.oid, work_dir)?, work_dir);
        }
        found.extend(entries.into_iter().filter(|e| !e.is_noise()));
    }
    found.reverse();
    Ok(found)
}

/// The journal of one clone.
#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
}

impl Journal {
    /// The journal of the clone whose git directory is `git_dir` (nothing is read yet).
    pub fn open(git_dir: &Path) -> Journal {
        Journal {
            dir: git_dir.join("coord").join("events"),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn io(&self, what: &'static str, name: &str) -> impl FnOnce(io::Error) -> JournalError {
        let path = self.path(name);
        move |source| JournalError::Io { what, path, source }
    }

    /// Returns the mark, None before the first reading.
    fn mark(&self) -> Option<Mark> {
        let bytes = crate::fsx::read_private(&self.path("mark.json")).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Returns the id of the last event published.
    pub fn last(&self) -> u64 {
        self.mark().map_or(0, |m| m.last)
    }

    /// Returns the commit the journal last read up to and the id of the last event, None
    /// before the first reading.
    pub fn position(&self) -> Option<(Option<String>, u64)> {
        self.mark().map(|m| (m.head, m.last))
    }

    /// Starts a journal that has no reading yet at `head`, with `last` as the last id given,
    /// so that the next reading publishes what follows `head` from id `last + 1` (a fresh
    /// clone going on from where another clone's journal stood); returns whether it did.
    pub fn seed(&self, head: Oid, last: u64) -> Result<bool, JournalError> {
        std::fs::create_dir_all(&self.dir).map_err(self.io("create", ""))?;
        let lock = File::create(self.path("lock")).map_err(self.io("create", "lock"))?;
        lock.lock().map_err(self.io("lock", "lock"))?;
        if self.mark().is_some() {
            return Ok(false);
        }
        let bytes = self.append(0, &[])?;
        let mark = Mark {
            head: Some(head.to_string()),
            last,
            bytes,
        };
        let text = serde_json::to_vec(&mark).unwrap_or_default();
        crate::fsx::write_private(&self.path("mark.json"), &text, true)
            .map_err(self.io("write", "mark.json"))?;
        Ok(true)
    }

    /// Reads history up to `head` (the branch's tip as the caller read it) and publishes
    /// what it adds since the last reading, then `loose` (changes no commit records), each
    /// with the next id; returns the events it published. One caller at a time per clone
    /// (an OS lock on `lock`); a caller killed midway publishes nothing.
    pub fn record(
        &self,
        repo: &Repo,
        work_dir: &str,
        head: Option<Oid>,
        loose: Vec<Value>,
    ) -> Result<Vec<Logged>, JournalError> {
        std::fs::create_dir_all(&self.dir).map_err(self.io("create", ""))?;
        let lock = File::create(self.path("lock")).map_err(self.io("create", "lock"))?;
        lock.lock().map_err(self.io("lock", "lock"))?;
        let mark = self.mark();
        let first = mark.is_none();
        let at = mark.as_ref().map(|m| m.head.as_ref().map(|h| h.parse()));
        let mut fresh: Vec<Value> = match at {
            // A clone's first reading only marks where its journal starts.
            None | Some(Some(Err(_))) => Vec::new(),
            Some(old) => {
                let old = old.and_then(Result::ok);
                let change = change(repo, work_dir, old, head)?.unwrap_or_default();
                change
                    .real()
                    .into_iter()
                    .map(|e| serde_json::json!(e))
                    .collect()
            }
        };
        fresh.extend(loose);
        let mark = mark.unwrap_or_default();
        let head_hex = head.map(|h| h.to_string());
        if fresh.is_empty() && !first && mark.head == head_hex {
            return Ok(Vec::new());
        }
        let logged: Vec<Logged> = (mark.last + 1..)
            .zip(fresh)
            .map(|(id, data)| Logged { id, data })
            .collect();
        let bytes = self.append(mark.bytes, &logged)?;
        let next = Mark {
            head: head_hex,
            last: logged.last().map_or(mark.last, |l| l.id),
            bytes,
        };
        let text = serde_json::to_vec(&next).unwrap_or_default();
        crate::fsx::write_private(&self.path("mark.json"), &text, true)
            .map_err(self.io("write", "mark.json"))?;
        Ok(logged)
    }

    /// Appends `logged` to the log at `at` (dropping what a killed writer left past it);
    /// returns the log's new length.
    fn append(&self, at: u64, logged: &[Logged]) -> Result<u64, JournalError> {
        let mut log = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.path("log.jsonl"))
            .map_err(self.io("open", "log.jsonl"))?;
        log.set_len(at).map_err(self.io("trim", "log.jsonl"))?;
        let mut text = Vec::new();
        for l in logged {
            serde_json::to_writer(&mut text, l).unwrap_or_default();
            text.push(b'\n');
        }
        use std::io::Seek;
        log.seek(io::SeekFrom::Start(at))
            .and_then(|_| log.write_all(&text))
            .and_then(|_| log.sync_data())
            .map_err(self.io("write", "log.jsonl"))?;
        Ok(at + text.len() as u64)
    }

    /// Returns the events published after id `after`, oldest first.
    pub fn after(&self, after: u64) -> Result<Vec<Logged>, JournalError> {
        let Some(mark) = self.mark().filter(|m| m.last > after) else {
            return Ok(Vec::new());
        };
        let text = crate::fsx::read_private(&self.path("log.jsonl"))
            .map_err(self.io("read", "log.jsonl"))?;
        let end = usize::try_from(mark.bytes)
            .unwrap_or(usize::MAX)
            .min(text.len());
        Ok(text[..end]
            .split(|&b| b == b'\n')
            .filter_map(|line| serde_json::from_slice::<Logged>(line).ok())
            .filter(|l| l.id > after && l.id <= mark.last)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{Coord, Options, Setup};

    fn tick_with(dir: &Path, opts: &Options, id: &str) {
        let task = format!("title: {id}\nagent: alice\n");
        std::fs::write(dir.join(format!("work/inbox/{id}.yaml")), task).expect("task");
        Coord::open(dir, opts.clone())
            .expect("open")
            .tick()
            .expect("tick");
    }

    #[test]
    fn a_record_cut_short_by_a_kill_is_dropped_and_ids_go_on() {
        let t = tempfile::tempdir().expect("tempdir");
        let opts = Options {
            now: Some("2026-11-22T10:00:00Z".parse().expect("time")),
            ..Options::default()
        };
        crate::ops::init(t.path(), Setup::default(), opts.clone(), Box::new(|_| {})).expect("init");
        let config = std::fs::read_to_string(t.path().join("coord.yaml")).expect("config");
        std::fs::write(t.path().join("coord.yaml"), config + "\nsettle: 0s\n").expect("config");
        std::fs::write(t.path().join("work/agents/alice.yaml"), "max_active: 9\n").expect("agent");
        let repo = Repo::discover(t.path()).expect("repo");
        let journal = Journal::open(repo.git_dir());
        let head = |repo: &Repo| repo.head().expect("head").oid;
        assert_eq!(
            journal
                .record(&repo, "work", head(&repo), Vec::new())
                .expect("record"),
            []
        );
        tick_with(t.path(), &opts, "first");
        let first = journal
            .record(&repo, "work", head(&repo), Vec::new())
            .expect("record");
        assert!(!first.is_empty(), "the tick's transitions");
        assert_eq!(first[0].id, 1);
        // A writer killed after appending, before its mark: its lines were never published.
        let log = journal.path("log.jsonl");
        let mut text = std::fs::read(&log).expect("log");
        text.extend_from_slice(b"{\"id\":99,\"data\":{}}\n{\"id\":1");
        std::fs::write(&log, text).expect("log");
        assert_eq!(
            journal.after(0).expect("after"),
            first,
            "only what was published"
        );
        tick_with(t.path(), &opts, "second");
        let second = journal
            .record(&repo, "work", head(&repo), Vec::new())
            .expect("record");
        let last = first.last().map(|l| l.id).expect("an id");
        assert_eq!(second.first().map(|l| l.id), Some(last + 1), "ids go on");
        let all = journal.after(0).expect("after");
        assert_eq!(
            all,
            [first, second].concat(),
            "the log holds each event once"
        );
    }
}
