//! `coord.yaml`, the optional repo configuration (docs/files.md), with its defaults. Reads one
//! file.

use crate::model::{AgentName, Duration, Priority};
use crate::schema::{Schema, Violation};
use crate::yaml::{parse_bytes, Doc, Limits, Pos};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why coord.yaml could not be used.
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {message}", path.display(), pos.map_or(String::new(), |p| format!(":{}:{}", p.line, p.col)))]
pub struct ConfigError {
    /// The config file.
    pub path: PathBuf,
    /// Where in the file, when known.
    pub pos: Option<Pos>,
    /// What is wrong and how to fix it.
    pub message: String,
    /// Whether a value is out of range (a usage error, exit 2) rather than unusable.
    pub out_of_range: bool,
}

/// The schema of coord.yaml, used to say where and what is wrong when the file does not read.
pub const CONFIG_SCHEMA: &str = include_str!("../schemas/config.schema.json");

/// Defaults for task fields.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Defaults {
    /// Lease per attempt.
    pub timeout: Duration,
    /// Attempts before the dead letter.
    pub max_attempts: u32,
    /// Priority of tasks that name none.
    pub priority: Priority,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            timeout: Duration::from_secs(30 * 60),
            max_attempts: 3,
            priority: Priority::Normal,
        }
    }
}

/// Exponential backoff with full jitter.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Backoff {
    /// Delay cap for the first retry.
    pub base: Duration,
    /// Largest delay.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_secs(60),
            max: Duration::from_secs(3600),
        }
    }
}

/// Per-agent circuit breaker.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CircuitBreaker {
    /// Consecutive failed attempts that open the circuit.
    pub failure_threshold: u32,
    /// How long it stays open.
    pub open_for: Duration,
}

impl Default for CircuitBreaker {
    fn default() -> Self {
        CircuitBreaker {
            failure_threshold: 5,
            open_for: Duration::from_secs(600),
        }
    }
}

/// Commit settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CommitConfig {
    /// `name <email>` for coord's commits.
    pub author: String,
}

impl Default for CommitConfig {
    fn default() -> Self {
        CommitConfig {
            author: "coord <coord@localhost>".to_string(),
        }
    }
}

/// The condition of a routing rule; every given field must match.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuleWhen {
    /// The agent that finished the task.
    pub agent: Option<AgentName>,
    /// Text the output (as JSON) contains, case-insensitively.
    pub output_contains: Option<String>,
    /// A label the task carries.
    pub label: Option<String>,
}

/// A conditional handoff after success (docs/files.md `rules`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// When it applies.
    pub when: RuleWhen,
    /// The agent to hand off to.
    pub then: AgentName,
}

/// The whole configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The work folder, relative to the repo root.
    pub work_dir: String,
    /// Task field defaults.
    pub defaults: Defaults,
    /// Retry backoff.
    pub backoff: Backoff,
    /// Per-agent circuit breaker.
    pub circuit_breaker: CircuitBreaker,
    /// Longest handoff chain.
    pub max_handoffs: u32,
    /// Age after which done/cancelled tasks are archived.
    pub archive_after: Duration,
    /// Whether results must carry a valid signature.
    pub require_signed_results: bool,
    /// Commit identity.
    pub commit: CommitConfig,
    /// Conditional routing after success.
    pub rules: Vec<Rule>,
    /// How long a file's size and mtime must stay unchanged before it is read (docs/behaviour.md);
    /// `0s` reads every file at once.
    pub settle: Duration,
    /// How agents' commands share work through a remote.
    pub sync: SyncConfig,
    /// How often a tick that found nothing else to do looks at the gates of waiting tasks
    /// again.
    pub gate_interval: Duration,
    /// How `coord run` runs agents' commands.
    pub run: RunConfig,
    /// The endpoints every event is POSTed to, by name (docs/webhooks.md).
    pub webhooks: BTreeMap<String, Webhook>,
    /// How `coord serve --hub` shares its clone's work through a remote.
    pub hub: HubConfig,
}

/// The event kinds a webhook may ask for besides the states a transition ends in.
pub const WEBHOOK_KINDS: [&str; 4] = ["transition", "dead_letter", "lease_lost", "circuit_open"];

