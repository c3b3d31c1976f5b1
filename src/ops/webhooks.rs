//! Outbound webhooks (docs/webhooks.md): the clone's deliverer, which POSTs every event of the
//! event journal ([`super::events`]) to each endpoint of `webhooks:` in coord.yaml, under the
//! journal's id (the id `/v1/events` gives it), signed with the endpoint's secret.
//!
//! Delivery is at least once: each endpoint has a cursor (the last id it took, or gave up on)
//! in `.git/coord/webhooks/<name>.json`, written after each answer, so a restart sends again
//! at most the one event in flight when the deliverer died. A failed try waits with
//! exponential backoff and jitter; after `max_attempts` failures the event goes to the
//! dead-letter record (`.git/coord/webhooks/dead.jsonl`) and delivery moves on. One deliverer
//! runs per clone, on a thread of its own, whichever of `coord watch` and `coord serve` starts
//! it: an OS lock on `.git/coord/webhooks/lock` (the others wait for it, delivering nothing).
//! A one-shot `tick` or `sync` delivers for a bounded time under the same lock (`once`).
//! `coord webhooks` lists the endpoints and sends dead letters again.
//! Reads and writes `.git/coord/webhooks/`, the journal and git history; sends HTTP.

use super::events::{Journal, JournalError, Logged};
use crate::config::Webhook;
use crate::git::{Oid, Repo};
use crate::store::Store;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod once;
pub use once::{prepare, Delivered, Once, ONCE_FOR};

/// How often the deliverer looks for new events.
const POLL: Duration = Duration::from_millis(200);
/// How often a process that does not deliver tries to take the deliverer's lock.
const LOCK_RETRY: Duration = Duration::from_secs(2);
/// The dead-letter record, under the webhooks folder.
pub const DEAD: &str = "dead.jsonl";
/// How long `coord status` lists a cursor that was found unreadable and replaced.
const RECOVERED_SHOWN_MS: u64 = 24 * 3600 * 1000;
/// The most of a receiver's answer that is read.
const ANSWER_LIMIT: u64 = 1 << 20;
/// Held while a dead letter is written, so the endpoints' threads append whole lines.
static BURYING: Mutex<()> = Mutex::new(());

/// Where each process's lines of trouble go, shared by the endpoints' threads.
type Say = Arc<Mutex<Box<dyn Fn(&str) + Send>>>;

/// Where an endpoint stands (`<name>.json`).
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct Cursor {
    /// The last event id delivered, skipped (not asked for) or given up on.
    pub cursor: u64,
    /// Failed tries of the next event.
    pub failures: u32,
    /// When the next try may start (ms since the epoch).
    pub not_before: u64,
    /// Why the last try failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The URL the cursor is for: an endpoint given a new URL starts at the journal's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Why the cursor was replaced (its file unreadable or gone) and where delivery resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovered: Option<String>,
    /// When it was replaced (ms since the epoch).
    #[serde(default)]
    pub recovered_at: u64,
}

/// What reading an endpoint's cursor file found.
enum Found {
    Missing,
    Unreadable(String),
    Cursor(Cursor),
}

/// One event the deliverer gave up on, a line of the dead-letter record.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DeadLetter {
    /// The endpoint.
    pub endpoint: String,
    /// The event's id.
    pub id: u64,
    /// The event, as it was sent.
    pub event: Value,
    /// How many tries failed.
    pub attempts: u32,
    /// Why the last one failed.
    pub error: String,
    /// When it was given up on (RFC 3339).
    pub at: String,
}

/// The folder of the clone's webhook state.
fn dir(git_dir: &Path) -> PathBuf {
    git_dir.join("coord").join("webhooks")
}

fn cursor_path(git_dir: &Path, name: &str) -> PathBuf {
    dir(git_dir).join(format!("{name}.json"))
}

/// Reads endpoint `name`'s cursor; None before its first delivery or when unreadable.
pub fn cursor(git_dir: &Path, name: &str) -> Option<Cursor> {
    match read_cursor(git_dir, name) {
        Found::Cursor(c) => Some(c),
        Found::Missing | Found::Unreadable(_) => None,
    }
}

