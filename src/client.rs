//! The hub client: an agent's operations (`claim`, `complete`, `fail`, `heartbeat`, `new`, and
//! what `coord run` needs besides) asked of a `coord serve` over HTTP instead of done in a
//! local repository. Writes carry an `Idempotency-Key` and are sent again after a network
//! error or a busy server (503), so an answer lost in transit neither loses a claim nor
//! takes a second task. Errors are typed: the server's refusal keeps the code the command
//! line would have given (`stale`, `nothing_to_claim`, ...), a network error names the URL.

use crate::engine::commands::Receipt;
use crate::engine::Signer;
use crate::model::{AgentName, State, TaskId};
use crate::ops::{
    Beat, BeatOp, Claimed, Created, Fence, How, NewTask, ReportAnswer, Verdict, Work,
};
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long one request may take, answer included (a claim on a large board takes a while).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The first pause between two tries; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// Why a request to the hub did not give an answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The hub could not be reached, or the connection broke, after every try.
    #[error("cannot reach the hub at {url}: {why}")]
    Unreachable {
        /// The URL asked.
        url: String,
        /// What the network said.
        why: String,
    },
    /// The hub refused the request (a problem+json answer).
    #[error("{detail}")]
    Refused {
        /// The URL asked.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's one-line message.
        detail: String,
        /// The kind the command line would give it (`stale`, `locked`, ...), when the
        /// server said.
        code: Option<String>,
    },
    /// The hub answered something that is not what this client expects.
    #[error("the hub at {url} answered what this coord does not read: {why}")]
    Garbled {
        /// The URL asked.
        url: String,
        /// What was wrong.
        why: String,
    },
    /// A result to sign through a hub names no agent and attempt, or the agent has no key.
    #[error("cannot sign the result: {0}")]
    Sign(String),
    /// The hub's URL is not an http(s) URL.
    #[error("the hub URL {0:?} is not an http:// or https:// URL")]
    BadUrl(String),
}

impl ClientError {
    /// Returns what to do about it, when there is something to do.
    pub fn hint(&self) -> Option<String> {
        match self {
            ClientError::Unreachable { .. } => Some(
                "check that 'coord serve' runs there and the URL is right (--hub, COORD_HUB or \
                 hub.url in coord.yaml)"
                    .into(),
            ),
            ClientError::Refused { status: 401, .. } => {
                Some("set COORD_HUB_TOKEN to the agent's token (or the server's token)".into())
            }
            ClientError::BadUrl(_) => {
                Some("give the server's address, e.g. http://hub:8088".into())
            }
            _ => None,
        }
    }

    /// Returns the code of the refusal, as the command line names kinds of errors.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Refused { code, .. } => code.as_deref(),
            _ => None,
        }
    }
}

/// A `coord serve` this process talks to.
#[derive(Clone)]
pub struct Hub {
    base: String,
    token: Option<String>,
    http: ureq::Agent,
    /// How long a write is tried again after network errors and busy answers, at most.
    retry_for: Duration,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").field("base", &self.base).finish()
    }
}

/// A report's answer as a hub gives it (older hubs without `op` and `recorded`).
#[derive(Debug, Deserialize)]
struct ReportedThere {
    agent: Option<AgentName>,
    attempt: u32,
    state: State,
}

/// A heartbeat's answer as a hub gives it (older hubs without `op` and `id`).
#[derive(Debug, Deserialize)]
struct BeatThere {
    state: State,
    #[serde(default, with = "crate::model::time::recorded")]
    lease_expires_at: Option<jiff::Timestamp>,
}

