//! Claim refs: how clones without a hub take tasks without racing each other for the branch.
//!
//! A claim with `--sync` first creates `refs/coord/claims/<task>/<attempt>` on the remote,
//! create-only (`--force-with-lease=<ref>:`), pointing at a small blob that names the agent:
//! exactly one clone creates it, and that clone's agent has the task. A clone that finds the
//! ref there learns at once that the task is taken and takes the next ready one, without
//! fetching or rebasing anything. The assignment itself reaches the branch by the normal sync
//! (replayed by meaning when the branch moved meanwhile).
//!
//! This module owns the refs: their names, the copies a fetch brings
//! (`refs/coord/remote/<remote>/claims/…`), which of them still hold a ready task (and which
//! were held longer than the task's timeout without their claim reaching the branch: a
//! claimer killed between the ref and the branch push), creating one, and pruning those whose
//! task moved on.

use super::{git, last_lines, SyncError};
use crate::board::Board;
use crate::git::{Oid, Repo};
use crate::model::{AgentName, State, TaskId};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Where the remote keeps the claim refs.
pub const PREFIX: &str = "refs/coord/claims/";
/// Where a fetch puts each remote's claim refs: `<MIRROR><remote>/claims/<task>/<attempt>`.
const MIRROR: &str = "refs/coord/remote/";
/// The file, under `.git/coord/`, that notes when this clone first saw each holding ref.
const SIGHTINGS: &str = "claim-sightings.json";

/// The fetch refspec that copies `remote`'s claim refs into this clone.
pub fn refspec(remote: &str) -> String {
    format!("+{PREFIX}*:{MIRROR}{remote}/claims/*")
}

/// A claim ref as fetched: the task, the attempt it grants and the blob it points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    /// The task claimed.
    pub id: TaskId,
    /// The attempt the claim took.
    pub attempt: u32,
    /// The blob the ref points at (unique per claim).
    pub oid: Oid,
}

impl ClaimRef {
    /// The ref's name on the remote.
    pub fn name(&self) -> String {
        name(&self.id, self.attempt)
    }
}

/// The remote ref that claims attempt `attempt` of task `id`.
pub fn name(id: &TaskId, attempt: u32) -> String {
    format!("{PREFIX}{id}/{attempt}")
}

/// Returns `remote`'s claim refs as last fetched.
pub fn fetched(repo: &Repo, remote: &str) -> Result<Vec<ClaimRef>, SyncError> {
    let prefix = format!("{MIRROR}{remote}/claims/");
    Ok(repo
        .refs_under(&prefix)?
        .into_iter()
        .filter_map(|(name, oid)| parse(name.strip_prefix(&prefix)?, oid))
        .collect())
}

/// Returns the claim refs of every remote as last fetched.
pub fn fetched_everywhere(repo: &Repo) -> Result<Vec<ClaimRef>, SyncError> {
    Ok(repo
        .refs_under(MIRROR)?
        .into_iter()
        .filter_map(|(name, oid)| parse(name.rsplit_once("/claims/")?.1, oid))
        .collect())
}

/// Reads `<task>/<attempt>`.
fn parse(rest: &str, oid: Oid) -> Option<ClaimRef> {
    let (id, attempt) = rest.split_once('/')?;
    Some(ClaimRef {
        id: TaskId::new(id).ok()?,
        attempt: attempt.parse().ok()?,
        oid,
    })
}

/// Returns whether claim ref `c` still holds its task on `board`: the task is ready there
/// and has not started the claimed attempt (the claim has not reached the branch). A ref
/// that does not hold is moot: its claim landed, or the task moved on or is gone.
pub fn holds(board: &Board, c: &ClaimRef) -> bool {
    board.find(&c.id).iter().any(|f| {
        f.folder.state == State::Ready && f.read.as_ref().is_ok_and(|t| t.coord.attempt < c.attempt)
    })
}

/// Returns the tasks that `refs` hold on `board` for claims that have not reached the
/// branch, measured by this clone's clock: a ref this clone has seen holding its task for
/// longer than the task's timeout (`default` unless the task sets one) no longer holds it,
/// as a lease that ran out (its claimer was killed before its branch push; the next claim
/// takes the task over the ref). Notes first sightings in `.git/coord/`.
pub fn holding(
    git_dir: &Path,
    board: &Board,
    refs: &[ClaimRef],
    default: Duration,
    now_ms: u64,
) -> Vec<TaskId> {
    let path = git_dir.join("coord").join(SIGHTINGS);
    let before: BTreeMap<String, u64> = crate::fsx::read_private(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let mut seen = BTreeMap::new();
    let mut held = Vec::new();
    for c in refs.iter().filter(|c| holds(board, c)) {
        let key = format!("{} {}", c.name(), c.oid);
        let first = before.get(&key).copied().unwrap_or(now_ms);
        seen.insert(key, first);
        let timeout = timeout_of(board, &c.id).unwrap_or(default);
        if now_ms.saturating_sub(first) < timeout.as_millis() as u64 {
            held.push(c.id.clone());
        }
    }
    if seen != before {
        if let Ok(bytes) = serde_json::to_vec(&seen) {
            // Only a hint for releasing a dead claimer's ref: a lost write notes it again.
            let _ = crate::fsx::write_private(&path, &bytes, false);
        }
    }
    held
}

/// The timeout task `id` sets, if any.
fn timeout_of(board: &Board, id: &TaskId) -> Option<Duration> {
    board.find(id).iter().find_map(|f| {
        let t = f.read.as_ref().ok()?.spec.timeout?;
        Some(Duration::from_secs(t.as_secs().max(0) as u64))
    })
}

/// What creating a claim ref came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Took {
    /// The ref is this claim's: the task is the agent's.
    Won,
    /// Another clone's claim created it first.
    Taken,
}

