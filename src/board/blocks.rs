//! History folders as blocks: a tick's board holds a judged history folder (see
//! `store::history`) as the ids of its task files, not a file each. The planner needs of
//! such files only their ids (is an id taken, is a live copy a duplicate) and, for a few, the
//! task itself (a dependency's state, an input's output, a handoff's existing step): the load
//! puts exactly those on the board as files ([`Board::block_files_wanted`]), so every step
//! reads them as it always did. Pure.

use super::{Board, TaskFile};
use crate::model::{Folder, State, TaskId};
use std::collections::{BTreeSet, HashSet};

/// The task files of one history folder, by id, with no file read.
#[derive(Debug, Clone)]
pub struct Block {
    /// The folder, work-relative (`done`, `archive/2026-07`).
    pub rel: String,
    /// The folder as the board names it.
    pub folder: Folder,
    /// The file names, one after another.
    names: String,
    /// Each file: where its name starts, where its id ends, where its name ends in `names`;
    /// sorted by id.
    spans: Vec<(u32, u32, u32)>,
}

impl Block {
    /// Returns the block of the folder `rel` (work-relative) holding the files `names`
    /// (`<id>.yaml` or `.yml`, or one the board passes over: [`super::is_ignored`]); None
    /// when `rel` is not a folder of task files or a name is neither.
    pub fn new<'n>(rel: &str, names: impl ExactSizeIterator<Item = &'n str>) -> Option<Block> {
        let (folder, _) = super::task_at(&format!("{rel}/x.yaml"))?;
        let mut block = Block {
            rel: rel.to_string(),
            folder,
            names: String::new(),
            spans: Vec::with_capacity(names.len()),
        };
        for name in names.filter(|n| !super::is_ignored(n)) {
            let id = name
                .strip_suffix(".yaml")
                .or_else(|| name.strip_suffix(".yml"))?;
            let start = u32::try_from(block.names.len()).ok()?;
            let id_end = start + u32::try_from(id.len()).ok()?;
            block.names.push_str(name);
            let end = u32::try_from(block.names.len()).ok()?;
            block.spans.push((start, id_end, end));
        }
        let names = &block.names;
        let id = |s: &(u32, u32, u32)| &names[s.0 as usize..s.1 as usize];
        // Names in byte order are ids in byte order but where one id is the start of
        // another (`a-1.yaml` sorts before `a.yaml`).
        if !block.spans.is_sorted_by(|a, b| id(a) <= id(b)) {
            let mut spans = std::mem::take(&mut block.spans);
            spans.sort_by(|a, b| id(a).cmp(id(b)));
            block.spans = spans;
        }
        Some(block)
    }

    /// Returns how many task files the folder holds.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Returns whether the folder holds no task file.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    fn id_at(&self, at: usize) -> &str {
        let (start, id_end, _) = self.spans[at];
        &self.names[start as usize..id_end as usize]
    }

    fn name_at(&self, at: usize) -> &str {
        let (start, _, end) = self.spans[at];
        &self.names[start as usize..end as usize]
    }

    /// Returns the ids, sorted.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        (0..self.spans.len()).map(|at| self.id_at(at))
    }

    /// Returns the file name of `id` in the folder, when it holds one.
    pub fn name_of(&self, id: &str) -> Option<&str> {
        let at = self.first_from(id);
        (at < self.len() && self.id_at(at) == id).then(|| self.name_at(at))
    }

    /// Returns where the first id not below `from` is.
    fn first_from(&self, from: &str) -> usize {
        let names = &self.names;
        self.spans
            .partition_point(|s| &names[s.0 as usize..s.1 as usize] < from)
    }

    /// Takes the file `name` out of the block (the load put it on the board as a file).
    pub fn remove(&mut self, name: &str) {
        let names = &self.names;
        if let Some(at) = self
            .spans
            .iter()
            .position(|s| &names[s.0 as usize..s.2 as usize] == name)
        {
            self.spans.remove(at);
        }
    }

    /// Returns the file names of the ids of `sorted` (sorted ids) the block holds: one pass
    /// through both, as a merge.
    pub fn names_of_sorted<'b>(&'b self, sorted: &'b [&str]) -> Vec<&'b str> {
        let mut names = Vec::new();
        let (mut i, mut at) = (0, 0);
        while i < sorted.len() && at < self.len() {
            match sorted[i].cmp(self.id_at(at)) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => at += 1,
                std::cmp::Ordering::Equal => {
                    names.push(self.name_at(at));
                    i += 1;
                }
            }
        }
        names
    }

    /// Returns the file names of the ids that start with `prefix`.
    pub fn names_with_prefix<'b>(&'b self, prefix: &'b str) -> impl Iterator<Item = &'b str> {
        (self.first_from(prefix)..self.len())
            .take_while(move |&at| self.id_at(at).starts_with(prefix))
            .map(|at| self.name_at(at))
    }
}