fn read_cursor(git_dir: &Path, name: &str) -> Found {
    match crate::fsx::read_private(&cursor_path(git_dir, name)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Found::Missing,
        Err(e) => Found::Unreadable(format!("is unreadable ({e})")),
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(c) => Found::Cursor(c),
            Err(e) => Found::Unreadable(format!("is no cursor ({e})")),
        },
    }
}

/// Writes a cursor durably (temporary file, fsync, rename).
fn save(git_dir: &Path, name: &str, c: &Cursor) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(c).map_err(std::io::Error::other)?;
    crate::fsx::write_private(&cursor_path(git_dir, name), &bytes, true)
}

/// Returns every dead letter of the clone, oldest first, once per endpoint and event, and
/// how many lines of the record are unreadable.
fn dead_record(git_dir: &Path) -> (Vec<DeadLetter>, usize) {
    let text = crate::fsx::read_private_text(&dir(git_dir).join(DEAD)).unwrap_or_default();
    let mut seen = BTreeSet::new();
    let mut bad = 0;
    let mut letters = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<DeadLetter>(line) {
            Ok(d) if seen.insert((d.endpoint.clone(), d.id)) => letters.push(d),
            Ok(_) => {}
            Err(_) => bad += 1,
        }
    }
    (letters, bad)
}

/// Returns every dead letter of the clone, oldest first, once per endpoint and event.
pub fn dead_letters(git_dir: &Path) -> Vec<DeadLetter> {
    dead_record(git_dir).0
}

/// What `/metrics` shows of one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The endpoint's name.
    pub name: String,
    /// The last event id it took or gave up on.
    pub cursor: u64,
    /// The events after its cursor in the journal.
    pub pending: u64,
    /// Failed tries of its next event.
    pub failures: u32,
    /// Its dead letters.
    pub dead: u64,
}

/// Returns every endpoint of `configured` that has a cursor or a dead letter, by name.
pub fn report(git_dir: &Path, configured: &BTreeSet<String>) -> Vec<Report> {
    let last = Journal::open(git_dir).last();
    let mut names: BTreeMap<String, u64> = BTreeMap::new();
    for d in dead_letters(git_dir) {
        *names.entry(d.endpoint).or_default() += 1;
    }
    let entries = std::fs::read_dir(dir(git_dir)).into_iter().flatten();
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        if let Some(name) = file.strip_suffix(".json") {
            names.entry(name.to_string()).or_default();
        }
    }
    names
        .into_iter()
        .filter(|(name, _)| configured.contains(name))
        .map(|(name, dead)| {
            let at = cursor(git_dir, &name).unwrap_or_default();
            Report {
                pending: last.saturating_sub(at.cursor),
                cursor: at.cursor,
                failures: at.failures,
                dead,
                name,
            }
        })
        .collect()
}

/// One endpoint of coord.yaml as `coord webhooks` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Listed {
    /// Its name.
    pub name: String,
    /// Its URL.
    pub url: String,
    /// The events it asked for (empty: every event).
    pub events: Vec<String>,
    /// The last event id it took or gave up on (None before a deliverer first saw it).
    pub cursor: Option<u64>,
    /// The events after its cursor in the clone's journal.
    pub pending: u64,
    /// Failed tries of its next event.
    pub failures: u32,
    /// Why the last try failed.
    pub last_error: Option<String>,
    /// Its dead letters in the clone's record.
    pub dead_letters: u64,
}

/// Lists every endpoint of coord.yaml with where its delivery stands in this clone.
pub fn list(store: &Store) -> Vec<Listed> {
    let git_dir = store.repo.git_dir();
    let last = Journal::open(git_dir).last();
    let dead = dead_letters(git_dir);
    store
        .config
        .webhooks
        .iter()
        .map(|(name, hook)| {
            let at = cursor(git_dir, name);
            Listed {
                name: name.clone(),
                url: hook.url.clone(),
                events: hook.events.clone(),
                cursor: at.as_ref().map(|c| c.cursor),
                pending: at.as_ref().map_or(0, |c| last.saturating_sub(c.cursor)),
                failures: at.as_ref().map_or(0, |c| c.failures),
                last_error: at.and_then(|c| c.last_error),
                dead_letters: dead.iter().filter(|d| d.endpoint == *name).count() as u64,
            }
        })
        .collect()
}

