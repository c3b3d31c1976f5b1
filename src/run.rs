//! One command run for one task, as `coord run` starts it: the task as JSON on stdin, the
//! environment and working directory given, a process group of its own (so a timeout or a stop
//! kills everything it started), its stdout kept (bounded) as the output and the tail of its
//! stderr for the error. Process I/O only, no task logic: the caller decides what to report.
//! That caller is the runner's loop, [`Runner`] (run/harness.rs).

mod harness;

pub use harness::{Kind, Runner, Tasks, Tell, Told};

use serde_json::{json, Value};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The exit code by which a command says "this task cannot succeed, do not retry it".
pub const EXIT_FATAL: i32 = 100;

/// The most stdout kept as the output (the task file limit).
pub const MAX_OUTPUT: usize = 1024 * 1024;

/// How much of the end of stderr goes into a failure's message.
const STDERR_TAIL: usize = 2000;

/// How long a group asked to stop with SIGTERM has before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(1);

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
}

/// A command that runs.
pub struct Running {
    child: Child,
    stdout: JoinHandle<(Vec<u8>, bool)>,
    stderr: JoinHandle<(Vec<u8>, bool)>,
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
    /// The last lines of its stderr.
    pub stderr_tail: String,
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
        let stdout = keep(child.stdout.take(), MAX_OUTPUT, false);
        let stderr = keep(child.stderr.take(), STDERR_TAIL, true);
        Ok(Running {
            child,
            stdout,
            stderr,
        })
    }

    /// Returns the exit status when the command has ended.
    pub fn poll(&mut self) -> std::io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// Stops the command's whole process group: SIGTERM, then SIGKILL after a second.
    pub fn kill(&mut self) {
        let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) else {
            return;
        };
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::TERM);
        let until = Instant::now() + TERM_GRACE;
        while Instant::now() < until {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Whatever the leader did, the rest of its group goes too.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }

    /// Waits for the command to end and returns what it left.
    pub fn finish(mut self) -> std::io::Result<Finished> {
        let status = self.child.wait()?;
        let (stdout, stdout_cut) = self.stdout.join().unwrap_or_default();
        let (tail, _) = self.stderr.join().unwrap_or_default();
        Ok(Finished {
            status,
            stdout,
            stdout_cut,
            stderr_tail: String::from_utf8_lossy(&tail).trim().to_string(),
        })
    }
}

/// Reads a pipe to its end in a thread, keeping at most `max` bytes: the first ones, or the
/// last ones when `tail`. Returns them and whether anything was dropped.
fn keep<R: Read + Send + 'static>(
    pipe: Option<R>,
    max: usize,
    tail: bool,
) -> JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || {
        let Some(mut pipe) = pipe else {
            return (Vec::new(), false);
        };
        let mut kept = Vec::new();
        let mut cut = false;
        let mut buf = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            kept.extend_from_slice(&buf[..n]);
            if kept.len() > max {
                cut = true;
                if tail {
                    kept.drain(..kept.len() - max);
                } else {
                    kept.truncate(max);
                }
            }
        }
        (kept, cut)
    })
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
        };
        let f = Running::start(&job)
            .expect("start")
            .finish()
            .expect("finish");
        assert_eq!(f.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&f.stdout), "in env\n");
        assert_eq!(f.stderr_tail, "oops");
    }
}
