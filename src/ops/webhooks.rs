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
//! Reads and writes `.git/coord/webhooks/`, the journal and git history; sends HTTP.

use super::events::{Journal, JournalError, Logged};
use crate::config::Webhook;
use crate::git::{Oid, Repo};
use crate::store::Store;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How often the deliverer looks for new events.
const POLL: Duration = Duration::from_millis(200);
/// How often a process that does not deliver tries to take the deliverer's lock.
const LOCK_RETRY: Duration = Duration::from_secs(2);
/// The dead-letter record, under the webhooks folder.
pub const DEAD: &str = "dead.jsonl";

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

/// Reads endpoint `name`'s cursor; None before its first delivery.
pub fn cursor(git_dir: &Path, name: &str) -> Option<Cursor> {
    let bytes = crate::fsx::read_private(&cursor_path(git_dir, name)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn save(git_dir: &Path, name: &str, c: &Cursor) {
    if let Ok(bytes) = serde_json::to_vec(c) {
        let _ = crate::fsx::write_private(&cursor_path(git_dir, name), &bytes, false);
    }
}

/// Returns every dead letter of the clone, oldest first.
pub fn dead_letters(git_dir: &Path) -> Vec<DeadLetter> {
    let text = crate::fsx::read_private_text(&dir(git_dir).join(DEAD)).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
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

/// Returns every endpoint that has a cursor or a dead letter, by name.
pub fn report(git_dir: &Path) -> Vec<Report> {
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

/// Returns the dead letters as problems of the board view (one per endpoint), as `coord
/// status`, the board and the live board list them.
fn problems(git_dir: &Path) -> Vec<Value> {
    let mut by_endpoint: BTreeMap<&str, Vec<&DeadLetter>> = BTreeMap::new();
    let dead = dead_letters(git_dir);
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
                "webhook {name} gave up on {} event(s); the last, {} ({} {} -> {}), after {} attempts: {}; fix the receiver, then resend them from this file and delete it",
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
/// and each endpoint without a cursor starts at the journal's end, so the events of later
/// ticks are delivered and earlier history is not. `say` gets one line per trouble worth
/// telling (a secret not set).
pub fn start(root: &Path, say: Box<dyn Fn(&str) + Send>) -> Result<bool, super::Error> {
    let store = Store::open(root)?;
    if store.config.webhooks.is_empty() {
        return Ok(false);
    }
    let git_dir = store.repo.git_dir().to_path_buf();
    let journal = Journal::open(&git_dir);
    let head = store.repo.head()?.oid;
    journal
        .record(&store.repo, store.work_dir(), head, Vec::new())
        .map_err(journal_error)?;
    let _ = std::fs::create_dir_all(dir(&git_dir));
    for name in store.config.webhooks.keys() {
        if cursor(&git_dir, name).is_none() {
            let start = Cursor {
                cursor: journal.last(),
                ..Cursor::default()
            };
            save(&git_dir, name, &start);
        }
    }
    let root = root.to_path_buf();
    std::thread::spawn(move || deliver_forever(&root, &*say));
    Ok(true)
}

/// Takes the deliverer's lock (waiting while another process holds it), then delivers until
/// the process ends.
fn deliver_forever(root: &Path, say: &dyn Fn(&str)) {
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
    let mut deliverer = Deliverer::new(store, say);
    loop {
        let wake = deliverer.pass();
        std::thread::sleep(wake.saturating_duration_since(Instant::now()).min(POLL));
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

/// The deliverer of one clone, holding its lock.
struct Deliverer<'s> {
    store: Store,
    journal: Journal,
    git_dir: PathBuf,
    agents: HashMap<String, ureq::Agent>,
    /// The endpoints whose missing secret was told.
    told: HashSet<String>,
    /// The task and attempt each commit's task files name, read once per commit.
    read: HashMap<String, Vec<(String, Value)>>,
    say: &'s dyn Fn(&str),
}

impl<'s> Deliverer<'s> {
    fn new(store: Store, say: &'s dyn Fn(&str)) -> Deliverer<'s> {
        let git_dir = store.repo.git_dir().to_path_buf();
        Deliverer {
            journal: Journal::open(&git_dir),
            store,
            git_dir,
            agents: HashMap::new(),
            told: HashSet::new(),
            read: HashMap::new(),
            say,
        }
    }

    /// Reads new history into the journal and delivers to every endpoint what it can now;
    /// returns when the next pass is due.
    fn pass(&mut self) -> Instant {
        let mut wake = Instant::now() + POLL;
        let head = self.store.repo.head().ok().and_then(|h| h.oid);
        let work_dir = self.store.work_dir().to_string();
        if self
            .journal
            .record(&self.store.repo, &work_dir, head, Vec::new())
            .is_err()
        {
            return wake;
        }
        let hooks = self.store.config.webhooks.clone();
        for (name, hook) in &hooks {
            wake = wake.min(self.endpoint(name, hook));
        }
        if self.read.len() > 4096 {
            self.read.clear();
        }
        wake
    }

    /// Delivers endpoint `name`'s events in order until one fails; returns when to look again.
    fn endpoint(&mut self, name: &str, hook: &Webhook) -> Instant {
        let later = Instant::now() + POLL;
        let secret = match &hook.secret_env {
            Some(var) => match std::env::var(var) {
                Ok(s) if !s.is_empty() => Some(s),
                _ => {
                    if self.told.insert(name.to_string()) {
                        (self.say)(&format!("coord: webhook {name}: the environment variable {var} (secret_env) is not set; its events wait until a deliverer starts with it"));
                    }
                    return later;
                }
            },
            None => None,
        };
        let mut at = cursor(&self.git_dir, name).unwrap_or_else(|| Cursor {
            cursor: self.journal.last(),
            ..Cursor::default()
        });
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
        for logged in events {
            let event = self.event(&logged);
            let kind = event["kind"].as_str().unwrap_or("");
            let to = event["to"].as_str().unwrap_or("");
            if !hook.wants(kind, to) {
                at.cursor = logged.id;
                continue;
            }
            match self.post(name, hook, secret.as_deref(), &event) {
                Ok(()) => {
                    at = Cursor {
                        cursor: logged.id,
                        ..Cursor::default()
                    };
                    save(&self.git_dir, name, &at);
                }
                Err(error) => {
                    at.failures += 1;
                    if at.failures >= hook.max_attempts {
                        self.bury(name, &event, at.failures, &error);
                        at = Cursor {
                            cursor: logged.id,
                            ..Cursor::default()
                        };
                        save(&self.git_dir, name, &at);
                        continue;
                    }
                    let wait = backoff(hook, at.failures);
                    at.not_before = epoch_ms() + wait.as_millis() as u64;
                    at.last_error = Some(error);
                    save(&self.git_dir, name, &at);
                    return Instant::now() + wait;
                }
            }
        }
        save(&self.git_dir, name, &at);
        later
    }

    /// Writes a dead letter for `event`.
    fn bury(&self, name: &str, event: &Value, attempts: u32, error: &str) {
        let dead = DeadLetter {
            endpoint: name.to_string(),
            id: event["id"].as_u64().unwrap_or(0),
            event: event.clone(),
            attempts,
            error: error.to_string(),
            at: jiff::Timestamp::now().to_string(),
        };
        let Ok(mut line) = serde_json::to_vec(&dead) else {
            return;
        };
        line.push(b'\n');
        let written = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir(&self.git_dir).join(DEAD))
            .and_then(|mut f| f.write_all(&line));
        if let Err(e) = written {
            (self.say)(&format!(
                "coord: webhook {name}: cannot write the dead letter of event {}: {e}",
                dead.id
            ));
        }
    }

    /// POSTs one event; Err says why it was not taken (an error, a status other than 2xx).
    fn post(
        &mut self,
        name: &str,
        hook: &Webhook,
        secret: Option<&str>,
        event: &Value,
    ) -> Result<(), String> {
        let agent = self.agents.entry(name.to_string()).or_insert_with(|| {
            let config = ureq::Agent::config_builder()
                .timeout_global(Some(hook.timeout.0))
                .http_status_as_error(false)
                .max_redirects(0)
                .user_agent(concat!("coord/", env!("CARGO_PKG_VERSION")))
                .build();
            ureq::Agent::new_with_config(config)
        });
        let body = event.to_string();
        let timestamp = (epoch_ms() / 1000).to_string();
        let mut request = agent
            .post(&hook.url)
            .header("content-type", "application/json")
            .header("x-coord-event-id", event["id"].to_string())
            .header("x-coord-timestamp", &timestamp);
        if let Some(secret) = secret {
            let signed = format!("{timestamp}.{body}");
            let mac = crate::sign::hmac_sha256_hex(secret.as_bytes(), signed.as_bytes());
            request = request.header("x-coord-signature", format!("sha256={mac}"));
        }
        let mut response = request.send(body.as_bytes()).map_err(|e| e.to_string())?;
        let _ = response.body_mut().read_to_string();
        match response.status().as_u16() {
            200..=299 => Ok(()),
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
    fn kinds_name_the_problems() {
        assert_eq!(kind("ready", "assigned", "assign t to a"), "transition");
        assert_eq!(kind("assigned", "failed", "fail t: boom"), "dead_letter");
        let lost = "retry t (attempt 2) after timeout";
        assert_eq!(kind("assigned", "ready", lost), "lease_lost");
        assert_eq!(kind("agent", "circuit open", "open a"), "circuit_open");
    }
}
