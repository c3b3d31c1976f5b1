//! `coord webhooks`: lists the endpoints of coord.yaml with where delivery stands in this
//! clone; `coord webhooks retry` sends dead letters again. Also the `--webhooks` flags with
//! which `coord tick` and `coord sync` deliver once ([`crate::ops::webhooks`]).

use super::{Ctx, Found};
use crate::error::{CliError, UsageError};
use crate::ops::webhooks::{self, Once};
use serde_json::json;
use std::time::Duration;

/// Arguments of `coord webhooks`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Option<Action>,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Send an endpoint's dead letters again; those taken leave the record
    Retry {
        /// The endpoint (a name under `webhooks:` in coord.yaml)
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        endpoint: Option<String>,
        /// Every endpoint's dead letters
        #[arg(long)]
        all: bool,
    },
}

/// The flags with which a one-shot command delivers webhooks.
#[derive(Debug, Clone, clap::Args)]
pub struct Deliver {
    /// Deliver the webhooks of coord.yaml before exiting (unless coord watch or serve of
    /// this clone does), for at most 20s
    #[arg(long)]
    webhooks: bool,
    /// Deliver the webhooks for at most this long (implies --webhooks; e.g. 1m)
    #[arg(long, value_name = "DURATION")]
    webhooks_for: Option<super::wait::FlagDuration>,
}

impl Deliver {
    /// How long to deliver; None: not asked to.
    fn within(&self) -> Option<Duration> {
        match (self.webhooks_for, self.webhooks) {
            (Some(d), _) => Some(d.get()),
            (None, true) => Some(webhooks::ONCE_FOR),
            (None, false) => None,
        }
    }

    /// Before the command's tick: takes the clone's deliverer role when asked to (with the
    /// cursors `remote` keeps, for `sync`).
    pub fn prepare(&self, ctx: &Ctx, remote: Option<&str>) -> Result<Option<Once>, CliError> {
        if self.within().is_none() {
            return Ok(None);
        }
        Ok(webhooks::prepare(
            &ctx.dir,
            remote,
            Box::new(|line| err!("{line}")),
        )?)
    }

    /// After the command: delivers, and tells what stays pending for the next run.
    pub fn deliver(&self, ctx: &Ctx, once: Option<Once>) -> Result<(), CliError> {
        let (Some(once), Some(within)) = (once, self.within()) else {
            return Ok(());
        };
        let delivered = once.deliver(within)?;
        for (name, pending) in delivered.pending.iter().filter(|(_, n)| *n > 0) {
            ctx.status(&format!(
                "coord: webhook {name}: {pending} event(s) pending after {within:?}; the next run with --webhooks delivers them ('coord webhooks' shows why)"
            ));
        }
        Ok(())
    }
}

/// Runs `coord webhooks`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    match args.action {
        None => list(ctx),
        Some(Action::Retry { endpoint, all }) => {
            if endpoint.is_none() && !all {
                return Err(UsageError("name an endpoint or pass --all".to_string()).into());
            }
            retry(ctx, endpoint.as_deref())
        }
    }
}

fn list(ctx: &Ctx) -> Result<(), CliError> {
    let store = ctx.store()?;
    let rows = webhooks::list(&store);
    if ctx.json {
        super::print_answer(json!({ "endpoints": rows }));
        return Ok(());
    }
    if rows.is_empty() {
        ctx.status("coord: no webhooks; add them under webhooks: in coord.yaml (docs/webhooks.md)");
    }
    for r in &rows {
        let events = match r.events.is_empty() {
            true => "every event".to_string(),
            false => r.events.join(","),
        };
        let at = r
            .cursor
            .map_or("not started".to_string(), |c| format!("at {c}"));
        out!(
            "{}  {}  {events}  {at}  {} pending  {} dead",
            r.name,
            r.url,
            r.pending,
            r.dead_letters
        );
        if let Some(e) = r.last_error.as_deref().filter(|_| r.failures > 0) {
            out!(
                "  {} failed tries of the next event; the last: {e}",
                r.failures
            );
        }
    }
    Ok(())
}

fn retry(ctx: &Ctx, endpoint: Option<&str>) -> Result<(), CliError> {
    let done = webhooks::retry(ctx.store()?, endpoint)?;
    if ctx.json {
        let sent: Vec<_> = done
            .sent
            .iter()
            .map(|(e, id)| json!({"endpoint": e, "id": id}))
            .collect();
        let failed: Vec<_> = done
            .failed
            .iter()
            .map(|(e, id, why)| json!({"endpoint": e, "id": id, "error": why}))
            .collect();
        super::print_answer(json!({"sent": sent, "failed": failed}));
    } else {
        ctx.status(&format!(
            "coord: {} dead letter(s) sent and removed from the record",
            done.sent.len()
        ));
        for (e, id, why) in &done.failed {
            out!("{e}  event {id}  failed again: {why}");
        }
    }
    match done.failed.len() {
        0 => Ok(()),
        n => Err(Found(format!(
            "{n} dead letter(s) failed again and stay in the record; fix the receiver and run 'coord webhooks retry' again"
        ))
        .into()),
    }
}
