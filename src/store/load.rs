//! Reading `work/` into a board: takes the files of a walk that did not change from the stat
//! cache, reads the others with the size limit, holds back files still being written (the
//! settle rule) and stands in for files an agent broke: past the size limit, or rewritten
//! without their `coord:` block.

use super::cache::{self, Hit, StatCache};
use super::clean::Listing;
use super::history::{self, History, Judged};
use super::settle::{Settle, Written};
use super::walk::{self, Walk};
use super::{io_err, Session, Store, StoreError};
use crate::board::{content_hash, Block, Board, Cached, Problem, RawFile, Settling, StandIn};
use crate::model::{State, TaskId};
use crate::yaml::Limits;
use std::collections::HashMap;

/// How many commits back the newest usable version of a broken file is looked for.
const HISTORY_DEPTH: usize = 50;

/// What a load found besides the board.
#[derive(Debug)]
pub struct Loaded {
    /// Every path the walk saw under `work/` with its stat key, for the clean mark.
    pub listing: Listing,
}

impl Store {
    /// Returns the settle rule of a load made now.
    pub(crate) fn settle_rule<'s>(&self, seen: &'s HashMap<String, Written>) -> Settle<'s> {
        Settle {
            wait: self.config.settle_wait(),
            now: std::time::SystemTime::now(),
            seen_complete: seen,
        }
    }

    /// Returns this store knowing which files `coord watch` saw renamed in and not written
    /// since (repo-relative paths), with their mtime and size
    /// then: its loads take those as complete while they still have them.
    pub fn with_seen_complete(mut self, seen: HashMap<String, Written>) -> Store {
        self.seen_complete = seen;
        self
    }
}