impl Hub {
    /// Returns a client of the hub at `url` (`http://host:port`, a path prefix allowed),
    /// sending `token` as a bearer token when given, and sending a write again after a
    /// network error or a busy answer for up to `retry_for`.
    pub fn new(url: &str, token: Option<String>, retry_for: Duration) -> Result<Hub, ClientError> {
        let base = url.trim().trim_end_matches('/').to_string();
        let rest = base
            .strip_prefix("http://")
            .or_else(|| base.strip_prefix("https://"));
        if rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) {
            return Err(ClientError::BadUrl(url.to_string()));
        }
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .build();
        Ok(Hub {
            base,
            token: token.filter(|t| !t.is_empty()),
            http: ureq::Agent::new_with_config(config),
            retry_for,
        })
    }

    /// Returns the hub's URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    /// Returns whether `agent` takes work with `claim` (pull) rather than being assigned it,
    /// as its profile on the hub says.
    pub fn pulls(&self, agent: &AgentName) -> Result<bool, ClientError> {
        let answer = self.send("GET", "/v1/agents", None)?;
        let rows = answer.as_array().cloned().unwrap_or_default();
        match rows.iter().find(|r| r["name"] == json!(agent)) {
            Some(row) => Ok(row["assign"] == json!("pull")),
            None => Err(ClientError::Refused {
                url: format!("{}/v1/agents", self.base),
                status: 404,
                detail: format!(
                    "the hub at {} has no agent '{agent}'; add it there with 'coord agents add'",
                    self.base
                ),
                code: Some("unknown_agent".into()),
            }),
        }
    }

    /// Takes the best ready task for `agent` (as `coord claim`).
    pub fn claim(&self, agent: &AgentName) -> Result<Claimed, ClientError> {
        let path = format!("/v1/agents/{agent}/claim");
        let answer = self.write(&path, &json!({}))?;
        self.claimed(&path, answer)
    }

    /// Takes the best ready task for `agent` as work for a runner's command, or None.
    pub fn claim_work(&self, agent: &AgentName) -> Result<Option<Work>, ClientError> {
        let path = format!("/v1/agents/{agent}/claim");
        let answer = self.write(&path, &json!({"work": true}))?;
        match answer.get("work") {
            Some(w) if !w.is_null() => self.work_of(&path, w).map(Some),
            _ => Ok(None),
        }
    }

    /// Returns `agent`'s assigned tasks without a result, as a push agent's runner takes them.
    pub fn work_waiting(&self, agent: &AgentName) -> Result<Vec<Work>, ClientError> {
        let path = format!("/v1/agents/{agent}/work");
        let answer = self.send("GET", &path, None)?;
        let items = answer["items"].as_array().cloned().unwrap_or_default();
        items.iter().map(|w| self.work_of(&path, w)).collect()
    }

    /// Writes a result for task `id` (as `coord complete`/`fail`), fenced, replacing and
    /// signed (here, with the agent's key, for the attempt the fence names) as `how` says.
    pub fn report(
        &self,
        id: &TaskId,
        verdict: &Verdict,
        how: &How,
    ) -> Result<ReportAnswer, ClientError> {
        let (action, mut body) = match verdict {
            Verdict::Success {
                output,
                next_agents,
            } => (
                "complete",
                json!({"output": output, "next_agent": next_agents}),
            ),
            Verdict::Failure { message, retryable } => {
                ("fail", json!({"error": message, "fatal": !retryable}))
            }
        };
        body["replace"] = json!(how.replace);
        body["attempt"] = json!(how.fence.attempt);
        if let Some(epoch) = how.fence.epoch {
            body["epoch"] = json!(epoch);
        }
        if let Some(metrics) = &how.metrics {
            body["metrics"] = json!(metrics);
        }
        if how.sign {
            body["signature"] = json!(signature(id, verdict, &how.fence)?);
        }
        let path = Hub::action_path(id, action, &how.fence);
        let answer = self.write(&path, &body)?;
        let there: ReportedThere = self.read(&path, answer)?;
        Ok(ReportAnswer {
            op: verdict.op(),
            id: id.clone(),
            agent: there.agent,
            state: there.state,
            attempt: there.attempt,
            recorded: true,
        })
    }

    /// Extends the lease of task `id` (as `coord heartbeat`).
    pub fn heartbeat(&self, id: &TaskId, fence: &Fence) -> Result<Beat, ClientError> {
        let path = Hub::action_path(id, "heartbeat", fence);
        let mut body = json!({"attempt": fence.attempt});
        if let Some(epoch) = fence.epoch {
            body["epoch"] = json!(epoch);
        }
        let answer = self.write(&path, &body)?;
        let there: BeatThere = self.read(&path, answer)?;
        Ok(Beat {
            op: BeatOp::Heartbeat,
            id: id.clone(),
            state: there.state,
            lease_expires_at: there.lease_expires_at,
        })
    }

    /// Returns why task `id` is no longer `agent`'s `attempt` (as a runner checks while the
    /// command runs), or None while it still is.
    pub fn lost(
        &self,
        id: &TaskId,
        agent: &AgentName,
        attempt: u32,
    ) -> Result<Option<String>, ClientError> {
        let path = format!("/v1/agents/{agent}/tasks/{id}/lost?attempt={attempt}");
        let answer = self.send("GET", &path, None)?;
        // `why` says it in words; a server before lease statuses answered it as `lost`.
        let why = answer["why"].as_str().or(answer["lost"].as_str());
        Ok(why.map(str::to_string))
    }

    /// Writes a new task (as `coord new`); every request carries an idempotency key (the
    /// task's own, or a new one), so a retry after a lost answer writes no second task.
    pub fn new_task(&self, task: &NewTask) -> Result<Created, ClientError> {
        let mut task = task.clone();
        task.idempotency_key
            .get_or_insert_with(crate::hash::random_hex);
        let body = serde_json::to_value(&task).map_err(|e| ClientError::Garbled {
            url: self.base.clone(),
            why: e.to_string(),
        })?;
        let key = task.idempotency_key.clone().unwrap_or_default();
        let answered = self.send_retried("POST", "/v1/tasks", &body, &key)?;
        #[derive(Deserialize)]
        struct Made {
            id: TaskId,
            path: String,
        }
        let made: Made = self.read("/v1/tasks", answered.body)?;
        Ok(Created {
            id: made.id,
            path: made.path,
            created: !answered.replayed,
            same: true,
        })
    }

    /// Returns the path of an agent's action on task `id`: under the agent's own routes when
    /// the fence names the agent, else the person's.
    fn action_path(id: &TaskId, action: &str, fence: &Fence) -> String {
        match &fence.agent {
            Some(agent) => format!("/v1/agents/{agent}/tasks/{id}/{action}"),
            None => format!("/v1/tasks/{id}/{action}"),
        }
    }

    /// Reads a claim's answer.
    fn claimed(&self, path: &str, answer: Value) -> Result<Claimed, ClientError> {
        if answer["claimed"] == json!(true) {
            #[derive(Deserialize)]
            struct Granted {
                id: TaskId,
                agent: AgentName,
                attempt: u32,
                #[serde(default)]
                epoch: Option<u64>,
                #[serde(with = "crate::model::time::recorded")]
                lease_expires_at: Option<jiff::Timestamp>,
                path: String,
            }
            let g: Granted = self.read(path, answer)?;
            return Ok(Claimed::Granted(Receipt {
                id: g.id,
                agent: g.agent,
                attempt: g.attempt,
                epoch: g.epoch,
                lease_expires_at: g.lease_expires_at,
                path: g.path,
            }));
        }
        #[derive(Deserialize)]
        struct Nothing {
            agent: AgentName,
            why: Option<String>,
        }
        let n: Nothing = self.read(path, answer)?;
        Ok(Claimed::Nothing {
            agent: n.agent,
            why: n.why.map(|w| format!(": {w}")).unwrap_or_default(),
        })
    }

    /// Reads one task of work as the hub gives it; the file is the one in the hub's clone.
    fn work_of(&self, path: &str, w: &Value) -> Result<Work, ClientError> {
        #[derive(Deserialize)]
        struct There {
            id: TaskId,
            attempt: u32,
            #[serde(default)]
            epoch: Option<u64>,
            timeout_secs: u64,
            lease_left_secs: u64,
            path: String,
            json: Value,
            branch: Option<String>,
        }
        let t: There = self.read(path, w.clone())?;
        Ok(Work {
            file: PathBuf::from(&t.path),
            id: t.id,
            attempt: t.attempt,
            epoch: t.epoch,
            timeout: Duration::from_secs(t.timeout_secs.max(1)),
            lease_left: Duration::from_secs(t.lease_left_secs),
            path: t.path,
            json: t.json,
            branch: t.branch,
        })
    }

    /// Reads an answer as `T`.
    fn read<T: for<'de> Deserialize<'de>>(&self, path: &str, v: Value) -> Result<T, ClientError> {
        serde_json::from_value(v).map_err(|e| ClientError::Garbled {
            url: format!("{}{path}", self.base),
            why: e.to_string(),
        })
    }

    /// Posts a write with a new idempotency key, sent again while it may still succeed.
    fn write(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        Ok(self
            .send_retried("POST", path, body, &crate::hash::random_hex())?
            .body)
    }

    /// Sends a request again after a network error or a 503 (the same key each time), for
    /// up to the client's retry time; returns the first other answer.
    fn send_retried(
        &self,
        method: &str,
        path: &str,
        body: &Value,
        key: &str,
    ) -> Result<Answered, ClientError> {
        let until = Instant::now() + self.retry_for;
        let mut pause = FIRST_PAUSE;
        loop {
            match self.send_keyed(method, path, Some(body), Some(key)) {
                Err(e) if again(&e) && Instant::now() + pause < until => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                other => return other,
            }
        }
    }

    /// Sends one request without a key.
    fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, ClientError> {
        Ok(self.send_keyed(method, path, body, None)?.body)
    }

    /// Sends one request; a 2xx answer's JSON body is the answer, any other a refusal.
    fn send_keyed(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        key: Option<&str>,
    ) -> Result<Answered, ClientError> {
        let url = format!("{}{path}", self.base);
        let unreachable = |e: ureq::Error| ClientError::Unreachable {
            url: url.clone(),
            why: e.to_string(),
        };
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let sent = match method {
            "GET" => {
                let mut req = self.http.get(&url);
                if let Some(a) = &auth {
                    req = req.header("Authorization", a);
                }
                req.call()
            }
            _ => {
                let mut req = self.http.post(&url).content_type("application/json");
                if let Some(a) = &auth {
                    req = req.header("Authorization", a);
                }
                if let Some(k) = key {
                    req = req.header("Idempotency-Key", k);
                }
                let text = body.map_or_else(|| "{}".to_string(), Value::to_string);
                req.send(text.as_bytes())
            }
        };
        let mut res = sent.map_err(unreachable)?;
        let status = res.status().as_u16();
        let replayed = res
            .headers()
            .get("idempotent-replayed")
            .is_some_and(|v| v.as_bytes() == b"true");
        let text = res.body_mut().read_to_string().map_err(unreachable)?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            return match value {
                Value::Null => Err(ClientError::Garbled {
                    url,
                    why: format!("status {status} without a JSON body"),
                }),
                body => Ok(Answered { body, replayed }),
            };
        }
        let detail = value["detail"]
            .as_str()
            .map_or_else(|| format!("the hub answered {status}"), str::to_string);
        Err(ClientError::Refused {
            url,
            status,
            detail,
            code: value["code"].as_str().map(str::to_string),
        })
    }
}

