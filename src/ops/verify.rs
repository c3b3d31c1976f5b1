//! `verify`: the history checker. Walks every commit reachable from a revision once and checks
//! what coord's trailers and the task files they name say happened: each (task, attempt)
//! granted once and to one agent, each accepted result the current grant's, each reported
//! result still kept at the tip, each task id in one place at the tip. Reads git only.

use super::{Coord, Error};
use crate::engine::operation;
use crate::git::{CommitInfo, Oid, Repo};
use crate::model::{Endpoint, State};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What `coord verify` found; serialized as its `--json` answer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Verified {
    /// The revision walked, as given.
    pub rev: String,
    /// The commit it names; None on an unborn branch.
    pub tip: Option<String>,
    /// Commits walked.
    pub commits: usize,
    /// Attempts granted (assignments read).
    pub attempts: usize,
    /// Results reported by `complete` and `fail`.
    pub results: usize,
    /// Task ids at the tip.
    pub tasks: usize,
    /// What breaks a rule; empty when the history is clean.
    pub findings: Vec<Violation>,
}

/// The rule a finding breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// One (task, attempt) was granted to two different agents.
    GrantedToTwoAgents,
    /// One (task, attempt) was granted by two commits.
    GrantedTwice,
    /// A result was accepted for an attempt or agent that did not hold the task.
    WrongHolder,
    /// A reported result is neither the task's result nor in its history at the tip.
    ResultLost,
    /// One task id has files in two places at the tip.
    TwoPlaces,
}

/// One finding: the rule, the task and what is involved.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// The rule broken.
    pub kind: ViolationKind,
    /// The task id.
    pub task: String,
    /// The attempt number, when the rule is about one.
    pub attempt: Option<u64>,
    /// The agents involved.
    pub agents: Vec<String>,
    /// The commits involved, oldest first.
    pub commits: Vec<String>,
    /// The files involved (at the tip, for `two_places`).
    pub paths: Vec<String>,
}

/// A task file as the checker reads it: who holds it and which result it carries.
#[derive(Debug, Default)]
struct FileView {
    holder: Option<String>,
    attempt: Option<u64>,
    result: Option<Stamp>,
    /// The results kept in `coord.history`.
    kept: Vec<Stamp>,
}

/// The agent and attempt a result names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Stamp {
    agent: Option<String>,
    attempt: Option<u64>,
}

impl FileView {
    fn parse(bytes: &[u8]) -> FileView {
        let limits = crate::yaml::Limits::default();
        let Ok(doc) = crate::yaml::parse_bytes(bytes, &limits) else {
            return FileView::default();
        };
        let v = &doc.value;
        let history = v.pointer("/coord/history").and_then(Value::as_array);
        FileView {
            holder: text(v.pointer("/coord/assigned_to")),
            attempt: v.pointer("/coord/attempt").and_then(Value::as_u64),
            result: v.get("result").map(Stamp::of),
            kept: history
                .into_iter()
                .flatten()
                .filter_map(|e| e.get("result").map(Stamp::of))
                .collect(),
        }
    }

    /// Whether the file keeps a result of `stamp`'s agent and attempt.
    fn keeps(&self, stamp: &Stamp) -> bool {
        self.result.iter().chain(&self.kept).any(|r| r == stamp)
    }
}

impl Stamp {
    fn of(result: &Value) -> Stamp {
        Stamp {
            agent: text(result.get("agent")),
            attempt: result.get("attempt").and_then(Value::as_u64),
        }
    }
}

fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_string)
}

/// A grant read from an assignment commit.
struct Grant {
    agent: String,
    commit: String,
}

/// What the walk gathers before the checks.
#[derive(Default)]
struct Gathered {
    grants: BTreeMap<(String, u64), Vec<Grant>>,
    attempts: usize,
    /// (task, the result's stamp, the commit) per result reported.
    reported: Vec<(String, Stamp, String)>,
    findings: Vec<Violation>,
}