/// What `coord webhooks retry` did: the dead letters sent again and taken (now gone from
/// the record), and those that failed again (kept), each with why.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Retried {
    /// The endpoint and event id of each dead letter taken.
    pub sent: Vec<(String, u64)>,
    /// The endpoint, event id and error of each that failed again.
    pub failed: Vec<(String, u64, String)>,
}

/// Sends the dead letters of endpoint `only` (every endpoint when None) once each, oldest
/// first, with the endpoint's secret and timeout; removes those taken from the record.
pub fn retry(store: Store, only: Option<&str>) -> Result<Retried, super::Error> {
    if let Some(name) = only.filter(|n| !store.config.webhooks.contains_key(*n)) {
        return Err(super::Error::Usage(format!(
            "no webhook '{name}' in coord.yaml; 'coord webhooks' lists them"
        )));
    }
    let git_dir = store.repo.git_dir().to_path_buf();
    let _held = BURYING.lock().unwrap_or_else(|e| e.into_inner());
    let (letters, _) = dead_record(&git_dir);
    let mut done = Retried::default();
    let hooks = store.config.webhooks.clone();
    let say: Say = Arc::new(Mutex::new(Box::new(|_: &str| {})));
    let mut endpoints: BTreeMap<String, Endpoint> = BTreeMap::new();
    for d in &letters {
        let wanted = only.is_none_or(|n| n == d.endpoint);
        let Some(hook) = hooks.get(&d.endpoint).filter(|_| wanted) else {
            continue;
        };
        if !endpoints.contains_key(&d.endpoint) {
            let mine = Store::open(store.root())?;
            let e = Endpoint::new(mine, d.endpoint.clone(), hook.clone(), Arc::clone(&say));
            endpoints.insert(d.endpoint.clone(), e);
        }
        let Some(endpoint) = endpoints.get_mut(&d.endpoint) else {
            continue;
        };
        let tried = match endpoint.secret() {
            Ok(secret) => endpoint.post(secret.as_deref(), &d.event),
            Err(()) => Err(format!(
                "the environment variable {} (secret_env) is not set",
                hook.secret_env.as_deref().unwrap_or("")
            )),
        };
        match tried {
            Ok(()) => done.sent.push((d.endpoint.clone(), d.id)),
            Err(e) => done.failed.push((d.endpoint.clone(), d.id, e)),
        }
    }
    if !done.sent.is_empty() {
        forget(&git_dir, &done.sent)?;
    }
    Ok(done)
}

/// Rewrites the dead-letter record without the letters `sent` names (lines that do not
/// read stay).
fn forget(git_dir: &Path, sent: &[(String, u64)]) -> Result<(), super::Error> {
    let path = dir(git_dir).join(DEAD);
    let text = crate::fsx::read_private_text(&path).unwrap_or_default();
    let kept: String = text
        .lines()
        .filter(|line| {
            let d = serde_json::from_str::<DeadLetter>(line).ok();
            !d.is_some_and(|d| sent.iter().any(|(e, id)| *e == d.endpoint && *id == d.id))
        })
        .map(|line| format!("{line}\n"))
        .collect();
    crate::fsx::write_private(&path, kept.as_bytes(), true).map_err(|source| super::Error::Io {
        what: "write",
        path: path.display().to_string(),
        source,
    })
}

