//! The tick: one reconciliation pass under the lock (walk, quiet check, load, record people's
//! changes, plan, apply, plan again without files that could not be moved), and the dry run
//! that only plans. Reports what a person must look at as lines.

use super::status::saved_status;
use super::{apply, inputs_for, Coord, Error, Event, Opener, Options, Sink};
use crate::board::Board;
use crate::engine::{self, Note, Plan, Transition};
use crate::lock::LockError;
use crate::model::Endpoint;
use crate::sign::KeyRing;
use crate::store::{Applied, Loaded, Origin, Recorded, Session, Stats, Walk};
use crate::watch::{self, SeenComplete, Why};
use jiff::Timestamp;
use std::cell::RefCell;
use std::time::{Duration, Instant};

/// How long a tick of a watch loop waits for an agent command to release the lock before
/// trying again later (unless [`Options::wait`] says otherwise).
pub const TICK_WAIT: Duration = Duration::from_secs(2);

/// How many times one pass plans again after a task file could not be moved or rewritten
/// (each time without the files skipped so far); what is left waits for the next tick.
const MAX_ROUNDS: usize = 8;

/// What one tick did.
#[derive(Debug, Clone, Default)]
pub struct Ticked {
    /// The commits it made.
    pub commits: usize,
    /// The transitions it committed, in order.
    pub transitions: Vec<Moved>,
    /// Files the pass left alone because a person must act (refused symlinks, stray files,
    /// files that do not read, duplicate ids), one line each, secrets redacted.
    pub attention: Vec<String>,
    /// Task files left where they were after a file operation on them failed (the other
    /// tasks moved); `status` lists them.
    pub skipped: usize,
    /// Whether the pass stopped after the walk: a tick that planned nothing saw this same
    /// state and nothing it waited for is due.
    pub quiet: bool,
    /// The earliest instant (system clock) a file still being written settles, when one is.
    pub settles_at: Option<Timestamp>,
    /// The files still being written, left unread (repo-relative, sorted).
    pub pending: Vec<String>,
}

/// A transition a tick committed, without its file operations.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Moved {
    /// The task (or agent, for profile updates) it concerns.
    pub task: String,
    /// Where it starts (the state before; `new` for created files).
    pub from: Endpoint,
    /// Where it ends.
    pub to: Endpoint,
    /// The summary line, secrets redacted, on one line.
    pub summary: String,
}

impl Moved {
    /// Returns what `t` did.
    pub fn of(t: &Transition) -> Moved {
        Moved {
            task: t.subject.clone(),
            from: t.from,
            to: t.to,
            summary: crate::redact::one_line(&t.summary),
        }
    }
}

/// What a dry run found: the board and the plan a tick would carry out now.
#[derive(Debug)]
pub struct Planned {
    /// The board as loaded.
    pub board: Board,
    /// The plan.
    pub plan: Plan,
    /// Files a person must act on, one line each, secrets redacted.
    pub attention: Vec<String>,
}

impl Coord {
    /// Runs one tick: takes the lock (by default without waiting), finishes what a killed run
    /// left, and runs one pass.
    ///
    /// People's uncommitted changes under `work/` are recorded (as external changes) right
    /// after the load and before anything is applied, so each tick commit holds only what the
    /// tick derived from committed files, and is marked so (`Coord-Origin: tick`): `coord
    /// sync` may drop such commits and tick again without losing anyone's bytes. A file that
    /// changes after the load fails its transition's guard and waits for the next tick.
    ///
    /// The pass starts with a walk of `work/` (names and stat data): when the quiet mark shows
    /// that a tick which planned nothing saw this same state, and nothing that plan waited for
    /// is due, it stops there. A pass that plans nothing and leaves no file for a person leaves
    /// that mark for the next one. No mark is left while a file settles: the settle rule runs
    /// on the system clock, which the mark's deadline (on coord's clock) cannot stand for.
    ///
    /// A task file whose move or rewrite fails (immutable, unreadable, another mount, a full
    /// disk) is left where it was and the pass plans again without it, so one such file never
    /// stops the other tasks; the files skipped are recorded for `status` and `doctor`.
    pub fn tick(&self) -> Result<Ticked, Error> {
        let session = self.lock(Duration::ZERO)?;
        let ticked = pass(&session, &self.sink, self.now, (self.keys(), self.epoch))?;
        session.finish()?;
        Ok(ticked)
    }

