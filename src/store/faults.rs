//! Fault tests of the store through the failure-injection hook (`inject`): every operation
//! of a tick made to fail in turn (the fail-at-N sweep), and a run stopped at one chosen step.
//! Test-only; does I/O in temporary repositories.

use super::inject::{count, crash_on, fail_at, fail_on, failed};
use crate::cli::{self, Cli};
use crate::error::CliError;
use clap::Parser;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

const NOW: &str = "2026-11-22T10:00:00Z";

/// Runs coord in-process; after `init`, sets `settle: 0s` (these tests write files and tick
/// at once, and copy repos with fresh file times: they test faults, not the settle rule).
fn coord(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let d = dir.to_str().expect("utf8");
    let argv = ["coord", "-C", d, "-q", "--now", NOW]
        .into_iter()
        .chain(args.iter().copied());
    cli::run(Cli::try_parse_from(argv).expect("arguments")).map_err(CliError::into_error)?;
    if args.first() == Some(&"init") {
        let mut config = fs::read_to_string(dir.join("coord.yaml")).unwrap_or_default();
        config.push_str("\nsettle: 0s\n");
        fs::write(dir.join("coord.yaml"), config)?;
        let who = ["-c", "user.name=p", "-c", "user.email=p@x"];
        git(
            dir,
            &[&who[..], &["commit", "-qm", "settle", "coord.yaml"]].concat(),
        );
    }
    Ok(())
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
            !path.ends_with(super::fsutil::TEMP_SUFFIX),
            "N={n}: {path} left"
        );
        if path.ends_with(".yaml") {
            let doc = crate::yaml::parse_bytes(&bytes, &crate::yaml::Limits::default());
            assert!(doc.is_ok(), "N={n}: {path} does not parse");
        }
    }
}

/// Asserts two snapshots are equal, showing the files that differ as text.
fn assert_same_files(got: &BTreeMap<String, Vec<u8>>, want: &BTreeMap<String, Vec<u8>>, n: usize) {
    let text = |m: &BTreeMap<String, Vec<u8>>, p: &String| {
        m.get(p).map(|b| String::from_utf8_lossy(b).into_owned())
    };
    let differ: Vec<String> = got
        .keys()
        .chain(want.keys())
        .filter(|p| got.get(*p) != want.get(*p))
        .map(|p| format!("{p}:\n got {:?}\n want {:?}", text(got, p), text(want, p)))
        .collect();
    assert!(
        differ.is_empty(),
        "N={n}: the final state differs\n{}",
        differ.join("\n")
    );
}

/// Returns the task ids (file stems outside `work/agents/`) whose place or bytes differ.
fn ids_differing(
    a: &BTreeMap<String, Vec<u8>>,
    b: &BTreeMap<String, Vec<u8>>,
) -> std::collections::BTreeSet<String> {
    let tasks =
        |m: &BTreeMap<String, Vec<u8>>| -> std::collections::BTreeSet<(String, String, Vec<u8>)> {
            m.iter()
                .filter(|(p, _)| p.ends_with(".yaml") && !p.starts_with("work/agents/"))
                .map(|(p, bytes)| {
                    let name = p.rsplit('/').next().unwrap_or(p);
                    let id = name.trim_end_matches(".yaml").to_string();
                    (id, p.clone(), bytes.clone())
                })
                .collect()
        };
    let (a, b) = (tasks(a), tasks(b));
    a.symmetric_difference(&b)
        .map(|(id, _, _)| id.clone())
        .collect()
}

/// Asserts that the index holds HEAD's version of every path under `work/` (nothing staged),
/// so a person's next `git commit` cannot commit a reversal of coord's commits.
fn assert_index_agrees_with_head(root: &Path, n: usize) {
    let staged = git(root, &["diff", "--cached", "--name-status", "--", "work"]);
    assert_eq!(staged, "", "N={n}: the index disagrees with HEAD");
}

