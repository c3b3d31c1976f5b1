//! The walk of `work/`: every file and folder down to where task files sit, in walk order
//! (folder by folder, names in byte order), each regular file with its stat key, never
//! following a symlink. Reading nothing, it is all a tick needs to tell whether `work/`
//! changed since the last one (the clean and quiet marks); the load then reads what changed.

use super::cache::StatKey;
use super::clean::Listing;
use super::history::{History, Judged, RecordFiles};
use crate::model::AgentName;
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What a walk of `work/` found.
#[derive(Debug)]
pub struct Walk {
    /// Regular files, work-relative (`ready/a.yaml`), in walk order, each with its stat key
    /// (None when it went away before it could be looked at).
    pub files: Vec<(String, Option<StatKey>)>,
    /// The agents whose folder exists under `assigned/`.
    pub agent_dirs: Vec<AgentName>,
    /// Symlinks, work-relative: refused, never followed.
    pub symlinks: Vec<String>,
    /// Every path with its stat key, for the clean and quiet marks; it also knows when the
    /// walk began.
    pub listing: Listing,
    /// Inbox files left out of `files` by [`Walk::window_inbox`], work-relative.
    pub held: Vec<String>,
    /// Regular files a scoped walk ([`walk_in`]) named without looking at them,
    /// work-relative: outside the folders a single-task command reads.
    pub unread: Vec<String>,
    /// The history folders whose files' keys came from the record ([`History`]),
    /// work-relative.
    pub taken: Vec<String>,
    /// The judged history folders taken whole from the record, not in `files` (their
    /// files are in `listing`).
    pub blocks: Vec<HistoryBlock>,
    /// The history folders the record holds as this walk found them, each with how many
    /// files it holds (in `files`): a load may judge them ([`History::judge`]).
    pub judgeable: Vec<(Judged, usize)>,
}

/// A history folder a walk took whole from the record: its files are not in
/// [`Walk::files`].
#[derive(Debug, Clone)]
pub struct HistoryBlock {
    /// The folder, work-relative.
    pub rel: String,
    /// Its files, as the record holds them.
    pub files: RecordFiles,
}

/// How many inbox files one window of a tick takes (see [`Walk::window_inbox`]).
pub const INBOX_WINDOW: usize = 4_096;

impl Walk {
    /// Returns a walk that found `files` and nothing else, beginning now.
    fn of(files: Vec<(String, Option<StatKey>)>) -> Walk {
        Walk {
            files,
            agent_dirs: Vec::new(),
            symlinks: Vec::new(),
            listing: Listing::new(SystemTime::now()),
            held: Vec::new(),
            unread: Vec::new(),
            taken: Vec::new(),
            blocks: Vec::new(),
            judgeable: Vec::new(),
        }
    }

    /// Returns the number of files in the folder that holds the most (files of a folder are
    /// next to each other in walk order; a block counts its files).
    pub fn fullest_folder(&self) -> usize {
        let blocks = self.blocks.iter().map(|b| b.files.len()).max().unwrap_or(0);
        self.fullest_listed().max(blocks)
    }

    /// Returns the number of files in the folder of `files` that holds the most.
    fn fullest_listed(&self) -> usize {
        let folder = |rel: &str| rel.rsplit_once('/').map_or("", |(dir, _)| dir).to_string();
        let mut fullest = 0;
        let mut run = (String::new(), 0);
        for (rel, _) in &self.files {
            let dir = rel.rsplit_once('/').map_or("", |(dir, _)| dir);
            if dir == run.0 {
                run.1 += 1;
            } else {
                run = (folder(rel), 1);
            }
            fullest = fullest.max(run.1);
        }
        fullest
    }

