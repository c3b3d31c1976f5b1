//! Which files were renamed into place and not written since, as the watcher reports it: the
//! evidence that lets `coord watch` read a file before its mtime is `settle` old
//! (docs/behaviour.md).
//!
//! A writer closing a file is no such evidence: a shell's `>> f` closes it after each half,
//! so a close says nothing of what comes next, and a gate (`authority:`) written in the second
//! half must never depend on how long the writer paused. A rename into place is the writer
//! saying the file is whole, also when it came within one timer tick of the last write (the
//! ctime then equals the mtime, and the settle rule alone would wait out `settle`).
//!
//! No clock stamps an event: one can come in long after it happened (a loaded watcher
//! thread), and a write made meanwhile would look older than the rename. Order does not lie:
//! the kernel reports one watch's events in the order they happened, and [`Renamed::note`]
//! takes them in that order. A rename into a name marks it; a write, a create or a replacing
//! rename after that unmarks it. A mark is used only once it is confirmed: the loop records
//! the size and mtime of each new mark ([`Renamed::snap`]), then makes an event of its own (a
//! barrier) and waits for it. Every write made before the barrier has been reported by then,
//! so a mark still standing is a file nobody wrote between its rename and the snapshot; the
//! settle rule reads it only while it still has that size and mtime.

use crate::store::Written;
use notify::event::{ModifyKind, RenameMode};
use notify::{Event, EventKind};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Files confirmed renamed in and not written since (absolute paths), with their mtime and
/// size then.
pub type SeenComplete = HashMap<PathBuf, Written>;

/// How long a confirmed mark is kept: by then its mtime alone says the file settled.
const SEEN_FOR: Duration = Duration::from_secs(600);

/// What is known of one marked file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mark {
    /// It was renamed in; nothing was written since, as far as events came in.
    Noted,
    /// Noted, and this is what it looked like just before the barrier was made.
    Snapped(Written),
    /// The barrier came back with the mark standing, at this time.
    Confirmed(Written, Instant),
}

/// The marks, kept in the order of the events.
#[derive(Debug, Default)]
pub struct Renamed {
    marks: HashMap<PathBuf, Mark>,
}

impl Renamed {
    /// Takes one event, in the order the watcher reported it. `noise` says which paths are
    /// never marked (coord's own temp files, editors' swap files).
    pub fn note(&mut self, e: &Event, noise: &dyn Fn(&Path) -> bool) {
        if e.need_rescan() {
            self.marks.clear();
            return;
        }
        match (&e.kind, &e.paths[..]) {
            (EventKind::Access(_), _) => {}
            (EventKind::Modify(ModifyKind::Name(RenameMode::Both)), [from, to]) => {
                self.forget_under(from);
                self.renamed_in(to, noise);
            }
            (EventKind::Modify(ModifyKind::Name(RenameMode::To)), [to]) => {
                self.renamed_in(to, noise);
            }
            (EventKind::Modify(ModifyKind::Name(RenameMode::From)), _) => {}
            (EventKind::Modify(ModifyKind::Metadata(_)), _) => {}
            (_, paths) => paths.iter().for_each(|p| self.forget_under(p)),
        }
    }

    /// Marks the name `to` renamed into (what was marked under it is gone); a folder renamed
    /// in loses its mark at the snapshot, its files settle by their times.
    fn renamed_in(&mut self, to: &Path, noise: &dyn Fn(&Path) -> bool) {
        self.forget_under(to);
        if !noise(to) {
            self.marks.insert(to.to_path_buf(), Mark::Noted);
        }
    }

    /// Forgets every mark: events were lost (the kernel's queue overflowed, the watcher
    /// failed), so none can be trusted.
    pub fn forget_all(&mut self) {
        self.marks.clear();
    }

    fn forget_under(&mut self, path: &Path) {
        self.marks.retain(|p, _| !p.starts_with(path));
    }

    /// Returns whether a mark waits for a barrier.
    pub fn unconfirmed(&self) -> bool {
        self.marks
            .values()
            .any(|m| !matches!(m, Mark::Confirmed(..)))
    }

    /// Records what each unconfirmed mark's file looks like now (call it just before making
    /// the barrier); forgets the marks of files gone.
    pub fn snap(&mut self) {
        self.marks.retain(|p, m| {
            if matches!(m, Mark::Confirmed(..)) {
                return true;
            }
            match p.symlink_metadata() {
                Ok(meta) if meta.is_file() => {
                    *m = Mark::Snapped(Written::of(&meta));
                    true
                }
                _ => false,
            }
        });
    }

    /// The barrier came back: every mark snapped before it and still standing is confirmed.
    pub fn confirm(&mut self) {
        let now = Instant::now();
        for m in self.marks.values_mut() {
            if let Mark::Snapped(w) = *m {
                *m = Mark::Confirmed(w, now);
            }
        }
    }

    /// Forgets confirmed marks older than [`SEEN_FOR`].
    pub fn expire(&mut self) {
        self.marks.retain(|_, m| match m {
            Mark::Confirmed(_, at) => at.elapsed() < SEEN_FOR,
            _ => true,
        });
    }