impl Board {
    /// Returns whether a block holds a task file of `id`.
    pub fn in_blocks(&self, id: &TaskId) -> bool {
        self.blocks.iter().any(|b| b.name_of(id.as_str()).is_some())
    }

    /// Returns how many task files the blocks hold.
    pub fn block_files(&self) -> usize {
        self.blocks.iter().map(Block::len).sum()
    }

    /// Returns the files of the blocks (work-relative) the planner may ask for, other than
    /// those in `expanded`: every copy of an id a file on the board also has (a live copy
    /// beside it is a duplicate, an inbox file reusing it goes to `invalid/`), every copy
    /// of an id two blocks hold, each dependency of a task waiting to start (or of a file of
    /// a block already on the board: a cycle check follows them), and each id a handoff may
    /// have made of a task on the board (it starts with the parent's id).
    pub fn block_files_wanted(&self, expanded: &HashSet<String>) -> BTreeSet<String> {
        let mut wanted = BTreeSet::new();
        let mut want = |block: &Block, name: &str| {
            let rel = format!("{}/{name}", block.rel);
            if !expanded.contains(&rel) {
                wanted.insert(rel);
            }
        };
        let live: Vec<&TaskFile> = self
            .tasks
            .iter()
            .filter(|t| t.folder.state != State::Invalid)
            .collect();
        let mut ids: Vec<&str> = live.iter().map(|t| t.id.as_str()).collect();
        ids.sort_unstable();
        for b in &self.blocks {
            for name in b.names_of_sorted(&ids) {
                want(b, name);
            }
        }
        // Only a task that may finish this pass makes steps (`handoff::create_children`).
        let parents = live
            .iter()
            .filter(|t| matches!(t.folder.state, State::Assigned | State::Review));
        for t in parents {
            let prefix = step_prefix(&t.id);
            for b in &self.blocks {
                for name in b.names_with_prefix(&prefix) {
                    want(b, name);
                }
            }
        }
        for t in &live {
            for id in named_by_expressions(t) {
                for b in &self.blocks {
                    if let Some(name) = b.name_of(&id) {
                        want(b, name);
                    }
                }
            }
        }
        for t in &live {
            for dep in deps_of(t, expanded, &self.work_dir) {
                for b in &self.blocks {
                    if let Some(name) = b.name_of(dep.as_str()) {
                        want(b, name);
                    }
                }
            }
        }
        for id in self.ids_in_two_blocks() {
            for b in &self.blocks {
                if let Some(name) = b.name_of(&id) {
                    want(b, name);
                }
            }
        }
        for b in self.spending_blocks() {
            for at in 0..b.len() {
                want(b, b.name_at(at));
            }
        }
        wanted
    }

    /// Returns the blocks whose files an agent's budget counts, when a profile sets one:
    /// the finished folders and the two newest months of the archive (a task finished this
    /// month is archived this month or the next).
    fn spending_blocks(&self) -> Vec<&Block> {
        if !self.has_budgets() {
            return Vec::new();
        }
        let mut months: Vec<&str> = self
            .blocks
            .iter()
            .filter(|b| b.folder.state == State::Archived)
            .map(|b| b.rel.as_str())
            .collect();
        months.sort_unstable();
        let recent = &months[months.len().saturating_sub(2)..];
        self.blocks
            .iter()
            .filter(|b| b.folder.state != State::Archived || recent.contains(&b.rel.as_str()))
            .collect()
    }

