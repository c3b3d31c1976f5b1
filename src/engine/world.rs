//! The planner's working state: the board's live tasks as they will be after the transitions
//! planned so far, agent loads and breaker states, and the builders that turn a decision into
//! a transition (new text spliced, ops listed, entry updated).

use super::{Clock, Inputs, Note, Op, Plan, Transition};
use crate::board::{split_copies, Board, Copies, StandIn, TaskFile};
use crate::check::{self, Task, TaskDoc};
use crate::config::Config;
use crate::model::time::whole_second;
use crate::model::{
    AgentCoord, AgentName, AgentProfile, CoordBlock, Endpoint, ErrorCode, ErrorInfo, Folder, State,
    TaskId, TaskResult,
};
use crate::yaml::{self, Limits};
use jiff::Timestamp;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// Why a result's signature was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// The signature is missing, malformed or wrong: the task fails with `bad_signature`.
    Bad(String),
    /// The coordinator cannot check it (no usable key for the agent): the task waits.
    Unverifiable(String),
}

/// Checks a result's signature (docs/security.md).
pub trait Verifier {
    /// Returns why the result's signature is not acceptable, if it is not.
    fn verify(
        &self,
        task: &TaskId,
        attempt: u32,
        agent: &AgentName,
        result: &TaskResult,
    ) -> Result<(), Rejection>;
}

/// Signs a result an agent reports through `coord complete --sign` / `coord fail --sign`.
pub trait Signer {
    /// Returns the `signature:` value for `result` (a result mapping), or why it cannot.
    fn sign(
        &self,
        task: &TaskId,
        attempt: u32,
        agent: &AgentName,
        result: &Value,
    ) -> Result<String, String>;
}

/// The highest attempt ever granted per task (docs/security.md), as history shows it: a new attempt
/// is numbered above it, so a revert or a hand edit of the `coord:` block cannot make coord
/// grant an attempt number twice.
pub trait AttemptFloor {
    /// Returns the highest attempt number granted for `id` before (0 when none).
    fn floor(&self, id: &TaskId) -> u32;
}

/// No history (tests): the task file's own `coord.attempt` counts.
#[cfg(test)]
pub struct NoHistory;

#[cfg(test)]
impl AttemptFloor for NoHistory {
    fn floor(&self, _: &TaskId) -> u32 {
        0
    }
}

/// A verifier for repos that do not require signed results.
pub struct AcceptAll;

impl Verifier for AcceptAll {
    fn verify(&self, _: &TaskId, _: u32, _: &AgentName, _: &TaskResult) -> Result<(), Rejection> {
        Ok(())
    }
}

/// A live task as it stands after the transitions planned so far.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The id.
    pub id: TaskId,
    /// Repo-relative path.
    pub path: String,
    /// Its folder.
    pub folder: Folder,
    /// Its parsed content, shared with the board until a transition changes it.
    pub task: Arc<Task>,
    /// The content hash of the file's bytes as planned so far (what the next transition of
    /// this task is guarded by).
    pub hash: u64,
    /// Set when `task` was read from other bytes than the file's (see [`StandIn`]).
    pub stand_in: Option<StandIn>,
}

impl Entry {
    /// Returns the file name.
    pub fn file_name(&self) -> String {
        self.path
            .rsplit('/')
            .next()
            .unwrap_or(&self.path)
            .to_string()
    }
}

/// What to do with the `result:` block in a transition.
pub enum ResultEdit {
    /// Leave it.
    Keep,
    /// Remove it (the task goes back for another attempt).
    Remove,
    /// Write this result.
    Set(Value),
}

/// An agent's planning state.
#[derive(Debug, Clone)]
pub struct AgentState {
    /// Its profile.
    pub profile: AgentProfile,
    /// Breaker state as planned.
    pub coord: AgentCoord,
    /// Whether `coord` changed this tick.
    pub changed: bool,
    /// Why its budget is spent, with when the period ends; None while it has room.
    pub over_budget: Option<(String, Timestamp)>,
}