    /// Returns the confirmed marks.
    pub fn complete(&self) -> SeenComplete {
        self.marks
            .iter()
            .filter_map(|(p, m)| match m {
                Mark::Confirmed(w, _) => Some((p.clone(), *w)),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessKind, AccessMode, CreateKind, DataChange, RemoveKind};

    fn ev(kind: EventKind, paths: &[&Path]) -> Event {
        paths
            .iter()
            .fold(Event::new(kind), |e, p| e.add_path(p.to_path_buf()))
    }

    fn closed(p: &Path) -> Event {
        ev(
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            &[p],
        )
    }

    fn written(p: &Path) -> Event {
        ev(EventKind::Modify(ModifyKind::Data(DataChange::Any)), &[p])
    }

    fn renamed(from: &Path, to: &Path) -> Event {
        ev(
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
            &[from, to],
        )
    }

    fn no_noise(_: &Path) -> bool {
        false
    }

    /// Notes the events, snaps, applies `meanwhile`, confirms; returns the complete set.
    fn barrier(c: &mut Renamed, events: &[Event], meanwhile: &[Event]) -> SeenComplete {
        for e in events {
            c.note(e, &no_noise);
        }
        c.snap();
        for e in meanwhile {
            c.note(e, &no_noise);
        }
        c.confirm();
        c.complete()
    }

    #[test]
    fn a_rename_in_counts_only_once_a_barrier_shows_no_write_came_after_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let part = dir.path().join(".a.yaml.part");
        let a = dir.path().join("a.yaml");
        std::fs::write(&a, "title: A\n").expect("write");
        let mut c = Renamed::default();
        c.note(&renamed(&part, &a), &no_noise);
        assert!(c.unconfirmed());
        assert!(c.complete().is_empty(), "not before the barrier");
        let done = barrier(&mut c, &[], &[]);
        let meta = a.symlink_metadata().expect("stat");
        assert_eq!(done.get(&a), Some(&Written::of(&meta)));
        assert!(!c.unconfirmed());
    }

    #[test]
    fn a_writer_closing_a_file_marks_nothing_for_it_may_append_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = dir.path().join("a.yaml");
        std::fs::write(&a, "title: Deploy\n").expect("write");
        let mut c = Renamed::default();
        let done = barrier(&mut c, &[written(&a), closed(&a)], &[]);
        assert!(done.is_empty(), "{done:?}");
        assert!(!c.unconfirmed());
    }

    #[test]
    fn a_write_reported_after_the_rename_unmarks_the_file_however_late_the_rename_came_in() {
        let dir = tempfile::tempdir().expect("tempdir");
        let part = dir.path().join(".a.yaml.part");
        let a = dir.path().join("a.yaml");
        std::fs::write(&a, "result:\n").expect("write");
        let mut c = Renamed::default();
        let late = barrier(&mut c, &[renamed(&part, &a), written(&a)], &[]);
        assert!(late.is_empty(), "{late:?}");
        let mut c = Renamed::default();
        let meanwhile = barrier(&mut c, &[renamed(&part, &a)], &[written(&a)]);
        assert!(meanwhile.is_empty(), "{meanwhile:?}");
        let mut c = Renamed::default();
        let created = barrier(
            &mut c,
            &[
                renamed(&part, &a),
                ev(EventKind::Create(CreateKind::File), &[&a]),
            ],
            &[],
        );
        assert!(created.is_empty(), "{created:?}");
    }

    #[test]
    fn a_rename_from_outside_marks_and_renaming_a_file_away_drops_its_mark() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = dir.path().join("a.yaml");
        let b = dir.path().join("b.yaml");
        std::fs::write(&b, "title: B\n").expect("write b");
        let mut c = Renamed::default();
        let to = ev(EventKind::Modify(ModifyKind::Name(RenameMode::To)), &[&a]);
        let done = barrier(&mut c, &[to, renamed(&a, &b)], &[]);
        assert_eq!(done.keys().collect::<Vec<_>>(), [&b], "moved on to b");
        c.note(
            &ev(EventKind::Remove(RemoveKind::Folder), &[dir.path()]),
            &no_noise,
        );
        assert!(c.complete().is_empty());
    }

    #[test]
    fn lost_events_noise_and_files_gone_leave_no_mark() {
        let dir = tempfile::tempdir().expect("tempdir");
        let part = dir.path().join(".part");
        let a = dir.path().join("a.yaml");
        let gone = dir.path().join("gone.yaml");
        let tmp = dir.path().join("a.yaml.coord-tmp");
        std::fs::write(&a, "title: A\n").expect("write");
        let mut c = Renamed::default();
        c.note(&renamed(&part, &tmp), &|p| p == tmp);
        assert!(!c.unconfirmed(), "noise is never marked");
        let done = barrier(&mut c, &[renamed(&part, &a), renamed(&a, &gone)], &[]);
        assert!(done.is_empty(), "{done:?}");
        let done = barrier(&mut c, &[renamed(&part, &a)], &[]);
        assert_eq!(done.keys().collect::<Vec<_>>(), [&a]);
        let overflow = Event::new(EventKind::Other).set_flag(notify::event::Flag::Rescan);
        c.note(&overflow, &no_noise);
        assert!(c.complete().is_empty());
    }
}
