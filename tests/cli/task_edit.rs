//! `coord edit <id>`: the task's file opened in `$EDITOR` (here a stand-in script that edits
//! the file with sed, as a person's editor would save it), checked, and committed in one
//! commit with the person's bytes; a typo is named at its line and column and can be fixed in
//! the editor again, or the edit given up with the text kept; a task an agent holds, and the
//! blocks that are coord's and the agent's, are not the person's to change this way.

use crate::harness::TestRepo;
use crate::steps::state;
use std::process::Output;

/// Writes a stand-in editor: a shell script running `body` with the file as `$1`.
fn editor(r: &TestRepo, name: &str, body: &str) -> String {
    let path = r.home().join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write editor");
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&path, mode).expect("chmod");
    path.display().to_string()
}

/// Runs `coord edit id` with `editor`, `answers` on stdin, drafts under the test's home.
fn edit(r: &TestRepo, id: &str, editor: &str, answers: &str) -> Output {
    r.cmd(&["edit", id])
        .env("EDITOR", editor)
        .env("TMPDIR", r.home())
        .write_stdin(answers)
        .output()
        .expect("run coord edit")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Returns the draft path an error line names as keeping the text.
fn kept_draft(err: &str) -> String {
    let kept = err
        .split("kept in ")
        .nth(1)
        .and_then(|k| k.split(')').next());
    kept.expect("the draft's path").to_string()
}

#[test]
fn an_edit_is_committed_once_with_the_persons_bytes() {
    let r = TestRepo::new();
    r.task("fix", "title: Fix it\npriority: low\n");
    r.ok(&["tick"]);
    let before = r.commit_count();
    let sed = editor(
        &r,
        "sed.sh",
        r#"sed -i 's/^priority: low$/priority: high   # asked on Monday/' "$1""#,
    );
    let out = edit(&r, "fix", &sed, "");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "fix\n");
    let text = r.read("work/ready/fix.yaml");
    assert!(
        text.contains("priority: high   # asked on Monday\n"),
        "{text}"
    );
    assert_eq!(r.commit_count(), before + 1);
    assert_eq!(r.git(&["show", "HEAD:work/ready/fix.yaml"]), text);
    let message = r.git(&["log", "-1", "--format=%B"]);
    assert!(
        message.starts_with("coord: edit fix") && message.contains("Coord-Op: edit"),
        "{message}"
    );
    assert!(r.git_status().is_empty(), "{}", r.git_status());
    let unchanged = edit(&r, "fix", "true", "");
    assert!(unchanged.status.success(), "{}", stderr(&unchanged));
    assert_eq!(
        r.commit_count(),
        before + 1,
        "nothing changed, nothing committed"
    );
}

#[test]
fn a_typo_is_named_at_its_line_and_column_and_fixed_in_the_editor_again() {
    let r = TestRepo::new();
    r.task("fix", "title: Fix it\npriority: low\n");
    r.ok(&["tick"]);
    let before = r.commit_count();
    let rounds = r.home().join("rounds");
    let body = format!(
        r#"echo x >> '{0}'
if [ "$(wc -l < '{0}')" -eq 1 ]; then sed -i 's/^priority: low$/priority: urgent # typo/' "$1"
else sed -i 's/^priority: urgent/priority: high/' "$1"; fi"#,
        rounds.display()
    );
    let twice = editor(&r, "twice.sh", &body);
    let out = edit(&r, "fix", &twice, "y\n");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let named: Vec<&str> = err.lines().filter(|l| l.contains("urgent")).collect();
    assert_eq!(named.len(), 1, "{err}");
    assert!(named[0].contains(".yaml:2:11: priority: 'urgent'"), "{err}");
    assert!(err.contains("Open the editor again"), "{err}");
    assert_eq!(
        r.read("work/ready/fix.yaml").lines().nth(1),
        Some("priority: high # typo")
    );
    assert_eq!(r.commit_count(), before + 1);

    let typo = editor(&r, "typo.sh", r#"sed -i 's/^title: .*/title: [Fix/' "$1""#);
    let out = edit(&r, "fix", &typo, "");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("was not changed"), "{err}");
    let draft = kept_draft(err.lines().last().unwrap_or_default());
    let kept = std::fs::read_to_string(&draft).expect("the person's text is kept");
    assert!(
        kept.starts_with("title: [Fix\npriority: high # typo\n"),
        "{kept}"
    );
    assert_eq!(r.commit_count(), before + 1);
    assert!(r.git_status().is_empty(), "{}", r.git_status());
}

#[test]
fn an_edit_never_moves_a_task_past_its_approval() {
    let r = TestRepo::with_agents(&["alice"]);
    r.task(
        "ask",
        "title: Ask first\nagent: alice\nauthority: ask_me_first\n",
    );
    r.ok(&["tick"]);
    assert_eq!(state(&r, "ask"), "review");
    let before = r.commit_count();
    let approve_itself = editor(&r, "skip.sh", r#"sed -i '/review: start/d' "$1""#);
    let out = edit(&r, "ask", &approve_itself, "n\n");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("'coord:' is coord's record"), "{err}");
    assert_eq!(r.commit_count(), before);
    let report = editor(
        &r,
        "report.sh",
        r#"printf 'result:\n  status: success\n' >> "$1""#,
    );
    let err = stderr(&edit(&r, "ask", &report, ""));
    assert!(err.contains("'result:' is the agent's report"), "{err}");
    let loosen = editor(
        &r,
        "loosen.sh",
        r#"sed -i 's/ask_me_first/just_do_it/' "$1""#,
    );
    let out = edit(&r, "ask", &loosen, "");
    assert!(out.status.success(), "{}", stderr(&out));
    r.ok(&["tick"]);
    assert_eq!(state(&r, "ask"), "review", "still waits for its approval");
    r.ok(&["approve", "ask"]);
    r.ok(&["tick"]);
    assert_eq!(state(&r, "ask"), "assigned");
    let marker = r.home().join("opened");
    let opens = editor(&r, "opens.sh", &format!("touch '{}'", marker.display()));
    let (_, err) = r.code(&["edit", "ask"], 1);
    assert!(err.contains("held by agent 'alice'"), "{err}");
    let out = edit(&r, "ask", &opens, "");
    assert_eq!(out.status.code(), Some(1));
    assert!(!marker.exists(), "the editor is not opened on a held task");
}

#[test]
fn a_file_changed_during_the_edit_is_not_overwritten() {
    let r = TestRepo::new();
    r.task("fix", "title: Fix it\n");
    r.ok(&["tick"]);
    let before = r.commit_count();
    let task = r.abs("work/ready/fix.yaml");
    let body = format!(
        r#"sed -i 's/^title: .*/title: Mine/' "$1"
sed -i 's/^title: .*/title: Theirs/' '{}'"#,
        task.display()
    );
    let racing = editor(&r, "racing.sh", &body);
    let out = edit(&r, "fix", &racing, "");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("changed while it was being edited"), "{err}");
    let kept = std::fs::read_to_string(kept_draft(&err)).expect("kept");
    assert!(kept.starts_with("title: Mine\n"), "{kept}");
    assert!(r.read("work/ready/fix.yaml").starts_with("title: Theirs\n"));
    assert!(
        r.commit_count() <= before + 1,
        "at most the other edit is recorded"
    );
    assert!(!r.git(&["log", "--format=%s"]).contains("coord: edit fix"));
}
