//! Reading `work/` into a board: a shallow walk that refuses symlinks, takes unchanged task
//! files from the stat cache and reads the others with the size limit, and remembers which
//! invalid inbox files were already seen.

use super::cache::{self, Hit, StatCache, StatKey};
use super::clean::Listing;
use super::{io_err, Store, StoreError};
use crate::board::{content_hash, Board, Cached, Problem, RawFile};
use crate::model::AgentName;
use crate::yaml::Limits;
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::Path;

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
        self.load_with(true)
    }

    /// Loads a snapshot of `work/` reading every file, so every document has the positions of
    /// its nodes (for reports such as `coord validate`); refreshes the stat cache.
    pub fn load_fresh(&self) -> Result<(Board, Loaded), StoreError> {
        self.load_with(false)
    }

    fn load_with(&self, use_cache: bool) -> Result<(Board, Loaded), StoreError> {
        let work = self.abs(self.work_dir());
        super::fsutil::refuse_symlink(self.root(), self.work_dir()).map_err(io_err(&work))?;
        match super::fsutil::file_type(self.root(), self.work_dir()) {
            Ok(Some(rustix::fs::FileType::Directory)) => {}
            Err(e) => return Err(io_err(&work)(e)),
            _ => return Err(StoreError::NoWorkDir { path: work }),
        }
        let seen = self.read_seen();
        let limits = Limits::default();
        let start = std::time::SystemTime::now();
        let cache_path = self.repo.git_dir().join(cache::PATH);
        let mut cache = if use_cache {
            StatCache::read(&cache_path, self.schema_salt)
        } else {
            StatCache::empty(self.schema_salt)
        };
        let mut missed = HashMap::new();
        let mut files = Vec::new();
        let mut problems = Vec::new();
        let mut agent_dirs = Vec::new();
        let mut listing = Listing::new(start);
        walk(&work, "", 0, &mut |rel, entry| match entry {
            Entry::File(path) => {
                let key = path.symlink_metadata().ok().map(|m| StatKey::of(&m));
                listing.file(rel, key.as_ref());
                let hit = key.and_then(|k| cache.take(rel, &k));
                files.push(match hit {
                    Some(hit) => from_cache(rel, hit),
                    None => {
                        if let Some(k) = key.filter(|_| cache::cacheable(rel)) {
                            missed.insert(rel.to_string(), k);
                        }
                        self.read_raw(rel, &limits, &seen)
                    }
                });
            }
            Entry::Dir => {
                if let Some(name) = rel.strip_prefix("assigned/") {
                    if let Ok(a) = AgentName::new(name) {
                        agent_dirs.push(a);
                    }
                }
            }
            Entry::Deep => listing.unwalked(),
            Entry::Symlink => {
                listing.symlink(rel);
                problems.push(Problem {
                    path: format!("{}/{rel}", self.work_dir()),
                    message: "symlink refused (never followed); replace it with a regular file"
                        .to_string(),
                });
            }
        })
        .map_err(|(p, e)| io_err(&p)(e))?;
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
            agent_dirs,
            (&self.task_schema, &self.agent_schema),
            &limits,
        );
        let cached = (&board.tasks[..], &board.agents);
        cache.save(&cache_path, cached, self.work_dir(), &missed, start);
        board.problems.extend(problems);
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
            listing,
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

enum Entry<'p> {
    File(&'p Path),
    Dir,
    /// A folder deeper than task files sit, not entered.
    Deep,
    Symlink,
}

type WalkError = (std::path::PathBuf, std::io::Error);

/// Visits files and folders up to three levels deep, never following symlinks.
fn walk(
    dir: &Path,
    rel: &str,
    depth: usize,
    visit: &mut dyn FnMut(&str, Entry<'_>),
) -> Result<(), WalkError> {
    let entries = fs::read_dir(dir).map_err(|e| (dir.to_path_buf(), e))?;
    let mut names: Vec<_> = entries.filter_map(Result::ok).collect();
    names.sort_by_cached_key(|e| e.file_name());
    for entry in names {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(super::fsutil::TEMP_SUFFIX) {
            continue;
        }
        let child_rel = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let path = entry.path();
        let ft = entry.file_type().map_err(|e| (path.clone(), e))?;
        if ft.is_symlink() {
            visit(&child_rel, Entry::Symlink);
        } else if ft.is_dir() && depth < 2 {
            visit(&child_rel, Entry::Dir);
            walk(&path, &child_rel, depth + 1, visit)?;
        } else if ft.is_dir() {
            visit(&child_rel, Entry::Deep);
        } else if ft.is_file() {
            visit(&child_rel, Entry::File(&path));
        }
    }
    Ok(())
}

/// Returns a file as the cache had it.
fn from_cache(rel: &str, hit: Hit) -> RawFile {
    let (bytes, cached) = match hit.kind {
        cache::Kind::Task(summary) => {
            let task = crate::check::Task::unparsed(hit.text, summary);
            (Vec::new(), Cached::Task(task, hit.hash))
        }
        cache::Kind::Profile => (hit.text.into_bytes(), Cached::Profile),
    };
    RawFile {
        rel: rel.to_string(),
        bytes: Ok(bytes),
        seen_before: false,
        cached: Some(cached),
    }
}

impl Store {
    /// Reads one file of `work/` within the size limit, never following a symlink (one
    /// swapped in after the walk looked is refused too).
    fn read_raw(&self, rel: &str, limits: &Limits, seen: &Pending) -> RawFile {
        let path = format!("{}/{rel}", self.work_dir());
        let bytes = super::fsutil::read_limited(self.root(), &path, limits.max_bytes)
            .map_err(|e| e.to_string());
        let seen_before = bytes
            .as_ref()
            .is_ok_and(|b| seen.get(rel) == Some(&content_hash(b)));
        RawFile {
            rel: rel.to_string(),
            bytes,
            seen_before,
            cached: None,
        }
    }
}