impl Session<'_> {
    /// Loads a snapshot of `work/`, taking unchanged task files outside `inbox/` from the stat
    /// cache: their text and summary, parsed only when used. Reads the walk a command's
    /// session kept ([`Session::keep_walk`]) when there is one, else walks now.
    pub fn load(&self) -> Result<(Board, Loaded), StoreError> {
        let kept = self.kept_walk.borrow_mut().take();
        self.load_walked(match kept {
            Some(walked) => walked,
            None => self.walk_work()?,
        })
    }

    /// Keeps `walked`, the walk a command's recording of people's changes was checked
    /// against, for the command's next [`Session::load`]: the board is then the state the
    /// recording found clean; None forgets a walk kept earlier.
    pub fn keep_walk(&self, walked: Option<Walk>) {
        *self.kept_walk.borrow_mut() = walked;
    }

    /// Loads a snapshot of `work/` reading every file, so every document has the positions of
    /// its nodes (for reports such as `coord validate`); refreshes the stat cache.
    pub fn load_fresh(&self) -> Result<(Board, Loaded), StoreError> {
        let walked = self.walk_work_whole()?;
        self.build(walked, StatCache::empty(self.schema_salt), Save::Yes)
    }

    /// Walks `work/` looking at every file, the history folders too (no record taken): a
    /// finished file edited in place is seen, for a command that acts on finished tasks or
    /// reports on every file.
    pub fn walk_work_whole(&self) -> Result<Walk, StoreError> {
        let walked = self.walk_work_in(&|_| true, None)?;
        self.fullest.set(walked.fullest_folder());
        Ok(walked)
    }

    /// Loads the task files of `work/` whose work-relative path `looked` takes, as
    /// [`Session::load`] does, and only the ids of the others, from their folders' listings
    /// ([`walk::walk_in`]: no lstat, no read): what a single-task command needs from the
    /// folders it does not act on. The stat cache is used, never rewritten (it would lose
    /// the entries of the files left unread).
    pub fn load_scoped(&self, looked: &dyn Fn(&str) -> bool) -> Result<Board, StoreError> {
        // No recording vouched for `work/`: what an earlier operation's did is not carried
        // (`Session::carry_vouch` carries the last vouch left on disk).
        *self.base.borrow_mut() = None;
        let walked = self.walk_work_in(looked, None)?;
        let unread: Vec<TaskId> = walked.unread.iter().filter_map(|r| task_id_of(r)).collect();
        let cache = StatCache::read(&self.cache_path(), self.schema_salt);
        let (mut board, _) = self.build(walked, cache, Save::No)?;
        board.unread = unread;
        Ok(board)
    }

    /// Walks `work/` (see [`Walk`]) without reading any file, taking the files of the
    /// history folders (`done/`, `failed/`, `cancelled/`, archive months) the record holds as
    /// they are from it, and noting those walked file by file for the record ([`History`]),
    /// which the next recording of people's changes saves ([`Session::save_history`]).
    pub fn walk_work(&self) -> Result<Walk, StoreError> {
        self.walk_history(false)
    }

    /// Walks `work/` as [`Session::walk_work`], taking each judged history folder whole, as
    /// one block ([`Walk::blocks`], [`Block`]): what a tick walks with. Its load holds no
    /// file of such a folder but those the planner may ask for.
    pub fn walk_work_blocks(&self) -> Result<Walk, StoreError> {
        self.walk_history(true)
    }

    fn walk_history(&self, blocks: bool) -> Result<Walk, StoreError> {
        let top = self.repo.head_subtrees(self.work_dir());
        let archive = self
            .repo
            .head_subtrees(&format!("{}/archive", self.work_dir()));
        let path = self.repo.git_dir().join(history::PATH);
        let mut history = History::read(&path, History::trees(top, archive));
        if blocks {
            history = history.with_blocks();
        }
        let walked = self.walk_work_in(&|_| true, Some(&mut history))?;
        // Saved once a recording has shown which folders hold a person's uncommitted change.
        *self.history.borrow_mut() = Some(PendingHistory {
            path,
            history,
            judged: Vec::new(),
        });
        self.fullest.set(walked.fullest_folder());
        Ok(walked)
    }

    /// Saves the history-folder record the last walk made, without the folders it walked file
    /// by file that hold one of `changed` (repo-relative paths a status scan found changed;
    /// None: the recording failed, and nothing is saved). A folder is recorded only with the
    /// stat keys of files that hold what is committed: a person's uncommitted in-place edit
    /// read by the walk's load, paired with its key in the stat cache, would otherwise be
    /// served from the record after the person undid it in place.
    pub(super) fn save_history(&self, changed: Option<&[String]>) {
        let Some(pending) = self.history.borrow_mut().take() else {
            return;
        };
        let PendingHistory {
            path,
            mut history,
            judged,
        } = pending;
        let Some(changed) = changed else { return };
        let prefix = format!("{}/", self.work_dir());
        for path in changed {
            let folder = path
                .strip_prefix(&prefix)
                .and_then(|rel| rel.rsplit_once('/'))
                .map(|(folder, _)| folder);
            if let Some(folder) = folder {
                history.forget_walked(folder);
            }
        }
        history.save(&path);
        // Only folders the record now holds as they were judged are marked.
        History::judge(&path, &judged);
    }

    /// Walks `work/` looking only at the files `looked` takes ([`walk::walk_in`]), with the
    /// history-folder record when given.
    fn walk_work_in(
        &self,
        looked: &dyn Fn(&str) -> bool,
        history: Option<&mut History>,
    ) -> Result<Walk, StoreError> {
        use rustix::fs::FileType;
        let work = self.abs(self.work_dir());
        match crate::fsx::file_type(self.root(), self.work_dir()) {
            Ok(Some(FileType::Directory)) => {}
            Ok(Some(FileType::Symlink)) => {
                return Err(io_err(&work)(crate::fsx::symlink_refused(self.work_dir())))
            }
            Err(e) => return Err(io_err(&work)(e)),
            _ => return Err(StoreError::NoWorkDir { path: work }),
        }
        walk::walk_in(&work, looked, history).map_err(|(p, e)| io_err(&p)(e))
    }

    /// Loads the snapshot a walk of `work/` found, as [`Session::load`].
    pub fn load_walked(&self, walked: Walk) -> Result<(Board, Loaded), StoreError> {
        let cache = StatCache::read(&self.cache_path(), self.schema_salt);
        self.build(walked, cache, Save::Yes)
    }

    /// Walks (with blocks, [`Session::walk_work_blocks`]) and loads `work/` as a tick does,
    /// taking only the window of the inbox after `after` ([`Walk::window_inbox`]); returns
    /// the last inbox file taken when files after it wait for the next window.
    pub fn load_window(
        &self,
        after: Option<&str>,
    ) -> Result<(Board, Loaded, Option<String>), StoreError> {
        let mut walked = self.walk_work_blocks()?;
        let more = self.window_inbox(&mut walked, after);
        let (board, loaded) = self.load_walked(walked)?;
        Ok((board, loaded, more))
    }

    /// Cuts `walked` to the inbox window after `after` ([`Walk::window_inbox`]).
    pub fn window_inbox(&self, walked: &mut Walk, after: Option<&str>) -> Option<String> {
        walked.window_inbox(after, self.inbox_window.get())
    }

    /// Returns whether `inbox/` holds more entries than one window of a tick takes (names
    /// only: nothing is read or looked at); false when it does not read.
    pub fn inbox_exceeds_window(&self) -> bool {
        let window = self.inbox_window.get();
        let inbox = self.abs(&format!("{}/inbox", self.work_dir()));
        std::fs::read_dir(inbox).is_ok_and(|d| d.take(window + 1).count() > window)
    }

    /// Makes a tick take the inbox `files` at a time (tests of a big inbox without one).
    #[cfg(test)]
    pub(crate) fn set_inbox_window(&self, files: usize) {
        self.inbox_window.set(files.max(1));
    }

    fn cache_path(&self) -> std::path::PathBuf {
        self.repo.git_dir().join(cache::PATH)
    }

    /// Reads the files of a walk (from `cache` when their key matches) into a board; with
    /// `Save::Yes`, writes the cache again when it missed or dropped enough entries.
    fn build(
        &self,
        walked: Walk,
        mut cache: StatCache,
        save: Save,
    ) -> Result<(Board, Loaded), StoreError> {
        let limits = Limits::default();
        let settle = self.settle_rule(&self.seen_complete);
        // The key of every file the new cache may keep: hits and files read from disk.
        let mut keys = cache::Keys::with_capacity(walked.files.len());
        let mut settling = Vec::new();
        let schemas = (&self.task_schema, &self.agent_schema);
        let mut board = Board::start(self.work_dir(), walked.agent_dirs);
        board.tasks.reserve(walked.files.len());
        let mut add = |f: RawFile| board.add(f, schemas, &limits);
        // Most runs skipped no file: then no path is made to look one up.
        let skips = self.skipped_count() > 0;
        for (rel, key) in walked.files {
            let skipped = skips
                .then(|| self.skipped_because(&format!("{}/{rel}", self.work_dir())))
                .flatten();
            if let Some(why) = skipped {
                let why = format!("left where it is this tick: {why}");
                add(RawFile::new(rel, Err(why)));
                continue;
            }
            if let Some((k, hit)) = key.and_then(|k| Some((k, cache.take(&rel, &k)?))) {
                keys.push(&rel, k);
                add(from_cache(rel, hit));
                continue;
            }
            let path = format!("{}/{rel}", self.work_dir());
            let until = key.and_then(|k| settle.until(&path, k.written(), k.ctime_ns()));
            let taken = taken_from_record(&walked.taken, &rel);
            let raw = match taken {
                true => self.read_committed(rel, &limits),
                false => self.read_raw(rel, &limits),
            };
            // The committed bytes are paired with the file's key only when the file holds
            // them: a checkout that converts line endings (or an in-place edit) gives other
            // bytes, and a later walk file by file would take them for the file's.
            let cacheable = !taken || self.holds(&raw, &limits);
            match until {
                Some(until) if !self.committed_as_is(&path, &raw) => {
                    settling.push(Settling {
                        id: task_id_of(&raw.rel),
                        path,
                        until: jiff::Timestamp::try_from(until).unwrap_or_default(),
                    });
                    if let Some(f) = self.settling_stand_in(raw) {
                        add(f);
                    }
                }
                _ => {
                    let raw = self.stand_in(raw, &limits);
                    if let Some(k) = key.filter(|_| cacheable && cache::cacheable(&raw.rel)) {
                        if raw.stand_in.is_none() {
                            keys.push(&raw.rel, k);
                        }
                    }
                    add(raw);
                }
            }
        }
        let cache = cache.used();
        let mut board = board.finish();
        board.settling = settling;
        self.judge(&board, &walked.judgeable);
        let blocks: Vec<String> = walked.blocks.iter().map(|b| b.rel.clone()).collect();
        self.expand_blocks(&mut board, walked.blocks, schemas, &limits);
        board.held = walked
            .held
            .iter()
            .filter_map(|rel| task_id_of(rel))
            .collect();
        board.head = self
            .repo
            .head()
            .ok()
            .and_then(|h| h.oid)
            .map(|o| o.to_string());
        // The files of the blocks' folders are kept as they are: no task of theirs was taken.
        let cache = cache.keeping(blocks);
        if save == Save::Yes {
            let cached = (&board.tasks[..], &board.agents);
            cache.save(
                &self.cache_path(),
                cached,
                self.work_dir(),
                &keys,
                walked.listing.start(),
            );
        }
        board
            .problems
            .extend(walked.symlinks.into_iter().map(|rel| Problem {
                path: format!("{}/{rel}", self.work_dir()),
                message:
                    "symlink refused (never followed); replace it with a regular file".to_string(),
            }));
        // The tasks are sorted by path: no set of every path is made.
        let present = |p: &str| {
            board
                .tasks
                .binary_search_by(|t| t.path.as_str().cmp(p))
                .is_ok()
        };
        let skipped = self.skipped_problems(&present);
        board.problems.extend(skipped);
        board.problems.sort();
        let loaded = Loaded {
            listing: walked.listing,
        };
        Ok((board, loaded))
    }

    /// Marks in the history record each folder of `judgeable` (with how many files the walk
    /// found in it) whose every file the board holds as a task a tick may leave in a block
    /// ([`History::judge`]): once the walk's record is saved ([`Session::save_history`]) when
    /// it waits for the recording, else now (a command's session recorded before its load).
    fn judge(&self, board: &Board, judgeable: &[(Judged, usize)]) {
        let judged: Vec<Judged> = judgeable
            .iter()
            .filter(|(j, count)| judged_folder(board, &j.rel, *count))
            .map(|(j, _)| j.clone())
            .collect();
        match self.history.borrow_mut().as_mut() {
            Some(pending) => pending.judged.extend(judged),
            None => History::judge(&self.repo.git_dir().join(history::PATH), &judged),
        }
    }

    /// Puts the history folders a walk took whole on `board` as blocks, and the files of them
    /// the planner may ask for ([`Board::block_files_wanted`]) as files, read as committed
    /// (as a file of a folder taken from the record is when the stat cache lacks it).
    fn expand_blocks(
        &self,
        board: &mut Board,
        taken: Vec<walk::HistoryBlock>,
        schemas: (&crate::schema::Schema, &crate::schema::Schema),
        limits: &Limits,
    ) {
        let mut expanded = std::collections::HashSet::new();
        for b in taken {
            match Block::new(&b.rel, b.files.iter().map(|(name, _)| name)) {
                Some(block) => board.blocks.push(block),
                // Not a folder of task files after all: each file goes on the board.
                None => {
                    for (name, _) in b.files.iter() {
                        let rel = format!("{}/{name}", b.rel);
                        let raw = self.stand_in(self.read_committed(rel.clone(), limits), limits);
                        board.add(raw, schemas, limits);
                        expanded.insert(rel);
                    }
                }
            }
        }
        let mut wanted = board.block_files_wanted(&expanded);
        while !wanted.is_empty() {
            let from = board.tasks.len();
            for rel in wanted {
                let Some((dir, name)) = rel.rsplit_once('/') else {
                    continue;
                };
                if let Some(block) = board.blocks.iter_mut().find(|b| b.rel == dir) {
                    block.remove(name);
                }
                let raw = self.stand_in(self.read_committed(rel.clone(), limits), limits);
                board.add(raw, schemas, limits);
                expanded.insert(rel);
            }
            // Only the files just put on the board can want more: their dependencies.
            wanted = board.block_deps_wanted(&board.tasks[from..]);
        }
        if !expanded.is_empty() {
            board.tasks.sort_by(|a, b| a.path.cmp(&b.path));
        }
    }

    /// Returns whether a file holds exactly what HEAD or the index has at its path (what
    /// coord's last operation staged for it, when the recording trusted its vouch).
    fn committed_as_is(&self, path: &str, raw: &RawFile) -> bool {
        raw.bytes.as_ref().is_ok_and(|bytes| {
            self.staged_by_coord(path, bytes) || self.repo.is_recorded(path, bytes)
        })
    }

    /// Returns what the board holds for a file still being written: its committed version,
    /// frozen, when there is one.
    fn settling_stand_in(&self, raw: RawFile) -> Option<RawFile> {
        let path = format!("{}/{}", self.work_dir(), raw.rel);
        let head = self.repo.read_head_file(&path).ok().flatten()?;
        let disk = raw.bytes.as_deref().map(content_hash).unwrap_or_default();
        Some(RawFile {
            stand_in: Some(StandIn::Settling(disk)),
            ..RawFile::new(raw.rel, Ok(head))
        })
    }

    /// Returns the file as the board should see it: a task file past the size limit gets its
    /// whole content hashed (and, in an agent's folder, its newest committed version within
    /// the limit stands in, so the attempt can fail with `bad_result`); a task file outside
    /// the inbox rewritten without its `coord:` block gets the block of its newest committed
    /// version back.
    fn stand_in(&self, raw: RawFile, limits: &Limits) -> RawFile {
        let Ok(bytes) = &raw.bytes else { return raw };
        if task_id_of(&raw.rel).is_none() {
            return raw;
        }
        let path = format!("{}/{}", self.work_dir(), raw.rel);
        if bytes.len() > limits.max_bytes {
            let Ok((hash, size)) = crate::fsx::hash_file(self.root(), &path) else {
                return raw;
            };
            let fits = |b: &[u8]| b.len() <= limits.max_bytes;
            let base = raw
                .rel
                .starts_with("assigned/")
                .then(|| self.repo.newest_version(&path, HISTORY_DEPTH, &fits))
                .and_then(|r| r.ok().flatten());
            return RawFile {
                stand_in: Some(StandIn::Oversize(size, hash)),
                ..RawFile::new(raw.rel, base.map_or(raw.bytes, Ok))
            };
        }
        let outside = !(raw.rel.starts_with("inbox/") || raw.rel.starts_with("invalid/"));
        if outside && !has_coord_line(bytes) {
            if let Some(text) = self.restore_coord(&path, bytes, limits) {
                return RawFile {
                    stand_in: Some(StandIn::Restored(content_hash(bytes))),
                    ..RawFile::new(raw.rel, Ok(text.into_bytes()))
                };
            }
        }
        raw
    }

    /// Returns `bytes` with the `coord:` block of the newest committed version of `path`
    /// that has one spliced in, when both read.
    fn restore_coord(&self, path: &str, bytes: &[u8], limits: &Limits) -> Option<String> {
        let old = self
            .repo
            .newest_version(path, HISTORY_DEPTH, &has_coord_line)
            .ok()
            .flatten()?;
        let old = crate::yaml::parse_bytes(&old, limits).ok()?;
        let coord = old.value.get("coord")?.clone();
        let doc = crate::yaml::parse_bytes(bytes, limits).ok()?;
        let text = String::from_utf8(bytes.to_vec()).ok()?;
        crate::yaml::set_block(&text, &doc, "coord", &coord).ok()
    }
}

