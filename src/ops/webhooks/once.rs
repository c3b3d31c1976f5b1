//! One-shot delivery (docs/webhooks.md, "From a cron job"): `coord tick --webhooks` and
//! `coord sync --webhooks` deliver the events of their run, and what earlier runs left
//! pending, for a bounded time, then return.
//!
//! A cron job's runs may each start from a fresh clone, so `coord sync` also keeps each
//! endpoint's cursor on the remote: `refs/coord/webhooks/<name>` names a blob, `Remote`,
//! holding the branch commit the endpoint has taken every event up to, the journal id of the
//! last of those events, its failures and its dead letters. A clone whose event journal has
//! never been read starts it from the cursor furthest behind, so the ids go on where the last
//! run left them and no event is lost or sent again in bulk. The cursor is pushed after
//! delivery, over the value fetched before (a lost push means those events come again).
//! Fetches and pushes with the `git` command.

use super::{
    append_line, begin, cursor, dead_letters, dir, journal_error, save, take_lock, Cursor,
    DeadLetter, Endpoint, Say, DEAD,
};
use crate::git::{Oid, Repo};
use crate::ops::events::Journal;
use crate::store::Store;
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a one-shot run delivers when not told (`--webhooks-for`).
pub const ONCE_FOR: Duration = Duration::from_secs(20);
/// Where the remote keeps the endpoints' cursors.
const PREFIX: &str = "refs/coord/webhooks/";
/// The most dead letters of one endpoint a remote cursor carries (the newest).
const DEAD_KEPT: usize = 100;

/// An endpoint's cursor as the remote keeps it (the blob `refs/coord/webhooks/<name>` names).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Remote {
    /// The branch commit the endpoint has taken every event up to.
    commit: String,
    /// The journal id of the last event up to `commit`.
    id: u64,
    /// The URL the cursor is for.
    url: String,
    /// Failed tries of the next event.
    #[serde(default)]
    failures: u32,
    /// When its next try may start (ms since the epoch).
    #[serde(default)]
    not_before: u64,
    /// Why its last try failed.
    #[serde(default)]
    last_error: Option<String>,
    /// The endpoint's dead letters, newest last.
    #[serde(default)]
    dead: Vec<DeadLetter>,
}

/// The clone's deliverer for one run: it holds the clone's deliverer lock from before the
/// run's tick until its events are delivered.
pub struct Once {
    root: PathBuf,
    _lock: File,
    /// The remote that keeps the cursors, and the blob each cursor named when fetched.
    remote: Option<(String, BTreeMap<String, Option<Oid>>)>,
    say: Say,
}

/// What a one-shot run left, per endpoint: its name and the events still pending.
#[derive(Debug, Clone, Default)]
pub struct Delivered {
    /// Each endpoint's name and how many events wait for the next run.
    pub pending: Vec<(String, u64)>,
}

/// Prepares a one-shot delivery in the repository around `root` before the run's tick:
/// None when coord.yaml names no webhook or another process of the clone delivers. With a
/// `remote`, fetches the cursors it keeps and, in a clone whose journal was never read,
/// starts the journal from them. Reads the journal up to HEAD, so the run's own events are
/// delivered. `say` gets one line per trouble worth telling.
pub fn prepare(
    root: &Path,
    remote: Option<&str>,
    say: Box<dyn Fn(&str) + Send>,
) -> Result<Option<Once>, super::super::Error> {
    let store = Store::open(root)?;
    if store.config.webhooks.is_empty() {
        return Ok(None);
    }
    let git_dir = store.repo.git_dir().to_path_buf();
    let Some(lock) = take_lock(&git_dir) else {
        say("coord: another process of this clone delivers the webhooks (coord watch or serve); this run leaves them to it");
        return Ok(None);
    };
    let remote = match remote {
        Some(name) => match fetch(&store.repo, name) {
            Ok(()) => Some((name.to_string(), fetched(&store))),
            Err(why) => {
                say(&format!("coord: cannot fetch the webhook cursors from {name} ({why}); this run keeps them in the clone only"));
                None
            }
        },
        None => None,
    };
    if remote.is_some() && Journal::open(&git_dir).position().is_none() {
        for line in resume(&store)? {
            say(&format!("coord: {line}"));
        }
    }
    // Opened again: a clone deepened meanwhile shows its history only to a new opening.
    begin(&Store::open(root)?)?;
    Ok(Some(Once {
        root: root.to_path_buf(),
        _lock: lock,
        remote,
        say: Arc::new(Mutex::new(say)),
    }))
}