    /// Runs one pass on `store`: this repository as a step of a sync opened it, with the lock
    /// held and a killed run's work finished (a sync step's tick).
    pub fn tick_on(&self, store: &Session<'_>) -> Result<Ticked, Error> {
        pass(store, &self.sink, self.now, (self.keys(), self.epoch))
    }

    /// Runs one tick on the tip of `remote` and pushes it, as a step of an agent command
    /// does (`coord run --sync`): redone on the newer tip after a rejected push.
    pub fn tick_remote(&self, remote: &str) -> Result<Ticked, Error> {
        let mut ticked = Ticked::default();
        let mut step = |store: &Session<'_>| -> Result<usize, Error> {
            ticked = self.tick_on(store)?;
            Ok(ticked.commits)
        };
        self.run_step(Some(remote), &mut step)?;
        Ok(ticked)
    }

    /// Runs one tick of a watch loop (`coord watch`, `coord serve --tick`): waits briefly for
    /// the lock ([`TICK_WAIT`] unless [`Options::wait`]), so that agent commands run between
    /// ticks; a lock still held then is [`watch::Ticked::Busy`] (said as a status line), not
    /// an error. Says why it ran and what it made as a detail.
    pub fn watch_tick(&self, why: Why) -> Result<watch::Ticked, Error> {
        let session = match self.lock(TICK_WAIT) {
            Ok(lock) => lock,
            Err(e @ Error::Lock(LockError::Held { .. })) => {
                self.emit(Event::Status(&format!("coord: {e}; trying again shortly")));
                return Ok(watch::Ticked::Busy);
            }
            Err(e) => return Err(e),
        };
        let pass = pass(&session, &self.sink, self.now, (self.keys(), self.epoch))?;
        session.finish()?;
        let n = pass.commits;
        self.emit(Event::Detail(&format!(
            "coord: tick ({why:?}): {n} commits"
        )));
        Ok(match pass.settles_at {
            Some(at) => {
                let after = at.duration_since(Timestamp::now());
                let after = Duration::try_from(after).unwrap_or_default();
                watch::Ticked::Settling(n, after + Duration::from_millis(20))
            }
            None => watch::Ticked::Done(n),
        })
    }

    /// Returns whether the inbox holds more files than one window of a tick takes: a tick
    /// then goes window by window, each building a board of every task of `work/`.
    pub fn inbox_is_a_burst(&self) -> bool {
        self.read().inbox_exceeds_window()
    }

    /// Plans a tick without the lock and changes nothing (`coord tick --dry-run`).
    pub fn plan(&self) -> Result<Planned, Error> {
        self.store.refuse_setup_left_out()?;
        let session = self.read();
        let (board, _) = session.load()?;
        let plan = engine::plan(&board, &self.inputs(&session));
        let attention = attention(&board, &plan.notes);
        Ok(Planned {
            board,
            plan,
            attention,
        })
    }
}

/// Runs one pass on `store`, whose lock the caller holds and whose killed run is finished,
/// and counts it with its duration in the clone's stats (`coord serve`'s `/metrics`).
/// `keys` are the agents' keys and the epoch of the hub planning (None outside a hub).
fn pass(
    store: &Session<'_>,
    sink: &Sink,
    now: Timestamp,
    keys: (&KeyRing, Option<u64>),
) -> Result<Ticked, Error> {
    let started = Instant::now();
    let ticked = reconcile(store, sink, now, keys)?;
    Stats::record_tick(store.repo.git_dir(), started.elapsed());
    Ok(ticked)
}

