//! Help and manual pages: every command's help lists its own options apart from the global
//! ones, a clock given in `COORD_NOW` never shows up as a required flag, and `coord man`
//! prints one page per command with exit status, environment, files and examples, naming
//! only pages that `coord man --output-dir` writes.

use crate::harness::TestRepo;
use std::collections::BTreeSet;

/// Returns the lines of `help` under the heading `heading` (up to the next blank line).
fn section<'a>(help: &'a str, heading: &str) -> Vec<&'a str> {
    help.lines()
        .skip_while(|l| *l != heading)
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

#[test]
fn every_command_help_lists_global_options_under_their_own_heading() {
    let r = TestRepo::empty();
    for cmd in ["list", "new", "tick", "agents"] {
        let help = r.ok(&[cmd, "-h"]);
        let global = section(&help, "Global options:").join("\n");
        let own = section(&help, "Options:").join("\n");
        for flag in [
            "--json",
            "--quiet",
            "--verbose",
            "--now",
            "--wait",
            "-C <DIR>",
        ] {
            assert!(global.contains(flag), "{cmd}: {flag} not global:\n{help}");
            assert!(!own.contains(flag), "{cmd}: {flag} among own:\n{help}");
        }
    }
    let list = r.ok(&["list", "-h"]);
    assert!(section(&list, "Options:").join("\n").contains("--state"));
    assert!(!section(&list, "Global options:")
        .join("\n")
        .contains("--state"));
    let top = r.ok(&["-h"]);
    assert!(section(&top, "Global options:")
        .join("\n")
        .contains("--json"));
}

#[test]
fn a_clock_set_in_the_environment_is_not_shown_as_a_required_flag() {
    let r = TestRepo::empty();
    for args in [&["show"][..], &["reject", "x"], &["list", "--no-such-flag"]] {
        let (_, err) = r.code(args, 2);
        let usage: Vec<&str> = err.lines().filter(|l| l.contains("Usage:")).collect();
        assert_eq!(usage.len(), 1, "{err}");
        assert!(!usage[0].contains("--now"), "{args:?}: {err}");
    }
    let help = r.ok(&["list", "-h"]);
    assert!(
        help.contains("COORD_NOW"),
        "the help names the variable: {help}"
    );
    assert!(!help.contains(crate::harness::T0), "{help}");
}

#[test]
fn a_page_per_command_has_exit_status_environment_files_and_examples() {
    let r = TestRepo::empty();
    for cmd in [&["list"][..], &["agents", "add"], &[]] {
        let mut args = vec!["man"];
        args.extend(cmd);
        let page = r.ok(&args);
        let title = std::iter::once("coord")
            .chain(cmd.iter().copied())
            .collect::<Vec<_>>()
            .join("-");
        assert!(page.contains(&format!(".TH {title} 1")), "{page}");
        for heading in [
            "EXIT STATUS",
            "ENVIRONMENT",
            "FILES",
            "EXAMPLES",
            "SEE ALSO",
        ] {
            assert!(
                page.contains(&format!(".SH \"{heading}\"")),
                "{heading}: {page}"
            );
        }
        assert!(
            page.contains("COORD_NOW") && page.contains("NO_COLOR"),
            "{page}"
        );
    }
    let (_, err) = r.code(&["man", "nosuch"], 2);
    assert!(err.contains("nosuch") && err.contains("list"), "{err}");
}

#[test]
fn the_pages_written_are_exactly_the_pages_referenced() {
    let r = TestRepo::empty();
    let dir = r.home().join("man1");
    r.ok(&["man", "--output-dir", dir.to_str().expect("utf8")]);
    let written: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("man1")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    for name in [
        "coord.1",
        "coord-list.1",
        "coord-agents.1",
        "coord-agents-add.1",
    ] {
        assert!(written.contains(name), "{name} missing: {written:?}");
    }
    assert!(!written.iter().any(|n| n.contains("help")), "{written:?}");
    for name in &written {
        let page = std::fs::read_to_string(dir.join(name)).expect("read page");
        for reference in references(&page) {
            assert!(
                written.contains(&format!("{reference}.1")),
                "{name} names {reference}(1), which is not written"
            );
        }
    }
}

/// Returns the `coord…(1)` page names a roff page references (`coord\-list(1)`).
fn references(page: &str) -> Vec<String> {
    let text = page
        .replace("\\-", "-")
        .replace("\\fB", "")
        .replace("\\fR", "");
    let mut names = Vec::new();
    for (at, _) in text.match_indices("(1)") {
        let start = text[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .map_or(0, |i| i + 1);
        let name = &text[start..at];
        if name.starts_with("coord") {
            names.push(name.to_string());
        }
    }
    names
}