/// One endpoint of `webhooks:` in coord.yaml.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// Where the events are POSTed (`http://` or `https://`).
    pub url: String,
    /// The events it gets: kinds ([`WEBHOOK_KINDS`]) or the states transitions end in; empty:
    /// every event.
    #[serde(default)]
    pub events: Vec<String>,
    /// The environment variable that holds the signing secret; None: deliveries are unsigned.
    #[serde(default)]
    pub secret_env: Option<String>,
    /// Failed tries of one event before it goes to the dead-letter record.
    #[serde(default = "default_webhook_attempts")]
    pub max_attempts: u32,
    /// The delays between tries.
    #[serde(default)]
    pub retry: WebhookRetry,
    /// How long one request may take, connecting included.
    #[serde(default = "default_webhook_timeout")]
    pub timeout: Millis,
}

fn default_webhook_attempts() -> u32 {
    8
}

fn default_webhook_timeout() -> Millis {
    Millis(std::time::Duration::from_secs(10))
}

impl Webhook {
    /// Returns whether the endpoint asked for an event of `kind` that ends in `to`.
    pub fn wants(&self, kind: &str, to: &str) -> bool {
        self.events.is_empty() || self.events.iter().any(|e| e == kind || e == to)
    }
}

/// Exponential backoff with jitter between the tries of one webhook event.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhookRetry {
    /// The delay after the first failure (each one after doubles it).
    pub base: Millis,
    /// The largest delay.
    pub max: Millis,
}

impl Default for WebhookRetry {
    fn default() -> Self {
        WebhookRetry {
            base: Millis(std::time::Duration::from_secs(1)),
            max: Millis(std::time::Duration::from_secs(300)),
        }
    }
}

/// A duration that may be shorter than a second: a whole number and `ms`, `s`, `m` or `h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Millis(pub std::time::Duration);

impl TryFrom<String> for Millis {
    type Error = String;

    fn try_from(s: String) -> Result<Millis, String> {
        let bad =
            || format!("{s:?} is not a duration: write a number and ms, s, m or h (250ms, 5s)");
        let digits = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let n: u64 = s[..digits].parse().map_err(|_| bad())?;
        let ms = match &s[digits..] {
            "ms" => Some(n),
            "s" => n.checked_mul(1000),
            "m" => n.checked_mul(60_000),
            "h" => n.checked_mul(3_600_000),
            _ => None,
        };
        match ms {
            Some(ms) if ms <= 86_400_000 => Ok(Millis(std::time::Duration::from_millis(ms))),
            _ => Err(bad()),
        }
    }
}

/// `sync:` in coord.yaml.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SyncConfig {
    /// The remote that `claim`, `complete` and `fail` fetch from and push to before they
    /// report success (as `--sync <remote>` does); None: they act on the local clone only.
    pub remote: Option<String>,
    /// The pushes a minute the remote takes from all clones together (GitHub recommends at
    /// most 6 per repository); `coord status` warns when this clone alone nears it.
    pub pushes_per_minute: u32,
}

impl Default for SyncConfig {
    fn default() -> Self {
        SyncConfig {
            remote: None,
            pushes_per_minute: 6,
        }
    }
}

/// `hub:` in coord.yaml: the settings of `coord serve --hub`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HubConfig {
    /// The URL of the `coord serve` that `claim`, `complete`, `fail`, `heartbeat`, `new` and
    /// `run` ask instead of the local repository (as `--hub`).
    pub url: Option<String>,
    /// The remote the hub pushes its batches to and holds its lease on.
    pub remote: String,
    /// The hub's pushes a minute at most (GitHub recommends at most 6 per repository).
    pub pushes_per_minute: u32,
    /// How long the hub's lease on the remote lasts unless renewed; another hub may take
    /// over once it lapsed.
    pub lease: Duration,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            url: None,
            remote: "origin".to_string(),
            pushes_per_minute: 6,
            lease: Duration::from_secs(60),
        }
    }
}