/// Returns the dead letters as problems of the board view (one per endpoint), as `coord
/// status`, the board and the live board list them.
fn problems(git_dir: &Path) -> Vec<Value> {
    let mut by_endpoint: BTreeMap<&str, Vec<&DeadLetter>> = BTreeMap::new();
    let (dead, bad) = dead_record(git_dir);
    for d in &dead {
        by_endpoint.entry(&d.endpoint).or_default().push(d);
    }
    let path = format!(".git/coord/webhooks/{DEAD}");
    by_endpoint
        .into_iter()
        .filter_map(|(name, all)| {
            let last = all.last()?;
            let e = &last.event;
            let message = format!(
                "webhook {name} gave up on {} event(s); the last, {} ({} {} -> {}), after {} attempts: {}; fix the receiver, then run 'coord webhooks retry {name}'",
                all.len(),
                last.id,
                e["task"].as_str().unwrap_or(""),
                e["from"].as_str().unwrap_or("none"),
                e["to"].as_str().unwrap_or("none"),
                last.attempts,
                crate::redact::one_line(&last.error)
            );
            Some(json!({"path": path, "message": message}))
        })
        .chain((bad > 0).then(|| {
            let message = format!("{bad} line(s) of this dead-letter record are unreadable; fix or delete them");
            json!({"path": path, "message": message})
        }))
        .chain(recovered(git_dir))
        .collect()
}

/// Returns the cursors replaced in the last day, as problems.
fn recovered(git_dir: &Path) -> Vec<Value> {
    let entries = std::fs::read_dir(dir(git_dir)).into_iter().flatten();
    let now = epoch_ms();
    entries
        .flatten()
        .filter_map(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            let name = file.strip_suffix(".json")?;
            let c = cursor(git_dir, name)?;
            let note = c.recovered?;
            (now.saturating_sub(c.recovered_at) < RECOVERED_SHOWN_MS)
                .then(|| json!({"path": format!(".git/coord/webhooks/{file}"), "message": note}))
        })
        .collect()
}

/// Adds the dead letters to a board view's `problems`.
pub fn add_problems(git_dir: &Path, view: &mut Value) {
    let found = problems(git_dir);
    if found.is_empty() {
        return;
    }
    if let Some(list) = view.get_mut("problems").and_then(Value::as_array_mut) {
        list.extend(found);
    }
}

/// Starts the clone's deliverer on a thread of its own when coord.yaml names webhooks;
/// returns whether it did. Before it returns, the event journal has read history up to HEAD
/// and each endpoint without a cursor, or whose cursor is for another URL, starts at the
/// journal's end (saved at once), so the events of later ticks are delivered and earlier
/// history is not. `say` gets one line per trouble worth telling (a secret not set).
pub fn start(root: &Path, say: Box<dyn Fn(&str) + Send>) -> Result<bool, super::Error> {
    let store = Store::open(root)?;
    if store.config.webhooks.is_empty() {
        return Ok(false);
    }
    begin(&store)?;
    let root = root.to_path_buf();
    let say: Say = Arc::new(Mutex::new(say));
    std::thread::spawn(move || deliver_forever(&root, &say));
    Ok(true)
}

/// Reads history up to HEAD into the event journal, then starts each endpoint without a
/// cursor, or whose cursor is for another URL, at the journal's end (saved at once).
fn begin(store: &Store) -> Result<(), super::Error> {
    let git_dir = store.repo.git_dir().to_path_buf();
    let journal = Journal::open(&git_dir);
    let head = store.repo.head()?.oid;
    journal
        .record(&store.repo, store.work_dir(), head, Vec::new())
        .map_err(journal_error)?;
    let _ = std::fs::create_dir_all(dir(&git_dir));
    for (name, hook) in &store.config.webhooks {
        let fresh = match read_cursor(&git_dir, name) {
            Found::Missing => true,
            Found::Unreadable(_) => false,
            Found::Cursor(c) => c.url.as_ref().is_some_and(|u| *u != hook.url),
        };
        if fresh {
            let start = Cursor {
                cursor: journal.last(),
                url: Some(hook.url.clone()),
                ..Cursor::default()
            };
            save(&git_dir, name, &start).map_err(|source| super::Error::Io {
                what: "write",
                path: cursor_path(&git_dir, name).display().to_string(),
                source,
            })?;
        }
    }
    Ok(())
}