/// The working state of one planning pass.
pub struct World<'a> {
    /// The snapshot.
    pub board: &'a Board,
    /// Configuration.
    pub config: &'a Config,
    /// The clock: decisions ask it whether an instant has come.
    pub clock: Clock,
    /// Signature checks.
    pub verifier: &'a dyn Verifier,
    /// Attempts granted before, from history.
    pub attempts: &'a dyn AttemptFloor,
    /// When this clone first saw each deadline.
    sightings: &'a dyn super::sighting::Sightings,
    /// Answers repository gates.
    gates: &'a dyn crate::model::gate::GateAnswers,
    /// The hub's epoch, recorded in each attempt started (None outside a hub).
    pub epoch: Option<u64>,
    /// The digest of the idempotency key of the claim being planned, recorded in the attempt
    /// it starts (None for any other plan).
    pub claim_key: Option<String>,
    /// Live, unique, readable tasks by id, except those of `archived`.
    live: BTreeMap<TaskId, Entry>,
    /// The archived tasks that are the one live copy of their id and read, sorted by id, as
    /// the board's files: no entry is made for them (at 100,000 tasks, 80,000 are archived
    /// and no planning step but a lookup by id reads one). [`World::entry`] gives one as an
    /// entry; a step that edits or forgets one takes it into `live` first (the flag).
    archived: Vec<(&'a TaskFile, bool)>,
    /// Every id present on the board in any form but those of `archived` (the board's own,
    /// borrowed: a world at 100,000 tasks copied each).
    ids: HashSet<Cow<'a, TaskId>>,
    /// New inbox files whose id another live file holds under another file name (docs/behaviour.md:
    /// the id is not unique), each with the paths of the files holding it.
    pub taken: Vec<(&'a TaskFile, &'a str)>,
    /// Agents by name.
    pub agents: BTreeMap<AgentName, AgentState>,
    /// Tasks whose file is still being written: on the board as committed, never moved.
    frozen: HashSet<TaskId>,
    /// Tasks with old copies an editor saved after coord moved them (see
    /// [`super::copies`]): the task is its entry, the old copies are listed here.
    pub older: Vec<(TaskId, Vec<&'a TaskFile>)>,
    /// The number of live entries in each agent's folder, kept as entries move (counting
    /// them for every ready task made a plan over many tasks quadratic).
    loads: std::collections::HashMap<AgentName, usize>,
    out: Plan,
}

/// Moves one entry's count in `loads` from the agent of `from` to the agent of `to`.
fn shift(
    loads: &mut std::collections::HashMap<AgentName, usize>,
    from: Option<&Folder>,
    to: Option<&Folder>,
) {
    if let Some(agent) = from.and_then(|f| f.agent.as_ref()) {
        if let Some(n) = loads.get_mut(agent) {
            *n = n.saturating_sub(1);
        }
    }
    if let Some(agent) = to.and_then(|f| f.agent.clone()) {
        *loads.entry(agent).or_default() += 1;
    }
}

impl<'a> World<'a> {
    /// Builds the working state from a board, noting duplicates and unreadable files.
    pub fn new(board: &'a Board, inputs: &Inputs<'a>) -> World<'a> {
        let mut w = World {
            board,
            config: inputs.config,
            clock: Clock::new(inputs.now),
            verifier: inputs.verifier,
            attempts: inputs.attempts,
            sightings: inputs.sightings,
            gates: inputs.gates,
            epoch: inputs.epoch,
            claim_key: None,
            live: BTreeMap::new(),
            archived: Vec::new(),
            ids: board
                .tasks
                .iter()
                .filter(|t| t.folder.state == State::Invalid)
                .map(|t| &t.id)
                .chain(board.settling.iter().filter_map(|s| s.id.as_ref()))
                .chain(&board.held)
                .chain(&board.unread)
                .map(Cow::Borrowed)
                .collect(),
            taken: Vec::new(),
            frozen: board
                .tasks
                .iter()
                .filter(|t| matches!(t.stand_in, Some(StandIn::Settling(_))))
                .map(|t| t.id.clone())
                .collect(),
            older: Vec::new(),
            agents: board
                .agents
                .iter()
                .map(|(n, a)| {
                    let st = AgentState {
                        profile: a.profile.clone(),
                        coord: a.profile.coord.clone(),
                        changed: false,
                        over_budget: board.budget_spent(a, inputs.now),
                    };
                    (n.clone(), st)
                })
                .collect(),
            loads: std::collections::HashMap::new(),
            out: Plan::default(),
        };
        w.load_entries();
        for e in w.live.values() {
            shift(&mut w.loads, None, Some(&e.folder));
        }
        for s in &board.settling {
            let (path, until) = (s.path.clone(), s.until);
            w.note(Note::Settling { path, until });
        }
        w
    }

    fn load_entries(&mut self) {
        let mut entries = Vec::new();
        let board = self.board;
        for live in board.live_sorted().chunk_by(|a, b| a.id == b.id) {
            let id = &live[0].id;
            if let Some(f) = archived_alone(live) {
                self.archived.push((f, false));
                continue;
            }
            self.ids.insert(Cow::Borrowed(id));
            let Copies { taken, kept } = split_copies(live);
            self.taken.extend(taken);
            if kept.len() > 1 {
                if let Some((newest, older)) = super::copies::moved(&kept) {
                    if let Ok(task) = &newest.read {
                        entries.push((id.clone(), entry_of(newest, task)));
                        self.older.push((id.clone(), older));
                    }
                    continue;
                }
                self.note(Note::Duplicate {
                    id: id.clone(),
                    paths: kept.iter().map(|f| f.path.clone()).collect(),
                });
                continue;
            }
            let Some(f) = kept.first() else { continue };
            match &f.read {
                Ok(task) => entries.push((id.clone(), entry_of(f, task))),
                Err(_) if f.folder.state == State::Inbox => {}
                Err(errors) => self.note(Note::Unreadable {
                    path: f.path.clone(),
                    errors: errors.iter().map(|v| v.render(&f.path)).collect(),
                }),
            }
        }
        // In id order: the map is built in one pass.
        self.live = entries.into_iter().collect();
    }

    /// Returns the live entry of `id`: one of `live`, or one made from an archived file.
    pub fn entry(&self, id: &TaskId) -> Option<Cow<'_, Entry>> {
        if let Some(e) = self.live.get(id) {
            return Some(Cow::Borrowed(e));
        }
        let (f, taken) = self.archived_file(id)?;
        match (&f.read, taken) {
            (Ok(task), false) => Some(Cow::Owned(entry_of(f, task))),
            _ => None,
        }
    }

    /// Returns the live entries but the archived tasks held as files (which [`World::entry`]
    /// finds by id): every step that goes through the entries looks for other states.
    pub fn live_entries(&self) -> impl Iterator<Item = &Entry> {
        self.live.values()
    }

    /// Returns whether some file of the board (or one planned) has this id.
    pub fn id_taken(&self, id: &TaskId) -> bool {
        self.ids.contains(id) || self.archived_file(id).is_some() || self.board.in_blocks(id)
    }

    /// Returns how many ids [`World::id_taken`] knows.
    pub fn id_count(&self) -> usize {
        self.ids.len() + self.archived.len() + self.board.block_files()
    }

    /// Returns the archived file of `id` held as a file, with whether it was taken into
    /// `live`.
    fn archived_file(&self, id: &TaskId) -> Option<(&'a TaskFile, bool)> {
        let at = self.archived.binary_search_by(|(f, _)| f.id.cmp(id)).ok()?;
        Some(self.archived[at])
    }

    /// Takes the archived file of `id` into `live` as an entry, so a step may edit or forget
    /// it as any other.
    fn take_archived(&mut self, id: &TaskId) {
        let Ok(at) = self.archived.binary_search_by(|(f, _)| f.id.cmp(id)) else {
            return;
        };
        let (f, taken) = &mut self.archived[at];
        if let (Ok(task), false) = (&f.read, *taken) {
            self.live.insert(id.clone(), entry_of(f, task));
            *taken = true;
        }
    }

    /// Takes `text` as task `id`'s planned content (a transition planned to write it there);
    /// false when it does not read back.
    pub fn rewrite(&mut self, id: &TaskId, text: &str) -> bool {
        let (Some(task), Some(e)) = (check::reread(text), self.live.get_mut(id)) else {
            return false;
        };
        e.hash = crate::board::content_hash(text.as_bytes());
        e.stand_in = None;
        e.task = Arc::new(Task::kept(e.folder.state, task));
        true
    }

    /// Records a note.
    pub fn note(&mut self, n: Note) {
        self.out.notes.push(n);
    }

    /// Returns whether a transition planned so far concerns `id`.
    pub fn acted_on(&self, id: &TaskId) -> bool {
        self.out
            .transitions
            .iter()
            .any(|t| t.subject == id.as_str())
    }

    /// Records a transition.
    pub fn push(&mut self, t: Transition) {
        self.out.transitions.push(t);
    }

    /// Returns the ids of live entries in one state but `archived`, sorted.
    pub fn ids_in(&self, state: State) -> Vec<TaskId> {
        self.live
            .values()
            .filter(|e| e.folder.state == state)
            .map(|e| e.id.clone())
            .collect()
    }

    /// Returns the output of a done (or archived) task.
    pub fn output_of(&self, id: &TaskId) -> Option<Value> {
        let e = self.entry(id)?;
        if !matches!(e.folder.state, State::Done | State::Archived) {
            return None;
        }
        e.task.result.as_ref().and_then(|r| r.output.clone())
    }

    /// Returns where a task's file is committed as the board was loaded: HEAD then (when
    /// known) and the file's path in it.
    pub fn locate(&self, id: &TaskId) -> Option<crate::expr::Location> {
        let file = self
            .board
            .find(id)
            .into_iter()
            .find(|f| f.folder.state != State::Invalid)?;
        Some((self.board.head.clone(), file.path.clone()))
    }

    /// Returns the current time as coord records it (whole seconds).
    pub fn now(&self) -> Timestamp {
        whole_second(self.clock.now())
    }

    /// Returns the gates of `gates` not open now. A time gate asks the clock; the others ask
    /// the repository, and while one is closed the plan's deadline is at most
    /// `gate_interval` away, so a quiet tick looks again then.
    pub fn closed_gates<'g>(
        &self,
        gates: &'g [crate::model::gate::Gate],
    ) -> Vec<&'g crate::model::gate::Gate> {
        let closed: Vec<_> = gates
            .iter()
            .filter(|g| match g.time() {
                Some(t) => !self.clock.reached(t),
                None if matches!(g, crate::model::gate::Gate::Time(_)) => true,
                None => self.gates.open(g, self.clock.now()) != Some(true),
            })
            .collect();
        if closed.iter().any(|g| g.time().is_none()) {
            let interval = self.config.gate_interval.to_signed();
            self.clock.reached(self.clock.after(interval));
        }
        closed
    }

    /// Returns a gate in words for `status`, with the last answer of one asked outside the
    /// repository.
    pub fn describe_gate(&self, gate: &crate::model::gate::Gate) -> String {
        match self.gates.last_answer(gate) {
            Some(said) => format!("{} ({said})", gate.describe()),
            None => gate.describe(),
        }
    }

    /// Returns whether the deadline `kind` written as `at`, `span` after its writer's start,
    /// has come by this clone's own measure of the span (see [`super::sighting`]).
    pub fn deadline_reached(
        &self,
        kind: super::sighting::Kind<'_>,
        at: Timestamp,
        span: jiff::SignedDuration,
    ) -> bool {
        self.clock.reached(self.local_deadline(kind, at, span))
    }

    /// Returns the instant, by this clone's clock, at which the deadline `kind` written as
    /// `at`, `span` after its writer's start, ends (see [`super::sighting`]).
    pub fn local_deadline(
        &self,
        kind: super::sighting::Kind<'_>,
        at: Timestamp,
        span: jiff::SignedDuration,
    ) -> Timestamp {
        let seen = self.sightings.sighting(&super::sighting::key(kind, at));
        super::sighting::local_deadline(at, span, seen, self.clock.now())
    }

    /// Returns the number of tasks assigned to `agent` now.
    pub fn load_of(&self, agent: &AgentName) -> usize {
        self.loads.get(agent).copied().unwrap_or(0)
    }

    /// Moves a task to `to` with a new coord block and result edit; records the transition.
    /// Returns false (with a note) when the file cannot be edited safely.
    pub fn transit(
        &mut self,
        id: &TaskId,
        to: Folder,
        coord: CoordBlock,
        result: ResultEdit,
        summary: String,
    ) -> bool {
        let path = self.entry(id).map(|e| e.path.clone());
        match self.try_transit(id, to, coord, result, summary) {
            Ok(done) => done,
            Err(message) => {
                let path = path.unwrap_or_default();
                self.note(Note::Skipped { path, message });
                false
            }
        }
    }

    /// Does what [`World::transit`] does, returning why the file cannot be edited safely
    /// instead of noting it; Ok(false) when the task is not live.
    pub fn try_transit(
        &mut self,
        id: &TaskId,
        to: Folder,
        coord: CoordBlock,
        result: ResultEdit,
        summary: String,
    ) -> Result<bool, String> {
        self.take_archived(id);
        let Some(entry) = self.live.get(id).filter(|_| !self.frozen.contains(id)) else {
            return Ok(false);
        };
        let from_state = entry.folder.state;
        let guard = vec![(entry.path.clone(), entry.hash)];
        let new_path = self.board.path_in(&to, &entry.file_name());
        // A task coord took in whose block cannot grow fails as too_large; an inbox file
        // that cannot take one is quarantined by intake, a result too large is refused.
        let coords_growth =
            !matches!(result, ResultEdit::Set(_)) && entry.folder.state != State::Inbox;
        let text = match edit_text(&entry.task, &coord, result) {
            Ok(text) => text,
            Err(EditError::TooLarge(_)) if coords_growth => {
                self.too_large(id);
                return Ok(false);
            }
            Err(e) => return Err(e.to_string()),
        };
        let ops = file_ops(entry, &new_path, Some(&text));
        let reread = check::reread(&text);
        let Some(entry) = self.live.get_mut(id) else {
            return Ok(false);
        };
        entry.path = new_path;
        shift(&mut self.loads, Some(&entry.folder), Some(&to));
        entry.folder = to.clone();
        entry.hash = crate::board::content_hash(text.as_bytes());
        entry.stand_in = None;
        if let Some(task) = reread {
            entry.task = Arc::new(Task::kept(to.state, task));
        }
        if !ops.is_empty() {
            self.push(Transition {
                subject: id.to_string(),
                from: from_state.into(),
                to: to.state.into(),
                summary,
                ops,
                guard,
                op: None,
            });
        }
        Ok(true)
    }

    /// Moves a task whose `coord:` block cannot grow (the file would pass the size limit) to
    /// `failed/` with `too_large`, never touching the bytes outside that block: its block is
    /// rewritten in place when the failed one fits, else as a short one (state, attempt
    /// numbers, creation time and the error; the rest is in git), else the file is only
    /// moved. Counts for no agent's breaker.
    fn too_large(&mut self, id: &TaskId) {
        self.take_archived(id);
        let Some(entry) = self.live.get(id).cloned() else {
            return;
        };
        let limit = Limits::default().max_bytes;
        let mut c = entry.task.coord.clone();
        c.state = Some(State::Failed);
        c.finished_at = Some(self.now());
        c.lease_expires_at = None;
        c.not_before = None;
        let message = format!("its coord: block cannot grow: the file would pass the limit of {limit} bytes; shorten the file, then 'coord retry' it");
        c.error = Some(ErrorInfo::new(ErrorCode::TooLarge, message, false));
        let compact = CoordBlock {
            state: c.state,
            attempt: c.attempt,
            attempt_base: c.attempt_base,
            created_at: c.created_at,
            error: Some(ErrorInfo::new(
                ErrorCode::TooLarge,
                "file size limit",
                false,
            )),
            ..CoordBlock::default()
        };
        let text = [c, compact]
            .iter()
            .find_map(|c| edit_text(&entry.task, c, ResultEdit::Keep).ok());
        let to = Folder::of(State::Failed);
        let new_path = self.board.path_in(&to, &entry.file_name());
        let ops = file_ops(&entry, &new_path, text.as_deref());
        if ops.is_empty() {
            let message =
                "its coord: block cannot grow: the file is at the size limit; shorten it by hand"
                    .to_string();
            self.note(Note::Skipped {
                path: entry.path.clone(),
                message,
            });
            return;
        }
        self.push(Transition {
            subject: id.to_string(),
            from: entry.folder.state.into(),
            to: to.state.into(),
            summary: format!("fail {id}: too_large (the file cannot take coord's entry)"),
            ops,
            guard: vec![(entry.path.clone(), entry.hash)],
            op: None,
        });
        if let Some(e) = self.live.get_mut(id) {
            e.path = new_path;
            shift(&mut self.loads, Some(&e.folder), Some(&to));
            e.folder = to;
            if let Some(text) = &text {
                e.hash = crate::board::content_hash(text.as_bytes());
                e.stand_in = None;
                if let Some(task) = check::reread(text) {
                    e.task = Arc::new(Task::parsed(task));
                }
            }
        }
    }

    /// Ends a task in a final state (`failed`, `cancelled`) for `error`, starting from the coord
    /// block `c`: records when, drops the lease and keeps any result for review.
    pub fn end(
        &mut self,
        id: &TaskId,
        mut c: CoordBlock,
        to: State,
        error: ErrorInfo,
        summary: String,
    ) -> bool {
        c.state = Some(to);
        c.finished_at = Some(self.now());
        c.lease_expires_at = None;
        c.error = Some(error);
        self.transit(id, Folder::of(to), c, ResultEdit::Keep, summary)
    }

    /// Adds a new task file created by the coordinator (handoff children, join tasks).
    pub fn create(&mut self, id: &TaskId, folder: Folder, text: String, summary: String) {
        let path = self.board.path_in(&folder, &format!("{id}.yaml"));
        let Some(task) = check::reread(&text) else {
            self.note(Note::Skipped {
                path,
                message: "generated task does not validate".to_string(),
            });
            return;
        };
        self.ids.insert(Cow::Owned(id.clone()));
        self.take_archived(id);
        shift(&mut self.loads, None, Some(&folder));
        let replaced = self.live.insert(
            id.clone(),
            Entry {
                id: id.clone(),
                path: path.clone(),
                folder: folder.clone(),
                hash: crate::board::content_hash(text.as_bytes()),
                stand_in: None,
                task: Arc::new(Task::parsed(task)),
            },
        );
        if let Some(old) = replaced {
            shift(&mut self.loads, Some(&old.folder), None);
        }
        self.push(Transition {
            subject: id.to_string(),
            from: Endpoint::New,
            to: folder.state.into(),
            summary,
            ops: vec![Op::Write { path, text }],
            guard: Vec::new(),
            op: None,
        });
    }

    /// Adds an op to the last transition (e.g. removing a stale `.errors` file).
    pub fn extend_last(&mut self, op: Op) {
        if let Some(t) = self.out.transitions.last_mut() {
            t.ops.push(op);
        }
    }

    /// Removes the task at `path` from the live set (it left for `invalid/`); a task of the
    /// same id at another path stays.
    pub fn forget(&mut self, id: &TaskId, path: &str) {
        self.take_archived(id);
        if self.live.get(id).is_some_and(|e| e.path == path) {
            if let Some(e) = self.live.remove(id) {
                shift(&mut self.loads, Some(&e.folder), None);
            }
        }
    }

    /// Returns whether task `id`'s file is still being written: it stands on the board as
    /// committed and nothing moves it until it settles.
    pub fn is_frozen(&self, id: &TaskId) -> bool {
        self.frozen.contains(id)
    }

    /// Returns whether `file` is the live entry of its id (not a copy beside it).
    pub fn is_entry(&self, file: &TaskFile) -> bool {
        self.entry(&file.id).is_some_and(|e| e.path == file.path)
    }

    /// Updates an agent's breaker state.
    pub fn set_agent_coord(&mut self, agent: &AgentName, coord: AgentCoord) {
        let st = self
            .agents
            .entry(agent.clone())
            .or_insert_with(|| AgentState {
                profile: AgentProfile::default(),
                coord: AgentCoord::default(),
                changed: false,
                over_budget: None,
            });
        if st.coord != coord {
            st.coord = coord;
            st.changed = true;
        }
    }

    /// Returns the plan, with profile updates for agents whose breaker changed.
    pub fn finish(mut self) -> Plan {
        let changed: Vec<(AgentName, AgentCoord)> = self
            .agents
            .iter()
            .filter(|(_, s)| s.changed)
            .map(|(n, s)| (n.clone(), s.coord.clone()))
            .collect();
        for (name, coord) in changed {
            if let Some(t) = profile_update(self.board, &name, &coord) {
                self.push(t);
            }
        }
        self.out.deadline = self.clock.deadline();
        self.out
    }
}