/// The history-folder record a walk made, with the folders its load judged, until a recording
/// of people's changes saves it ([`Session::save_history`]).
pub(super) struct PendingHistory {
    path: std::path::PathBuf,
    history: History,
    judged: Vec<Judged>,
}

/// Whether a load may write the stat cache again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Save {
    Yes,
    No,
}

/// Returns whether some line of a file starts a `coord:` key (at any indentation).
fn has_coord_line(bytes: &[u8]) -> bool {
    bytes
        .split(|&b| b == b'\n')
        .any(|l| l.trim_ascii_start().starts_with(b"coord:"))
}

/// Returns the task id a work-relative path names, if it is a task file's.
fn task_id_of(rel: &str) -> Option<TaskId> {
    if rel.starts_with("agents/") {
        return None;
    }
    let name = rel.rsplit('/').next()?;
    let stem = name
        .strip_suffix(".yaml")
        .or_else(|| name.strip_suffix(".yml"))?;
    TaskId::new(stem).ok()
}

/// Returns a file as the cache had it.
fn from_cache(rel: String, hit: Hit) -> RawFile {
    let (bytes, cached) = match hit.kind {
        cache::Kind::Task(summary, text) => {
            let task = crate::check::Task::unparsed(text, summary);
            (Vec::new(), Cached::Task(Box::new(task), hit.hash))
        }
        cache::Kind::Profile(text) => (text.into_bytes(), Cached::Profile),
    };
    RawFile {
        cached: Some(cached),
        ..RawFile::new(rel, Ok(bytes))
    }
}