/// What a claim ref points at: a blob naming the claim, unique to it.
#[derive(Debug, serde::Serialize)]
struct Grant<'a> {
    task: &'a TaskId,
    attempt: u32,
    agent: &'a AgentName,
    nonce: u64,
}

/// Creates the claim ref of attempt `attempt` of task `id` for `agent` on `remote`:
/// create-only, or over `old` (a moot or expired ref of the same name, as fetched). Deletes
/// the moot refs `prune` in the same push, each only while it holds the value fetched; their
/// outcome does not matter.
pub fn take(
    root: &Path,
    repo: &Repo,
    remote: &str,
    (id, attempt, agent): (&TaskId, u32, &AgentName),
    old: Option<Oid>,
    prune: &[ClaimRef],
) -> Result<Took, SyncError> {
    let nonce = getrandom::u64().unwrap_or(0);
    let grant = Grant {
        task: id,
        attempt,
        agent,
        nonce,
    };
    let bytes = serde_json::to_vec(&grant).unwrap_or_default();
    let blob = repo.write_blob(&bytes)?;
    let target = name(id, attempt);
    let old = old.map_or_else(String::new, |o| o.to_string());
    let mut args = vec![
        "push".to_string(),
        "--porcelain".to_string(),
        format!("--force-with-lease={target}:{old}"),
    ];
    for p in prune {
        args.push(format!("--force-with-lease={}:{}", p.name(), p.oid));
    }
    args.push(remote.to_string());
    args.push(format!("{blob}:{target}"));
    args.extend(prune.iter().map(|p| format!(":{}", p.name())));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = git(root, "push", &args)?;
    read_took(&String::from_utf8_lossy(&out.stdout), &target).ok_or_else(|| SyncError::GitCommand {
        action: "push",
        message: last_lines(&String::from_utf8_lossy(&out.stderr)),
    })
}

/// What git says of a ref another push created or changed first: before sending (`stale
/// info`, …), or on the remote, when two pushes create it at once (`failed to update ref`).
const TAKEN: [&str; 6] = [
    "stale info",
    "fetch first",
    "already exists",
    "non-fast-forward",
    "failed to update ref",
    "failed to lock",
];

/// Reads the outcome of `target` from `git push --porcelain`: created (`*`), forced over a
/// moot value (`+`) or already this claim's (`=`, the blob is unique) is won; rejected
/// because it exists or changed (`stale info`, `fetch first`, `already exists`) is taken.
/// None for any other answer.
fn read_took(stdout: &str, target: &str) -> Option<Took> {
    let line = stdout.lines().find(|l| {
        l.split('\t')
            .nth(1)
            .is_some_and(|spec| spec.ends_with(&format!(":{target}")))
    })?;
    let flag = line.chars().next()?;
    let summary = line.split('\t').nth(2).unwrap_or("");
    match flag {
        '*' | '+' | '=' | ' ' => Some(Took::Won),
        '!' if TAKEN.iter().any(|why| summary.contains(why)) => Some(Took::Taken),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_push_says_whether_the_claim_ref_was_created_or_another_clones() {
        let target = "refs/coord/claims/t1/1";
        let won = "To /r.git\n*\tabc:refs/coord/claims/t1/1\t[new reference]\n-\t:refs/coord/claims/t0/1\t[deleted]\nDone\n";
        assert_eq!(read_took(won, target), Some(Took::Won));
        let taken = "To /r.git\n!\tabc:refs/coord/claims/t1/1\t[rejected] (stale info)\nDone\n";
        assert_eq!(read_took(taken, target), Some(Took::Taken));
        let at_once =
            "To /r.git\n!\tabc:refs/coord/claims/t1/1\t[remote rejected] (failed to update ref)\n";
        assert_eq!(read_took(at_once, target), Some(Took::Taken));
        let other = "To /r.git\n!\tabc:refs/coord/claims/t1/1\t[remote rejected] (hook declined)\n";
        assert_eq!(read_took(other, target), None);
        let pruned_only = "To /r.git\n*\tabc:refs/coord/claims/t1/10\t[new reference]\n";
        assert_eq!(read_took(pruned_only, target), None);
    }
}