/// Returns the file of an id whose one live copy is archived and read: the planner holds it
/// as the board's file (see `World::archived`).
fn archived_alone<'a>(live: &[&'a TaskFile]) -> Option<&'a TaskFile> {
    match live {
        [f] if f.folder.state == State::Archived && f.read.is_ok() => Some(f),
        _ => None,
    }
}

/// Returns the entry of a live file that read.
fn entry_of(f: &TaskFile, task: &Arc<Task>) -> Entry {
    Entry {
        id: f.id.clone(),
        path: f.path.clone(),
        folder: f.folder.clone(),
        task: task.clone(),
        hash: f.hash,
        stand_in: f.stand_in,
    }
}

/// Returns the ops that move `entry` to `new_path` and, when `text` is given and differs,
/// rewrite it there.
fn file_ops(entry: &Entry, new_path: &str, text: Option<&str>) -> Vec<Op> {
    let mut ops = Vec::new();
    if new_path != entry.path {
        ops.push(Op::Move {
            from: entry.path.clone(),
            to: new_path.to_string(),
        });
    }
    if let Some(text) = text.filter(|t| *t != entry.task.text) {
        // An oversized file is replaced by its restored version, never spliced into.
        let rest = match entry.stand_in {
            Some(StandIn::Oversize(..)) => None,
            _ => super::rest_hash(&entry.task.text, &entry.task.doc),
        };
        ops.push(match rest {
            Some(rest) => Op::Edit {
                path: new_path.to_string(),
                text: text.to_string(),
                rest,
            },
            None => Op::Write {
                path: new_path.to_string(),
                text: text.to_string(),
            },
        });
    }
    ops
}