/// Takes the deliverer's lock (waiting while another process holds it), then delivers to
/// each endpoint on a thread of its own, so a slow one never holds up another, and reads
/// new history into the journal until the process ends.
fn deliver_forever(root: &Path, say: &Say) {
    let Ok(store) = Store::open(root) else {
        return;
    };
    let git_dir = store.repo.git_dir().to_path_buf();
    // Held while the process lives: the kernel releases it however the process ends.
    let _lock = loop {
        if let Some(lock) = take_lock(&git_dir) {
            break lock;
        }
        std::thread::sleep(LOCK_RETRY);
    };
    for (name, hook) in store.config.webhooks.clone() {
        let Ok(mine) = Store::open(root) else {
            return;
        };
        let mut endpoint = Endpoint::new(mine, name, hook, Arc::clone(say));
        std::thread::spawn(move || loop {
            let wake = endpoint.pass();
            std::thread::sleep(wake.saturating_duration_since(Instant::now()).min(POLL));
        });
    }
    let journal = Journal::open(&git_dir);
    loop {
        let head = store.repo.head().ok().and_then(|h| h.oid);
        let _ = journal.record(&store.repo, store.work_dir(), head, Vec::new());
        std::thread::sleep(POLL);
    }
}

fn journal_error(e: JournalError) -> super::Error {
    match e {
        JournalError::Io { what, path, source } => super::Error::Io {
            what,
            path: path.display().to_string(),
            source,
        },
        JournalError::Git(g) => super::Error::Git(g),
    }
}

/// Takes the deliverer's lock without waiting; None while another process holds it.
fn take_lock(git_dir: &Path) -> Option<File> {
    let _ = std::fs::create_dir_all(dir(git_dir));
    let file = File::create(dir(git_dir).join("lock")).ok()?;
    file.try_lock().ok()?;
    Some(file)
}

/// The deliverer of one endpoint, on its own thread while the clone's lock is held.
struct Endpoint {
    name: String,
    hook: Webhook,
    store: Store,
    journal: Journal,
    git_dir: PathBuf,
    agent: ureq::Agent,
    /// Whether the trouble with its secret was told.
    told: bool,
    /// The cursor last saved: what delivery resumes from when its file goes.
    at: Option<Cursor>,
    /// The task and attempt each commit's task files name, read once per commit.
    read: HashMap<String, Vec<(String, Value)>>,
    say: Say,
}