    /// Keeps in `files` only the first `max` inbox files whose names sort after `after` (all
    /// inbox files when `after` is None), moving the other inbox files to `held`; returns the
    /// last one kept when files after it were held back. A tick over a big inbox takes it
    /// window by window, so what one pass holds in memory (parsed tasks, planned texts, the
    /// journal) is bounded by the window, not by the inbox. The files stay where they are:
    /// only the held ones are taken out (a copy of every file's entry cost 3 % of a tick at
    /// 100,000 tasks).
    pub fn window_inbox(&mut self, after: Option<&str>, max: usize) -> Option<String> {
        let mut kept = 0;
        let mut last = None;
        let mut more = false;
        let held = self.files.extract_if(.., |(rel, _)| {
            if !rel.starts_with("inbox/") {
                return false;
            }
            let after_window = after.is_none_or(|a| rel.as_str() > a);
            if after_window && kept < max {
                kept += 1;
                last = Some(rel.clone());
                return false;
            }
            more |= after_window;
            true
        });
        self.held.extend(held.map(|(rel, _)| rel));
        last.filter(|_| more)
    }
}

/// A failure to read a folder, with the folder.
pub type WalkError = (PathBuf, std::io::Error);

/// Folders are entered this deep below `work/` (`assigned/<agent>/` is the deepest).
const MAX_DEPTH: usize = 2;

/// How many files make another thread for their lstat calls worth starting (git's preload
/// index takes 500 entries per thread; a thread costs ~50 µs, an lstat ~1 µs).
const FILES_PER_THREAD: usize = 2_000;

/// How folders are opened: never through a symlink.
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// One entry of a folder.
struct Named {
    /// The first bytes of its name, to sort by.
    head: u128,
    /// Its work-relative path.
    rel: String,
    /// Where its name starts in `rel`.
    name_at: usize,
    kind: FileType,
}

impl Named {
    fn name(&self) -> &str {
        &self.rel[self.name_at..]
    }
}

/// Walks the folder `work` (absolute), looking only at the regular files whose work-relative
/// path `looked` takes: the others are named in [`Walk::unread`] from their folder's listing,
/// without an lstat each. Such a walk cannot vouch for `work/` (its listing is incomplete).
/// With `history`, the files of a history folder (`done/`, `failed/`, `cancelled/`, an
/// archive month) the record holds as it still is are taken from it, without reading the
/// folder or an lstat each ([`History`]), and the history folders walked file by file are
/// noted for the record.
pub fn walk_in(
    work: &Path,
    looked: &dyn Fn(&str) -> bool,
    history: Option<&mut History>,
) -> Result<Walk, WalkError> {
    let mut found = Walk::of(Vec::new());
    let fd = rustix::fs::open(work, DIR_FLAGS, Mode::empty()).map_err(walk_error(work, ""))?;
    let mut at = At {
        work,
        looked,
        found: &mut found,
        history,
    };
    at.visit_dir(fd, "", 0)?;
    Ok(found)
}

/// Where a walk is and what it found so far.
struct At<'a> {
    work: &'a Path,
    looked: &'a dyn Fn(&str) -> bool,
    found: &'a mut Walk,
    history: Option<&'a mut History>,
}

fn walk_error<'a>(work: &'a Path, rel: &'a str) -> impl FnOnce(Errno) -> WalkError + 'a {
    move |e| (work.join(rel), e.into())
}