impl Once {
    /// Reads the journal up to HEAD and delivers to each endpoint, each on a thread of its
    /// own, until all is taken or no try would start within `within`; a try under way ends
    /// within the endpoint's `timeout`. Then pushes the cursors to the remote.
    pub fn deliver(self, within: Duration) -> Result<Delivered, super::super::Error> {
        let deadline = Instant::now() + within;
        let store = Store::open(&self.root)?;
        let git_dir = store.repo.git_dir().to_path_buf();
        let journal = Journal::open(&git_dir);
        let head = store.repo.head()?.oid;
        journal
            .record(&store.repo, store.work_dir(), head, Vec::new())
            .map_err(journal_error)?;
        let mut threads = Vec::new();
        for (name, hook) in store.config.webhooks.clone() {
            let mine = Store::open(&self.root)?;
            let mut endpoint = Endpoint::new(mine, name.clone(), hook, Arc::clone(&self.say));
            threads.push(std::thread::spawn(move || {
                (name, endpoint.until(deadline).cursor)
            }));
        }
        let last = journal.last();
        let mut delivered = Delivered::default();
        for t in threads {
            if let Ok((name, at)) = t.join() {
                delivered.pending.push((name, last.saturating_sub(at)));
            }
        }
        if let Some((remote, leases)) = &self.remote {
            if let Err(why) = push(&store, &journal, remote, leases) {
                self.tell(&format!("coord: cannot push the webhook cursors to {remote} ({why}); the next run from a fresh clone sends their events again"));
            }
        }
        Ok(delivered)
    }

    fn tell(&self, line: &str) {
        let say = self.say.lock().unwrap_or_else(|e| e.into_inner());
        say(line);
    }
}

/// Fetches the remote's webhook cursors into the clone's refs of the same names (pruning
/// those the remote no longer has); Err says why not.
fn fetch(repo: &Repo, remote: &str) -> Result<(), String> {
    let spec = format!("+{PREFIX}*:{PREFIX}*");
    let args = ["fetch", "--quiet", "--no-tags", "--prune", remote, &spec];
    git(repo, &args)
}

/// Runs git in the work tree; Err holds the last line of what it said.
fn git(repo: &Repo, args: &[&str]) -> Result<(), String> {
    let out = crate::git::command::git_output(repo.workdir(), args).map_err(|e| e.to_string())?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(crate::redact::one_line(
        stderr.lines().last().unwrap_or("git failed"),
    ))
}

/// The blob each configured endpoint's cursor ref names (None: the remote has none).
fn fetched(store: &Store) -> BTreeMap<String, Option<Oid>> {
    store
        .config
        .webhooks
        .keys()
        .map(|name| {
            let at = store.repo.ref_target(&format!("{PREFIX}{name}"));
            (name.clone(), at.ok().flatten())
        })
        .collect()
}

/// Reads the cursor the clone fetched for `name`; None when there is none or it does not
/// read.
fn remote_cursor(store: &Store, name: &str) -> Option<Remote> {
    let oid = store.repo.ref_target(&format!("{PREFIX}{name}")).ok()??;
    serde_json::from_slice(&store.repo.blob_bytes(oid).ok()?).ok()
}

