//! Result signatures (docs/security.md): HMAC-SHA256 over a canonical encoding of (task id,
//! attempt,
//! agent, status, canonical JSON of output), written as `signature: hmac-sha256:<hex>`.
//! Signing, verifying (constant-time) and the canonical encoding are pure; [`KeyRing::load`]
//! and [`keygen`] read and write agents' keys outside the repository
//! (`$XDG_CONFIG_HOME/coord/keys/<agent>` or `~/.config/coord/keys/<agent>`, or the
//! `COORD_KEY_<AGENT>` environment variable). Key bytes never appear in any message.

use crate::engine::{Rejection, Signer, Verifier};
use crate::model::{AgentName, TaskId, TaskResult};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;
use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The prefix of a signature value.
pub const PREFIX: &str = "hmac-sha256:";
/// The number of random bytes in a key made by `coord keygen`.
pub const KEY_BYTES: usize = 32;
const MIN_KEY_BYTES: usize = 16;

/// Why a key cannot be made or used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Neither `$XDG_CONFIG_HOME` nor `$HOME` is set.
    #[error("cannot find the key folder")]
    NoHome,
    /// The key file exists already.
    #[error("{}: a key exists already", path.display())]
    Exists {
        /// The key file.
        path: PathBuf,
    },
    /// A file operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No randomness.
    #[error("no randomness available: {0}")]
    Random(String),
}

impl KeyError {
    /// Returns what to do about it, when there is something to do.
    pub fn hint(&self) -> Option<String> {
        match self {
            KeyError::NoHome => Some("set HOME (or XDG_CONFIG_HOME)".into()),
            KeyError::Exists { .. } => Some("delete the key file first to replace it".into()),
            _ => None,
        }
    }
}

/// An agent's secret key. Its `Debug` never shows the bytes.
#[derive(Clone)]
pub struct Key(Vec<u8>);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key([hidden])")
    }
}

impl Key {
    /// Parses a key written as hex (surrounding whitespace ignored); `what` names its source.
    pub fn from_hex(text: &str, what: &str) -> Result<Key, String> {
        let bytes = hex_decode(text.trim())
            .ok_or_else(|| format!("{what} is not a hex key; make one with 'coord keygen'"))?;
        if bytes.len() < MIN_KEY_BYTES {
            return Err(format!(
                "{what} is shorter than {MIN_KEY_BYTES} bytes; make one with 'coord keygen'"
            ));
        }
        Ok(Key(bytes))
    }

    fn mac(&self, payload: &[u8]) -> Hmac<Sha256> {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC accepts keys of any size");
        mac.update(payload);
        mac
    }

    /// Returns the signature value (`hmac-sha256:<hex>`) of a payload.
    pub fn sign(&self, payload: &[u8]) -> String {
        let tag = self.mac(payload).finalize().into_bytes();
        format!("{PREFIX}{}", hex_encode(&tag))
    }

    /// Checks a signature value against a payload in constant time.
    pub fn verify(&self, payload: &[u8], signature: &str) -> bool {
        let Some(tag) = signature.strip_prefix(PREFIX).and_then(hex_decode) else {
            return false;
        };
        self.mac(payload).verify_slice(&tag).is_ok()
    }
}

/// Returns HMAC-SHA256 of `payload` under `secret` (any length) in lowercase hex, as webhook
/// deliveries carry it (`X-Coord-Signature: sha256=<hex>`).
pub fn hmac_sha256_hex(secret: &[u8], payload: &[u8]) -> String {
    match <Hmac<Sha256> as Mac>::new_from_slice(secret) {
        Ok(mut mac) => {
            mac.update(payload);
            hex_encode(&mac.finalize().into_bytes())
        }
        Err(_) => String::new(),
    }
}

/// Returns the bytes a signature covers: a version tag and the five fields, NUL-separated
/// (ids, agent names and statuses cannot hold a NUL; the output's canonical JSON comes last).
pub fn payload(
    task: &TaskId,
    attempt: u32,
    agent: &AgentName,
    status: &str,
    output: &Value,
) -> Vec<u8> {
    format!(
        "coord-result-v1\0{task}\0{attempt}\0{agent}\0{status}\0{}",
        canonical_json(output)
    )
    .into_bytes()
}

/// Returns JSON with object keys sorted (by UTF-8 bytes) and no whitespace.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Returns the folder of key files: `$XDG_CONFIG_HOME/coord/keys`, else
/// `$HOME/.config/coord/keys`.
pub fn key_dir(xdg_config_home: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
    match (xdg_config_home.filter(|s| !s.is_empty()), home) {
        (Some(x), _) => Some(Path::new(x).join("coord/keys")),
        (None, Some(h)) if !h.is_empty() => Some(Path::new(h).join(".config/coord/keys")),
        _ => None,
    }
}

