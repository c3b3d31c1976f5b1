//! One command run for one task, as `coord run` starts it: the task as JSON on stdin, the
//! environment and working directory given, a process group of its own and a run id in its
//! environment (so a timeout or a stop ends everything it started, [`procs`]), its stdout kept
//! (bounded) as the output and the tail of its stderr. When the command ends, whatever it left
//! running is ended too, and its pipes are read for a bounded time only: a background process
//! holding them cannot hold up the runner. Both streams are also written to the attempt's log
//! files as they come ([`logs`]). Process I/O only, no task logic: the caller decides
//! what to report. That caller is the runner's loop, [`Runner`] (run/harness.rs).

mod harness;
pub mod logs;
mod place;
mod procs;
mod record;

pub use harness::{Kind, Runner, Tasks, Tell, Told};
pub use procs::RUN_ID_VAR;

use serde_json::{json, Value};
use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The exit code by which a command says "this task cannot succeed, do not retry it".
pub const EXIT_FATAL: i32 = 100;

/// The most stdout kept as the output (the task file limit).
pub const MAX_OUTPUT: usize = 1024 * 1024;

/// How much of the end of stderr goes into a failure's message.
const STDERR_TAIL: usize = 2000;

/// How much of the end of stderr is kept in the attempt's log.
pub const STDERR_LOG: usize = 64 * 1024;

/// How long a group asked to stop with SIGTERM has before SIGKILL.
pub(crate) const TERM_GRACE: Duration = Duration::from_secs(1);

/// How long the pipes are read after the command ended, before what it left running is ended.
const DRAIN: Duration = Duration::from_secs(1);

/// What to start.
#[derive(Debug, Clone)]
pub struct Job {
    /// The program and its arguments.
    pub argv: Vec<OsString>,
    /// Written to the command's stdin, which is then closed.
    pub stdin: Vec<u8>,
    /// Variables added to the environment.
    pub env: Vec<(String, String)>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The run id, given to the command as `COORD_RUN_ID`: it names every process of this
    /// attempt, also one that left the command's process group.
    pub run_id: String,
    /// The files its stdout and stderr are logged to as they come, up to [`logs::LOG_MAX`]
    /// bytes each (None: not logged).
    pub log: Option<(PathBuf, PathBuf)>,
}

/// A command that runs.
pub struct Running {
    child: Child,
    attempt: procs::Attempt,
    stdout: Kept,
    stderr: Kept,
}

/// What a finished command left.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// Its stdout, up to [`MAX_OUTPUT`] bytes.
    pub stdout: Vec<u8>,
    /// Whether stdout was longer than that.
    pub stdout_cut: bool,
    /// The last [`STDERR_LOG`] bytes of its stderr.
    pub stderr: Vec<u8>,
    /// Whether stderr was longer than that.
    pub stderr_cut: bool,
}

impl Finished {
    /// Returns the end of its stderr for a failure's message, trimmed.
    pub fn stderr_tail(&self) -> String {
        let from = self.stderr.len().saturating_sub(STDERR_TAIL);
        String::from_utf8_lossy(&self.stderr[from..])
            .trim()
            .to_string()
    }

    /// Returns how it ended when not by exit 0: `exit N` or the signal that killed it.
    pub fn how_it_ended(&self) -> String {
        use std::os::unix::process::ExitStatusExt;
        match (self.status.code(), self.status.signal()) {
            (Some(code), _) => format!("exit {code}"),
            (None, Some(sig)) => match signal_name(sig) {
                Some(name) => format!("killed by {name} (signal {sig})"),
                None => format!("killed by signal {sig}"),
            },
            (None, None) => "ended without an exit code".to_string(),
        }
    }
}