impl Endpoint {
    fn new(store: Store, name: String, hook: Webhook, say: Say) -> Endpoint {
        let git_dir = store.repo.git_dir().to_path_buf();
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(hook.timeout.0))
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(concat!("coord/", env!("CARGO_PKG_VERSION")))
            .build();
        Endpoint {
            journal: Journal::open(&git_dir),
            at: cursor(&git_dir, &name),
            store,
            git_dir,
            agent: ureq::Agent::new_with_config(config),
            told: false,
            read: HashMap::new(),
            name,
            hook,
            say,
        }
    }

    fn tell(&self, line: &str) {
        let say = self.say.lock().unwrap_or_else(|e| e.into_inner());
        say(line);
    }

    /// The endpoint's secret; Err when `secret_env` names a variable not set or not UTF-8.
    fn secret(&mut self) -> Result<Option<String>, ()> {
        let Some(var) = &self.hook.secret_env else {
            return Ok(None);
        };
        let why = match std::env::var(var) {
            Ok(s) if !s.is_empty() => return Ok(Some(s)),
            Err(std::env::VarError::NotUnicode(_)) => "is not UTF-8",
            _ => "is not set",
        };
        if !self.told {
            self.told = true;
            let name = &self.name;
            self.tell(&format!("coord: webhook {name}: the environment variable {var} (secret_env) {why}; its events wait until a deliverer starts with it set"));
        }
        Err(())
    }

    /// Saves the cursor (and keeps it, should its file go).
    fn keep(&mut self, at: &Cursor) {
        if let Err(e) = save(&self.git_dir, &self.name, at) {
            let name = &self.name;
            self.tell(&format!(
                "coord: webhook {name}: cannot save its cursor: {e}"
            ));
        }
        self.at = Some(at.clone());
    }

    /// The cursor to go on from: its file, else (gone or unreadable) the one last saved, or
    /// the journal's start; a replaced cursor is saved at once and told.
    fn current(&mut self) -> Cursor {
        let why = match read_cursor(&self.git_dir, &self.name) {
            Found::Cursor(c) => return c,
            Found::Missing => "was gone".to_string(),
            Found::Unreadable(why) => why,
        };
        let from = self.at.as_ref().map_or(0, |c| c.cursor);
        let name = &self.name;
        let note = format!("webhook {name}: its cursor file {why}; delivery resumed after event {from}, so receivers may get some events twice");
        self.tell(&format!("coord: {note}"));
        let at = Cursor {
            url: Some(self.hook.url.clone()),
            recovered: Some(note),
            recovered_at: epoch_ms(),
            ..self.at.clone().unwrap_or_default()
        };
        self.keep(&at);
        at
    }

    /// Delivers the endpoint's events in order until one fails; returns when to look again.
    fn pass(&mut self) -> Instant {
        let later = Instant::now() + POLL;
        let Ok(secret) = self.secret() else {
            return later;
        };
        let mut at = self.current();
        let now = epoch_ms();
        if at.not_before > now {
            return Instant::now() + Duration::from_millis(at.not_before - now);
        }
        if at.cursor >= self.journal.last() {
            return later;
        }
        let Ok(events) = self.journal.after(at.cursor) else {
            return later;
        };
        let hook = self.hook.clone();
        for logged in events {
            let event = self.event(&logged);
            let kind = event["kind"].as_str().unwrap_or("");
            let to = event["to"].as_str().unwrap_or("");
            if !hook.wants(kind, to) {
                at.cursor = logged.id;
                continue;
            }
            match self.post(secret.as_deref(), &event) {
                Ok(()) => {
                    at = Cursor {
                        cursor: logged.id,
                        ..self.kept(&at)
                    };
                    self.keep(&at);
                }
                Err(error) => {
                    at.failures += 1;
                    if at.failures >= hook.max_attempts {
                        self.bury(&event, at.failures, &error);
                        at = Cursor {
                            cursor: logged.id,
                            ..self.kept(&at)
                        };
                        self.keep(&at);
                        continue;
                    }
                    let wait = backoff(&hook, at.failures);
                    at.not_before = epoch_ms() + wait.as_millis() as u64;
                    at.last_error = Some(error);
                    self.keep(&at);
                    return Instant::now() + wait;
                }
            }
        }
        self.keep(&at);
        if self.read.len() > 4096 {
            self.read.clear();
        }
        later
    }

    /// Delivers until every event is taken, the next try would start after `deadline`, or
    /// the secret is missing; returns the cursor it left.
    fn until(&mut self, deadline: Instant) -> Cursor {
        while self.secret().is_ok() {
            let wake = self.pass();
            let at = self.current();
            if at.cursor >= self.journal.last() || wake > deadline {
                return at;
            }
            std::thread::sleep(wake.saturating_duration_since(Instant::now()));
        }
        self.current()
    }

    /// A cursor with no failures that keeps `at`'s URL and note.
    fn kept(&self, at: &Cursor) -> Cursor {
        Cursor {
            url: Some(self.hook.url.clone()),
            recovered: at.recovered.clone(),
            recovered_at: at.recovered_at,
            ..Cursor::default()
        }
    }

    /// Writes a dead letter for `event`, unless the record has one for it already (a
    /// deliverer killed before it saved the cursor); a torn last line is ended first.
    fn bury(&self, event: &Value, attempts: u32, error: &str) {
        let name = &self.name;
        let dead = DeadLetter {
            endpoint: name.clone(),
            id: event["id"].as_u64().unwrap_or(0),
            event: event.clone(),
            attempts,
            error: error.to_string(),
            at: jiff::Timestamp::now().to_string(),
        };
        let _held = BURYING.lock().unwrap_or_else(|e| e.into_inner());
        let known = dead_letters(&self.git_dir)
            .iter()
            .any(|d| d.endpoint == dead.endpoint && d.id == dead.id);
        if known {
            return;
        }
        if let Err(e) = append_line(&dir(&self.git_dir).join(DEAD), &dead) {
            self.tell(&format!(
                "coord: webhook {name}: cannot write the dead letter of event {}: {e}",
                dead.id
            ));
        }
    }

    /// POSTs one event; Err says why it was not taken (an error, a status other than 2xx,
    /// an answer cut off).
    fn post(&mut self, secret: Option<&str>, event: &Value) -> Result<(), String> {
        let body = event.to_string();
        let timestamp = (epoch_ms() / 1000).to_string();
        let mut request = self
            .agent
            .post(&self.hook.url)
            .header("content-type", "application/json")
            .header("x-coord-event-id", event["id"].to_string())
            .header("x-coord-timestamp", &timestamp);
        if let Some(secret) = secret {
            let signed = format!("{timestamp}.{body}");
            let mac = crate::sign::hmac_sha256_hex(secret.as_bytes(), signed.as_bytes());
            request = request.header("x-coord-signature", format!("sha256={mac}"));
        }
        let mut response = request.send(body.as_bytes()).map_err(|e| e.to_string())?;
        let read = std::io::copy(
            &mut response.body_mut().as_reader().take(ANSWER_LIMIT),
            &mut std::io::sink(),
        );
        match response.status().as_u16() {
            200..=299 => match read {
                Ok(_) => Ok(()),
                Err(e) => Err(format!("the answer was cut off: {e}")),
            },
            code => Err(format!("HTTP {code}")),
        }
    }

    /// The event as it is sent: the journal's transition with its id, its kind, and the
    /// agent and attempt the task file names at the commit.
    fn event(&mut self, logged: &Logged) -> Value {
        let d = &logged.data;
        let s = |k: &str| d[k].as_str().unwrap_or("").to_string();
        let (task, from, to, summary) = (s("task"), s("from"), s("to"), s("summary"));
        let kind = kind(&from, &to, &summary);
        let coord = if to.starts_with("circuit") || from == "agent" {
            json!({"assigned_to": task})
        } else {
            self.task_at(&s("commit"), &task)
        };
        json!({
            "id": logged.id,
            "kind": kind,
            "task": task,
            "from": d["from"],
            "to": d["to"],
            "op": d["op"],
            "agent": coord["assigned_to"],
            "attempt": coord["attempt"],
            "commit": d["commit"],
            "time": d["time"],
            "summary": d["summary"],
            "by": d.get("by").cloned().unwrap_or(Value::Null),
        })
    }

    /// Returns the `coord:` block of task `task`'s file as commit `commit` holds it (Null
    /// when it holds none).
    fn task_at(&mut self, commit: &str, task: &str) -> Value {
        if !self.read.contains_key(commit) {
            let files = read_tasks(&self.store.repo, self.store.work_dir(), commit);
            self.read.insert(commit.to_string(), files);
        }
        let name = format!("{task}.yaml");
        self.read
            .get(commit)
            .and_then(|files| files.iter().find(|(f, _)| *f == name))
            .map_or(Value::Null, |(_, v)| v.clone())
    }
}

