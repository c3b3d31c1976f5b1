//! Reading `work/` into a board: a shallow walk that refuses symlinks, takes unchanged task
//! files from the stat cache and reads the others with the size limit, and remembers which
//! invalid inbox files were already seen.

use super::cache::{self, StatCache, StatKey};
use super::{io_err, Store, StoreError};
use crate::board::{content_hash, Board, Problem, RawFile};
use crate::model::AgentName;
use crate::yaml::Limits;
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::Path;

const SEEN_FILE: &str = "seen-invalid.json";

/// Invalid inbox files of this load and their content hashes, to remember for the next tick.
pub type Pending = BTreeMap<String, u64>;

impl Store {
    /// Loads a snapshot of `work/`, taking unchanged task files outside `inbox/` from the stat
    /// cache: their text and summary, parsed only when used.
    pub fn load(&self) -> Result<(Board, Pending), StoreError> {
        self.load_with(true)
    }

    /// Loads a snapshot of `work/` reading every file, so every document has the positions of
    /// its nodes (for reports such as `coord validate`); refreshes the stat cache.
    pub fn load_fresh(&self) -> Result<(Board, Pending), StoreError> {
        self.load_with(false)
    }

    fn load_with(&self, use_cache: bool) -> Result<(Board, Pending), StoreError> {
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
        let cache_path = self.private_dir().join(cache::CACHE_FILE);
        let salt = cache::salt(&self.abs("schemas/task.schema.json"));
        let mut cache = if use_cache {
            StatCache::read(&cache_path, salt)
        } else {
            StatCache::empty(salt)
        };
        let mut keys = HashMap::new();
        let mut files = Vec::new();
        let mut problems = Vec::new();
        let mut agent_dirs = Vec::new();
        walk(&work, "", 0, &mut |rel, entry| match entry {
            Entry::File(path) => {
                let key = path.symlink_metadata().ok().map(|m| StatKey::of(&m));
                let cached = key.and_then(|k| from_cache(&mut cache, rel, &k));
                if let Some(k) = key {
                    keys.insert(rel.to_string(), k);
                }
                files.push(match cached {
                    Some(raw) => raw,
                    None => self.read_raw(rel, &limits, &seen),
                });
            }
            Entry::Dir => {
                if let Some(name) = rel.strip_prefix("assigned/") {
                    if let Ok(a) = AgentName::new(name) {
                        agent_dirs.push(a);
                    }
                }
            }
            Entry::Symlink => problems.push(Problem {
                path: format!("{}/{rel}", self.work_dir()),
                message: "symlink refused (never followed); replace it with a regular file"
                    .to_string(),
            }),
        })
        .map_err(|(p, e)| io_err(&p)(e))?;
        let pending: Pending = files
            .iter()
            .filter(|f| f.parsed.is_none() && f.rel.starts_with("inbox/"))
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
        cache.save(&cache_path, &board.tasks, self.work_dir(), &keys, start);
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
        Ok((board, invalid_inbox))
    }

    /// Remembers the invalid inbox files of this tick, so the next tick may quarantine them.
    pub fn remember_pending(&self, pending: &Pending) -> Result<(), StoreError> {
        let path = self.private_dir().join(SEEN_FILE);
        let text = serde_json::to_string(pending).unwrap_or_default();
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
        } else if ft.is_file() {
            visit(&child_rel, Entry::File(&path));
        }
    }
    Ok(())
}

/// Returns the file as the cache has it, when its key still matches.
fn from_cache(cache: &mut StatCache, rel: &str, key: &StatKey) -> Option<RawFile> {
    let (text, summary) = cache.take(rel, key)?;
    Some(RawFile {
        rel: rel.to_string(),
        bytes: Ok(Vec::new()),
        seen_before: false,
        parsed: Some(crate::check::Task::unparsed(text, summary)),
    })
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
            parsed: None,
        }
    }
}
