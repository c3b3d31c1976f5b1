//! An immutable snapshot of `work/`: every task file with its folder and what reading it gave,
//! every agent with its profile, and the files that do not belong. Built by `store::load`;
//! read by the engine and the commands. Pure data.

use crate::check::Task;
use crate::model::{AgentName, AgentProfile, Folder, State, TaskId};
use crate::schema::Violation;
use crate::yaml::Doc;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

mod blocks;
mod build;
mod checks;
mod spend;
pub use blocks::Block;
pub use build::{content_hash, is_ignored, is_layout, is_month, task_at, Cached, RawFile, StandIn};
pub use checks::Checks;
use jiff::Timestamp;

/// One task file.
#[derive(Debug, Clone)]
pub struct TaskFile {
    /// The id (file stem).
    pub id: TaskId,
    /// Repo-relative path, `/`-separated.
    pub path: String,
    /// The folder it sits in.
    pub folder: Folder,
    /// The task (shared, so the planner's working copy costs no deep clone; parsed on first
    /// use when it came from the stat cache), or every problem found in the file on its own.
    pub read: Result<Arc<Task>, Vec<Violation>>,
    /// Set when `read` comes from other bytes than the file's (a file still being written,
    /// past the size limit, or rewritten without its `coord:` block).
    pub stand_in: Option<StandIn>,
    /// Content hash of the bytes on disk (`content_hash`), which transitions are guarded by.
    pub hash: u64,
}

/// The live copies of one id, split as intake judges them (docs/behaviour.md).
pub struct Copies<'a> {
    /// New inbox files reusing the id, each with the path of another file holding it.
    pub taken: Vec<(&'a TaskFile, &'a str)>,
    /// The others: the task itself, or the copies of a duplicate id.
    pub kept: Vec<&'a TaskFile>,
}

/// Splits the `live` files of one id. A file is a new one reusing a taken id when it is in
/// `inbox/`, settled, and no other file of the id has its file name. A copy under the same
/// name is rather a moved file reappearing at its old path (an editor saving it), which is
/// kept and reported as a duplicate; a file still being written is judged once it
/// settles.
pub fn split_copies<'a>(live: &[&'a TaskFile]) -> Copies<'a> {
    let mut copies = Copies {
        taken: Vec::new(),
        kept: Vec::new(),
    };
    for &file in live {
        let others = || live.iter().filter(|o| o.path != file.path);
        let reuses = file.folder.state == State::Inbox
            && !matches!(file.stand_in, Some(StandIn::Settling(_)))
            && others().all(|o| o.file_name() != file.file_name());
        match others().next() {
            Some(holder) if reuses => copies.taken.push((file, holder.path.as_str())),
            _ => copies.kept.push(file),
        }
    }
    copies
}

impl TaskFile {
    /// Returns the file name (`<id>.yaml` or `.yml`).
    pub fn file_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

/// An agent profile file.
#[derive(Debug, Clone)]
pub struct ProfileFile {
    /// Repo-relative path.
    pub path: String,
    /// Its exact text.
    pub text: String,
    /// Parsed, for splicing the `coord:` block.
    pub doc: Doc,
}

/// One agent: a profile, a folder under `assigned/`, or both.
#[derive(Debug, Clone)]
pub struct AgentEntry {
    /// The agent's name.
    pub name: AgentName,
    /// The profile with defaults applied (defaults alone when there is no readable file).
    pub profile: AgentProfile,
    /// The profile file, when there is one that reads.
    pub file: Option<ProfileFile>,
    /// What is wrong with an unreadable profile.
    pub error: Option<Violation>,
}

/// A path under `work/` that is not a task file where one belongs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    /// Repo-relative path.
    pub path: String,
    /// What is wrong and what to do.
    pub message: String,
}

/// A file still being written (docs/behaviour.md): read once its size and mtime have been stable
/// for `settle`, or sooner when it arrived by rename, its writer closed it, or it is
/// committed as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settling {
    /// Repo-relative path.
    pub path: String,
    /// The task id its name gives, if it names one.
    pub id: Option<TaskId>,
    /// When it settles unless written again (the system clock, not `--now`).
    pub until: Timestamp,
}