/// Appends `value` as one JSON line to `path`, starting a new line when the file does not
/// end with one.
fn append_line(path: &Path, value: &impl serde::Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut f = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)?;
    if f.seek(SeekFrom::End(0))? > 0 {
        f.seek(SeekFrom::End(-1))?;
        let mut last = [0u8];
        f.read_exact(&mut last)?;
        if last[0] != b'\n' {
            line.insert(0, b'\n');
        }
    }
    f.write_all(&line)
}

/// Returns the `coord:` block of each task file commit `commit` added or changed, by file
/// name.
fn read_tasks(repo: &Repo, work_dir: &str, commit: &str) -> Vec<(String, Value)> {
    let (Ok(touched), Ok(oid)) = (repo.touched(commit, work_dir), commit.parse::<Oid>()) else {
        return Vec::new();
    };
    touched
        .files
        .iter()
        .filter_map(|(path, _)| {
            let blob = repo.blob_at(oid, path).ok()??;
            let bytes = repo.blob_bytes(blob).ok()?;
            let doc = crate::yaml::parse_bytes(&bytes, &crate::yaml::Limits::default()).ok()?;
            let name = path.rsplit('/').next()?.to_string();
            Some((name, doc.value.get("coord")?.clone()))
        })
        .collect()
}

/// The kind of a transition: `dead_letter`, `lease_lost`, `circuit_open` or `transition`.
fn kind(from: &str, to: &str, summary: &str) -> &'static str {
    let timeout = summary.contains(" after timeout") || summary.contains(": timeout ");
    match (from, to) {
        (_, "circuit open") => "circuit_open",
        ("assigned", "ready" | "failed") if timeout => "lease_lost",
        ("assigned", "failed") => "dead_letter",
        _ => "transition",
    }
}