/// Returns whether `board` holds each of the `count` files a walk found in the history
/// folder `rel` (work-relative) as a task a tick may leave in a block: read, standing in for
/// nothing, its recorded state its folder's (adoption has nothing to do), and of an id no
/// other file of the folder has.
fn judged_folder(board: &Board, rel: &str, count: usize) -> bool {
    let prefix = format!("{}/{rel}/", board.work_dir);
    let from = board
        .tasks
        .partition_point(|t| t.path.as_str() < prefix.as_str());
    let files = board.tasks[from..]
        .iter()
        .take_while(|t| t.path.starts_with(&prefix));
    let mut ids = Vec::with_capacity(count);
    for t in files {
        let agrees = match &t.read {
            Ok(task) => {
                t.folder.state == State::Archived || task.summary().state == Some(t.folder.state)
            }
            Err(_) => false,
        };
        if !agrees || t.stand_in.is_some() {
            return false;
        }
        ids.push(&t.id);
    }
    ids.sort_unstable();
    ids.len() == count && ids.windows(2).all(|w| w[0] != w[1])
}

/// Returns whether the walk took the key of the file `rel` (work-relative) from the
/// history-folder record.
fn taken_from_record(taken: &[String], rel: &str) -> bool {
    rel.rsplit_once('/')
        .is_some_and(|(dir, _)| taken.iter().any(|t| t == dir))
}

