//! `coord prime`: the instructions block for an agent, `--install` into AGENTS.md, `.mcp.json`
//! and `.codex/config.toml`, and `--uninstall`.

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
    assert!(err.contains("unchanged: AGENTS.md"), "{err}");
    let after = r.read("AGENTS.md");
    assert_eq!(after.matches("coord:prime:begin").count(), 1, "{after}");
    assert_eq!(after.matches("coord:prime:end").count(), 1, "{after}");
    assert!(
        after.starts_with(mine) && after.ends_with("\n## After\nalso mine\n"),
        "{after}"
    );
}

/// The files `--install` writes, relative to the repo root.
const FILES: [&str; 3] = ["AGENTS.md", ".mcp.json", ".codex/config.toml"];

fn snapshot(r: &TestRepo) -> Vec<Option<String>> {
    FILES
        .iter()
        .map(|f| r.exists(f).then(|| r.read(f)))
        .collect()
}

#[test]
fn prime_install_sets_up_every_agents_files_once_and_for_any_agent() {
    let r = TestRepo::with_agents(&["writer"]);
    r.write("AGENTS.md", "# Agents\n\nPeople wrote this.\n");
    r.write(
        ".mcp.json",
        "{\n  \"mcpServers\": {\n    \"db\": {\"command\": \"db-mcp\", \"args\": [\"--ro\"]}\n  }\n}\n",
    );
    r.write(
        ".codex/config.toml",
        "model = \"o3\"\n\n[mcp_servers.db]\ncommand = \"db-mcp\"\n",
    );
    let (_, err) = r.code(&["prime", "--install"], 0);
    for f in FILES {
        assert!(err.contains(&format!("wrote {f}")), "{err}");
    }
    let once = snapshot(&r);
    let (_, err) = r.code(&["prime", "--install", "--agent", "writer"], 0);
    assert_eq!(snapshot(&r), once, "a second install changes no byte");
    assert_eq!(err.matches("unchanged:").count(), 3, "{err}");

    let agents = r.read("AGENTS.md");
    assert!(
        agents.starts_with("# Agents\n\nPeople wrote this.\n"),
        "{agents}"
    );
    assert!(
        agents.contains("--agent <you>") && !agents.contains("writer"),
        "{agents}"
    );
    for name in ["Claude", "Codex", "claude", "codex"] {
        assert!(!agents.contains(name), "no one agent's name: {name}");
    }
    let mcp: serde_json::Value = serde_json::from_str(&r.read(".mcp.json")).expect("json");
    assert_eq!(mcp["mcpServers"]["db"]["args"][0], "--ro", "{mcp}");
    assert_eq!(mcp["mcpServers"]["coord"]["command"], "coord", "{mcp}");
    assert_eq!(mcp["mcpServers"]["coord"]["args"][0], "mcp", "{mcp}");
    let codex = r.read(".codex/config.toml");
    assert_eq!(
        codex,
        "model = \"o3\"\n\n[mcp_servers.db]\ncommand = \"db-mcp\"\n\n\
         [mcp_servers.coord]\ncommand = \"coord\"\nargs = [\"mcp\"]\n"
    );
    let status = r.git_status();
    let mut lines: Vec<&str> = status.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        ["?? .codex/config.toml", "?? .mcp.json", "?? AGENTS.md"],
        "no temporary file left"
    );
}

#[test]
fn prime_install_refuses_a_conflicting_coord_entry_and_writes_nothing() {
    let r = TestRepo::new();
    let theirs = "{\"mcpServers\": {\"coord\": {\"command\": \"/opt/other\"}}}\n";
    r.write(".mcp.json", theirs);
    let (_, err) = r.code(&["prime", "--install"], 1);
    assert!(
        err.contains(".mcp.json") && err.contains("'coord' is not coord's own"),
        "{err}"
    );
    assert_eq!(r.read(".mcp.json"), theirs);
    assert!(!r.exists("AGENTS.md") && !r.exists(".codex/config.toml"));

    r.write(".mcp.json", "{}");
    r.write(
        ".codex/config.toml",
        "[mcp_servers.coord]\ncommand = \"/opt/other\"\n",
    );
    let (_, err) = r.code(&["prime", "--install"], 1);
    assert!(
        err.contains("config.toml") && err.contains("'coord'"),
        "{err}"
    );
    assert_eq!(r.read(".mcp.json"), "{}");
}

