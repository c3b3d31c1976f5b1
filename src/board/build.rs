//! Turning a list of files under `work/` (path and bytes) into a board: which folder each file
//! belongs to, task files parsed and checked on their own, agent profiles read, and every file
//! that does not belong reported. Pure, so the planner can be tested without a disk.

use super::{AgentEntry, Board, Problem, ProfileFile, TaskFile};
use crate::check::{self, Task};
use crate::model::{AgentName, AgentProfile, Folder, State, TaskId};
use crate::schema::{Schema, Violation};
use crate::yaml::{parse_bytes, Limits};
use std::sync::Arc;

/// A file found under the work folder.
#[derive(Debug, Clone)]
pub struct RawFile {
    /// Path relative to the work folder, `/`-separated (`ready/a.yaml`).
    pub rel: String,
    /// The bytes, or why they could not be read.
    pub bytes: Result<Vec<u8>, String>,
    /// What the store did to the bytes on disk, if anything.
    pub stand_in: Option<StandIn>,
    /// What the stat cache knew of the file, when it had it.
    pub cached: Option<Cached>,
}

impl RawFile {
    /// Returns a file read as it is on disk.
    pub fn new(rel: String, bytes: Result<Vec<u8>, String>) -> RawFile {
        RawFile {
            rel,
            bytes,
            stand_in: None,
            cached: None,
        }
    }
}

/// Why a file's `bytes` are not what is on disk, and the hash of what is (transitions are
/// guarded by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StandIn {
    /// The file is still being written (docs/behaviour.md): `bytes` are its last committed version,
    /// which the planner leaves alone until the file settles.
    Settling(u64),
    /// The file passed the size limit (this many bytes): `bytes` are its newest committed
    /// version within the limit.
    Oversize(u64, u64),
    /// The file was rewritten without its `coord:` block: `bytes` are the new text with the
    /// block of its newest committed version restored.
    Restored(u64),
}

impl StandIn {
    /// Returns the hash of the bytes on disk.
    pub fn disk_hash(self) -> u64 {
        match self {
            StandIn::Settling(h) | StandIn::Oversize(_, h) | StandIn::Restored(h) => h,
        }
    }
}

/// What the stat cache gave for a file whose stat key had not changed.
#[derive(Debug, Clone)]
pub enum Cached {
    /// A task that passed the per-file checks, and its content hash; `bytes` is unused and the
    /// task's text is what the file holds.
    Task(Box<Task>, u64),
    /// An agent profile whose text (in `bytes`) passed the profile schema.
    Profile,
}

/// What a path under `work/` is.
enum Kind {
    Task(Folder, TaskId),
    Profile(AgentName),
    Errors,
    Schedule,
    Ignored,
    Stray(String),
}

/// Returns the FNV-1a hash of a file's bytes (the key of the seen-invalid memory).
pub fn content_hash(bytes: &[u8]) -> u64 {
    crate::hash::fnv1a(bytes)
}

impl Board {
    /// Builds a board from the files under `work_dir` and the folders of agents.
    pub fn build(
        work_dir: &str,
        files: Vec<RawFile>,
        agent_dirs: Vec<AgentName>,
        schemas: (&Schema, &Schema),
        limits: &Limits,
    ) -> Board {
        let mut board = Board::start(work_dir, agent_dirs);
        for f in files {
            board.add(f, schemas, limits);
        }
        board.finish()
    }

    /// Starts a board of the files under `work_dir` with the folders of agents: files are
    /// added one by one as a load takes them ([`Board::add`]), so no list of every file is
    /// held beside the board; [`Board::finish`] ends it.
    pub fn start(work_dir: &str, agent_dirs: Vec<AgentName>) -> Board {
        Board {
            work_dir: work_dir.to_string(),
            agent_dirs,
            ..Board::default()
        }
    }

    /// Ends a board started with [`Board::start`]: tasks sorted by path, an empty folder
    /// under `assigned/` without a profile reported (it is no agent: git does not carry an
    /// empty folder to other clones, and a typo must not receive work), problems sorted.
    pub fn finish(mut self) -> Board {
        self.tasks.sort_by(|a, b| a.path.cmp(&b.path));
        for name in std::mem::take(&mut self.agent_dirs) {
            if !self.agents.contains_key(&name) {
                self.problems.push(Problem {
                    path: format!("{}/assigned/{name}", self.work_dir),
                    message: format!("a folder without a profile or tasks is no agent and gets no work; add the agent ('coord agents add {name}') or remove the folder"),
                });
            }
        }
        self.problems.sort();
        self
    }