impl Store {
    /// Reads the committed version of a file whose stat key a walk took from the
    /// history-folder record ([`super::history`]) when the stat cache did not have it: the
    /// rule is that coord sees a finished task's file as committed, so an in-place edit nobody committed is not read
    /// (and so never paired with the recorded key in the cache). The file itself when HEAD's
    /// version is missing or over the size limit.
    fn read_committed(&self, rel: String, limits: &Limits) -> RawFile {
        let path = format!("{}/{rel}", self.work_dir());
        match self.repo.read_head_file(&path) {
            Ok(Some(bytes)) if bytes.len() <= limits.max_bytes => RawFile::new(rel, Ok(bytes)),
            _ => self.read_raw(rel, limits),
        }
    }

    /// Returns whether the file of `raw` holds exactly `raw`'s bytes.
    fn holds(&self, raw: &RawFile, limits: &Limits) -> bool {
        let on_disk = self.read_raw(raw.rel.clone(), limits);
        matches!((&raw.bytes, &on_disk.bytes), (Ok(a), Ok(b)) if a == b)
    }

    /// Reads one file of `work/` within the size limit, never following a symlink (one
    /// swapped in after the walk looked is refused too).
    fn read_raw(&self, rel: String, limits: &Limits) -> RawFile {
        let path = format!("{}/{rel}", self.work_dir());
        let bytes = crate::fsx::read_limited(self.root(), &path, limits.max_bytes)
            .map_err(|e| e.to_string());
        RawFile::new(rel, bytes)
    }
}