/// The pass itself: walk, quiet check, then window by window load and record, plan and
/// apply. An inbox of more than [`crate::store::INBOX_WINDOW`] files is taken window by window
/// (names in byte order), each window loaded, planned and applied in turn: what the pass
/// holds at once is bounded by the window, not by the inbox.
fn reconcile(
    store: &Session<'_>,
    sink: &Sink,
    now: Timestamp,
    keys: (&KeyRing, Option<u64>),
) -> Result<Ticked, Error> {
    let scheduled = super::schedules::run_due(store, sink, now)?;
    let mut ticked = Ticked {
        commits: scheduled.commits,
        transitions: scheduled.transitions,
        attention: scheduled.attention,
        ..Ticked::default()
    };
    let mut walked = store.walk_work_blocks()?;
    if store.is_quiet(&walked, now) {
        store.look_unchanged(now);
        sink(&Event::Detail("coord: nothing changed since a tick found nothing to do, and nothing it waits for is due; planning skipped ('coord status' shows what waits)"));
        ticked.quiet = true;
        return Ok(ticked);
    }
    let mut seen: std::collections::HashSet<String> = ticked.attention.iter().cloned().collect();
    let last = store.window_inbox(&mut walked, None);
    let mut first = Some((walked, last));
    let mut after: Option<String> = None;
    loop {
        let walked = first.take();
        let window = Window {
            walked,
            after: after.as_deref(),
        };
        // Declared first, dropped last: the window's board is gone before it packs.
        let _pack_after = store.pack_later();
        let (found, last) = window_pass(store, sink, now, keys, window, &mut ticked)?;
        for line in found.attention {
            if seen.insert(line.clone()) {
                ticked.attention.push(line);
            }
        }
        ticked.settles_at = ticked.settles_at.into_iter().chain(found.settles).min();
        ticked.pending.extend(found.pending);
        match last {
            Some(last) => after = Some(last),
            None => break,
        }
    }
    ticked.skipped = store.skipped_count();
    ticked.pending.sort();
    ticked.pending.dedup();
    Ok(ticked)
}

/// Where a window of the inbox starts: the first window's walk with its last inbox file when
/// more wait (later windows walk again and take the inbox files after `after`).
struct Window<'a> {
    walked: Option<(Walk, Option<String>)>,
    after: Option<&'a str>,
}

/// What a window's board showed that the pass reports once the board is gone.
struct Found {
    /// One line per file a person must act on.
    attention: Vec<String>,
    /// The earliest instant a file still being written settles, when one is.
    settles: Option<Timestamp>,
    /// The files still being written.
    pending: Vec<String>,
}

impl Found {
    /// Returns whether nothing shown asks for a person or settles later.
    fn is_calm(&self) -> bool {
        self.attention.is_empty() && self.settles.is_none()
    }

    /// Returns what `board` and its `plan` show.
    fn of(board: &Board, plan: &Plan) -> Found {
        Found {
            attention: attention(board, &plan.notes),
            settles: board.settling.iter().map(|s| s.until).min(),
            pending: board.settling.iter().map(|s| s.path.clone()).collect(),
        }
    }
}

/// Loads, plans and applies one window of the inbox (the whole of it when it is small).
/// The board is dropped before the plan is applied: the plan holds every text it writes, and
/// the board (every task of `work/`, the window's inbox files parsed) would otherwise sit
/// under the commits' trees and the index (the heap peak of a 50,000-task burst).
/// Adds its commits to `ticked`; returns what the last board showed and the last inbox file
/// taken when more wait for the next window. A window that found `work/` clean leaves a vouch
/// (see `ops::apply`), so the next one skips the status scan when only the tick wrote.
fn window_pass(
    store: &Session<'_>,
    sink: &Sink,
    now: Timestamp,
    keys: (&KeyRing, Option<u64>),
    window: Window<'_>,
    ticked: &mut Ticked,
) -> Result<WindowDone, Error> {
    let (first, after) = (window.walked.is_some(), window.after);
    let (mut board, recorded, mut last) = load_recorded(store, sink, now, window)?;
    store.look(&board, now);
    let inputs = inputs_for(store, now, keys.0, keys.1);
    let committed = RefCell::new(Vec::new());
    let collect = |event: &Event<'_>| {
        if let Event::Applied(t, Applied::Committed | Applied::LeftAsFound(_)) = event {
            committed.borrow_mut().push(Moved::of(t));
        }
        sink(event);
    };
    let mut rounds = 0;
    let alone = first && last.is_none();
    let (plan, found, saved) = loop {
        let plan = engine::plan(&board, &inputs);
        let found = Found::of(&board, &plan);
        // What status shows of the board the recording found, should this pass stay quiet
        // (only the first round's board is that one; a round after it ends the loop).
        let may_stay_quiet = rounds == 0 && alone && plan.is_empty() && found.is_calm();
        let saved = (may_stay_quiet && store.may_mark_quiet(&recorded))
            .then(|| saved_status(store, &board, &plan, now))
            .flatten();
        drop(board);
        let skipped = store.skipped_count();
        ticked.commits += apply(store, &collect, &plan, now, Origin::Tick)?;
        rounds += 1;
        if store.skipped_count() == skipped || rounds == MAX_ROUNDS {
            break (plan, found, saved);
        }
        (board, _, last) = store.load_window(after)?;
    };
    store.save_skipped()?;
    // A pass that leaves files for a person is not quiet: the next one says so again.
    let clean = store.skipped_count() == 0 && found.attention.is_empty();
    if alone && ticked.commits == 0 && plan.is_empty() && found.settles.is_none() && clean {
        let board = saved.map(|saved| (saved.until, saved.bytes));
        store.set_quiet_mark(&recorded, now, plan.deadline, board);
    }
    for note in &plan.notes {
        sink(&Event::Detail(&format!("note: {}", describe(note))));
    }
    ticked.transitions.extend(committed.into_inner());
    Ok((found, last))
}