/// `run:` in coord.yaml.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    /// Whether each attempt's command runs in a git worktree of its own (as `--worktree`).
    pub worktree: bool,
    /// What a new attempt's branch starts from.
    pub worktree_base: String,
    /// Where the worktrees are made, relative to the repository root; None: under
    /// `.git/coord/worktrees/`.
    pub worktree_dir: Option<String>,
    /// Whether a failed attempt's worktree stays for a person to look at.
    pub keep_failed_worktrees: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            worktree: false,
            worktree_base: "HEAD".to_string(),
            worktree_dir: None,
            keep_failed_worktrees: false,
        }
    }
}

impl Config {
    /// Returns the settle time as a standard duration.
    pub fn settle_wait(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.settle.as_secs().max(0) as u64)
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            work_dir: "work".to_string(),
            defaults: Defaults::default(),
            backoff: Backoff::default(),
            circuit_breaker: CircuitBreaker::default(),
            max_handoffs: 10,
            archive_after: Duration::from_secs(7 * 86_400),
            require_signed_results: false,
            commit: CommitConfig::default(),
            rules: Vec::new(),
            settle: Duration::from_secs(2),
            sync: SyncConfig::default(),
            gate_interval: Duration::from_secs(60),
            run: RunConfig::default(),
            webhooks: BTreeMap::new(),
            hub: HubConfig::default(),
        }
    }
}

/// The keys of coord.yaml that hold durations.
const DURATION_KEYS: [&str; 7] = [
    "/defaults/timeout",
    "/backoff/base",
    "/backoff/max",
    "/circuit_breaker/open_for",
    "/archive_after",
    "/gate_interval",
    "/hub/lease",
];

/// Returns why a duration in the raw config is out of range, naming its key.
fn out_of_range(value: &serde_json::Value) -> Option<String> {
    DURATION_KEYS.iter().find_map(|key| {
        let s = value.pointer(key)?.as_str()?;
        match Duration::parse_checked(s) {
            Err(e @ crate::model::DurationError::TooLong(_)) => {
                let name = key.trim_start_matches('/').replace('/', ".");
                Some(format!("{name}: {e}"))
            }
            _ => None,
        }
    })
}

impl Config {
    /// Reads `coord.yaml` at `path`; a missing file gives the defaults.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let err = |message: String| ConfigError {
            path: path.to_path_buf(),
            pos: None,
            message,
            out_of_range: false,
        };
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(e) => return Err(err(format!("cannot read: {e}"))),
        };
        let at = |pos: Pos, message: String| ConfigError {
            path: path.to_path_buf(),
            pos: Some(pos),
            message,
            out_of_range: false,
        };
        let doc = parse_bytes(&bytes, &Limits::default()).map_err(|e| at(e.pos, e.message))?;
        if doc.value.is_null() {
            return Ok(Config::default());
        }
        if let Some(message) = out_of_range(&doc.value) {
            return Err(ConfigError {
                out_of_range: true,
                ..err(message)
            });
        }
        let config: Config = serde_json::from_value(doc.value.clone()).map_err(|e| {
            match Config::violations(&doc).into_iter().next() {
                Some(v) => at(
                    v.pos,
                    format!("{}; the keys are listed in docs/files.md", v.message),
                ),
                None => err(format!("{e}; the keys are listed in docs/files.md")),
            }
        })?;
        config.check().map_err(err)?;
        Ok(config)
    }

    /// Returns every way `doc` breaks the coord.yaml schema, each at its line and column. Used
    /// to place an error once the file failed to read (the schema itself may lag behind a new
    /// key: a file that reads is never refused by it).
    pub fn violations(doc: &Doc) -> Vec<Violation> {
        match Schema::deferred(CONFIG_SCHEMA, Path::new("schemas/config.schema.json")) {
            Ok(schema) => schema.validate(doc),
            Err(_) => Vec::new(),
        }
    }

    fn check(&self) -> Result<(), String> {
        let wd = Path::new(&self.work_dir);
        let contained = !self.work_dir.is_empty()
            && wd.is_relative()
            && wd
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !contained {
            return Err(format!(
                "work_dir {:?} must be a relative path inside the repo without '..'",
                self.work_dir
            ));
        }
        if self.hub.pushes_per_minute == 0 {
            return Err("hub.pushes_per_minute must be at least 1".to_string());
        }
        if self.hub.lease.as_secs() < 1 {
            return Err("hub.lease must be at least 1s".to_string());
        }
        if self.defaults.max_attempts == 0 {
            return Err("defaults.max_attempts must be at least 1".to_string());
        }
        self.webhooks
            .iter()
            .try_for_each(|(name, hook)| check_webhook(name, hook))
    }
}