/// Each operation of a tick is made to fail in turn. A failure of one task's file operation
/// skips that task (recorded for `status`) while the others move; any other failure ends the
/// pass with a clean error (or, in a best-effort write such as a cache, is ignored). Either
/// way the index agrees with HEAD at once (unless writing the index was what failed), and the
/// next ticks converge on the same state as an uninjected run.
#[test]
fn failing_the_nth_operation_of_a_tick_leaves_a_clean_index_and_converges() {
    let base = template();
    let reference = tempfile::tempdir().expect("tempdir");
    copy_tree(base.path(), reference.path());
    fail_at(None);
    coord(reference.path(), &["tick"]).expect("uninjected tick");
    let ops = count();
    let after_one = snapshot(reference.path());
    coord(reference.path(), &["tick"]).expect("second tick");
    let want = snapshot(reference.path());
    assert!(
        want.contains_key("work/assigned/bob/t2.bob.yaml"),
        "{:?}",
        want.keys()
    );
    assert!(ops > 20, "a whole tick has many operations ({ops})");
    let mut skipped = 0;
    for n in 1..=ops {
        let run = tempfile::tempdir().expect("tempdir");
        copy_tree(base.path(), run.path());
        fail_at(Some(n));
        let injected = coord(run.path(), &["tick"]);
        let what = failed();
        fail_at(None);
        let record = fs::read_to_string(run.path().join(".git/coord/skipped.json"));
        if let Err(err) = &injected {
            let why = if record.is_ok() {
                "left where they were after a file operation failed; the other tasks moved"
            } else {
                "injected failure"
            };
            assert!(format!("{err:#}").contains(why), "N={n}: {err:#}");
        }
        if let Ok(record) = record {
            assert!(record.contains("injected failure"), "N={n}: {record}");
            let behind = ids_differing(&snapshot(run.path()), &after_one);
            let stuck = behind.first().expect("the skipped task stays behind");
            assert!(
                record.contains(&format!("/{stuck}.yaml")),
                "N={n}: {record}"
            );
            assert!(
                behind
                    .iter()
                    .all(|id| id == stuck || id.starts_with(&format!("{stuck}."))),
                "N={n}: only the skipped task and its children stay behind: {behind:?}"
            );
            skipped += 1;
        }
        assert_no_partial_file(run.path(), n);
        if what.as_deref() != Some("git index") {
            assert_index_agrees_with_head(run.path(), n);
        }
        coord(run.path(), &["tick"]).unwrap_or_else(|e| panic!("N={n}: next tick: {e:#}"));
        coord(run.path(), &["tick"]).unwrap_or_else(|e| panic!("N={n}: third tick: {e:#}"));
        assert_same_files(&snapshot(run.path()), &want, n);
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
    assert!(skipped > 0, "some failures hit one task's file operations");
    eprintln!("fault sweep: {ops} operations failed in turn, {skipped} skipped one task");
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf8")
}

#[test]
fn a_result_written_between_a_killed_move_and_recovery_is_kept() {
    let t = tempfile::tempdir().expect("tempdir");
    let d = t.path();
    coord(d, &["init"]).expect("init");
    fs::write(
        d.join("work/inbox/x.yaml"),
        "# mine\ntitle: x\ncapabilities: [z]\n",
    )
    .expect("write");
    coord(d, &["tick"]).expect("intake");
    assert!(d.join("work/ready/x.yaml").exists());
    coord(d, &["agents", "add", "a2", "--capability", "z"]).expect("agent");
    crash_on(Some(("create temp", 1)));
    let stopped = coord(d, &["tick"]);
    crash_on(None);
    assert!(stopped.is_err(), "the tick stops after the move");
    let half = d.join("work/assigned/a2/x.yaml");
    let text = fs::read_to_string(&half).expect("moved, not yet rewritten");
    assert!(text.contains("state: ready"), "{text}");
    let with_result = text.replace(
        "coord:\n",
        "result:\n  status: success\n  output: {answer: 42}\ncoord:\n",
    );
    fs::write(&half, with_result).expect("the agent writes its result");
    coord(d, &["tick"]).expect("recovery and tick");
    coord(d, &["tick"]).expect("next tick");
    let done = fs::read_to_string(d.join("work/done/x.yaml")).expect("done");
    assert!(done.starts_with("# mine\ntitle: x\n"), "{done}");
    assert!(done.contains("answer: 42"), "the result is kept: {done}");
    let committed = git(d, &["show", "HEAD:work/done/x.yaml"]);
    assert_eq!(committed, done);
    assert_eq!(git(d, &["status", "--porcelain"]), "");
}

/// A pass that fails after some commits leaves the index in line with HEAD: a person's next
/// unrelated `git commit` holds only their own change, never a reversal of coord's moves.
#[test]
fn a_person_commits_nothing_of_coords_after_a_pass_failed_midway() {
    let t = tempfile::tempdir().expect("tempdir");
    let d = t.path();
    coord(d, &["init", "--agents", "alice"]).expect("init");
    for id in ["a", "b", "c"] {
        coord(d, &["new", id, "--id", id, "--agent", "alice"]).expect("new");
    }
    fail_on(Some(("git commit", 2)));
    let failed = coord(d, &["tick"]);
    fail_on(None);
    assert!(failed.is_err(), "the second commit of the pass fails");
    fs::write(d.join("NOTES.md"), "mine\n").expect("write");
    git(d, &["add", "NOTES.md"]);
    git(
        d,
        &[
            "-c",
            "user.name=p",
            "-c",
            "user.email=p@x",
            "commit",
            "-qm",
            "notes",
        ],
    );
    let changed = git(d, &["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(
        changed, "NOTES.md\n",
        "the person's commit holds only their file"
    );
}
