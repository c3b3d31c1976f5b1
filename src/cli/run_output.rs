//! What `coord run` prints about its tasks: one line per task on stdout (`<id> attempt <n>:
//! done (1.2s)`); with `--json`, one JSON object per task event on stdout and nothing else
//! there; on a terminal, a live line on stderr naming what runs and for how long.

use crate::model::{AgentName, TaskId};
use crate::run::{Kind, Tasks, Tell, Told};
use serde_json::json;
use std::io::{IsTerminal, Write};

/// Returns the text after `<id> attempt <n>: `.
fn line(told: &Told) -> String {
    let mut s = match told.kind {
        Kind::Fatal => "failed (fatal)".to_string(),
        other => other.as_str().to_string(),
    };
    if let Some(m) = &told.message {
        s += &format!(": {}", m.lines().next().unwrap_or(""));
    }
    if told.kind != Kind::Dropped {
        s += &format!(" ({:.1}s)", told.secs);
    }
    if let Some(e) = &told.not_recorded {
        s += &format!(", but not recorded: {e}");
    }
    s
}

/// Where the harness's task events go.
pub struct Output {
    agent: AgentName,
    json: bool,
    quiet: bool,
    /// Whether a live line is drawn on stderr (a terminal, not quiet, not JSON).
    live: bool,
}

impl Output {
    /// Returns the output for `agent`: JSON events with `json`; a live line when stderr is a
    /// terminal and the run is neither quiet nor JSON.
    pub fn new(agent: AgentName, json: bool, quiet: bool) -> Output {
        let live = !json && !quiet && std::io::stderr().is_terminal();
        Output {
            agent,
            json,
            quiet,
            live,
        }
    }

    /// Returns whether a live line is drawn.
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// Clears the live line before other text.
    fn clear(&self) {
        if self.live {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
        }
    }

    /// Prints one event line: `"version"` first, the event's fields, then the agent.
    fn event(&self, fields: serde_json::Value) {
        let mut line = serde_json::Map::new();
        line.insert("version".into(), crate::error::JSON_VERSION.into());
        if let serde_json::Value::Object(m) = fields {
            line.extend(m);
        }
        line.insert("agent".into(), json!(self.agent));
        out!("{}", serde_json::Value::Object(line));
    }
}

impl Tell for Output {
    /// Prints a status line of the harness on stderr (unless quiet), below the live line.
    fn say(&self, line: &str) {
        if !self.quiet {
            self.clear();
            err!("{line}");
        }
    }

    /// Tells that a task's command started.
    fn started(&self, id: &TaskId, attempt: u32) {
        if self.json {
            self.event(json!({"event": "started", "id": id, "attempt": attempt}));
        }
    }

    /// Tells how a task's command ended.
    fn ended(&self, id: &TaskId, attempt: u32, told: &Told) {
        if self.json {
            self.event(json!({
                "event": told.kind.as_str(), "id": id, "attempt": attempt,
                "seconds": (told.secs * 1000.0).round() / 1000.0,
                "message": told.message, "recorded": told.not_recorded.is_none(),
                "not_recorded": told.not_recorded,
            }));
            return;
        }
        self.clear();
        out!("{id} attempt {attempt}: {}", line(told));
    }

    /// Redraws the live line: what runs and for how long (a terminal only).
    fn progress(&self, running: &Tasks) {
        if !self.live {
            return;
        }
        let line = if running.is_empty() {
            format!("coord run {}: waiting for work", self.agent)
        } else {
            let tasks: Vec<String> = running
                .iter()
                .map(|(id, (n, at))| format!("{id}#{n} {}s", at.elapsed().as_secs()))
                .collect();
            format!("coord run {}: running {}", self.agent, tasks.join(", "))
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[K{}", crate::redact::one_line(&line));
        let _ = err.flush();
    }

    /// Clears the live line: the runner stops telling progress.
    fn done(&self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_say_how_a_task_ended() {
        let told = |kind, message: Option<&str>, not_recorded: Option<&str>| Told {
            kind,
            message: message.map(String::from),
            secs: 1.24,
            not_recorded: not_recorded.map(String::from),
        };
        assert_eq!(line(&told(Kind::Done, None, None)), "done (1.2s)");
        assert_eq!(
            line(&told(Kind::Fatal, Some("exit 100: no\nmore"), None)),
            "failed (fatal): exit 100: no (1.2s)"
        );
        assert_eq!(
            line(&told(Kind::Done, None, Some("stale"))),
            "done (1.2s), but not recorded: stale"
        );
        assert_eq!(
            line(&told(Kind::Dropped, Some("lost"), None)),
            "dropped: lost"
        );
    }
}
