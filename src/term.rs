//! Writing lines on stdout and stderr without panicking: a closed stdout ends the program
//! quietly (`coord log | head`), a closed stderr loses the line. Every front end prints
//! through these. Long output may go through a pager instead of stdout ([`start_pager`]).

use std::io::Write;
use std::process::{Child, ChildStdin};
use std::sync::Mutex;

/// The pager lines go to while one runs, instead of stdout.
static PAGER: Mutex<Option<Pager>> = Mutex::new(None);

/// A pager started for this process's output: its process and the pipe to its input.
struct Pager {
    child: Child,
    input: ChildStdin,
}

/// Writes one line to stdout (or to the pager, while one runs); exits 0 when the reader went
/// away, like other Unix tools.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    let mut pager = PAGER.lock().unwrap_or_else(|p| p.into_inner());
    let written = match pager.as_mut() {
        Some(p) => writeln!(p.input, "{args}"),
        None => writeln!(std::io::stdout().lock(), "{args}"),
    };
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
    }
}

/// Writes one line on stderr, ignoring a failed write: status and error lines are worth
/// nothing to a reader that closed stderr, and printing must never panic.
pub fn write_err(args: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "{args}");
}

/// Returns the pager command: `COORD_PAGER`, else `PAGER`, else `less -FRX` (which leaves
/// output shorter than the screen on it). An empty value, or `cat`, means none.
fn pager_command() -> Option<String> {
    let chosen = ["COORD_PAGER", "PAGER"]
        .iter()
        .find_map(|k| std::env::var(k).ok())
        .unwrap_or_else(|| "less -FRX".to_string());
    let chosen = chosen.trim();
    (!chosen.is_empty() && chosen != "cat").then(|| chosen.to_string())
}

/// Starts the pager ([`pager_command`], run by the shell) for what [`write_out`] writes from
/// now on. No pager, or one that does not start, leaves the lines to stdout.
pub fn start_pager() {
    let Some(command) = pager_command() else {
        return;
    };
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", &command])
        .stdin(std::process::Stdio::piped());
    if std::env::var_os("LESS").is_none() {
        cmd.env("LESS", "FRX");
    }
    if let Ok(mut child) = cmd.spawn() {
        if let Some(input) = child.stdin.take() {
            *PAGER.lock().unwrap_or_else(|p| p.into_inner()) = Some(Pager { child, input });
        }
    }
}

/// Ends the pager, if one runs: closes its input and waits until the reader quits it.
pub fn finish_pager() {
    let pager = PAGER.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(Pager { mut child, input }) = pager {
        drop(input);
        let _ = child.wait();
    }
}