/// Returns the name of a signal that commonly ends a process.
fn signal_name(sig: i32) -> Option<&'static str> {
    let names = [
        (1, "SIGHUP"),
        (2, "SIGINT"),
        (3, "SIGQUIT"),
        (4, "SIGILL"),
        (5, "SIGTRAP"),
        (6, "SIGABRT"),
        (7, "SIGBUS"),
        (8, "SIGFPE"),
        (9, "SIGKILL"),
        (10, "SIGUSR1"),
        (11, "SIGSEGV"),
        (12, "SIGUSR2"),
        (13, "SIGPIPE"),
        (14, "SIGALRM"),
        (15, "SIGTERM"),
        (24, "SIGXCPU"),
        (25, "SIGXFSZ"),
    ];
    names.iter().find(|(n, _)| *n == sig).map(|(_, name)| *name)
}

impl Running {
    /// Starts `job` in a new process group.
    pub fn start(job: &Job) -> std::io::Result<Running> {
        let (program, args) = job
            .argv
            .split_first()
            .ok_or_else(|| std::io::Error::other("no command given"))?;
        let mut child = std::process::Command::new(program)
            .args(args)
            .envs(job.env.iter().map(|(k, v)| (k, v)))
            .env(procs::RUN_ID_VAR, &job.run_id)
            .current_dir(&job.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()?;
        let input = job.stdin.clone();
        if let Some(mut stdin) = child.stdin.take() {
            // A command that does not read its stdin closes the pipe: that is not an error.
            std::thread::spawn(move || {
                let _ = stdin.write_all(&input);
            });
        }
        let (out_log, err_log) = match &job.log {
            Some((out, err)) => (log_file(out), log_file(err)),
            None => (None, None),
        };
        let stdout = keep(child.stdout.take(), MAX_OUTPUT, false, out_log);
        let stderr = keep(child.stderr.take(), STDERR_LOG, true, err_log);
        let pid = child.id() as i32;
        let attempt = procs::Attempt {
            pgid: Some(pid),
            start: procs::stat(pid).map(|s| s.start),
            run_id: job.run_id.clone(),
        };
        Ok(Running {
            child,
            attempt,
            stdout,
            stderr,
        })
    }

    /// Returns the command's pid (also its process group) and its start time (None: it
    /// ended before that could be read).
    pub fn pid(&self) -> (i32, Option<u64>) {
        (self.child.id() as i32, self.attempt.start)
    }

    /// Returns the exit status when the command has ended.
    pub fn poll(&mut self) -> std::io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// Stops the command and everything of its attempt: its process group and whatever
    /// carries its run id get SIGTERM, then SIGKILL a second later.
    pub fn kill(&mut self) {
        self.attempt.end(TERM_GRACE);
        let _ = self.child.try_wait();
    }

    /// Waits for the command to end and returns what it left. Its pipes are read up to
    /// [`DRAIN`] longer; then whatever of its attempt still runs is ended.
    pub fn finish(mut self) -> std::io::Result<Finished> {
        let status = self.child.wait()?;
        let until = Instant::now() + DRAIN;
        while !(self.stdout.done() && self.stderr.done()) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.attempt.end(TERM_GRACE);
        let (stdout, stdout_cut) = self.stdout.take();
        let (stderr, stderr_cut) = self.stderr.take();
        Ok(Finished {
            status,
            stdout,
            stdout_cut,
            stderr,
            stderr_cut,
        })
    }
}

/// What a pipe's reader kept so far, and whether it reached the end.
struct Kept {
    bytes: Arc<Mutex<(Vec<u8>, bool)>>,
    reader: JoinHandle<()>,
}

impl Kept {
    fn done(&self) -> bool {
        self.reader.is_finished()
    }

    /// Returns what was kept and whether anything was dropped. A reader still blocked (a
    /// process nothing could end holds the pipe) is left to end with the pipe.
    fn take(self) -> (Vec<u8>, bool) {
        let until = Instant::now() + DRAIN;
        while !self.reader.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut kept = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *kept)
    }
}