/// Loads `work/` (the inbox window after `after`; `walked`, windowed, when the caller walked
/// already)
/// and records people's uncommitted changes (skipping the status scan when the load shows
/// nothing changed since a scan found `work/` clean); when something was recorded, the load
/// may have missed it (a file dropped meanwhile), so it loads again, until a load and the
/// recording after it agree (at most a few rounds; a busy inbox is caught next tick).
/// A later window's recording trusts the vouch the window before it left instead of
/// scanning, when the load shows `work/` as that window left it.
/// Returns the board, the last recording (the quiet mark is made from it) and the last inbox
/// file taken when more wait for the next window.
fn load_recorded(
    store: &Session<'_>,
    sink: &Sink,
    now: Timestamp,
    window: Window<'_>,
) -> Result<WindowLoad, Error> {
    let Window { walked, after } = window;
    let (mut board, mut loaded, mut last): (Board, Loaded, _) = match walked {
        Some((walked, last)) => {
            let (board, loaded) = store.load_walked(walked)?;
            (board, loaded, last)
        }
        None => store.load_window(after)?,
    };
    let mut recorded = Recorded::default();
    for _ in 0..3 {
        let listing = Some(&loaded.listing);
        recorded = store.record_external_changes(now, listing)?;
        if let Some(why) = recorded.skipped_scan() {
            sink(&Event::Detail(why));
        }
        if recorded.lines.is_empty() {
            break;
        }
        for line in &recorded.lines {
            sink(&Event::Recovered(line));
        }
        (board, loaded, last) = store.load_window(after)?;
    }
    Ok((board, recorded, last))
}

/// What `window_pass` returns: what the last board showed, the last inbox file taken.
type WindowDone = (Found, Option<String>);

/// What `load_recorded` returns.
type WindowLoad = (Board, Recorded, Option<String>);

/// Returns one line per file a person must act on.
fn attention(board: &Board, notes: &[Note]) -> Vec<String> {
    let files = board
        .problems
        .iter()
        .map(|p| crate::redact::error_line(&format!("{}: {}", p.path, p.message)));
    let noted = notes
        .iter()
        .filter(|n| matches!(n, Note::Unreadable { .. } | Note::Duplicate { .. }))
        .map(describe);
    files.chain(noted).collect()
}

/// Returns a note as one line for people, secrets redacted.
pub fn describe(note: &Note) -> String {
    crate::redact::error_line(&describe_raw(note))
}

fn describe_raw(note: &Note) -> String {
    match note {
        Note::Waiting { id, reason } | Note::Held { id, reason } => {
            format!("{id} waits: {reason}")
        }
        Note::Blocked { id, open, gates } => {
            let open = open
                .iter()
                .map(|i| i.to_string())
                .chain(gates.iter().cloned());
            format!("{id} is blocked on {}", open.collect::<Vec<_>>().join(", "))
        }
        Note::Duplicate { id, paths } => {
            format!(
                "{id} exists in {} places ({}); run 'coord doctor'",
                paths.len(),
                paths.join(", ")
            )
        }
        Note::Unreadable { path, errors } => {
            format!(
                "{path} does not read: {}",
                errors.first().cloned().unwrap_or_default()
            )
        }
        Note::Settling { path, until } => {
            format!("{path} is still being written; it is read once unchanged until {until}")
        }
        Note::Skipped { path, message } => format!("{path} left alone: {message}"),
    }
}

impl Opener {
    /// Opens the repository now, knowing the files a watcher saw complete, and runs one tick
    /// of a watch loop ([`Coord::watch_tick`]).
    pub fn watch_tick(&self, why: Why, seen: &SeenComplete) -> Result<watch::Ticked, Error> {
        let options = Options {
            seen_complete: seen.clone(),
            ..self.options.clone()
        };
        self.open_with(options)?.watch_tick(why)
    }
}
