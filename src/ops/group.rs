//! An agent's writes as parts of a group commit (what a hub gathers while it commits the
//! last group, [`crate::store::Session::begin_group`]): a claim or a result applied in the
//! group's session, each checked on its own and reading only the files it needs, as the
//! claim and the report read them when they stay in scope. None says the write must go the
//! whole way on its own (it reads other tasks, a file it touches is not as committed, or it
//! may need a tick), after the group's commit.

use super::agent::{is_file_of, Claimed, How, Verdict};
use super::answer::ReportAnswer;
use super::{apply, Coord, Error, AGENT_WAIT};
use crate::engine::commands;
use crate::model::{AgentName, TaskId};
use crate::store::{Origin, Session};

impl Coord {
    /// Takes the lock (recording people's changes, as a single command does) and starts a
    /// group commit in the session.
    pub fn group_session(&self) -> Result<Session<'_>, Error> {
        let session = self.session(AGENT_WAIT)?;
        session.begin_group();
        Ok(session)
    }

    /// Ends a group commit: one sync of the folders it changed, one commit of every
    /// transition in it, and the session. Returns the transitions committed.
    pub fn commit_group(&self, session: Session<'_>) -> Result<usize, Error> {
        let n = session.commit_group(self.now)?;
        session.finish()?;
        Ok(n)
    }

    /// Claims the best ready task for `agent` in the group of `session`, reading `ready/`,
    /// the agent's folder and the profiles only, its grant recording the claim's idempotency
    /// `key` (the grant already made under it answers again); None when the claim must go
    /// the whole way.
    pub fn claim_in_group(
        &self,
        session: &Session<'_>,
        agent: &AgentName,
        key: Option<&str>,
    ) -> Result<Option<Claimed>, Error> {
        let mine = format!("assigned/{agent}/");
        let looked = |rel: &str| {
            rel.starts_with("ready/") || rel.starts_with(&mine) || rel.starts_with("agents/")
        };
        let board = session.load_scoped(&looked)?;
        let key = key.map(crate::hash::digest_hex);
        let inputs = self.inputs(session);
        let Ok(claim) = commands::claim(&board, &inputs, agent, key.as_deref()) else {
            return Ok(None);
        };
        if claim.plan.transitions.is_empty() {
            return Ok(Some(Claimed::Granted(claim.receipt)));
        }
        if commands::reads_other_tasks(&board, &claim.receipt.id)
            || !session.plan_stays_in_scope(&board, &claim.plan)?
        {
            return Ok(None);
        }
        // A file changed since it was read: the claim goes the whole way.
        if apply(session, &self.sink, &claim.plan, self.now, Origin::Command)? == 0 {
            return Ok(None);
        }
        Ok(Some(Claimed::Granted(claim.receipt)))
    }

    /// Reports `verdict` on task `id` in the group of `session`, reading the task's files
    /// and the profiles only, and answers as [`Coord::report_answer`] does; None when the
    /// report must go the whole way.
    pub fn report_in_group(
        &self,
        session: &Session<'_>,
        id: &TaskId,
        verdict: &Verdict,
        how: &How,
    ) -> Result<Option<ReportAnswer>, Error> {
        let looked = |rel: &str| rel.starts_with("agents/") || is_file_of(rel, id);
        let board = session.load_scoped(&looked)?;
        let result = how.result_of(verdict);
        let report = self.report_of(&result, how);
        let Ok(done) = commands::report(&board, &self.inputs(session), id, report) else {
            return Ok(None);
        };
        if !session.plan_stays_in_scope(&board, &done.plan)? {
            return Ok(None);
        }
        let (n, reported) = self.apply_report(session, done)?;
        if n == 0 {
            return Ok(None);
        }
        let (agent, attempt) = reported.accepted(id)?;
        let board = session.load_scoped(&|rel| is_file_of(rel, id))?;
        let file = board.find(id).into_iter().next();
        let file = file.ok_or_else(|| commands::CommandError::NotFound(id.clone()))?;
        Ok(Some(ReportAnswer {
            op: verdict.op(),
            id: id.clone(),
            agent,
            state: file.folder.state,
            attempt,
            recorded: true,
        }))
    }

    /// Returns task `id` as `coord show --json` gives it, reading only its
    /// files (in `session` when given, else without the lock, once a move under way is over).
    pub fn show_task(
        &self,
        session: Option<&Session<'_>>,
        id: &TaskId,
    ) -> Result<super::TaskView, Error> {
        let load = |s: &Session<'_>| s.load_scoped(&|rel| is_file_of(rel, id));
        let board = match session {
            Some(s) => load(s)?,
            None => self.load_settled(id, &load)?,
        };
        Ok(crate::view::task_view(&board, id)?)
    }
}