/// Why a task file could not be edited.
#[derive(Debug, thiserror::Error)]
pub(super) enum EditError {
    /// The edited file would pass the size limit.
    #[error("with coord's block the file would pass the {} KiB limit; shorten it (large outputs belong in a file the result names)", .0 / 1024)]
    TooLarge(usize),
    /// The edit would not read back as intended.
    #[error("{0}")]
    Unsafe(String),
}

pub(super) fn edit_text(
    task: &TaskDoc,
    coord: &CoordBlock,
    result: ResultEdit,
) -> Result<String, EditError> {
    let unsafe_edit = |e: String| EditError::Unsafe(e);
    let (text, doc) = match result {
        ResultEdit::Keep => (task.text.clone(), task.doc.clone()),
        ResultEdit::Remove => reparse_text(yaml::remove_block(&task.text, &task.doc, "result"))
            .map_err(unsafe_edit)?,
        ResultEdit::Set(v) => reparse_text(yaml::set_block(&task.text, &task.doc, "result", &v))
            .map_err(unsafe_edit)?,
    };
    let out = yaml::set_block(&text, &doc, "coord", &coord.to_value())
        .map_err(|e| unsafe_edit(e.to_string()))?;
    let max = Limits::default().max_bytes;
    if out.len() > max {
        return Err(EditError::TooLarge(max));
    }
    Ok(out)
}