impl Coord {
    /// Checks the whole history reachable from `rev` (default `HEAD`) and the files at its
    /// tip. A revision that names no commit is a usage error.
    pub fn verify(&self, rev: Option<&str>) -> Result<Verified, Error> {
        let repo = &self.store.repo;
        let rev = rev.unwrap_or("HEAD");
        let tip = repo.resolve_rev(rev).map_err(|_| {
            Error::Usage(format!(
                "--ref {rev} names no commit here; name a branch, tag or commit (after `git fetch` for a remote's branch)"
            ))
        })?;
        let mut verified = Verified {
            rev: rev.to_string(),
            tip: tip.map(|t| t.to_string()),
            commits: 0,
            attempts: 0,
            results: 0,
            tasks: 0,
            findings: Vec::new(),
        };
        let Some(tip) = tip else {
            return Ok(verified);
        };
        let work = self.store.work_dir();
        let mut commits = repo.log_from(tip, None)?;
        commits.reverse();
        let mut gathered = Gathered::default();
        for c in &commits {
            gathered.read(repo, work, c)?;
        }
        let places = places_at(repo, work, tip)?;
        let mut findings = gathered.grant_findings();
        findings.append(&mut gathered.findings);
        findings.extend(lost_results(repo, &places, &gathered.reported)?);
        findings.extend(two_places(&places));
        findings.sort_by(|a, b| (a.kind, &a.task, a.attempt).cmp(&(b.kind, &b.task, b.attempt)));
        verified.commits = commits.len();
        verified.attempts = gathered.attempts;
        verified.results = gathered.reported.len();
        verified.tasks = places.len();
        verified.findings = findings;
        Ok(verified)
    }
}

impl Gathered {
    /// Reads one commit's transitions: grants, results accepted, results reported.
    fn read(&mut self, repo: &Repo, work: &str, c: &CommitInfo) -> Result<(), Error> {
        let oid = Oid::from_str(&c.oid).map_err(|e| Error::Refused(e.to_string()))?;
        let assigned = Some(Endpoint::State(State::Assigned));
        let op = c
            .trailers
            .iter()
            .find(|(k, _)| k == operation::OP)
            .map(|(_, v)| v.as_str());
        for t in c.transitions().into_iter().filter(|t| !t.agent) {
            let (from, to) = (t.from == assigned, t.to == assigned);
            if to && !from {
                self.grant(repo, work, oid, &t.subject, &c.oid)?;
            } else if to && matches!(op, Some("complete" | "fail")) {
                self.reported(repo, work, oid, &t.subject, &c.oid)?;
            } else if let (true, Some(Endpoint::State(state))) = (from && !to, t.to) {
                let folder = format!("{work}/{}", state.as_str());
                self.accepted(repo, work, oid, (&folder, &t.subject), &c.oid)?;
            }
        }
        Ok(())
    }

    /// Records the attempt an assignment commit granted, read from the agent's folder.
    fn grant(
        &mut self,
        repo: &Repo,
        work: &str,
        oid: Oid,
        id: &str,
        commit: &str,
    ) -> Result<(), Error> {
        let prefix = format!("{work}/assigned");
        for path in repo.find_named(oid, &prefix, &names(id))? {
            let Some(blob) = repo.blob_at(oid, &path)? else {
                continue;
            };
            let file = FileView::parse(&repo.blob_bytes(blob)?);
            let agent = path.rsplit('/').nth(1).unwrap_or_default().to_string();
            if let Some(attempt) = file.attempt {
                self.attempts += 1;
                let grant = Grant {
                    agent,
                    commit: commit.to_string(),
                };
                self.grants
                    .entry((id.to_string(), attempt))
                    .or_default()
                    .push(grant);
            }
        }
        Ok(())
    }

    /// Records the result a `complete` or `fail` commit wrote into the agent's folder.
    fn reported(
        &mut self,
        repo: &Repo,
        work: &str,
        oid: Oid,
        id: &str,
        commit: &str,
    ) -> Result<(), Error> {
        let file = file_in(repo, oid, &format!("{work}/assigned"), id)?;
        if let Some(stamp) = file.and_then(|f| f.result) {
            self.reported
                .push((id.to_string(), stamp, commit.to_string()));
        }
        Ok(())
    }

    /// Checks a result a task left its agent's folder with for `folder`: it must be the one
    /// the task's holder reported for the attempt it held just before (in the first parent).
    fn accepted(
        &mut self,
        repo: &Repo,
        work: &str,
        oid: Oid,
        (folder, id): (&str, &str),
        commit: &str,
    ) -> Result<(), Error> {
        let Some(after) = file_named(repo, oid, folder, id)? else {
            return Ok(());
        };
        let Some(result) = after.result.clone() else {
            return Ok(());
        };
        let before = match repo.first_parent(oid)? {
            Some(p) => file_in(repo, p, &format!("{work}/assigned"), id)?,
            None => None,
        };
        let held = before.unwrap_or(after);
        let wrong_agent = result.agent.is_some() && result.agent != held.holder;
        let wrong_attempt = result.attempt.is_some() && result.attempt != held.attempt;
        if wrong_agent || wrong_attempt {
            let agents = [result.agent.clone(), held.holder.clone()];
            self.findings.push(Violation {
                kind: ViolationKind::WrongHolder,
                task: id.to_string(),
                attempt: result.attempt,
                agents: agents.into_iter().flatten().collect(),
                commits: vec![commit.to_string()],
                paths: Vec::new(),
            });
        }
        Ok(())
    }