impl At<'_> {
    /// Visits the open folder `rel` at `depth`: a history folder through the record when it
    /// has one ([`At::visit_history`]), any other as [`At::visit_entries`].
    fn visit_dir(&mut self, fd: OwnedFd, rel: &str, depth: usize) -> Result<(), WalkError> {
        if History::is_history(rel, depth) {
            if let Some(history) = self.history.take() {
                let visited = self.visit_history(fd, rel, depth, &mut *history);
                self.history = Some(history);
                return visited;
            }
        }
        self.visit_entries(fd, rel, depth).map(|_| ())
    }

    /// Visits the history folder `rel` at `depth`: its files as the record holds them when
    /// it still holds the folder as it is, else file by file, noting what it found for the
    /// record. The folder's stat key is taken before its entries are read, so a change made
    /// meanwhile makes the next walk's key differ.
    fn visit_history(
        &mut self,
        fd: OwnedFd,
        rel: &str,
        depth: usize,
        history: &mut History,
    ) -> Result<(), WalkError> {
        let folder = rustix::fs::fstat(&fd).ok().map(|st| StatKey::of(&st));
        if let Some(taken) = folder.as_ref().and_then(|f| history.take(rel, f)) {
            let found = &mut *self.found;
            let files = &taken.files;
            if let Some(sums) = files.sums().filter(|_| history.blocks()) {
                // The listing from the checksums the record keeps: no path per file.
                let start = found.listing.start();
                found.listing.reserve(files.len());
                for ((name, key), sums) in files.iter().zip(sums) {
                    if key.settled(start) {
                        found.listing.file_summed(sums, &key);
                    } else {
                        found.listing.file(&child_rel(rel, name), Some(&key));
                    }
                }
                found.blocks.push(HistoryBlock {
                    rel: rel.to_string(),
                    files: taken.files.clone(),
                });
                return Ok(());
            }
            found.files.reserve(files.len());
            found.listing.reserve(files.len());
            for (name, key) in files.iter() {
                let child = child_rel(rel, name);
                found.listing.file(&child, Some(&key));
                found.files.push((child, Some(key)));
            }
            found.taken.push(rel.to_string());
            if !taken.judged {
                let judged = Judged {
                    rel: rel.to_string(),
                    folder: taken.folder,
                    tree: taken.tree,
                };
                found
                    .judgeable
                    .push((judged, task_names(files.iter().map(|(n, _)| n))));
            }
            return Ok(());
        }
        let from = self.found.files.len();
        let only_files = self.visit_entries(fd, rel, depth)?;
        let name_at = rel.len() + 1;
        let files = only_files.then(|| {
            self.found.files[from..]
                .iter()
                .map(|(r, key)| Some((r[name_at..].to_string(), (*key)?)))
                .collect::<Option<Vec<_>>>()
        });
        let start = self.found.listing.start();
        if let Some((folder, tree)) = history.walked(rel, folder, files.flatten(), start) {
            let judged = Judged {
                rel: rel.to_string(),
                folder,
                tree,
            };
            let names = self.found.files[from..].iter().map(|(r, _)| &r[name_at..]);
            let count = task_names(names);
            self.found.judgeable.push((judged, count));
        }
        Ok(())
    }

    /// Visits the entries of the open folder `rel` in byte order of their names; looks at
    /// its files relative to it, so a symlink swapped in meanwhile is never followed.
    /// Returns whether every entry was a regular file it looked at.
    fn visit_entries(&mut self, fd: OwnedFd, rel: &str, depth: usize) -> Result<bool, WalkError> {
        let work = self.work;
        let (dir, entries) = sorted_entries(fd, rel).map_err(walk_error(work, rel))?;
        let fd = dir.fd().map_err(walk_error(work, rel))?;
        let looked = |e: &&Named| e.kind == FileType::RegularFile && (self.looked)(&e.rel);
        let files: Vec<&str> = entries.iter().filter(looked).map(Named::name).collect();
        let mut keys = stat_keys(fd, &files, threads_for(files.len())).into_iter();
        self.found.files.reserve(files.len());
        self.found.listing.reserve(files.len());
        let only_files = files.len() == entries.len();
        for entry in entries {
            let found = &mut *self.found;
            match entry.kind {
                FileType::RegularFile if (self.looked)(&entry.rel) => {
                    let key = keys.next().flatten();
                    found.listing.file(&entry.rel, key.as_ref());
                    found.files.push((entry.rel, key));
                }
                FileType::RegularFile => {
                    found.listing.unwalked();
                    found.unread.push(entry.rel);
                }
                FileType::Symlink => {
                    found.listing.symlink(&entry.rel);
                    found.symlinks.push(entry.rel);
                }
                FileType::Directory if depth < MAX_DEPTH => {
                    if let Some(agent) = entry.rel.strip_prefix("assigned/") {
                        found.agent_dirs.extend(AgentName::new(agent).ok());
                    }
                    match rustix::fs::openat(fd, entry.name(), DIR_FLAGS, Mode::empty()) {
                        Ok(sub) => self.visit_dir(sub, &entry.rel, depth + 1)?,
                        // Gone or replaced since the folder was read: the next walk sees it.
                        Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR) => found.listing.unwalked(),
                        Err(e) => return Err(walk_error(work, &entry.rel)(e)),
                    }
                }
                FileType::Directory => found.listing.unwalked(),
                _ => {}
            }
        }
        Ok(only_files)
    }
}