/// The snapshot.
#[derive(Debug, Clone, Default)]
pub struct Board {
    /// The work folder, repo-relative (`work`).
    pub work_dir: String,
    /// Every task file, sorted by path.
    pub tasks: Vec<TaskFile>,
    /// Every agent by name.
    pub agents: BTreeMap<AgentName, AgentEntry>,
    /// `invalid/*.errors` files, repo-relative.
    pub error_files: BTreeSet<String>,
    /// Symlinks, stray files, badly named files and folders.
    pub problems: Vec<Problem>,
    /// Files still being written, not read yet (a task file among them that was committed
    /// before is on the board as committed, frozen until it settles).
    pub settling: Vec<Settling>,
    /// Inbox files a tick over a big inbox takes in a later window (see `Walk::window_inbox`):
    /// not read yet, but their ids exist, so a task may depend on one.
    pub held: Vec<TaskId>,
    /// Task files a single-task command's scoped load named without reading them (in the
    /// folders it does not act on): their ids exist, and any of them may be a second copy
    /// of a task on the board.
    pub unread: Vec<TaskId>,
    /// The commit HEAD pointed at when the board was loaded (every layout file not settling
    /// is committed as read), when known.
    pub head: Option<String>,
    /// The history folders a tick's load took whole ([`Block`]): the ids of their task
    /// files, none of which is in `tasks` unless the load put it there for the planner.
    /// Empty on every other board.
    pub blocks: Vec<Block>,
    /// The folders under `assigned/` the walk found, until [`Board::finish`] reports those
    /// that are no agent's (no profile, no task).
    pub agent_dirs: Vec<AgentName>,
}

impl Board {
    /// Returns the live copies of each id, by id: every file except those in `invalid/`
    /// (a rejected file is not a copy of the task). Two or more copies are a duplicate.
    pub fn live_by_id(&self) -> BTreeMap<&TaskId, Vec<&TaskFile>> {
        // Sorted and distinct: the map is built in one pass.
        self.live_sorted()
            .chunk_by(|a, b| a.id == b.id)
            .map(|copies| (&copies[0].id, copies.to_vec()))
            .collect()
    }

    /// Returns the live files (every file except those in `invalid/`) sorted by id, so the
    /// copies of one id are next to each other (`chunk_by` groups them without a vector per
    /// id, as the planner does for every task of the board).
    pub fn live_sorted(&self) -> Vec<&TaskFile> {
        let mut live: Vec<&TaskFile> = self
            .tasks
            .iter()
            .filter(|t| t.folder.state != State::Invalid)
            .collect();
        live.sort_by(|a, b| a.id.cmp(&b.id));
        live
    }

    /// Returns whether some file of `work/` has this id: a file on the board, one a scoped
    /// load named without reading it, an inbox file held for a later window, or a new file
    /// still being written (its id counts as taken).
    pub fn has_id(&self, id: &TaskId) -> bool {
        self.tasks.iter().any(|t| &t.id == id)
            || self.in_blocks(id)
            || self.unread.contains(id)
            || self.held.contains(id)
            || self.settling.iter().any(|s| s.id.as_ref() == Some(id))
    }

    /// Returns the files of one id.
    pub fn find(&self, id: &TaskId) -> Vec<&TaskFile> {
        self.tasks.iter().filter(|t| &t.id == id).collect()
    }

    /// Returns the repo-relative path of a file named `file` in `folder`.
    pub fn path_in(&self, folder: &Folder, file: &str) -> String {
        format!("{}/{}/{file}", self.work_dir, folder.rel_dir())
    }

    /// Returns how many tasks sit in `agent`'s folder.
    pub fn load_of(&self, agent: &AgentName) -> usize {
        self.tasks
            .iter()
            .filter(|t| t.folder.agent.as_ref() == Some(agent))
            .count()
    }

    /// Returns how many tasks sit in each state.
    pub fn counts(&self) -> BTreeMap<State, usize> {
        let mut c = BTreeMap::new();
        for t in &self.tasks {
            *c.entry(t.folder.state).or_insert(0) += 1;
        }
        for b in &self.blocks {
            *c.entry(b.folder.state).or_insert(0) += b.len();
        }
        c
    }
}
