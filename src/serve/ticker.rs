//! `coord serve --tick`: the loop of `coord watch` on a thread of the server, so that one
//! process serves the board and moves the tasks. Each tick is `coord watch`'s (it takes the
//! coordinator lock like any other) and is counted in the clone's stats like any other
//! (`/metrics`). The loop stops on the
//! same SIGINT or SIGTERM as the server, after the tick in progress.

use super::hub::Hub;
use super::ServeError;
use crate::store::Store;
use crate::watch::{self, SeenComplete, Ticked, Why};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Starts the loop and returns once it watches (its signal handlers installed, its first tick
/// under way), or with the reason it could not start.
pub fn start(hub: Arc<Hub>, opts: watch::Options) -> Result<JoinHandle<()>, ServeError> {
    let (started, outcome) = channel();
    let thread = std::thread::Builder::new()
        .name("coord-serve-tick".into())
        .spawn(move || run(&hub, &opts, started))
        .map_err(|e| ServeError::Repo(e.into()))?;
    match outcome.recv() {
        Ok(Ok(())) => Ok(thread),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ServeError::Repo(
            "the tick loop ended before it started".into(),
        )),
    }
}

/// Runs the loop; says on `started` once it watches, or why it could not.
fn run(hub: &Hub, opts: &watch::Options, started: Sender<Result<(), ServeError>>) {
    let store = match Store::open(&hub.opener().dir) {
        Ok(s) => s,
        Err(e) => {
            let _ = started.send(Err(ServeError::Repo(e.into())));
            return;
        }
    };
    let work = store.abs(store.work_dir());
    let mut waiting = Some(started);
    let mut tick = |why: Why, seen: &SeenComplete| {
        let done = hub.opener().watch_tick(why, seen);
        if let Ok(Ticked::Done(_) | Ticked::Settling(..)) = done {
            hub.changed();
        }
        done.map_err(Into::into)
    };
    let mut say = |line: &str| {
        if let Some(s) = waiting.take() {
            let _ = s.send(Ok(()));
        }
        crate::term::write_err(format_args!("{line}"));
    };
    let ran = watch::run(&store.repo, &work, opts, &mut tick, &mut say);
    match (ran, waiting) {
        (Ok(ticks), _) => crate::term::write_err(format_args!(
            "coord serve: stopped ticking after {ticks} ticks"
        )),
        (Err(e), Some(s)) => {
            let _ = s.send(Err(ServeError::Tick(e)));
        }
        (Err(e), None) => crate::term::write_err(format_args!("coord serve --tick: {e}")),
    }
}