/// Returns how many of `names` the board does not pass over ([`crate::board::is_ignored`]).
fn task_names<'n>(names: impl Iterator<Item = &'n str>) -> usize {
    names.filter(|n| !crate::board::is_ignored(n)).count()
}

/// Reads the open folder `rel`: its entries in byte order of their names, leaving out `.`,
/// `..` and coord's temporary files.
fn sorted_entries(fd: OwnedFd, rel: &str) -> Result<(Dir, Vec<Named>), Errno> {
    let mut dir = Dir::new(fd)?;
    let mut entries = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy();
        if name == "." || name == ".." || name.ends_with(crate::fsx::TEMP_SUFFIX) {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => kind_of(&dir, &name),
            kind => kind,
        };
        let name_at = if rel.is_empty() { 0 } else { rel.len() + 1 };
        entries.push(Named {
            head: head_of(&name),
            rel: child_rel(rel, &name),
            name_at,
            kind,
        });
    }
    // Paths in one folder share their prefix: the names decide.
    entries.sort_unstable_by(|a, b| a.head.cmp(&b.head).then_with(|| a.rel.cmp(&b.rel)));
    Ok((dir, entries))
}

/// Returns the type of an entry whose folder did not say (some file systems never do).
fn kind_of(dir: &Dir, name: &str) -> FileType {
    dir.fd()
        .and_then(|fd| rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW))
        .map_or(FileType::Unknown, |st| FileType::from_raw_mode(st.st_mode))
}

/// Returns the first 16 bytes of a name as a number that sorts as the names do (a name has
/// no NUL byte, so the zero padding of a shorter one sorts first, as it should).
fn head_of(name: &str) -> u128 {
    let mut head = [0u8; 16];
    let n = name.len().min(16);
    head[..n].copy_from_slice(&name.as_bytes()[..n]);
    u128::from_be_bytes(head)
}

/// Returns how many threads should look at `files` files: one per `FILES_PER_THREAD`, at
/// most one per core.
fn threads_for(files: usize) -> usize {
    if files < 2 * FILES_PER_THREAD {
        return 1;
    }
    // Read once per process: std reads the cgroup's CPU quota (three files) on every call.
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from));
    cores.min(files / FILES_PER_THREAD).max(1)
}

/// Returns the stat key of each file named in the open folder `dir` (None for one that went
/// away), never following a symlink, on `threads` threads. The threads fill their share of
/// the one result and allocate nothing: glibc gives a thread that allocates an arena of its
/// own, and what such arenas keep stays in the process's memory (a 50,000-task burst, one
/// walk per window: peak RSS 202 MB with a vector per thread, 190 MB without).
fn stat_keys(dir: BorrowedFd<'_>, names: &[&str], threads: usize) -> Vec<Option<StatKey>> {
    let key = |name: &&str| {
        rustix::fs::statat(dir, *name, AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .map(|st| StatKey::of(&st))
    };
    if threads <= 1 || names.is_empty() {
        return names.iter().map(key).collect();
    }
    let mut keys: Vec<Option<StatKey>> = vec![None; names.len()];
    let chunk = names.len().div_ceil(threads);
    let fill = move |(part, out): (&[&str], &mut [Option<StatKey>])| {
        for (name, slot) in part.iter().zip(out) {
            *slot = key(name);
        }
    };
    std::thread::scope(|scope| {
        let mut parts = names.chunks(chunk).zip(keys.chunks_mut(chunk));
        let mine = parts.next();
        let others: Vec<_> = parts.map(|part| scope.spawn(move || fill(part))).collect();
        mine.into_iter().for_each(fill);
        for other in others {
            other
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e));
        }
    });
    keys
}