/// Returns the key folder from this process's environment.
pub fn key_dir_from_env() -> Option<PathBuf> {
    let get = |k: &str| std::env::var(k).ok();
    key_dir(get("XDG_CONFIG_HOME").as_deref(), get("HOME").as_deref())
}

/// Returns this process's environment variables whose names are UTF-8; a value that is not
/// becomes one that no key parses from, so using it says which variable is at fault.
fn utf8_vars() -> impl Iterator<Item = (String, String)> {
    std::env::vars_os().filter_map(|(k, v)| {
        let k = k.into_string().ok()?;
        let v = v
            .into_string()
            .unwrap_or_else(|_| "(not UTF-8)".to_string());
        Some((k, v))
    })
}

/// Agents' keys, loaded before planning so that signing and verifying are pure.
#[derive(Debug, Clone, Default)]
pub struct KeyRing {
    /// By environment variable name: the key, or why it is unusable.
    env: BTreeMap<String, Result<Key, String>>,
    /// By agent name (the key file's name): the key, or why it is unusable.
    files: BTreeMap<String, Result<Key, String>>,
}

impl KeyRing {
    /// Loads every `COORD_KEY_*` variable and every key file of `dir`.
    pub fn load(vars: impl IntoIterator<Item = (String, String)>, dir: Option<&Path>) -> KeyRing {
        let env = vars
            .into_iter()
            .filter(|(k, _)| k.starts_with("COORD_KEY_"))
            .map(|(k, v)| {
                let key = Key::from_hex(&v, &format!("environment variable {k}"));
                (k, key)
            })
            .collect();
        let files = dir.map(read_key_dir).unwrap_or_default();
        KeyRing { env, files }
    }

    /// Loads the keys this process can see.
    pub fn from_env() -> KeyRing {
        KeyRing::load(utf8_vars(), key_dir_from_env().as_deref())
    }

    /// Returns an agent's key: its environment variable first, else its key file.
    pub fn key(&self, agent: &AgentName) -> Result<&Key, String> {
        let var = agent.key_var();
        let found = self
            .env
            .get(&var)
            .or_else(|| self.files.get(agent.as_str()));
        match found {
            Some(Ok(k)) => Ok(k),
            Some(Err(why)) => Err(why.clone()),
            None => Err(format!(
                "no key for agent {agent}: set {var} or run 'coord keygen {agent}'"
            )),
        }
    }
}

fn read_key_dir(dir: &Path) -> BTreeMap<String, Result<Key, String>> {
    let Ok(entries) = fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            AgentName::new(&name).ok()?;
            Some((name, read_key_file(&e.path())))
        })
        .collect()
}

/// Reads a key file, refusing one that is a symlink or readable by group or others.
pub fn read_key_file(path: &Path) -> Result<Key, String> {
    let shown = path.display();
    let meta = fs::symlink_metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    if !meta.file_type().is_file() {
        return Err(format!(
            "{shown}: not a regular file; a key file must be one"
        ));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "{shown}: readable by group or others; run 'chmod 600 {shown}'"
        ));
    }
    let text = fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
    Key::from_hex(&text, &format!("key file {shown}"))
}

impl Verifier for KeyRing {
    fn verify(
        &self,
        task: &TaskId,
        attempt: u32,
        agent: &AgentName,
        result: &TaskResult,
    ) -> Result<(), Rejection> {
        let key = self.key(agent).map_err(Rejection::Unverifiable)?;
        let Some(sig) = result.signature.as_deref() else {
            return Err(Rejection::Bad("the result carries no signature".into()));
        };
        let output = result.output.clone().unwrap_or(Value::Null);
        let data = payload(task, attempt, agent, result.status.as_str(), &output);
        if key.verify(&data, sig) {
            Ok(())
        } else {
            Err(Rejection::Bad(format!(
                "the signature does not match task {task}, attempt {attempt}, agent {agent} and this result"
            )))
        }
    }
}

impl Signer for KeyRing {
    fn sign(
        &self,
        task: &TaskId,
        attempt: u32,
        agent: &AgentName,
        result: &Value,
    ) -> Result<String, String> {
        let key = self.key(agent)?;
        let status = result["status"].as_str().unwrap_or("success");
        let output = result.get("output").cloned().unwrap_or(Value::Null);
        Ok(key.sign(&payload(task, attempt, agent, status, &output)))
    }
}

/// Creates a random key for `agent` in `dir` (mode 0600, folder 0700), never replacing one.
/// Returns the key file's path.
pub fn keygen(dir: &Path, agent: &AgentName) -> Result<PathBuf, KeyError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| KeyError::Io { path, source }
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io(dir))?;
    let path = dir.join(agent.as_str());
    let mut bytes = [0u8; KEY_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| KeyError::Random(e.to_string()))?;
    let mut file = match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(KeyError::Exists { path });
        }
        Err(e) => return Err(io(&path)(e)),
    };
    let text = format!("{}\n", hex_encode(&bytes));
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io(&path))?;
    Ok(path)
}

fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if s.is_empty() || !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ResultStatus;
    use serde_json::json;

    const HEX: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    fn ring() -> KeyRing {
        KeyRing::load([("COORD_KEY_BOT_A".to_string(), HEX.to_string())], None)
    }

    fn ids() -> (TaskId, AgentName) {
        (
            TaskId::new("t1").expect("id"),
            AgentName::new("bot-a").expect("agent"),
        )
    }

    fn result(v: Value) -> TaskResult {
        serde_json::from_value(v).expect("result")
    }

    #[test]
    fn canonical_json_sorts_keys_without_whitespace() {
        let v = json!({"b": [1, {"z": null, "a": "x y"}], "a": true});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":true,"b":[1,{"a":"x y","z":null}]}"#
        );
    }

    #[test]
    fn signed_result_verifies_and_key_order_does_not_matter() {
        let (t, a) = ids();
        let r = ring();
        let sig = r
            .sign(
                &t,
                2,
                &a,
                &json!({"status": "success", "output": {"x": 1, "y": "z"}}),
            )
            .expect("sign");
        assert!(sig.starts_with(PREFIX));
        let res =
            result(json!({"status": "success", "output": {"y": "z", "x": 1}, "signature": sig}));
        assert_eq!(r.verify(&t, 2, &a, &res), Ok(()));
    }

    #[test]
    fn other_attempt_task_agent_status_or_output_is_rejected() {
        let (t, a) = ids();
        let r = ring();
        let sig = r
            .sign(&t, 2, &a, &json!({"status": "success", "output": {"x": 1}}))
            .expect("sign");
        let res = result(json!({"status": "success", "output": {"x": 1}, "signature": sig}));
        let bad = |x: Result<(), Rejection>| matches!(x, Err(Rejection::Bad(_)));
        assert!(bad(r.verify(&t, 1, &a, &res)), "other attempt");
        assert!(
            bad(r.verify(&TaskId::new("t2").expect("id"), 2, &a, &res)),
            "other task"
        );
        let mut changed = res.clone();
        changed.output = Some(json!({"x": 2}));
        assert!(bad(r.verify(&t, 2, &a, &changed)), "other output");
        changed = res.clone();
        changed.status = ResultStatus::Failure;
        assert!(bad(r.verify(&t, 2, &a, &changed)), "other status");
        changed = res.clone();
        changed.signature = None;
        assert!(bad(r.verify(&t, 2, &a, &changed)), "missing");
        let other = AgentName::new("bot.a").expect("agent");
        assert!(
            matches!(r.verify(&t, 2, &other, &res), Err(Rejection::Bad(_))),
            "bot.a shares bot-a's variable name, but the agent is part of the payload"
        );
    }

    #[test]
    fn unknown_agent_is_unverifiable_not_bad() {
        let (t, _) = ids();
        let res = result(json!({"status": "success", "signature": "hmac-sha256:00"}));
        let who = AgentName::new("nobody").expect("agent");
        assert!(matches!(
            ring().verify(&t, 1, &who, &res),
            Err(Rejection::Unverifiable(m)) if m.contains("COORD_KEY_NOBODY")
        ));
    }

    #[test]
    fn malformed_keys_are_refused_without_echoing_them() {
        let r = KeyRing::load(
            [("COORD_KEY_X".to_string(), "not-hex-secret".to_string())],
            None,
        );
        let err = r
            .key(&AgentName::new("x").expect("agent"))
            .expect_err("bad");
        assert!(!err.contains("not-hex-secret"), "{err}");
        assert!(Key::from_hex("abcd", "k").is_err(), "too short");
    }

    #[test]
    fn keygen_makes_a_private_key_and_never_overwrites() {
        let d = tempfile::tempdir().expect("tempdir");
        let dir = d.path().join("coord/keys");
        let a = AgentName::new("bot-a").expect("agent");
        let path = keygen(&dir, &a).expect("keygen");
        let mode = fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let before = fs::read_to_string(&path).expect("read");
        assert!(matches!(keygen(&dir, &a), Err(KeyError::Exists { .. })));
        assert_eq!(fs::read_to_string(&path).expect("read"), before);
        assert!(KeyRing::load([], Some(&dir)).key(&a).is_ok());
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = KeyRing::load([], Some(&dir)).key(&a).expect_err("open");
        assert!(err.contains("chmod 600"), "{err}");
    }

    #[test]
    fn key_dir_prefers_xdg() {
        assert_eq!(
            key_dir(Some("/x"), Some("/h")),
            Some(PathBuf::from("/x/coord/keys"))
        );
        assert_eq!(
            key_dir(None, Some("/h")),
            Some(PathBuf::from("/h/.config/coord/keys"))
        );
        assert_eq!(key_dir(Some(""), None), None);
    }
}