/// The wait after the `failures`th failed try: the capped doubling of `retry.base`, half of
/// it fixed and half random, so the waits grow and clients do not retry in step.
fn backoff(hook: &Webhook, failures: u32) -> Duration {
    let base = hook.retry.base.0.as_millis() as u64;
    let cap = hook.retry.max.0.as_millis() as u64;
    let full = base
        .saturating_mul(1u64 << failures.saturating_sub(1).min(32))
        .min(cap)
        .max(1);
    let half = full / 2;
    let random = u64::from(getrandom::u32().unwrap_or(0)) % (full - half + 1);
    Duration::from_millis(half + random)
}

/// Milliseconds since the epoch on the system clock (what receivers compare the timestamp
/// with; never the clock `COORD_NOW` sets).
fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(base: &str, max: &str) -> Webhook {
        let yaml = format!("url: http://x\nretry: {{base: {base}, max: {max}}}\n");
        let doc = crate::yaml::parse(&yaml, &crate::yaml::Limits::default()).expect("yaml");
        serde_json::from_value(doc.value).expect("a webhook")
    }

    #[test]
    fn backoff_doubles_with_half_of_it_random_up_to_the_cap() {
        let h = hook("100ms", "1s");
        for (failures, low, high) in [(1, 50, 100), (2, 100, 200), (3, 200, 400), (9, 500, 1000)] {
            for _ in 0..50 {
                let ms = backoff(&h, failures).as_millis() as u64;
                assert!((low..=high).contains(&ms), "{failures}: {ms}");
            }
        }
    }

    #[test]
    fn a_torn_dead_letter_line_is_counted_and_ends_before_the_next_and_twins_read_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let git_dir = dir.path();
        let path = super::dir(git_dir).join(DEAD);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, "{\"endpoint\": \"ops\", \"id").expect("torn");
        let dead = DeadLetter {
            endpoint: "ops".into(),
            id: 7,
            event: json!({"id": 7}),
            attempts: 3,
            error: "HTTP 500".into(),
            at: "2026-01-01T00:00:00Z".into(),
        };
        append_line(&path, &dead).expect("append");
        append_line(&path, &dead).expect("append again");
        let (letters, bad) = dead_record(git_dir);
        assert_eq!((letters.len(), letters[0].id, bad), (1, 7, 1));
        let view = problems(git_dir).to_vec();
        assert!(json!(view).to_string().contains("1 line(s)"), "{view:?}");
    }

    #[test]
    fn kinds_name_the_problems() {
        assert_eq!(kind("ready", "assigned", "assign t to a"), "transition");
        assert_eq!(kind("assigned", "failed", "fail t: boom"), "dead_letter");
        let lost = "retry t (attempt 2) after timeout";
        assert_eq!(kind("assigned", "ready", lost), "lease_lost");
        assert_eq!(kind("agent", "circuit open", "open a"), "circuit_open");
    }
}