    /// Adds one file to a board started with [`Board::start`].
    pub fn add(
        &mut self,
        f: RawFile,
        (task_schema, agent_schema): (&Schema, &Schema),
        limits: &Limits,
    ) {
        let path = [self.work_dir.as_str(), "/", &f.rel].concat();
        // Files of one month folder come one after another: they share its name.
        let last = self.tasks.last().and_then(|t| t.folder.month.clone());
        let month = |m: &str| match last.clone() {
            Some(last) if *last == *m => last,
            _ => Arc::from(m),
        };
        match classify(&f.rel, &month) {
            Kind::Task(folder, id) => {
                let (mut hash, read) = match (f.cached, &f.bytes) {
                    (Some(Cached::Task(task, hash)), _) => (hash, Ok(Arc::new(*task))),
                    (_, Ok(b)) => (
                        content_hash(b),
                        check::read_task(id.as_str(), b, task_schema, limits)
                            .map(|d| Arc::new(Task::kept(folder.state, d))),
                    ),
                    (_, Err(e)) => (0, Err(vec![Violation::file(format!("cannot read: {e}"))])),
                };
                if let Some(s) = f.stand_in {
                    hash = s.disk_hash();
                }
                if let Some(agent) = &folder.agent {
                    self.agents
                        .entry(agent.clone())
                        .or_insert_with(|| self::agent(agent.clone()));
                }
                self.tasks.push(TaskFile {
                    hash,
                    id,
                    path,
                    folder,
                    read,
                    stand_in: f.stand_in,
                });
            }
            Kind::Profile(name) => {
                let checked = matches!(f.cached, Some(Cached::Profile));
                let schema = (!checked).then_some(agent_schema);
                let entry = read_profile(name.clone(), path, &f.bytes, schema, limits);
                self.agents.insert(name, entry);
            }
            Kind::Errors => {
                self.error_files.insert(path);
            }
            // Schedules are read by the tick's schedule step, not by the board.
            Kind::Schedule | Kind::Ignored => {}
            Kind::Stray(message) => self.problems.push(Problem { path, message }),
        }
    }
}

/// Returns whether a work-relative path belongs to the layout, which is all coord ever
/// commits of people's changes: task files in their folders, `.errors` files, agent
/// profiles, schedules, `.gitkeep` and `README.md` files and `work/.gitignore` (what the `.gitignore`
/// `coord init` writes lets git see). Anything else is stray (or ignored).
pub fn is_layout(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    match classify(rel, &|m| Arc::from(m)) {
        Kind::Task(..) | Kind::Profile(_) | Kind::Errors | Kind::Schedule => true,
        Kind::Ignored => {
            rel == ".gitignore" || name == ".gitkeep" || name.eq_ignore_ascii_case("README.md")
        }
        Kind::Stray(_) => false,
    }
}

/// Returns the folder and id of the task file at a work-relative path, when it is one.
pub fn task_at(rel: &str) -> Option<(Folder, TaskId)> {
    match classify(rel, &|m| Arc::from(m)) {
        Kind::Task(folder, id) => Some((folder, id)),
        _ => None,
    }
}

fn agent(name: AgentName) -> AgentEntry {
    AgentEntry {
        name,
        profile: AgentProfile::default(),
        file: None,
        error: None,
    }
}

/// Reads an agent profile, checking it against `schema` unless it is known to pass (None).
fn read_profile(
    name: AgentName,
    path: String,
    bytes: &Result<Vec<u8>, String>,
    schema: Option<&Schema>,
    limits: &Limits,
) -> AgentEntry {
    let parsed = bytes
        .as_ref()
        .map_err(|e| Violation::file(format!("cannot read: {e}")))
        .and_then(|b| parse_bytes(b, limits).map_err(|e| Violation::at(e.pos, e.message)))
        .and_then(|doc| {
            let empty = doc.value.is_null();
            if let Some(v) = schema
                .filter(|_| !empty)
                .and_then(|s| s.validate(&doc).into_iter().next())
            {
                return Err(v);
            }
            let profile: AgentProfile = if empty {
                AgentProfile::default()
            } else {
                serde_json::from_value(doc.value.clone())
                    .map_err(|e| Violation::file(e.to_string()))?
            };
            let text = String::from_utf8_lossy(bytes.as_deref().unwrap_or_default()).into_owned();
            Ok((
                profile,
                ProfileFile {
                    path: path.clone(),
                    text,
                    doc,
                },
            ))
        });
    match parsed {
        Ok((profile, file)) => AgentEntry {
            name,
            profile,
            file: Some(file),
            error: None,
        },
        Err(v) => AgentEntry {
            name,
            profile: AgentProfile {
                enabled: false,
                ..AgentProfile::default()
            },
            file: None,
            error: Some(Violation::at(v.pos, v.render(&path))),
        },
    }
}

fn is_task_name(name: &str) -> Option<&str> {
    name.strip_suffix(".yaml")
        .or_else(|| name.strip_suffix(".yml"))
}

