//! Runs the `git` binary so that it never outlives coord: a `git fetch` or `git push` left
//! running by a killed `coord sync` would hold the remote-tracking ref's lock and make the next
//! run fail, and a `git repack` left running by a killed tick would race the next one's.
//! Spawns processes.
//!
//! On Unix, git runs under a small `sh` guard in a process group of its own; the guard reads
//! a pipe that only coord holds open. When coord exits for any reason (kill -9 included), the
//! pipe closes, the read returns, and the guard kills its whole group: git and whatever git
//! started (upload-pack, ssh, a credential helper). When git ends first, the guard stops
//! watching and exits with git's status.

use std::io;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The guard: runs `"$@"` in the background, waits for it, and kills the process group when
/// its stdin (coord's end of the pipe) closes first.
#[cfg(unix)]
const GUARD: &str = r#"exec 3<&0
"$@" </dev/null &
child=$!
{ read -r _ <&3; kill -TERM 0; } &
watcher=$!
wait "$child"
status=$?
kill "$watcher" 2>/dev/null
exit "$status""#;

/// Returns the output of `git args…` run in `root` with C messages and no prompt, killed
/// with its children if coord dies first.
pub fn git_output(root: &Path, args: &[&str]) -> io::Result<Output> {
    let mut cmd = guarded(args);
    cmd.current_dir(root)
        .env("LC_ALL", "C")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    // Held open until git is done: closing it is the guard's signal to kill git.
    let lifeline = child.stdin.take();
    let out = child.wait_with_output();
    drop(lifeline);
    out
}

#[cfg(unix)]
fn guarded(args: &[&str]) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(GUARD).arg("sh").arg("git").args(args);
    cmd.process_group(0);
    cmd
}

#[cfg(not(unix))]
fn guarded(args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.args(args);
    cmd
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_passes_output_and_status_through() {
        let dir = std::env::temp_dir();
        let out = git_output(&dir, &["--version"]).unwrap();
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("git version"));
        let out = git_output(&dir, &["no-such-command"]).unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-command"));
    }
}
