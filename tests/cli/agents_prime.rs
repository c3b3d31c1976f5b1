//! `coord prime`: the instructions block for an agent, and `--install` into AGENTS.md.

use crate::harness::TestRepo;

#[test]
fn prime_names_the_agent_its_folder_and_the_commands() {
    let r = TestRepo::with_agents(&["writer"]);
    let out = r.ok(&["prime", "--agent", "writer"]);
    for needle in [
        "work/assigned/writer/",
        "coord claim --agent writer",
        "coord complete <id> --agent writer --attempt <n>",
        "coord fail <id> --agent writer --attempt <n>",
        "coord heartbeat <id> --agent writer --attempt <n>",
        "`coord:` block",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
    assert!(
        out.split_whitespace().count() < 700,
        "short enough for a session hook"
    );
}

#[test]
fn prime_install_twice_leaves_one_section_and_keeps_peoples_text() {
    let r = TestRepo::with_agents(&["writer"]);
    let mine = "# Agents\n\nPeople wrote this.\n";
    r.write("AGENTS.md", mine);
    r.ok(&["prime", "--install", "--agent", "writer"]);
    let once = r.read("AGENTS.md");
    assert!(once.starts_with(mine), "{once}");
    r.write("AGENTS.md", &format!("{once}\n## After\nalso mine\n"));
    let (_, err) = r.code(&["prime", "--install", "--agent", "writer"], 0);
    assert!(err.contains("unchanged"), "{err}");
    let before = r.read("AGENTS.md");
    r.ok(&["prime", "--install", "--agent", "editor"]);
    let after = r.read("AGENTS.md");
    assert_eq!(after.matches("coord:prime:begin").count(), 1, "{after}");
    assert_eq!(after.matches("coord:prime:end").count(), 1, "{after}");
    assert!(after.contains("coord claim --agent editor") && !after.contains("--agent writer"));
    assert!(
        after.starts_with(mine) && after.ends_with("\n## After\nalso mine\n"),
        "{after}"
    );
    assert_ne!(before, after);
}

#[test]
fn prime_install_creates_agents_md_and_refuses_a_broken_section() {
    let r = TestRepo::new();
    r.ok(&["prime", "--install"]);
    assert!(r.read("AGENTS.md").starts_with("<!-- coord:prime:begin"));
    r.write("AGENTS.md", "<!-- coord:prime:begin -->\nno end\n");
    let (_, err) = r.code(&["prime", "--install"], 1);
    assert!(
        err.contains("AGENTS.md") && err.contains("end marker"),
        "{err}"
    );
    assert_eq!(r.read("AGENTS.md"), "<!-- coord:prime:begin -->\nno end\n");
}