    /// Returns the files of the blocks holding a dependency of one of `files` (block files
    /// just put on the board: a cycle check follows their dependencies).
    pub fn block_deps_wanted(&self, files: &[TaskFile]) -> BTreeSet<String> {
        let mut wanted = BTreeSet::new();
        for t in files {
            let Ok(task) = &t.read else { continue };
            for dep in &task.waiting().depends_on {
                for b in &self.blocks {
                    if let Some(name) = b.name_of(dep.as_str()) {
                        wanted.insert(format!("{}/{name}", b.rel));
                    }
                }
            }
        }
        wanted
    }

    /// Returns the ids more than one block holds (a merge of the blocks' sorted ids).
    fn ids_in_two_blocks(&self) -> Vec<String> {
        let mut twice = Vec::new();
        if self.blocks.len() < 2 {
            return twice;
        }
        let mut heads: Vec<_> = self.blocks.iter().map(|b| b.ids().peekable()).collect();
        loop {
            let Some(least) = heads.iter_mut().filter_map(|h| h.peek().copied()).min() else {
                return twice;
            };
            let mut n = 0;
            for h in &mut heads {
                if h.peek() == Some(&least) {
                    h.next();
                    n += 1;
                }
            }
            if n > 1 {
                twice.push(least.to_string());
            }
        }
    }
}

/// Returns what every id a handoff makes of `parent` starts with (`handoff::child_id`: the
/// parent's id and a dot, or its first 100 characters when that is too long).
fn step_prefix(parent: &TaskId) -> String {
    let head: String = parent.as_str().chars().take(100).collect();
    // `handoff::child_id` drops the dots a parent's id ends with before its own.
    let trimmed = head.trim_end_matches('.');
    match head.len() == parent.as_str().len() {
        true => format!("{trimmed}."),
        false => trimmed.to_string(),
    }
}

/// Returns the ids the expressions in a task's text name (`${tasks.<id>.result.output...}`,
/// in its input or anywhere else, such as an agent's output a step takes as its input): a
/// tick may resolve them (a hand move or a handoff starts an attempt), so their block files
/// go on the board. Every `${...}` is looked at on its own; one that does not read names
/// nothing. The text is scanned as it is held or stored, never parsed (a parse is kept).
fn named_by_expressions(t: &TaskFile) -> Vec<String> {
    let Ok(task) = &t.read else {
        return Vec::new();
    };
    let Some(text) = task.text().read() else {
        return Vec::new();
    };
    text.match_indices("${")
        .filter_map(|(at, _)| {
            let body = &text[at + 2..];
            let body = &body[..body.find('}').unwrap_or(body.len())];
            let rest = body.trim_start().strip_prefix("tasks.")?;
            Some(rest[..rest.find(".result.output")?].to_string())
        })
        .collect()
}

