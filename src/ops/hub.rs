//! Hub mode's work on the repository (`coord serve --hub`): the lease on the remote that makes
//! one hub at a time the writer of the branch (`refs/coord/hub`: a commit whose message names
//! the holder, the epoch, the lease's length, a renewal count and, for people, the expiry by
//! the holder's clock; only ever moved by compare-and-swap pushes), the batch
//! pushed with each renewal (a `coord sync` whose push carries the lease atomically with the
//! branch, so a hub that lost the lease cannot land anything). Each grant records the hub's
//! epoch; the engine's fence checks reports against it.
//!
//! No wall clock decides who holds the lease. A contender takes it over only after it watched
//! the ref stay unchanged for a whole lease on its own monotonic clock; the holder counts its
//! lease from before the push that renewed it, on its own monotonic clock, and stops writing
//! before that runs out (`serve::hubmode`). Every renewal writes a new commit, so a live holder
//! always moves the ref. See docs/fleet.md.

use super::{Coord, Error, Event};
use crate::git::command::git_output;
use crate::sync::{self, RefUpdate};
use jiff::Timestamp;
use std::time::{Duration, Instant};

/// The ref on the remote that holds the hub's lease.
pub const LEASE_REF: &str = "refs/coord/hub";
/// Where this clone keeps the last lease it read from the remote.
const SEEN_REF: &str = "refs/coord/hub-remote";
/// git's empty tree: the lease commit holds no files.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
/// How long a batch waits for the coordinator lock (a person's command in the hub's clone).
const PUSH_WAIT: Duration = Duration::from_secs(10);

/// Who holds the hub's lease, in which epoch, and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The holder: host name and the clone's folder.
    pub holder: String,
    /// Counts the hubs that took over; every grant carries it.
    pub epoch: u64,
    /// How long the lease lasts unless renewed: a contender waits this long, on its own
    /// clock, without seeing a renewal before it takes over.
    pub period: Duration,
    /// Counts the writes of the lease, so that each renewal is a new commit.
    pub renewal: u64,
    /// When the lease lapses unless renewed, by the holder's clock: for people to read, never
    /// compared with another clock.
    pub expires: Timestamp,
}

/// The lease as this hub last wrote it on the remote.
#[derive(Debug, Clone)]
pub struct Held {
    /// The lease.
    pub lease: Lease,
    /// The commit of it on the remote.
    oid: String,
    /// The remote.
    pub remote: String,
    /// When the push that last wrote the lease started, by this machine's monotonic clock:
    /// no contender can take the lease over before a whole period after it.
    pub written: Instant,
}

/// Why the hub cannot hold or use the lease.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// Another hub renewed its lease while this one waited for it to lapse.
    #[error("another hub holds the lease on {remote} and renews it: {holder}, epoch {epoch}; stop it, or start this one once it has stopped (it takes over after {}s without a renewal)", period.as_secs())]
    Held {
        /// The remote.
        remote: String,
        /// The other hub.
        holder: String,
        /// Its epoch.
        epoch: u64,
        /// How long a lease goes without a renewal before another hub takes it over.
        period: Duration,
    },
    /// A newer hub took the lease over.
    #[error("a newer hub holds the lease on {remote}: {holder}, epoch {epoch} (this hub's was {mine}); this hub stopped writing")]
    Superseded {
        /// The remote.
        remote: String,
        /// The newer hub.
        holder: String,
        /// Its epoch.
        epoch: u64,
        /// This hub's epoch.
        mine: u64,
    },
    /// The lease commit on the remote is not one a hub wrote.
    #[error("the hub lease {LEASE_REF} on {remote} is unreadable ({why}); delete it with 'git push {remote} :{LEASE_REF}' once no hub runs")]
    Unreadable {
        /// The remote.
        remote: String,
        /// What is wrong with it.
        why: String,
    },
    /// A git command failed.
    #[error("git {action} failed: {message}")]
    Git {
        /// What git was doing.
        action: &'static str,
        /// git's last lines.
        message: String,
    },
}

impl Lease {
    /// Returns the lease commit's message.
    fn message(&self) -> String {
        format!(
            "coord: hub lease\n\nCoord-Hub-Holder: {}\nCoord-Hub-Epoch: {}\nCoord-Hub-Lease-Seconds: {}\nCoord-Hub-Renewal: {}\nCoord-Hub-Expires: {}\n",
            self.holder,
            self.epoch,
            self.period.as_secs(),
            self.renewal,
            self.expires
        )
    }

