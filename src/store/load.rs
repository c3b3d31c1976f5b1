//! Reading `work/` into a board: takes the files of a walk that did not change from the stat
//! cache and reads the others with the size limit, and remembers which invalid inbox files
//! were already seen.

use super::cache::{self, Hit, StatCache};
use super::clean::Listing;
use super::walk::{self, Walk};
use super::{io_err, Store, StoreError};
use crate::board::{content_hash, Board, Cached, Problem, RawFile};
use crate::yaml::Limits;
use std::collections::{BTreeMap, HashMap};
use std::fs;

const SEEN_FILE: &str = "seen-invalid.json";

/// Invalid inbox files of a load and their content hashes, to remember for the next tick.
pub type Pending = BTreeMap<String, u64>;

/// What a load found besides the board.
#[derive(Debug)]
pub struct Loaded {
    /// The invalid inbox files of this load (quarantined if still so at the next tick).
    pub pending: Pending,
    /// The invalid inbox files the previous tick remembered.
    seen: Pending,
    /// Every path the walk saw under `work/` with its stat key, for the clean mark.
    pub listing: Listing,
}

impl Store {
    /// Loads a snapshot of `work/`, taking unchanged task files outside `inbox/` from the stat
    /// cache: their text and summary, parsed only when used.
    pub fn load(&self) -> Result<(Board, Loaded), StoreError> {
        self.load_walked(self.walk_work()?)
    }

    /// Loads a snapshot of `work/` reading every file, so every document has the positions of
    /// its nodes (for reports such as `coord validate`); refreshes the stat cache.
    pub fn load_fresh(&self) -> Result<(Board, Loaded), StoreError> {
        let walked = self.walk_work()?;
        self.build(walked, StatCache::empty(self.schema_salt))
    }

    /// Walks `work/` (see [`Walk`]) without reading any file.
    pub fn walk_work(&self) -> Result<Walk, StoreError> {
        use rustix::fs::FileType;
        let work = self.abs(self.work_dir());
        match super::fsutil::file_type(self.root(), self.work_dir()) {
            Ok(Some(FileType::Directory)) => {}
            Ok(Some(FileType::Symlink)) => {
                return Err(io_err(&work)(super::fsutil::symlink_refused(
                    self.work_dir(),
                )))
            }
            Err(e) => return Err(io_err(&work)(e)),
            _ => return Err(StoreError::NoWorkDir { path: work }),
        }
        walk::walk(&work).map_err(|(p, e)| io_err(&p)(e))
    }

    /// Loads the snapshot a walk of `work/` found, as [`Store::load`].
    pub fn load_walked(&self, walked: Walk) -> Result<(Board, Loaded), StoreError> {
        let cache = StatCache::read(&self.cache_path(), self.schema_salt);
        self.build(walked, cache)
    }

    fn cache_path(&self) -> std::path::PathBuf {
        self.repo.git_dir().join(cache::PATH)
    }

    /// Reads the files of a walk (from `cache` when their key matches) into a board.
    fn build(&self, walked: Walk, mut cache: StatCache) -> Result<(Board, Loaded), StoreError> {
        let seen = self.read_seen();
        let limits = Limits::default();
        let mut missed = HashMap::new();
        let mut files = Vec::with_capacity(walked.files.len());
        for (rel, key) in walked.files {
            let hit = key.and_then(|k| cache.take(&rel, &k));
            files.push(match hit {
                Some(hit) => from_cache(rel, hit),
                None => {
                    if let Some(k) = key.filter(|_| cache::cacheable(&rel)) {
                        missed.insert(rel.clone(), k);
                    }
                    self.read_raw(rel, &limits, &seen)
                }
            });
        }
        let pending: Pending = files
            .iter()
            .filter(|f| f.cached.is_none() && f.rel.starts_with("inbox/"))
            .filter_map(|f| {
                f.bytes
                    .as_ref()
                    .ok()
                    .map(|b| (f.rel.clone(), content_hash(b)))
            })
            .collect();
        let mut board = Board::build(
            self.work_dir(),
            files,
            walked.agent_dirs,
            (&self.task_schema, &self.agent_schema),
            &limits,
        );
        let cached = (&board.tasks[..], &board.agents);
        cache.save(
            &self.cache_path(),
            cached,
            self.work_dir(),
            &missed,
            walked.listing.start(),
        );
        board
            .problems
            .extend(walked.symlinks.into_iter().map(|rel| Problem {
                path: format!("{}/{rel}", self.work_dir()),
                message:
                    "symlink refused (never followed); replace it with a regular file".to_string(),
            }));
        board.problems.sort();
        let invalid_inbox: Pending = board
            .tasks
            .iter()
            .filter(|t| t.read.is_err())
            .filter_map(|t| {
                let rel = t.path.strip_prefix(&format!("{}/", self.work_dir()))?;
                pending.get(rel).map(|h| (rel.to_string(), *h))
            })
            .collect();
        let loaded = Loaded {
            pending: invalid_inbox,
            seen,
            listing: walked.listing,
        };
        Ok((board, loaded))
    }

    /// Remembers the invalid inbox files of a tick's load, so the next tick may quarantine
    /// them; writes only when they differ from what the previous tick remembered.
    pub fn remember_pending(&self, loaded: &Loaded) -> Result<(), StoreError> {
        if loaded.pending == loaded.seen {
            return Ok(());
        }
        let path = self.private_dir().join(SEEN_FILE);
        let text = serde_json::to_string(&loaded.pending).unwrap_or_default();
        super::fsutil::write_private(&path, text.as_bytes(), false).map_err(io_err(&path))
    }

    fn read_seen(&self) -> Pending {
        fs::read(self.private_dir().join(SEEN_FILE))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }
}

/// Returns a file as the cache had it.
fn from_cache(rel: String, hit: Hit) -> RawFile {
    let (bytes, cached) = match hit.kind {
        cache::Kind::Task(summary) => {
            let task = crate::check::Task::unparsed(hit.text, summary);
            (Vec::new(), Cached::Task(task, hit.hash))
        }
        cache::Kind::Profile => (hit.text.into_bytes(), Cached::Profile),
    };
    RawFile {
        rel,
        bytes: Ok(bytes),
        seen_before: false,
        cached: Some(cached),
    }
}

impl Store {
    /// Reads one file of `work/` within the size limit, never following a symlink (one
    /// swapped in after the walk looked is refused too).
    fn read_raw(&self, rel: String, limits: &Limits, seen: &Pending) -> RawFile {
        let path = format!("{}/{rel}", self.work_dir());
        let bytes = super::fsutil::read_limited(self.root(), &path, limits.max_bytes)
            .map_err(|e| e.to_string());
        let seen_before = bytes
            .as_ref()
            .is_ok_and(|b| seen.get(&rel) == Some(&content_hash(b)));
        RawFile {
            rel,
            bytes,
            seen_before,
            cached: None,
        }
    }
}