#[test]
fn prime_uninstall_puts_back_what_was_there() {
    let r = TestRepo::new();
    let agents = "# Agents\nno newline at the end";
    let mcp = "{ \"mcpServers\": { \"db\": { \"command\": \"db-mcp\" } } }";
    r.write("AGENTS.md", agents);
    r.write(".mcp.json", mcp);
    let before = snapshot(&r);
    r.ok(&["prime", "--install"]);
    assert_ne!(snapshot(&r), before);
    r.ok(&["prime", "--uninstall"]);
    assert_eq!(
        snapshot(&r),
        before,
        "byte for byte, and no .codex/config.toml"
    );
    assert!(!r.exists(".codex"), "the folder made for it is gone too");

    // Edited since the install: only coord's section and entries are taken out.
    r.ok(&["prime", "--install"]);
    let edited = format!("{}\n## Later\nmine\n", r.read("AGENTS.md"));
    r.write("AGENTS.md", &edited);
    r.ok(&["prime", "--uninstall"]);
    let left = r.read("AGENTS.md");
    assert!(!left.contains("coord:prime"), "{left}");
    assert!(
        left.starts_with("# Agents\nno newline at the end") && left.ends_with("## Later\nmine\n"),
        "{left}"
    );
    assert_eq!(r.read(".mcp.json"), mcp);
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

#[test]
fn prime_install_keeps_a_files_mode_and_its_backup_is_the_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let r = TestRepo::with_agents(&["writer"]);
    let secret = r#"{"mcpServers":{"db":{"command":"x","env":{"API_KEY":"sk"}}}}"#;
    r.write(".mcp.json", secret);
    let mode =
        |p: &std::path::Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    std::fs::set_permissions(r.abs(".mcp.json"), std::fs::Permissions::from_mode(0o600))
        .expect("chmod");
    r.ok(&["prime", "--install"]);
    assert_eq!(mode(&r.abs(".mcp.json")), 0o600, "the file keeps its mode");
    let kept = r.abs(".git/coord/prime");
    let backups: Vec<_> = walk(&kept);
    assert!(!backups.is_empty(), "a backup is kept");
    for b in &backups {
        assert_eq!(mode(b), 0o600, "{}", b.display());
    }
    r.ok(&["prime", "--uninstall"]);
    assert_eq!(mode(&r.abs(".mcp.json")), 0o600, "and after uninstall");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn prime_install_refuses_codex_servers_written_as_one_inline_table_and_writes_nothing() {
    let r = TestRepo::with_agents(&["writer"]);
    let codex = "mcp_servers = { other = { command = \"x\" } }\n";
    r.write(".codex/config.toml", codex);
    let (_, err) = r.code(&["prime", "--install"], 1);
    assert!(
        err.contains(".codex/config.toml") && err.contains("inline table"),
        "{err}"
    );
    assert_eq!(r.read(".codex/config.toml"), codex);
    assert!(
        !r.exists("AGENTS.md") && !r.exists(".mcp.json"),
        "nothing written"
    );
}

#[test]
fn prime_install_and_uninstall_write_through_a_symlinked_agents_md() {
    let r = TestRepo::with_agents(&["writer"]);
    let mine = "# Agents\n\nShared with another tool.\n";
    r.write("docs/AGENTS.md", mine);
    std::os::unix::fs::symlink("docs/AGENTS.md", r.abs("AGENTS.md")).expect("link");
    let is_link = |r: &TestRepo| {
        std::fs::symlink_metadata(r.abs("AGENTS.md"))
            .expect("stat")
            .file_type()
            .is_symlink()
    };
    r.ok(&["prime", "--install"]);
    assert!(is_link(&r), "the link is kept");
    let written = r.read("docs/AGENTS.md");
    assert!(
        written.starts_with(mine) && written.contains("coord:prime:begin"),
        "{written}"
    );
    r.ok(&["prime", "--uninstall"]);
    assert!(is_link(&r), "the link is kept");
    assert_eq!(r.read("docs/AGENTS.md"), mine);

    // A link to nothing is refused, and left as it is.
    std::fs::remove_file(r.abs("docs/AGENTS.md")).expect("rm");
    let (_, err) = r.code(&["prime", "--install"], 1);
    assert!(
        err.contains("AGENTS.md") && err.contains("link") && err.lines().count() <= 2,
        "{err}"
    );
    assert!(is_link(&r) && !r.exists("docs/AGENTS.md"));
}

#[test]
fn prime_uninstall_without_an_install_keeps_a_persons_own_section() {
    let r = TestRepo::with_agents(&["writer"]);
    let theirs = "# Agents\n\n<!-- coord:prime:begin -->\nOur own notes on coord.\n<!-- coord:prime:end -->\n";
    r.write("AGENTS.md", theirs);
    r.ok(&["prime", "--uninstall"]);
    assert_eq!(
        r.read("AGENTS.md"),
        theirs,
        "a person's text is never removed"
    );

    // The section exactly as prime writes it is coord's own, installed or not.
    r.ok(&["prime", "--install"]);
    let installed = r.read("AGENTS.md");
    std::fs::remove_dir_all(r.abs(".git/coord/prime")).expect("forget the install");
    r.write(
        "AGENTS.md",
        &installed.replace("Our own notes on coord.\n", ""),
    );
    let ours = r.read("AGENTS.md");
    assert!(ours.contains("coord claim"), "{ours}");
    r.ok(&["prime", "--uninstall"]);
    assert_eq!(r.read("AGENTS.md"), "# Agents\n");
}

#[test]
fn prime_install_refuses_an_invalid_codex_config_naming_its_line() {
    let r = TestRepo::with_agents(&["writer"]);
    let codex = "model = \"o3\"\n\n[profiles.fast\nmodel = \"o4-mini\"\n";
    r.write(".codex/config.toml", codex);
    let (_, err) = r.code(&["prime", "--install"], 1);
    assert!(
        err.contains(".codex/config.toml:3") && err.contains("TOML"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(r.read(".codex/config.toml"), codex);
    assert!(
        !r.exists("AGENTS.md") && !r.exists(".mcp.json"),
        "nothing written"
    );
}