/// Returns the dependencies of a file whose dependencies a step or a check may follow: a
/// task waiting to start (read from its summary, no parse) or a file of a block put on the
/// board (`expanded`, by work-relative path).
fn deps_of(t: &TaskFile, expanded: &HashSet<String>, work_dir: &str) -> Vec<TaskId> {
    let Ok(task) = &t.read else {
        return Vec::new();
    };
    let waiting = matches!(
        t.folder.state,
        State::Inbox | State::Blocked | State::Ready | State::Review
    );
    let from_block = t
        .path
        .strip_prefix(work_dir)
        .and_then(|p| p.strip_prefix('/'))
        .is_some_and(|rel| expanded.contains(rel));
    if waiting || from_block {
        task.waiting().depends_on.clone()
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(rel: &str, names: &[&str]) -> Block {
        Block::new(rel, names.iter().copied()).expect("block")
    }

    #[test]
    fn ids_are_found_by_id_whatever_the_name_order() {
        let b = block(
            "done",
            &[".gitkeep", "README.md", "a-1.yaml", "a.yml", "b.yaml"],
        );
        assert_eq!(b.ids().collect::<Vec<_>>(), ["a", "a-1", "b"]);
        assert_eq!(b.name_of("a"), Some("a.yml"));
        assert_eq!(b.name_of("a-1"), Some("a-1.yaml"));
        assert_eq!(b.name_of("c"), None);
        assert_eq!(b.folder.state, State::Done);
        let m = block("archive/2026-07", &["p.x.yaml", "p.y.yaml", "pq.yaml"]);
        assert_eq!(m.folder.state, State::Archived);
        let steps: Vec<_> = m.names_with_prefix("p.").collect();
        assert_eq!(steps, ["p.x.yaml", "p.y.yaml"]);
    }

    #[test]
    fn ids_two_blocks_hold_are_found() {
        let board = Board {
            blocks: vec![
                block("done", &["a.yaml", "c.yaml", "e.yaml"]),
                block("archive/2026-07", &["b.yaml", "c.yaml"]),
                block("archive/2026-08", &["e.yaml", "f.yaml"]),
            ],
            ..Board::default()
        };
        assert_eq!(board.ids_in_two_blocks(), ["c", "e"]);
        let wanted = board.block_files_wanted(&HashSet::new());
        let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
        assert_eq!(
            wanted,
            [
                "archive/2026-07/c.yaml",
                "archive/2026-08/e.yaml",
                "done/c.yaml",
                "done/e.yaml"
            ]
        );
    }

    /// The files the planner may ask for: a block's copy of an id on the board, a waiting
    /// task's dependency, the steps of a task that may finish; nothing else.
    #[test]
    fn only_the_files_the_planner_may_ask_for_are_wanted() {
        let (t, a) = (
            crate::schema::Schema::builtin_task(),
            crate::schema::Schema::builtin_agent(),
        );
        let raw = |rel: &str, text: &str| super::super::RawFile::new(rel.into(), Ok(text.into()));
        let files = vec![
            raw("assigned/bot/p.yaml", "title: p\n"),
            raw("ready/r.yaml", "title: r\ndepends_on: [d]\n"),
            raw("inbox/x.yml", "title: x\n"),
        ];
        let limits = crate::yaml::Limits::default();
        let mut board = Board::build("work", files, vec![], (&t, &a), &limits);
        board.blocks = vec![
            block(
                "done",
                &["d.yaml", "other.yaml", "p.bot.yaml", "r.next.yaml"],
            ),
            block("archive/2026-07", &["pq.yaml", "x.yaml"]),
        ];
        let wanted = board.block_files_wanted(&HashSet::new());
        let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
        assert_eq!(
            wanted,
            ["archive/2026-07/x.yaml", "done/d.yaml", "done/p.bot.yaml"]
        );
    }

    #[test]
    fn a_block_file_s_dependencies_are_wanted_in_turn() {
        let (t, a) = (
            crate::schema::Schema::builtin_task(),
            crate::schema::Schema::builtin_agent(),
        );
        let limits = crate::yaml::Limits::default();
        let files = vec![super::super::RawFile::new(
            "done/c.yaml".into(),
            Ok(b"title: c\ndepends_on: [b]\ncoord:\n  state: done\n".to_vec()),
        )];
        let mut board = Board::build("work", files, vec![], (&t, &a), &limits);
        board.blocks = vec![block("archive/2026-07", &["a.yaml", "b.yaml"])];
        let wanted = board.block_deps_wanted(&board.tasks);
        let wanted: Vec<&str> = wanted.iter().map(String::as_str).collect();
        assert_eq!(wanted, ["archive/2026-07/b.yaml"]);
    }

    #[test]
    fn a_parent_s_steps_share_the_prefix_child_id_gives_them() {
        for parent in ["p".to_string(), "p.".to_string(), "x".repeat(120)] {
            let parent = TaskId::new(&parent).expect("id");
            let child = crate::engine::handoff::child_id(&parent, "bob");
            assert!(child.as_str().starts_with(&step_prefix(&parent)), "{child}");
        }
    }

    #[test]
    fn a_folder_with_another_file_is_no_block() {
        assert!(Block::new("done", ["a.yaml", "notes.txt"].into_iter()).is_none());
        assert!(Block::new("ready", ["a.yaml"].into_iter()).is_some());
        assert!(Block::new("elsewhere", ["a.yaml"].into_iter()).is_none());
    }
}