    /// Reads a lease commit's message; one written before the length and the renewal count
    /// were has none (0).
    fn parse(message: &str) -> Option<Lease> {
        let field = |key: &str| {
            message
                .lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
                .map(str::trim)
        };
        Some(Lease {
            holder: field("Coord-Hub-Holder")?.to_string(),
            epoch: field("Coord-Hub-Epoch")?.parse().ok()?,
            period: Duration::from_secs(
                field("Coord-Hub-Lease-Seconds").map_or(Some(0), |s| s.parse().ok())?,
            ),
            renewal: field("Coord-Hub-Renewal").map_or(Some(0), |s| s.parse().ok())?,
            expires: field("Coord-Hub-Expires")?.parse().ok()?,
        })
    }
}

/// Returns the refusal naming the hub whose lease `l` on `remote` is live.
fn held_by(remote: &str, l: Lease, period: Duration) -> HubError {
    HubError::Held {
        remote: remote.to_string(),
        holder: l.holder,
        epoch: l.epoch,
        period: period.max(l.period),
    }
}

/// Returns this clone's name as a lease holder: the host name and the clone's folder.
pub fn holder_of(root: &std::path::Path) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string());
    format!("{host}:{}", root.display())
}

impl Coord {
    /// Runs git in the clone; its stdout on success.
    fn git_hub(&self, action: &'static str, args: &[&str]) -> Result<String, HubError> {
        let out = git_output(self.store.root(), args).map_err(|e| HubError::Git {
            action,
            message: e.to_string(),
        })?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let last: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
            return Err(HubError::Git {
                action,
                message: last[last.len().saturating_sub(2)..].join(" "),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Reads the lease on `remote`: None when no hub ever held it.
    pub fn read_lease(&self, remote: &str) -> Result<Option<(Lease, String)>, Error> {
        let spec = format!("+{LEASE_REF}:{SEEN_REF}");
        match self.git_hub("fetch", &["fetch", "--quiet", "--no-tags", remote, &spec]) {
            Err(HubError::Git { message, .. }) if message.contains("couldn't find remote ref") => {
                return Ok(None)
            }
            other => other?,
        };
        let oid = self.git_hub("rev-parse", &["rev-parse", SEEN_REF])?;
        let text = self.git_hub("cat-file", &["cat-file", "commit", &oid])?;
        let message = text.split_once("\n\n").map_or("", |(_, m)| m);
        let lease = Lease::parse(message).ok_or_else(|| HubError::Unreadable {
            remote: remote.to_string(),
            why: format!("commit {oid} names no holder, epoch and expiry"),
        })?;
        Ok(Some((lease, oid)))
    }

    /// Takes the lease on `remote` for `holder`, lasting `lease_for` unless renewed: a new
    /// lease in epoch 1; the holder's own lease (a restarted hub) in its epoch; another
    /// holder's in the next epoch once this machine watched it go a whole lease without a
    /// renewal ([`HubError::Held`] as soon as it sees one). Taking another holder's lease
    /// also sets the clone's lease floor, so the grants of the older hub each get a whole
    /// lease from now on this clone's clock before they can time out.
    pub fn take_lease(
        &self,
        remote: &str,
        holder: &str,
        lease_for: Duration,
    ) -> Result<Held, Error> {
        let seen = self.read_lease(remote)?;
        let (epoch, renewal) = match &seen {
            None => (1, 0),
            Some((l, _)) if l.holder == holder => (l.epoch, l.renewal + 1),
            Some((l, oid)) => {
                self.wait_out(remote, l, oid, lease_for)?;
                self.lock(PUSH_WAIT)?.floor_leases(self.now)?;
                (l.epoch + 1, l.renewal + 1)
            }
        };
        let lease = Lease {
            holder: holder.to_string(),
            epoch,
            period: lease_for,
            renewal,
            expires: self.expiry(lease_for),
        };
        let old = seen.map(|(_, oid)| oid);
        let oid = self.lease_commit(&lease)?;
        let update = RefUpdate {
            name: LEASE_REF.to_string(),
            old,
            new: oid.clone(),
        };
        let written = Instant::now();
        if let Err(e) = self.push_ref(remote, &update) {
            // Another hub moved it first: say who.
            return Err(match self.read_lease(remote)? {
                Some((l, _)) if l.holder != holder => held_by(remote, l, lease_for).into(),
                _ => e,
            });
        }
        Ok(Held {
            lease,
            oid,
            remote: remote.to_string(),
            written,
        })
    }

    /// Waits until the lease `seen` (commit `oid`) has gone a whole lease (the longer of its
    /// own and `lease_for`) unchanged, timed from after this machine read it, on its
    /// monotonic clock; fails with [`HubError::Held`] as soon as the holder renews it.
    fn wait_out(
        &self,
        remote: &str,
        seen: &Lease,
        oid: &str,
        lease_for: Duration,
    ) -> Result<(), Error> {
        let since = Instant::now();
        let period = lease_for.max(seen.period);
        self.emit(Event::Status(&format!(
            "coord: {} holds the hub lease on {remote} in epoch {}; taking it over if it goes {}s without a renewal",
            seen.holder,
            seen.epoch,
            period.as_secs()
        )));
        let poll = (period / 6).clamp(Duration::from_millis(200), Duration::from_secs(10));
        loop {
            let left = period.saturating_sub(since.elapsed());
            if left.is_zero() {
                return Ok(());
            }
            std::thread::sleep(left.min(poll));
            match self.read_lease(remote)? {
                Some((l, now)) if now != oid => return Err(held_by(remote, l, period).into()),
                // Unchanged, or deleted (then taking it over fails on the swap).
                _ => {}
            }
        }
    }

    /// Pushes everything committed since the last batch with the lease renewed, in one atomic
    /// push after integrating the remote's new commits as `coord sync` does (and ticking);
    /// with nothing to push, renews the lease alone when `renew`. Fails with
    /// [`HubError::Superseded`] once another hub holds the lease.
    pub fn hub_push(
        &self,
        held: &mut Held,
        lease_for: Duration,
        renew: bool,
    ) -> Result<sync::Report, Error> {
        self.still_held(held)?;
        let lease = Lease {
            period: lease_for,
            renewal: held.lease.renewal + 1,
            expires: self.expiry(lease_for),
            ..held.lease.clone()
        };
        let update = RefUpdate {
            name: LEASE_REF.to_string(),
            old: Some(held.oid.clone()),
            new: self.lease_commit(&lease)?,
        };
        let opts = sync::Options {
            remote: held.remote.clone(),
            branch: None,
            max_retries: 0,
            wait: PUSH_WAIT,
            redo_on_reject: false,
            drop_edits: Vec::new(),
            now: self.now,
            with_ref: Some(update.clone()),
            // Agents were answered on the hub's ticks: its grants stand on them.
            ticks: sync::Ticks::Keep,
        };
        let written = Instant::now();
        let report = match self.sync(&opts) {
            Ok(r) => r,
            Err(e) => {
                self.still_held(held)?;
                return Err(e);
            }
        };
        if report.pushes == 0 && !renew {
            return Ok(report);
        }
        if report.pushes == 0 {
            if let Err(e) = self.push_ref(&held.remote, &update) {
                self.still_held(held)?;
                return Err(e);
            }
        }
        held.oid = update.new;
        held.lease = lease;
        held.written = written;
        Ok(report)
    }

    /// Fails with [`HubError::Superseded`] when the remote's lease is no longer `held`'s.
    fn still_held(&self, held: &Held) -> Result<(), Error> {
        match self.read_lease(&held.remote)? {
            Some((_, oid)) if oid == held.oid => Ok(()),
            Some((l, _)) => Err(HubError::Superseded {
                remote: held.remote.clone(),
                holder: l.holder,
                epoch: l.epoch,
                mine: held.lease.epoch,
            }
            .into()),
            None => Err(HubError::Superseded {
                remote: held.remote.clone(),
                holder: "nobody (the lease was deleted)".to_string(),
                epoch: 0,
                mine: held.lease.epoch,
            }
            .into()),
        }
    }

    /// Returns when a lease taken now for `lease_for` lapses.
    fn expiry(&self, lease_for: Duration) -> Timestamp {
        let span = jiff::SignedDuration::from_secs(lease_for.as_secs() as i64);
        self.now.checked_add(span).unwrap_or(self.now)
    }

    /// Writes the lease as a commit of the empty tree; returns its id.
    fn lease_commit(&self, lease: &Lease) -> Result<String, Error> {
        self.git_hub(
            "hash-object",
            &["hash-object", "-t", "tree", "-w", "/dev/null"],
        )?;
        let name = format!("user.name={}", self.store.identity.name);
        let email = format!("user.email={}", self.store.identity.email);
        let message = lease.message();
        let args = [
            "-c",
            &name,
            "-c",
            &email,
            "commit-tree",
            "--no-gpg-sign",
            EMPTY_TREE,
            "-m",
            &message,
        ];
        Ok(self.git_hub("commit-tree", &args)?)
    }

    /// Pushes one ref by compare-and-swap, counted in the clone's push times (`coord
    /// status` warns near the budget).
    fn push_ref(&self, remote: &str, update: &RefUpdate) -> Result<(), Error> {
        crate::store::Stats::record_push(self.store.repo.git_dir(), self.now.as_second());
        let [lease, spec] = update.push_args();
        self.git_hub("push", &["push", "--quiet", &lease, remote, &spec])?;
        Ok(())
    }
}