/// Starts a never-read journal from the remote's cursors: at the commit of the one furthest
/// behind (deepening a shallow clone to reach it), and each endpoint's cursor, failures and
/// dead letters as the remote keeps them. Returns the lines worth telling.
fn resume(store: &Store) -> Result<Vec<String>, super::super::Error> {
    let git_dir = store.repo.git_dir();
    let cursors: Vec<(String, Remote)> = store
        .config
        .webhooks
        .iter()
        .filter_map(|(name, hook)| {
            let r = remote_cursor(store, name)?;
            (r.url == hook.url).then(|| (name.clone(), r))
        })
        .collect();
    let Some((_, behind)) = cursors.iter().min_by_key(|(_, r)| r.id) else {
        return Ok(Vec::new());
    };
    let Ok(commit) = behind.commit.parse::<Oid>() else {
        return Ok(vec![format!(
            "the webhook cursor names no commit ({:?}); delivery starts at HEAD",
            behind.commit
        )]);
    };
    let head = store.repo.head()?.oid;
    if Some(commit) != head && store.repo.is_shallow() {
        store.repo.unshallow();
    }
    if !store.repo.has_commit(commit) {
        return Ok(vec![format!("the webhook cursor's commit {commit} is not on the branch; delivery starts at HEAD, and the events since that commit are not sent")]);
    }
    Journal::open(git_dir)
        .seed(commit, behind.id)
        .map_err(journal_error)?;
    let _ = std::fs::create_dir_all(dir(git_dir));
    let known = dead_letters(git_dir);
    for (name, r) in &cursors {
        let at = Cursor {
            cursor: r.id,
            failures: r.failures,
            not_before: r.not_before,
            last_error: r.last_error.clone(),
            url: Some(r.url.clone()),
            ..Cursor::default()
        };
        let path = dir(git_dir).join(format!("{name}.json"));
        save(git_dir, name, &at).map_err(|source| super::super::Error::Io {
            what: "write",
            path: path.display().to_string(),
            source,
        })?;
        for d in &r.dead {
            if !known
                .iter()
                .any(|k| k.endpoint == d.endpoint && k.id == d.id)
            {
                let _ = append_line(&dir(git_dir).join(DEAD), d);
            }
        }
    }
    Ok(Vec::new())
}

/// Pushes each endpoint's cursor that moved, over the blob fetched before.
fn push(
    store: &Store,
    journal: &Journal,
    remote: &str,
    leases: &BTreeMap<String, Option<Oid>>,
) -> Result<(), String> {
    let git_dir = store.repo.git_dir();
    let dead = dead_letters(git_dir);
    let mut args: Vec<String> = ["push", "--quiet", "--porcelain", remote]
        .map(String::from)
        .to_vec();
    let mut specs = Vec::new();
    for (name, hook) in &store.config.webhooks {
        let Some(at) = cursor(git_dir, name) else {
            continue;
        };
        let Some((commit, id)) = taken_up_to(store, journal, at.cursor) else {
            continue;
        };
        let mut mine: Vec<DeadLetter> = dead
            .iter()
            .filter(|d| d.endpoint == *name)
            .cloned()
            .collect();
        mine.drain(..mine.len().saturating_sub(DEAD_KEPT));
        let value = Remote {
            commit,
            id,
            url: hook.url.clone(),
            failures: at.failures,
            not_before: at.not_before,
            last_error: at.last_error,
            dead: mine,
        };
        let bytes = serde_json::to_vec(&value).map_err(|e| e.to_string())?;
        let blob = store.repo.write_blob(&bytes).map_err(|e| e.to_string())?;
        let old = leases.get(name).copied().flatten();
        if old == Some(blob) {
            continue;
        }
        let refname = format!("{PREFIX}{name}");
        let lease = old.map_or_else(String::new, |o| o.to_string());
        args.push(format!("--force-with-lease={refname}:{lease}"));
        specs.push(format!("{blob}:{refname}"));
    }
    if specs.is_empty() {
        return Ok(());
    }
    args.extend(specs);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    git(&store.repo, &args)
}

/// The remote cursor of an endpoint whose local cursor is `taken`: the last commit all of
/// whose events it has taken and the id of the last of them. An endpoint stopped midway
/// through a commit's events goes back to the commit before (those events come again).
/// None when the journal cannot say.
fn taken_up_to(store: &Store, journal: &Journal, taken: u64) -> Option<(String, u64)> {
    let (head, last) = journal.position()?;
    if taken >= last {
        return Some((head?, last));
    }
    let recent = journal.after(taken.saturating_sub(4096)).ok()?;
    let commit_of = |id: u64| {
        recent
            .iter()
            .find(|l| l.id == id)
            .and_then(|l| l.data["commit"].as_str().map(str::to_string))
    };
    let next = commit_of(taken + 1)?;
    let first = recent
        .iter()
        .find(|l| l.data["commit"].as_str() == Some(next.as_str()))?;
    if first.id == recent.first()?.id && first.id > 1 {
        return None;
    }
    let parent = store.repo.first_parent(next.parse().ok()?).ok()??;
    Some((parent.to_string(), first.id - 1))
}