/// Returns the signature of `verdict` for the attempt `fence` names, made with the agent's
/// key on this machine (the hub stamps the same attempt and agent, and checks the signature
/// with its own copy of the key when it ticks).
fn signature(id: &TaskId, verdict: &Verdict, fence: &Fence) -> Result<String, ClientError> {
    let (Some(agent), Some(attempt)) = (&fence.agent, fence.attempt) else {
        return Err(ClientError::Sign(
            "through a hub, --sign needs --agent and --attempt (as claim granted them)".into(),
        ));
    };
    crate::sign::KeyRing::from_env()
        .sign(id, attempt, agent, &verdict.to_value())
        .map_err(ClientError::Sign)
}

/// A 2xx answer: its JSON body, and whether the server gave it again for a key it had seen
/// (`Idempotent-Replayed: true`).
struct Answered {
    body: Value,
    replayed: bool,
}

/// Whether a failed request is worth sending again: the network failed, or the server was
/// busy (503: another writer held its lock).
fn again(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Unreachable { .. } | ClientError::Refused { status: 503, .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_urls_name_a_hub() {
        assert!(Hub::new("http://127.0.0.1:8088/", None, Duration::ZERO).is_ok());
        assert!(Hub::new("https://hub.example/coord", None, Duration::ZERO).is_ok());
        for bad in ["127.0.0.1:8088", "ftp://x", "http://", "http:///x", ""] {
            assert!(Hub::new(bad, None, Duration::ZERO).is_err(), "{bad}");
        }
    }
}