/// Refuses an endpoint name that cannot name a file, a URL that is not http(s) or names no
/// host, no tries, a `secret_env` that names no variable, a zero timeout or retry base, a
/// retry base above its max, and an event no transition has.
fn check_webhook(name: &str, hook: &Webhook) -> Result<(), String> {
    let named = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !named {
        return Err(format!(
            "webhooks.{name}: a name is 1 to 64 letters, digits, '-' or '_'"
        ));
    }
    let lower = hook.url.to_ascii_lowercase();
    let Some(rest) = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"))
    else {
        return Err(format!(
            "webhooks.{name}.url {:?} must start with http:// or https://",
            hook.url
        ));
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or("");
    if host.is_empty() || host.starts_with(':') {
        return Err(format!(
            "webhooks.{name}.url {:?} names no host; write http://host/path",
            hook.url
        ));
    }
    if hook.max_attempts == 0 {
        return Err(format!("webhooks.{name}.max_attempts must be at least 1"));
    }
    if let Some(var) = &hook.secret_env {
        if var.is_empty() || var.contains(['=', '\0']) {
            return Err(format!(
                "webhooks.{name}.secret_env {var:?} is no variable name; write one like OPS_HOOK_SECRET"
            ));
        }
    }
    if hook.timeout.0.is_zero() {
        return Err(format!("webhooks.{name}.timeout must be more than 0s"));
    }
    if hook.retry.base.0.is_zero() || hook.retry.base.0 > hook.retry.max.0 {
        return Err(format!(
            "webhooks.{name}.retry.base must be more than 0s and at most retry.max"
        ));
    }
    let known = |e: &String| {
        WEBHOOK_KINDS.contains(&e.as_str())
            || crate::model::State::ALL.iter().any(|s| s.as_str() == e)
    };
    match hook.events.iter().find(|e| !known(e)) {
        Some(e) => Err(format!(
            "webhooks.{name}.events: {e:?} is no event; write {} or a state (done, failed, ...)",
            WEBHOOK_KINDS.join(", ")
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_compiles_and_accepts_the_example_config() {
        let schema = Schema::compile(CONFIG_SCHEMA, Path::new("config.schema.json"));
        assert!(schema.is_ok(), "{:?}", schema.err());
        let doc =
            crate::yaml::parse(crate::ops::init::EXAMPLE_CONFIG, &Limits::default()).expect("yaml");
        assert_eq!(Config::violations(&doc), vec![]);
    }

    #[test]
    fn a_file_with_every_key_reads_and_passes_the_schema() {
        let text = "work_dir: work\ndefaults: {timeout: 5m, max_attempts: 2, priority: high}\nbackoff: {base: 1m, max: 1h}\ncircuit_breaker: {failure_threshold: 3, open_for: 10m}\nmax_handoffs: 4\narchive_after: 7d\nrequire_signed_results: false\ncommit: {author: \"a <a@b>\"}\nrules: [{when: {agent: a, output_contains: x, label: y}, then: b}]\nsettle: 2s\nsync: {remote: origin}\nrun: {worktree: true, worktree_base: main, worktree_dir: ../trees, keep_failed_worktrees: true}\nwebhooks: {ops: {url: \"https://h.example/c\", events: [dead_letter, done], secret_env: S, max_attempts: 3, retry: {base: 250ms, max: 5m}, timeout: 10s}}\n";
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("coord.yaml");
        std::fs::write(&p, text).expect("write");
        assert!(Config::load(&p).is_ok(), "{:?}", Config::load(&p).err());
        let doc = crate::yaml::parse(text, &Limits::default()).expect("yaml");
        assert_eq!(Config::violations(&doc), vec![]);
    }

    #[test]
    fn webhooks_are_checked_and_durations_take_milliseconds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("coord.yaml");
        let load = |text: &str| {
            std::fs::write(&p, text).expect("write");
            Config::load(&p)
        };
        let c = load("webhooks: {a: {url: \"http://x\", retry: {base: 250ms}}}\n").expect("valid");
        let hook = &c.webhooks["a"];
        assert_eq!(hook.retry.base.0, std::time::Duration::from_millis(250));
        assert_eq!(hook.retry.max.0, std::time::Duration::from_secs(300));
        assert_eq!(hook.max_attempts, 8);
        assert!(hook.wants("transition", "done"));
        for (text, says) in [
            ("webhooks: {\"a b\": {url: \"http://x\"}}\n", "a name is"),
            (
                "webhooks: {a: {url: \"ftp://x\"}}\n",
                "must start with http",
            ),
            (
                "webhooks: {a: {url: \"http://x\", max_attempts: 0}}\n",
                "at least 1",
            ),
            (
                "webhooks: {a: {url: \"http://x\", events: [dne]}}\n",
                "\"dne\" is no event",
            ),
            (
                "webhooks: {a: {url: \"http://x\", timeout: 5 s}}\n",
                "a whole number and a unit",
            ),
            (
                "webhooks: {a: {url: \"http://x\", secret_env: \"\"}}\n",
                "secret_env",
            ),
            (
                "webhooks: {a: {url: \"http://x\", secret_env: \"A=B\"}}\n",
                "secret_env",
            ),
            ("webhooks: {a: {url: \"http://\"}}\n", "no host"),
            ("webhooks: {a: {url: \"http:///p\"}}\n", "no host"),
            (
                "webhooks: {a: {url: \"http://x\", timeout: 0s}}\n",
                "timeout",
            ),
            (
                "webhooks: {a: {url: \"http://x\", retry: {base: 0s}}}\n",
                "retry.base",
            ),
            (
                "webhooks: {a: {url: \"http://x\", retry: {base: 5m, max: 1m}}}\n",
                "retry.base",
            ),
        ] {
            let e = load(text).expect_err(text).to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
        load("webhooks: {a: {url: \"HTTP://X:80/p\"}}\n").expect("capitals");
        let c = load("webhooks: {a: {url: \"http://x\", events: [dead_letter, done]}}\n")
            .expect("valid");
        let hook = &c.webhooks["a"];
        assert!(hook.wants("dead_letter", "failed") && hook.wants("transition", "done"));
        assert!(!hook.wants("transition", "ready"));
    }

    #[test]
    fn missing_file_gives_defaults() {
        let c = Config::load(Path::new("/nonexistent/coord.yaml")).expect("defaults");
        assert_eq!(c.work_dir, "work");
        assert_eq!(c.defaults.max_attempts, 3);
        assert_eq!(c.max_handoffs, 10);
    }

    #[test]
    fn reads_and_checks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("coord.yaml");
        std::fs::write(
            &p,
            "defaults: {timeout: 5m}\nrules:\n  - when: {agent: research}\n    then: analyst\n",
        )
        .expect("write");
        let c = Config::load(&p).expect("valid");
        assert_eq!(c.defaults.timeout.as_secs(), 300);
        assert_eq!(c.rules[0].then.as_str(), "analyst");
        std::fs::write(&p, "work_dir: ../elsewhere\n").expect("write");
        assert!(Config::load(&p).is_err());
        std::fs::write(&p, "max_handof: 3\n").expect("write");
        let e = Config::load(&p).expect_err("typo");
        assert!(
            e.to_string()
                .contains("coord.yaml:1:1: unknown key 'max_handof'"),
            "{e}"
        );
        std::fs::write(&p, "defaults:\n  timeout: 5 minutes\n").expect("write");
        let e = Config::load(&p).expect_err("bad duration");
        assert!(
            e.to_string().contains("coord.yaml:2:12: defaults.timeout:"),
            "{e}"
        );
        assert!(e.to_string().contains("30m"), "{e}");
    }
}