fn reparse_text(r: Result<String, yaml::SpliceError>) -> Result<(String, yaml::Doc), String> {
    let text = r.map_err(|e| e.to_string())?;
    let doc = yaml::parse(&text, &Limits::default()).map_err(|e| e.to_string())?;
    Ok((text, doc))
}

fn profile_update(board: &Board, name: &AgentName, coord: &AgentCoord) -> Option<Transition> {
    let value = serde_json::to_value(coord).ok()?;
    let op = match board.agents.get(name).and_then(|a| a.file.as_ref()) {
        Some(f) => Op::Edit {
            path: f.path.clone(),
            text: yaml::set_block(&f.text, &f.doc, "coord", &value).ok()?,
            rest: super::rest_hash(&f.text, &f.doc)?,
        },
        None => Op::Write {
            path: format!("{}/agents/{name}.yaml", board.work_dir),
            text: yaml::emit_block("coord", &value, 0),
        },
    };
    Some(Transition {
        subject: name.to_string(),
        from: Endpoint::Agent,
        to: Endpoint::Circuit(coord.circuit),
        summary: format!(
            "agent {name}: {} failed attempt(s) in a row, circuit {}",
            coord.consecutive_failures,
            coord.circuit.as_str()
        ),
        ops: vec![op],
        guard: Vec::new(),
        op: None,
    })
}