/// Returns the work-relative path of `name` in the folder `rel` (a name that is not UTF-8
/// is kept lossily; the board reports it as a stray file).
fn child_rel(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        return name.to_string();
    }
    let mut child = String::with_capacity(rel.len() + 1 + name.len());
    child.push_str(rel);
    child.push('/');
    child.push_str(name);
    child
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::fs::symlink;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn files_come_in_walk_order_with_their_keys() {
        let dir = tempfile::tempdir().expect("tempdir");
        let work = dir.path();
        let long = "a-name-longer-than-sixteen-bytes";
        let rels = [
            format!("ready/{long}-10.yaml"),
            format!("ready/{long}-2.yaml"),
            format!("ready/{long}.yaml"),
            "a-b/x.yaml".to_string(),
            "a/x.yaml".to_string(),
            "assigned/bot/t.yaml".to_string(),
        ];
        for (i, rel) in rels.iter().enumerate() {
            write(work, rel, &"x".repeat(i + 1));
        }
        write(work, "assigned/bot/deep/e.txt", "not walked");
        symlink(work.join("a/x.yaml"), work.join("ready/link.yaml")).expect("symlink");
        let found = walk_in(work, &|_| true, None).expect("walk");
        let mut expected: Vec<&str> = rels.iter().map(String::as_str).collect();
        expected.sort_by(|a, b| crate::store::cache::walk_order(a, b));
        let listed: Vec<&str> = found.files.iter().map(|(rel, _)| rel.as_str()).collect();
        assert_eq!(listed, expected);
        for (rel, key) in &found.files {
            let i = rels.iter().position(|r| r == rel).expect("known file");
            let key = key.as_ref().expect("a key");
            let size = std::fs::metadata(work.join(rel)).expect("meta").len();
            assert_eq!(size, i as u64 + 1, "{rel}");
            assert_eq!(
                *key,
                StatKey::of(&rustix::fs::lstat(work.join(rel)).expect("lstat"))
            );
        }
        assert_eq!(found.symlinks, ["ready/link.yaml"]);
        let agents: Vec<&str> = found.agent_dirs.iter().map(AgentName::as_str).collect();
        assert_eq!(agents, ["bot"]);
    }

    #[test]
    fn an_inbox_window_keeps_the_other_files_in_walk_order() {
        let rels = ["done/x", "inbox/a", "inbox/b", "inbox/c", "ready/y"];
        let mut walk = Walk::of(rels.iter().map(|r| (r.to_string(), None)).collect());
        let last = walk.window_inbox(Some("inbox/a"), 1);
        assert_eq!(last.as_deref(), Some("inbox/b"), "inbox/c waits");
        let kept: Vec<&str> = walk.files.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(kept, ["done/x", "inbox/b", "ready/y"]);
        assert_eq!(walk.held, ["inbox/a", "inbox/c"]);
        assert_eq!(walk.window_inbox(Some("inbox/b"), 1), None, "nothing after");
    }

    #[test]
    fn a_scoped_walk_names_the_files_it_does_not_look_at() {
        let dir = tempfile::tempdir().expect("tempdir");
        let work = dir.path();
        for rel in [
            "ready/a.yaml",
            "done/b.yaml",
            "archive/2026-07/c.yaml",
            "agents/p.yaml",
        ] {
            write(work, rel, "x");
        }
        let found = walk_in(work, &|rel| rel.starts_with("ready/"), None).expect("walk");
        let looked: Vec<&str> = found.files.iter().map(|(rel, _)| rel.as_str()).collect();
        assert_eq!(looked, ["ready/a.yaml"]);
        assert!(found.files[0].1.is_some(), "looked at");
        assert_eq!(
            found.unread,
            ["agents/p.yaml", "archive/2026-07/c.yaml", "done/b.yaml"]
        );
    }

    #[test]
    fn a_recorded_folder_gives_what_a_walk_file_by_file_gives() {
        let dir = tempfile::tempdir().expect("tempdir");
        let work = dir.path();
        for rel in [
            "archive/2026-07/a.yaml",
            "archive/2026-07/b.yaml",
            "done/c.yaml",
            "ready/e.yaml",
        ] {
            write(work, rel, "x");
        }
        write(work, "archive/2026-08/d.yaml", "x");
        symlink(
            work.join("done/c.yaml"),
            work.join("archive/2026-08/l.yaml"),
        )
        .expect("symlink");
        let git_dir = tempfile::tempdir().expect("tempdir");
        let record = git_dir.path().join("record");
        let tree = crate::git::Oid::from_bytes(&[1; 20]).expect("oid");
        let trees = || {
            std::collections::HashMap::from([
                ("archive/2026-07".to_string(), tree),
                ("archive/2026-08".to_string(), tree),
                ("done".to_string(), tree),
                ("ready".to_string(), tree),
            ])
        };
        std::thread::sleep(std::time::Duration::from_millis(100));
        let plain = walk_in(work, &|_| true, None).expect("walk");
        let mut history = History::read(&record, trees());
        let first = walk_in(work, &|_| true, Some(&mut history)).expect("walk");
        history.save(&record);
        assert!(first.taken.is_empty(), "nothing recorded yet");
        let mut history = History::read(&record, trees());
        let second = walk_in(work, &|_| true, Some(&mut history)).expect("walk");
        assert_eq!(
            second.taken,
            ["archive/2026-07", "done"],
            "a symlink is never recorded, nor a folder of unfinished tasks"
        );
        for found in [&first, &second] {
            assert_eq!(found.files, plain.files);
            assert_eq!(found.symlinks, plain.symlinks);
        }
        history.save(&record);
        let judged: Vec<_> = second.judgeable.iter().map(|(j, _)| j.clone()).collect();
        History::judge(&record, &judged);
        let mut history = History::read(&record, trees()).with_blocks();
        let third = walk_in(work, &|_| true, Some(&mut history)).expect("walk");
        let blocks: Vec<&str> = third.blocks.iter().map(|b| b.rel.as_str()).collect();
        assert_eq!(
            blocks,
            ["archive/2026-07", "done"],
            "judged folders are blocks"
        );
        let unblocked = |(rel, _): &&(String, Option<StatKey>)| {
            !rel.starts_with("archive/2026-07/") && !rel.starts_with("done/")
        };
        let rest: Vec<_> = plain.files.iter().filter(unblocked).cloned().collect();
        assert_eq!(third.files, rest);
        assert_eq!(
            third.listing.read_by_marks(),
            plain.listing.read_by_marks(),
            "the listing of a block is the listing of its files"
        );
    }

    #[test]
    fn keys_keep_the_names_order_on_any_number_of_threads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let names: Vec<String> = (0..50).map(|i| format!("f{i}.yaml")).collect();
        for (i, name) in names.iter().enumerate() {
            write(dir.path(), name, &"x".repeat(i));
        }
        let mut asked: Vec<&str> = names.iter().map(String::as_str).collect();
        asked.insert(7, "gone.yaml");
        let fd = rustix::fs::open(dir.path(), DIR_FLAGS, Mode::empty()).expect("open");
        let one = stat_keys(fd.as_fd(), &asked, 1);
        for threads in [2, 3, 8] {
            assert_eq!(
                stat_keys(fd.as_fd(), &asked, threads),
                one,
                "{threads} threads"
            );
        }
        assert!(one[7].is_none(), "a file that went away has no key");
        for (name, key) in asked.iter().zip(&one).filter(|(n, _)| **n != "gone.yaml") {
            let st = rustix::fs::lstat(dir.path().join(name)).expect("lstat");
            assert_eq!(*key, Some(StatKey::of(&st)), "{name}");
        }
    }

    #[test]
    fn an_entry_of_unknown_type_is_looked_at() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "f.yaml", "x");
        std::fs::create_dir(dir.path().join("d")).expect("mkdir");
        symlink(dir.path().join("f.yaml"), dir.path().join("l.yaml")).expect("symlink");
        let fd = rustix::fs::open(dir.path(), DIR_FLAGS, Mode::empty()).expect("open");
        let folder = Dir::new(fd).expect("dir");
        let kinds = ["f.yaml", "d", "l.yaml", "gone"].map(|n| kind_of(&folder, n));
        assert_eq!(
            kinds,
            [
                FileType::RegularFile,
                FileType::Directory,
                FileType::Symlink,
                FileType::Unknown
            ]
        );
    }
}