/// Returns whether a file name is one the board passes over (a dot file such as `.gitkeep`,
/// a `README.md`, an editor's backup `~`).
pub fn is_ignored(name: &str) -> bool {
    name.starts_with('.') || name.eq_ignore_ascii_case("README.md") || name.ends_with('~')
}

fn task_kind(folder: Folder, name: &str) -> Kind {
    match is_task_name(name).map(TaskId::new) {
        Some(Ok(id)) => Kind::Task(folder, id),
        Some(Err(e)) => Kind::Stray(format!(
            "file name is not a task id ({e}); rename it to <id>.yaml with letters, digits, '.', '_' or '-'"
        )),
        None => Kind::Stray("not a task file (.yaml or .yml); move it out of work/".to_string()),
    }
}

/// Returns what the work-relative path `rel` is; `month` gives the shared name of a month
/// folder of `archive/`.
fn classify(rel: &str, month: &dyn Fn(&str) -> Arc<str>) -> Kind {
    let name = rel.rsplit('/').next().unwrap_or_default();
    if is_ignored(name) {
        return Kind::Ignored;
    }
    // At most three parts name a task file; a fourth slot catches anything deeper.
    let mut parts = [""; 4];
    let mut n = 0;
    for part in rel.split('/') {
        parts[n.min(3)] = part;
        n += 1;
    }
    match &parts[..n.min(4)] {
        ["invalid", n] if n.ends_with(".errors") => Kind::Errors,
        ["agents", n] => match is_task_name(n).map(AgentName::new) {
            Some(Ok(a)) => Kind::Profile(a),
            _ => Kind::Stray("agent profiles are <name>.yaml with a valid agent name".to_string()),
        },
        ["schedules", n] => match is_task_name(n).map(AgentName::new) {
            Some(Ok(_)) => Kind::Schedule,
            _ => Kind::Stray(
                "schedules are <name>.yaml with a name like a task id".to_string(),
            ),
        },
        ["assigned", agent, n] => match AgentName::new(agent) {
            Ok(a) => task_kind(Folder::assigned(a), n),
            Err(e) => Kind::Stray(format!("agent folder name {e}")),
        },
        ["archive", m, n] if is_month(m) => {
            task_kind(Folder::archive(month(m)), n)
        }
        [state, n] => match State::parse(state) {
            Some(s) if !matches!(s, State::Assigned | State::Archived) => {
                task_kind(Folder::of(s), n)
            }
            _ => Kind::Stray(format!(
                "'{state}' is not a state folder; move the file into one (inbox, ready, ...; see docs/files.md)"
            )),
        },
        [] | [_] if name.is_empty() => Kind::Ignored,
        [_] => Kind::Stray("files belong in a state folder, e.g. work/inbox/".to_string()),
        _ => Kind::Stray(
            "unexpected nesting; task files sit directly in their state folder".to_string(),
        ),
    }
}

/// Returns whether `s` names a month folder of `archive/` (`YYYY-MM`).
pub fn is_month(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 7
        && b[4] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(rel: &str, text: &str) -> RawFile {
        RawFile::new(rel.to_string(), Ok(text.as_bytes().to_vec()))
    }

    fn build(files: Vec<RawFile>) -> Board {
        let (t, a) = (Schema::builtin_task(), Schema::builtin_agent());
        Board::build("work", files, vec![], (&t, &a), &Limits::default())
    }

    #[test]
    fn classifies_every_kind_of_path() {
        let b = build(vec![
            raw("inbox/a.yaml", "title: a\n"),
            raw("assigned/alice/b.yml", "title: b\n"),
            raw("archive/2026-11/c.yaml", "title: c\n"),
            raw("agents/bob.yaml", "capabilities: [x]\nmax_active: 2\n"),
            raw("invalid/d.yaml.errors", "x"),
            raw("ready/.gitkeep", ""),
            raw("ready/README.md", ""),
            raw("ready/notes.txt", ""),
            raw("ready/bad name.yaml", "title: x\n"),
            raw("elsewhere/e.yaml", "title: e\n"),
        ]);
        let ids: Vec<_> = b.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, vec!["c", "b", "a"]);
        assert_eq!(b.agents.len(), 2);
        assert_eq!(
            b.agents[&AgentName::new("bob").expect("name")]
                .profile
                .max_active,
            2
        );
        assert_eq!(b.error_files.len(), 1);
        assert_eq!(b.problems.len(), 3, "{:?}", b.problems);
    }

    #[test]
    fn unreadable_profile_disables_the_agent() {
        let b = build(vec![raw("agents/x.yaml", "max_active: lots\n")]);
        let x = &b.agents[&AgentName::new("x").expect("name")];
        assert!(!x.profile.enabled);
        assert!(x.error.is_some());
    }
}
