//! Failure injection for tests: under `cfg(test)`, [`point`] counts the filesystem and git
//! operations of the store on the current thread and fails the Nth one, so a test can sweep N
//! over a whole tick. In every other build [`point`] is an empty inline function.

use std::io;

#[cfg(test)]
mod hook {
    use std::cell::Cell;

    thread_local! {
        static FAIL_AT: Cell<Option<usize>> = const { Cell::new(None) };
        static COUNT: Cell<usize> = const { Cell::new(0) };
    }

    /// Makes the `n`th operation from now fail (1-based); `None` turns injection off.
    pub fn fail_at(n: Option<usize>) {
        FAIL_AT.with(|f| f.set(n));
        COUNT.with(|c| c.set(0));
    }

    /// Returns how many operations ran since the last `fail_at`.
    pub fn count() -> usize {
        COUNT.with(Cell::get)
    }

    pub(super) fn hit() -> bool {
        let n = COUNT.with(|c| {
            c.set(c.get() + 1);
            c.get()
        });
        FAIL_AT.with(|f| f.get() == Some(n))
    }
}

#[cfg(test)]
pub use hook::{count, fail_at};

/// Marks one filesystem or git operation; fails it when a test asked for this one.
#[cfg(test)]
pub fn point(what: &str) -> io::Result<()> {
    if hook::hit() {
        return Err(io::Error::other(format!("injected failure: {what}")));
    }
    Ok(())
}

/// Marks one filesystem or git operation (no-op outside tests).
#[cfg(not(test))]
#[inline(always)]
pub fn point(_what: &str) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{count, fail_at};
    use crate::cli::{self, Cli};
    use clap::Parser;
    use std::collections::BTreeMap;
    use std::fs;
    use std::path::Path;

    const NOW: &str = "2026-11-22T10:00:00Z";

    fn coord(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
        let d = dir.to_str().expect("utf8");
        let argv = ["coord", "-C", d, "-q", "--now", NOW]
            .into_iter()
            .chain(args.iter().copied());
        cli::run(Cli::try_parse_from(argv).expect("arguments"))
    }

    fn copy_tree(from: &Path, to: &Path) {
        fs::create_dir_all(to).expect("mkdir");
        for e in fs::read_dir(from)
            .expect("read dir")
            .map(|e| e.expect("entry"))
        {
            let (src, dst) = (e.path(), to.join(e.file_name()));
            if e.file_type().expect("type").is_dir() {
                copy_tree(&src, &dst);
            } else {
                fs::copy(&src, &dst).expect("copy");
            }
        }
    }

    /// Returns every file under `work/` with its bytes.
    fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![root.join("work")];
        while let Some(dir) = stack.pop() {
            for e in fs::read_dir(&dir)
                .expect("read dir")
                .map(|e| e.expect("entry"))
            {
                if e.file_type().expect("type").is_dir() {
                    stack.push(e.path());
                } else {
                    let rel = e.path().strip_prefix(root).expect("inside").to_owned();
                    out.insert(rel.display().to_string(), fs::read(e.path()).expect("read"));
                }
            }
        }
        out
    }

    /// A repo where one tick does intake, assignment, completion and a handoff, after
    /// recording a dropped file.
    fn template() -> tempfile::TempDir {
        let t = tempfile::tempdir().expect("tempdir");
        let d = t.path();
        coord(d, &["init", "--agents", "alice,bob"]).expect("init");
        fs::write(
            d.join("work/inbox/t2.yaml"),
            "title: two\nagent: alice\nnext_agent: bob\n",
        )
        .expect("write");
        coord(d, &["tick"]).expect("tick");
        coord(d, &["complete", "t2"]).expect("complete");
        fs::write(
            d.join("work/inbox/t1.yaml"),
            "# keep me\ntitle: one\nagent: alice\n",
        )
        .expect("write");
        fs::write(
            d.join("work/inbox/t3.yaml"),
            "title: three\ndepends_on: [t1]\n",
        )
        .expect("write");
        t
    }

    fn assert_no_partial_file(root: &Path, n: usize) {
        for (path, bytes) in snapshot(root) {
            assert!(
                !path.ends_with(super::super::fsutil::TEMP_SUFFIX),
                "N={n}: {path} left"
            );
            if path.ends_with(".yaml") {
                let doc = crate::yaml::parse_bytes(&bytes, &crate::yaml::Limits::default());
                assert!(doc.is_ok(), "N={n}: {path} does not parse");
            }
        }
    }

    #[test]
    fn failing_the_nth_operation_of_a_tick_errors_cleanly_and_converges() {
        let base = template();
        let reference = tempfile::tempdir().expect("tempdir");
        copy_tree(base.path(), reference.path());
        fail_at(None);
        coord(reference.path(), &["tick"]).expect("uninjected tick");
        let ops = count();
        coord(reference.path(), &["tick"]).expect("second tick");
        let want = snapshot(reference.path());
        assert!(
            want.contains_key("work/assigned/bob/t2.bob.yaml"),
            "{:?}",
            want.keys()
        );
        assert!(ops > 20, "a whole tick has many operations ({ops})");
        for n in 1..=ops {
            let run = tempfile::tempdir().expect("tempdir");
            copy_tree(base.path(), run.path());
            fail_at(Some(n));
            let injected = coord(run.path(), &["tick"]);
            fail_at(None);
            let err = injected.expect_err(&format!("operation {n} of {ops} was made to fail"));
            assert!(
                format!("{err:#}").contains("injected failure"),
                "N={n}: {err:#}"
            );
            assert_no_partial_file(run.path(), n);
            coord(run.path(), &["tick"]).unwrap_or_else(|e| panic!("N={n}: next tick: {e:#}"));
            coord(run.path(), &["tick"]).unwrap_or_else(|e| panic!("N={n}: third tick: {e:#}"));
            assert_eq!(snapshot(run.path()), want, "N={n}: the final state differs");
            let store = crate::store::Store::open(run.path()).expect("open");
            assert!(
                store
                    .repo
                    .changed_paths("work/")
                    .expect("status")
                    .is_empty(),
                "N={n}"
            );
        }
    }
}
