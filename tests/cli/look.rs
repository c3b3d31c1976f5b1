//! How output looks at a terminal: colour (`--color`, `NO_COLOR`, none into a pipe), local
//! and relative times (`--utc` for UTC; a pipe keeps RFC 3339 UTC) and the pager for `list`,
//! `log` and `show` (`COORD_PAGER`, then `PAGER`; none into a pipe or with `--no-pager`).
//! A terminal is a real pseudo-terminal from `script`; the pager is a stand-in shell command
//! that records what it was given.

use crate::harness::{TestRepo, T0};
use std::process::Command;

/// One hour after [`T0`], when the tasks of these tests were written.
const LATER: &str = "2026-11-22T11:00:00Z";

/// Returns a repo with a task done at [`T0`], read from [`LATER`].
fn repo() -> TestRepo {
    let mut r = TestRepo::with_agents(&["alice"]);
    r.ok(&["new", "Write the spec", "--id", "spec", "--agent", "alice"]);
    r.ok(&["tick"]);
    r.at(LATER);
    r
}

/// Runs `coord ARGS` in `r` with stdout on a pseudo-terminal (`script`), in the harness's
/// environment without its `NO_COLOR`, with `env` added; returns what the terminal showed,
/// without carriage returns.
fn on_terminal(r: &TestRepo, args: &[&str], env: &[(&str, &str)]) -> String {
    let coord = r.spawn_cmd(args);
    let line: Vec<String> = std::iter::once(coord.get_program())
        .chain(coord.get_args())
        .map(|a| format!("'{}'", a.to_string_lossy().replace('\'', r"'\''")))
        .collect();
    let mut script = Command::new("script");
    script
        .args(["-qec", &line.join(" "), "/dev/null"])
        .env_clear()
        .stdin(std::process::Stdio::null());
    for (k, v) in coord.get_envs().filter(|(k, _)| *k != "NO_COLOR") {
        if let Some(v) = v {
            script.env(k, v);
        }
    }
    script.envs(env.iter().copied());
    let out = script.output().expect("run script");
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    assert!(out.status.success(), "coord {args:?} on a terminal: {text}");
    text
}

#[test]
fn colour_is_on_at_a_terminal_unless_refused_and_off_in_a_pipe_unless_asked() {
    let r = repo();
    let no_pager = [("COORD_PAGER", "cat")];
    let shown = on_terminal(&r, &["list"], &no_pager);
    assert!(shown.contains("\x1b["), "{shown:?}");
    let refused = [("COORD_PAGER", "cat"), ("NO_COLOR", "1")];
    assert!(!on_terminal(&r, &["list"], &refused).contains('\x1b'));
    assert!(!on_terminal(&r, &["--color", "never", "log"], &no_pager).contains('\x1b'));
    for cmd in ["list", "log", "status"] {
        assert!(!r.ok(&[cmd]).contains('\x1b'), "{cmd} into a pipe");
        assert!(r.ok(&["--color", "always", cmd]).contains("\x1b["), "{cmd}");
    }
    assert!(r
        .ok(&["--color", "always", "show", "spec"])
        .contains("\x1b[36mspec"));
}

#[test]
fn times_are_local_and_relative_at_a_terminal_and_utc_in_a_pipe_or_with_utc() {
    let r = repo();
    let env = [("COORD_PAGER", "cat"), ("TZ", "Europe/Paris")];
    let log = on_terminal(&r, &["log"], &env);
    assert!(log.contains("2026-11-22 11:00 CET (1 h ago)"), "{log}");
    assert!(!log.contains(T0), "{log}");
    let show = on_terminal(&r, &["show", "spec"], &env);
    assert!(show.contains("(1 h ago)"), "{show}");
    let utc = on_terminal(&r, &["--utc", "log"], &env);
    assert!(utc.contains(T0) && !utc.contains("ago"), "{utc}");
    let piped = r.ok(&["log"]);
    assert!(piped.contains(T0) && !piped.contains("ago"), "{piped}");
}

#[test]
fn the_pager_gets_long_output_at_a_terminal_only() {
    let r = repo();
    let record = r.home().join("paged.txt");
    let pager = format!("cat > '{}'", record.display());
    let env = [("COORD_PAGER", pager.as_str()), ("PAGER", "false")];
    for cmd in [&["log"][..], &["list"], &["show", "spec"]] {
        let shown = on_terminal(&r, cmd, &env);
        let paged = std::fs::read_to_string(&record).expect("the pager ran");
        assert!(paged.contains("spec"), "{cmd:?}: {paged}");
        assert!(
            !shown.contains("spec"),
            "{cmd:?} went to the pager: {shown}"
        );
        std::fs::remove_file(&record).expect("remove");
    }
    on_terminal(&r, &["--no-pager", "log"], &env);
    on_terminal(&r, &["status"], &env);
    assert!(!record.exists(), "--no-pager and status print straight");
    r.cmd(&["log"])
        .env("COORD_PAGER", &pager)
        .assert()
        .success();
    assert!(!record.exists(), "no pager into a pipe");
    let env = [("PAGER", pager.as_str())];
    on_terminal(&r, &["log"], &env);
    assert!(
        record.exists(),
        "PAGER is the pager when COORD_PAGER is unset"
    );
}

#[test]
fn coloured_and_paged_output_is_as_its_snapshot_shows() {
    let r = repo();
    let record = r.home().join("paged.txt");
    let pager = format!("cat > '{}'", record.display());
    on_terminal(
        &r,
        &["--color", "always", "--utc", "log"],
        &[("COORD_PAGER", &pager)],
    );
    let paged = std::fs::read_to_string(&record).expect("the pager ran");
    let list = r.ok(&["--color", "always", "list"]);
    insta::with_settings!({
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!("look_log_paged", paged);
        insta::assert_snapshot!("look_list_colour", list);
    });
}