/// Creates (or empties) a log file, readable by its owner alone; None when it cannot be
/// made: a log is not a reason to fail a task.
fn log_file(path: &std::path::Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(path.parent()?).ok()?;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .ok()
}

/// Reads a pipe to its end in a thread, keeping at most `max` bytes: the first ones, or the
/// last ones when `tail`, with whether anything was dropped. The first [`logs::LOG_MAX`]
/// bytes also go to `log` as they come.
fn keep<R: Read + Send + 'static>(
    pipe: Option<R>,
    max: usize,
    tail: bool,
    mut log: Option<File>,
) -> Kept {
    let bytes = Arc::new(Mutex::new((Vec::new(), false)));
    let kept = bytes.clone();
    let reader = std::thread::spawn(move || {
        let Some(mut pipe) = pipe else {
            return;
        };
        let mut buf = [0u8; 8192];
        let mut logged = 0;
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            if let Some(file) = log.as_mut() {
                let room = logs::LOG_MAX.saturating_sub(logged).min(n);
                logged += room;
                if room == 0 || file.write_all(&buf[..room]).is_err() {
                    log = None;
                }
            }
            let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
            let (bytes, cut) = &mut *kept;
            bytes.extend_from_slice(&buf[..n]);
            if bytes.len() > max {
                *cut = true;
                if tail {
                    bytes.drain(..bytes.len() - max);
                } else {
                    bytes.truncate(max);
                }
            }
        }
    });
    Kept { bytes, reader }
}

/// Returns a command's stdout as a task output: a YAML or JSON mapping or list as it is, other
/// text as `{text: …}`, nothing when it printed nothing.
pub fn output_of(stdout: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(stdout);
    if text.trim().is_empty() {
        return None;
    }
    match crate::yaml::parse_bytes(stdout, &crate::yaml::Limits::default()) {
        Ok(doc) if doc.value.is_object() || doc.value.is_array() => Some(doc.value),
        _ => Some(json!({"text": text.trim_end()})),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_structured_when_it_reads_and_text_otherwise() {
        assert_eq!(output_of(b"{\"a\": 1}\n"), Some(json!({"a": 1})));
        assert_eq!(
            output_of(b"a: 1\nb: [x]\n"),
            Some(json!({"a": 1, "b": ["x"]}))
        );
        assert_eq!(output_of(b"hello\n"), Some(json!({"text": "hello"})));
        assert_eq!(output_of(b"a: [\n"), Some(json!({"text": "a: ["})));
        assert_eq!(output_of(b" \n"), None);
    }

    #[test]
    fn a_killed_group_takes_its_children_with_it() {
        let job = Job {
            argv: ["sh", "-c", "sleep 30 & sleep 30; echo never"]
                .map(OsString::from)
                .to_vec(),
            stdin: Vec::new(),
            env: Vec::new(),
            cwd: std::env::temp_dir(),
            run_id: "test".into(),
            log: None,
        };
        let mut r = Running::start(&job).expect("start");
        let t = Instant::now();
        r.kill();
        let f = r.finish().expect("finish");
        assert!(!f.status.success());
        assert!(f.stdout.is_empty());
        assert!(t.elapsed() < Duration::from_secs(5), "the pipes closed");
    }

    #[test]
    fn stdin_env_and_stderr_tail_reach_the_command() {
        let job = Job {
            argv: ["sh", "-c", "cat; echo \"$X\"; echo oops >&2; exit 3"]
                .map(OsString::from)
                .to_vec(),
            stdin: b"in ".to_vec(),
            env: vec![("X".to_string(), "env".to_string())],
            cwd: std::env::temp_dir(),
            run_id: "test".into(),
            log: None,
        };
        let f = Running::start(&job)
            .expect("start")
            .finish()
            .expect("finish");
        assert_eq!(f.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&f.stdout), "in env\n");
        assert_eq!(f.stderr_tail(), "oops");
        assert_eq!(f.how_it_ended(), "exit 3");
    }
}