    /// Returns the findings about grants: an attempt given to two agents, or given twice.
    fn grant_findings(&self) -> Vec<Violation> {
        let mut found = Vec::new();
        for ((task, attempt), grants) in &self.grants {
            if grants.len() < 2 {
                continue;
            }
            let agents: BTreeSet<&str> = grants.iter().map(|g| g.agent.as_str()).collect();
            let kind = if agents.len() > 1 {
                ViolationKind::GrantedToTwoAgents
            } else {
                ViolationKind::GrantedTwice
            };
            found.push(Violation {
                kind,
                task: task.clone(),
                attempt: Some(*attempt),
                agents: agents.into_iter().map(str::to_string).collect(),
                commits: grants.iter().map(|g| g.commit.clone()).collect(),
                paths: Vec::new(),
            });
        }
        found
    }
}

/// The file names a task id may have.
fn names(id: &str) -> [String; 2] {
    [format!("{id}.yaml"), format!("{id}.yml")]
}

/// Returns the first file of task `id` under `prefix` in a commit.
fn file_in(repo: &Repo, commit: Oid, prefix: &str, id: &str) -> Result<Option<FileView>, Error> {
    let Some(path) = repo
        .find_named(commit, prefix, &names(id))?
        .into_iter()
        .next()
    else {
        return Ok(None);
    };
    match repo.blob_at(commit, &path)? {
        Some(blob) => Ok(Some(FileView::parse(&repo.blob_bytes(blob)?))),
        None => Ok(None),
    }
}

/// Returns task `id`'s file directly in `folder` in a commit.
fn file_named(repo: &Repo, commit: Oid, folder: &str, id: &str) -> Result<Option<FileView>, Error> {
    for name in names(id) {
        if let Some(blob) = repo.blob_at(commit, &format!("{folder}/{name}"))? {
            return Ok(Some(FileView::parse(&repo.blob_bytes(blob)?)));
        }
    }
    Ok(None)
}

/// Returns, by task id, the task files under `work` at the tip (path and blob).
fn places_at(
    repo: &Repo,
    work: &str,
    tip: Oid,
) -> Result<HashMap<String, Vec<(String, Oid)>>, Error> {
    let mut places: HashMap<String, Vec<(String, Oid)>> = HashMap::new();
    for (path, blob) in repo.files_under(tip, work)? {
        let Some(rel) = path.strip_prefix(work).and_then(|p| p.strip_prefix('/')) else {
            continue;
        };
        if let Some((_, id)) = crate::board::task_at(rel) {
            places.entry(id.to_string()).or_default().push((path, blob));
        }
    }
    Ok(places)
}

/// Returns a finding per reported result that the task's file at the tip keeps neither as its
/// result nor in its history. A task with no file at the tip (deleted) is not judged.
fn lost_results(
    repo: &Repo,
    places: &HashMap<String, Vec<(String, Oid)>>,
    reported: &[(String, Stamp, String)],
) -> Result<Vec<Violation>, Error> {
    let mut found = Vec::new();
    let mut read: HashMap<Oid, FileView> = HashMap::new();
    for (task, stamp, commit) in reported {
        let Some(files) = places.get(task) else {
            continue;
        };
        let mut kept = false;
        for (_, blob) in files {
            if !read.contains_key(blob) {
                read.insert(*blob, FileView::parse(&repo.blob_bytes(*blob)?));
            }
            kept |= read.get(blob).is_some_and(|f| f.keeps(stamp));
        }
        if !kept {
            found.push(Violation {
                kind: ViolationKind::ResultLost,
                task: task.clone(),
                attempt: stamp.attempt,
                agents: stamp.agent.iter().cloned().collect(),
                commits: vec![commit.clone()],
                paths: files.iter().map(|(p, _)| p.clone()).collect(),
            });
        }
    }
    Ok(found)
}

/// Returns a finding per task id with files in two places at the tip.
fn two_places(places: &HashMap<String, Vec<(String, Oid)>>) -> Vec<Violation> {
    places
        .iter()
        .filter(|(_, files)| files.len() > 1)
        .map(|(task, files)| Violation {
            kind: ViolationKind::TwoPlaces,
            task: task.clone(),
            attempt: None,
            agents: Vec::new(),
            commits: Vec::new(),
            paths: files.iter().map(|(p, _)| p.clone()).collect(),
        })
        .collect()
}
