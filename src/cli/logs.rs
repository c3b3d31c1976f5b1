//! `coord logs <id> [--attempt N] [--follow]`: the stdout and stderr `coord run` kept of one
//! attempt of a task in this clone ([`crate::run::logs`]); with `--follow`, what a running
//! attempt writes, as it comes, until the attempt ends.

use super::Ctx;
use crate::error::CliError;
use crate::model::TaskId;
use crate::run::logs::{self, Stream, KEEP_PER_TASK};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

/// How often `--follow` looks for more.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// Arguments of `coord logs`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The task's id
    id: TaskId,
    /// The attempt (default: the latest one with logs)
    #[arg(long, value_name = "N")]
    attempt: Option<u32>,
    /// Print what a running attempt writes as it comes, until the attempt ends
    #[arg(long, short = 'f')]
    follow: bool,
}

/// Runs `coord logs`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let git_dir = ctx.coord()?.store().repo.git_dir().to_path_buf();
    let dir = logs::folder(&git_dir);
    let id = args.id.as_str();
    let kept = logs::attempts(&dir, id);
    let attempt = args.attempt.or_else(|| kept.last().copied());
    let Some(attempt) = attempt.filter(|a| kept.contains(a)) else {
        return Err(none_kept(id, args.attempt, &kept));
    };
    let running = logs::running(&git_dir, id, attempt);
    if ctx.json {
        let read = |s| String::from_utf8_lossy(&read_from(&dir, id, attempt, s, 0)).into_owned();
        super::print_json(&serde_json::json!({
            "version": 1,
            "id": id,
            "attempt": attempt,
            "running": running,
            "stdout": read(Stream::Stdout),
            "stderr": read(Stream::Stderr),
        }));
        return Ok(());
    }
    let mut at = [0u64; 2];
    let mut last = None;
    print_new(&dir, id, attempt, &mut at, &mut last, true);
    if !args.follow {
        if running {
            ctx.status(&format!(
                "coord: {id} attempt {attempt} still runs; 'coord logs {id} --follow' prints the rest as it comes"
            ));
        }
        return Ok(());
    }
    loop {
        // Looked at before the last read, so what it wrote before it ended is printed.
        let live = logs::running(&git_dir, id, attempt);
        print_new(&dir, id, attempt, &mut at, &mut last, false);
        if !live {
            return Ok(());
        }
        std::thread::sleep(FOLLOW_POLL);
    }
}

/// Returns the error for an attempt (or a task) without logs in this clone.
fn none_kept(id: &str, asked: Option<u32>, kept: &[u32]) -> CliError {
    let what = match asked {
        Some(a) => format!("no logs of {id} attempt {a} in this clone"),
        None => format!("no logs of {id} in this clone"),
    };
    let hint = match kept {
        [] => format!(
            "'coord run' keeps the stdout and stderr of a task's last {KEEP_PER_TASK} attempts, in the clone it ran in"
        ),
        _ => format!("attempts with logs: {}", list(kept)),
    };
    CliError::problem(what, hint)
}

/// Returns `1, 2, 3`.
pub fn list(attempts: &[u32]) -> String {
    let names: Vec<String> = attempts.iter().map(u32::to_string).collect();
    names.join(", ")
}

/// Prints what the logs gained since `at` (by stream), under a header line whenever the
/// stream printed last is another; with `all`, also the header of a stream that has nothing.
fn print_new(
    dir: &Path,
    id: &str,
    attempt: u32,
    at: &mut [u64; 2],
    last: &mut Option<Stream>,
    all: bool,
) {
    for (n, stream) in Stream::BOTH.into_iter().enumerate() {
        let bytes = read_from(dir, id, attempt, stream, at[n]);
        at[n] += bytes.len() as u64;
        if bytes.is_empty() && !all {
            continue;
        }
        let mut out = std::io::stdout().lock();
        let mut text = Vec::new();
        if *last != Some(stream) {
            if last.is_some() {
                text.push(b'\n');
            }
            text.extend(format!("==> {} of {id} attempt {attempt} <==\n", stream.as_str()).bytes());
            *last = Some(stream);
        }
        text.extend_from_slice(&bytes);
        if out.write_all(&text).and_then(|()| out.flush()).is_err() {
            // A reader that went away (`coord logs … | head`) wants no more.
            std::process::exit(0);
        }
    }
}

/// Returns what a log holds from byte `from` on: nothing when it is missing, or shorter (its
/// end was rewritten once the command ended).
fn read_from(dir: &Path, id: &str, attempt: u32, stream: Stream, from: u64) -> Vec<u8> {
    let path = logs::path(dir, id, attempt, stream);
    let Ok((mut file, size)) = crate::fsx::open_private(&path) else {
        return Vec::new();
    };
    if size <= from || file.seek(SeekFrom::Start(from)).is_err() {
        return Vec::new();
    }
    let mut bytes = Vec::new();
    let _ = file.take(size - from).read_to_end(&mut bytes);
    bytes
}
