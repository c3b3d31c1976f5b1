//! A headless Chromium driven over the DevTools protocol for the real-browser tests: the
//! browser is started with `--remote-debugging-pipe`, so the protocol runs over its file
//! descriptors 3 (in) and 4 (out), as JSON messages that each end in a NUL byte. No WebDriver,
//! no WebSocket, no port: `sh` puts the child's stdin and stdout on fds 3 and 4.

#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Set to `require` (as `.ci/run` does) to fail instead of skipping when no browser is found.
pub const REQUIRE: &str = "COORD_BROWSER_TEST";
/// The browser program to use instead of the first Chromium found on PATH.
pub const PROGRAM: &str = "COORD_BROWSER";

/// How long one protocol command may take.
const ANSWER: Duration = Duration::from_secs(60);

/// Returns the Chromium to drive, or `None` after telling why the test is skipped; panics
/// when `COORD_BROWSER_TEST=require` and there is none.
pub fn chromium_or_skip(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os(PROGRAM)
        .map(PathBuf::from)
        .or_else(|| on_path(&["chromium", "chromium-browser", "google-chrome"]));
    if found.is_none() {
        let why = "no headless Chromium (chromium on PATH, or COORD_BROWSER)";
        assert!(
            std::env::var(REQUIRE).as_deref() != Ok("require"),
            "{test}: {REQUIRE}=require but {why}"
        );
        // Straight to stderr: the test harness captures eprintln! of passing tests.
        let _ = writeln!(
            std::io::stderr(),
            "\n{test}: SKIPPED, {why}; `apt-get install chromium` (or bash .ci/run) runs it"
        );
    }
    found
}

fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

/// A running headless browser with one page attached; closed when dropped.
pub struct Browser {
    child: Child,
    to: ChildStdin,
    from: Receiver<Value>,
    next: u64,
    session: Option<String>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts `program` headless with a fresh profile, its window `width` × `height`.
    pub fn start(program: &PathBuf, width: u32, height: u32) -> Browser {
        Browser::start_with(program, width, height, &[])
    }

    /// Starts `program` as [`Browser::start`] does, with more command-line switches (such as
    /// `--host-resolver-rules`, which points a test's host names at the server).
    pub fn start_with(program: &PathBuf, width: u32, height: u32, extra: &[&str]) -> Browser {
        let profile = tempfile::tempdir().expect("profile dir");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null 2>&1"#)
            .arg(program)
            .args([
                "--headless",
                // CI runs as root, where Chromium's sandbox cannot start.
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-pipe",
                &format!("--window-size={width},{height}"),
            ])
            .args(extra)
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the browser");
        let to = child.stdin.take().expect("stdin");
        let from = reader(child.stdout.take().expect("stdout"));
        Browser {
            child,
            to,
            from,
            next: 0,
            session: None,
            _profile: profile,
        }
    }

    /// Opens `url` in a new page and attaches to it; later commands go to that page.
    pub fn open(&mut self, url: &str) {
        let target = self.call("Target.createTarget", json!({ "url": url }));
        let attached = self.call(
            "Target.attachToTarget",
            json!({ "targetId": target["targetId"], "flatten": true }),
        );
        self.session = attached["sessionId"].as_str().map(String::from);
        assert!(self.session.is_some(), "no session: {attached}");
    }

    /// Evaluates a JavaScript expression in the page and returns its value.
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true }),
        );
        assert!(
            r.get("exceptionDetails").is_none(),
            "{expression} threw: {r}"
        );
        r["result"]["value"].clone()
    }

    /// Evaluates a JavaScript expression whose value is a promise, and returns what the
    /// promise resolves to.
    pub fn eval_async(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        );
        assert!(
            r.get("exceptionDetails").is_none(),
            "{expression} threw: {r}"
        );
        r["result"]["value"].clone()
    }

    /// Evaluates `expression` until it is `true` or `within` passes; returns how long it took.
    pub fn until(&mut self, within: Duration, expression: &str) -> Option<Duration> {
        let start = Instant::now();
        while start.elapsed() < within {
            if self.eval(expression) == Value::Bool(true) {
                return Some(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Returns a PNG of the page as it is shown.
    pub fn screenshot(&mut self) -> Vec<u8> {
        let r = self.call("Page.captureScreenshot", json!({ "format": "png" }));
        base64(r["data"].as_str().expect("screenshot data"))
    }

    /// Sends one command (to the attached page, if any) and returns its result.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let mut msg = json!({ "id": self.next, "method": method, "params": params });
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).expect("json");
        bytes.push(0);
        self.to.write_all(&bytes).expect("write to the browser");
        let end = Instant::now() + ANSWER;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let answer = match self.from.recv_timeout(left) {
                Ok(v) => v,
                Err(RecvTimeoutError::Timeout) => panic!("{method}: no answer in {ANSWER:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("{method}: the browser exited"),
            };
            if answer["id"] == json!(self.next) {
                assert!(answer.get("error").is_none(), "{method}: {answer}");
                return answer["result"].clone();
            }
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads NUL-terminated JSON messages on a thread; the channel closes when the browser does.
fn reader(out: std::process::ChildStdout) -> Receiver<Value> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(out);
        loop {
            let mut msg = Vec::new();
            match r.read_until(0, &mut msg) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            msg.pop();
            if let Ok(v) = serde_json::from_slice(&msg) {
                if tx.send(v).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// Decodes standard base64 (the screenshot's encoding).
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let digits: Vec<u8> = text.bytes().filter(|&c| c != b'=').map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &d)| n | u32::from(d) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}
