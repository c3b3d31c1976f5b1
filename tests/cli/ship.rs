//! What ships with coord: `--version` with the commit, completions, the man page, and the
//! GitHub Actions workflow `coord init` writes, run step by step as a runner would.

use crate::harness::{git_in, Net, TestRepo};
use std::path::Path;

#[test]
fn version_names_the_package_version_and_the_commit_it_was_built_from() {
    let out = TestRepo::empty().ok(&["--version"]);
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    if !here.join(".git").exists() {
        // Built from a package without git metadata: the version stands alone.
        assert!(out.starts_with(&format!("coord {}", env!("CARGO_PKG_VERSION"))));
        return;
    }
    let want = format!("coord {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(out.starts_with(&want), "{out}");
    let commit = out[want.len()..].trim_end().trim_end_matches(')');
    assert_eq!(commit.len(), 12, "{out}");
    // The build script read the commit from this checkout: git knows it.
    crate::harness::git_in(here, &["cat-file", "-e", &format!("{commit}^{{commit}}")]);
}

#[test]
fn completions_for_each_shell_name_the_subcommands() {
    let r = TestRepo::empty();
    for (shell, marker) in [
        ("bash", "complete -F _coord"),
        ("zsh", "#compdef coord"),
        ("fish", "complete -c coord"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let out = r.ok(&["completions", shell]);
        assert!(out.contains(marker), "{shell}: {out}");
        for sub in ["sync", "archive", "completions"] {
            assert!(out.contains(sub), "{shell} completions lack {sub}");
        }
    }
    let (_, err) = r.code(&["completions", "tcsh"], 2);
    assert!(err.contains("possible values"), "{err}");
}

#[test]
fn man_page_is_roff_with_every_subcommand() {
    let out = TestRepo::empty().ok(&["man"]);
    assert!(out.contains(".TH coord 1"), "{out}");
    for sub in ["init", "sync", "archive", "status", "completions"] {
        assert!(out.contains(&format!("coord\\-{sub}(1)")), "{sub}: {out}");
    }
}

/// A bare remote on disk and a person's clone of it that holds `coord init` and two agents.
struct Remote {
    bare: TestRepo,
    person: TestRepo,
}

impl Remote {
    fn new() -> Remote {
        let net = Net::new(&["alice", "bob"]);
        Remote {
            bare: net.remote,
            person: net.seed,
        }
    }

    /// The URL a shallow clone needs: `--depth` is ignored for plain local paths.
    fn url(&self) -> String {
        format!("file://{}", path_str(self.bare.path()))
    }

    /// The person pulls, commits task files by hand and pushes.
    fn person_pushes_tasks(&self, ids: &[&str]) {
        self.person
            .git(&["pull", "-q", "--ff-only", "origin", "main"]);
        for id in ids {
            self.person.task(id, &format!("title: Task {id}\n"));
        }
        self.person.git(&["add", "work"]);
        self.person.git(&["commit", "-q", "-m", "add tasks"]);
        self.person.git(&["push", "-q", "origin", "main"]);
    }

    /// A clone of depth 1, as actions/checkout makes by default.
    fn shallow_clone(&self) -> TestRepo {
        let r = TestRepo::empty_in_memory();
        git_in(r.path(), &["clone", "-q", "--depth", "1", &self.url(), "."]);
        assert_eq!(
            r.git(&["rev-parse", "--is-shallow-repository"]).trim(),
            "true"
        );
        r
    }

    /// A full clone of the remote as it is now.
    fn look(&self) -> TestRepo {
        let r = TestRepo::empty_in_memory();
        git_in(r.path(), &["clone", "-q", &path_str(self.bare.path()), "."]);
        r
    }
}

fn path_str(p: &Path) -> String {
    p.to_str().expect("utf-8 temp path").to_string()
}

#[test]
fn sync_from_a_depth_1_clone_fetches_integrates_and_pushes() {
    let remote = Remote::new();
    remote.person_pushes_tasks(&["a1", "a2"]);
    let runner = remote.shallow_clone();
    // A tick commit the remote does not have yet, while the person pushes more work: the
    // histories diverge below nothing the shallow clone holds but its one commit.
    runner.task("r1", "title: Task r1\n");
    runner.ok(&["tick"]);
    remote.person_pushes_tasks(&["b1"]);
    let err = String::from_utf8_lossy(&runner.run(&["sync"]).stderr).into_owned();
    assert!(err.contains("pushed to origin"), "{err}");
    assert!(
        err.contains("dropped"),
        "the diverged histories were rebuilt: {err}"
    );
    let view = remote.look();
    for id in ["a1", "a2", "b1", "r1"] {
        assert!(view.where_is(id).starts_with("work/assigned/"), "{id}");
    }
    assert_eq!(view.git(&["log", "-1", "--format=%an"]).trim(), "coord");
    // A second sync from the same shallow clone has nothing to do.
    let err = String::from_utf8_lossy(&runner.run(&["sync"]).stderr).into_owned();
    assert!(err.contains("up to date"), "{err}");
}

/// The workflow `coord init` writes (it embeds this file).
fn template_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/coord-workflow.yml")
}

/// A `run:` step of the shipped workflow.
struct Step {
    name: String,
    script: String,
}

/// Reads the shipped workflow: the job's env and its `run:` steps, leaving out the install
/// step (the locally built binary stands in for what it installs).
fn workflow_steps() -> (Vec<(String, String)>, Vec<Step>) {
    let text = std::fs::read_to_string(template_path()).expect("read the template");
    let doc =
        coord::yaml::parse(&text, &coord::yaml::Limits::default()).expect("the template parses");
    let job = &doc.value["jobs"]["sync"];
    let env = job["env"]
        .as_object()
        .expect("job env")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().map_or(v.to_string(), str::to_string)))
        .collect();
    let steps = job["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter(|s| s["id"] != "install")
        .filter_map(|s| {
            Some(Step {
                name: s["name"].as_str()?.to_string(),
                script: s["run"].as_str()?.to_string(),
            })
        })
        .collect();
    (env, steps)
}

/// A GitHub-hosted runner, as far as the workflow's steps can tell: a fresh shallow clone as
/// the workspace, a home whose `~/.coord/bin/coord` is what the install step would leave there
/// (the binary under test), the runner's files for PATH additions and the job summary, and no
/// git identity or clock given from outside.
struct Runner {
    home: TestRepo,
    workspace: TestRepo,
}

impl Runner {
    fn new(remote: &Remote) -> Runner {
        let home = TestRepo::empty_in_memory();
        let bin = home.abs(".coord/bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        std::os::unix::fs::symlink(assert_cmd::cargo::cargo_bin("coord"), bin.join("coord"))
            .expect("symlink coord");
        Runner {
            home,
            workspace: remote.shallow_clone(),
        }
    }

    /// Runs every step in order as the runner does (`bash --noprofile --norc -eo pipefail`),
    /// each seeing the PATH entries earlier steps added; returns the job summary.
    fn run_job(&self) -> String {
        let (env, steps) = workflow_steps();
        let summary = self.home.abs("step-summary.md");
        let github_path = self.home.abs("github-path");
        std::fs::write(&github_path, "").expect("write GITHUB_PATH");
        for step in &steps {
            let added = std::fs::read_to_string(&github_path).expect("read GITHUB_PATH");
            let mut path: Vec<&str> = added.lines().rev().collect();
            let system = std::env::var("PATH").unwrap_or_default();
            path.push(&system);
            let out = std::process::Command::new("bash")
                .args([
                    "--noprofile",
                    "--norc",
                    "-eo",
                    "pipefail",
                    "-c",
                    &step.script,
                ])
                .current_dir(self.workspace.path())
                .env_clear()
                .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .env("PATH", path.join(":"))
                .env("HOME", self.home.path())
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GITHUB_PATH", &github_path)
                .env("GITHUB_STEP_SUMMARY", &summary)
                .env("GITHUB_WORKSPACE", self.workspace.path())
                .output()
                .expect("run bash");
            assert!(
                out.status.success(),
                "step {:?} failed:\n{}{}",
                step.name,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::fs::read_to_string(&summary).unwrap_or_default()
    }
}

#[test]
fn the_shipped_workflow_steps_assign_pushed_tasks_and_archive_from_a_shallow_clone() {
    let (env, steps) = workflow_steps();
    let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
    assert!(names.iter().any(|n| n.starts_with("Sync")), "{names:?}");
    assert!(env
        .iter()
        .any(|(k, v)| k == "COORD_VERSION" && v == env!("CARGO_PKG_VERSION")));
    let written = TestRepo::new().read(".github/workflows/coord.yml");
    assert_eq!(
        written,
        std::fs::read_to_string(template_path()).expect("read")
    );
    let remote = Remote::new();
    // A task finished long ago (a person ran coord at an earlier date) is due for the archive.
    let mut old = TestRepo::empty_in_memory();
    git_in(
        old.path(),
        &["clone", "-q", &path_str(remote.bare.path()), "."],
    );
    old.at("2026-01-05T10:00:00Z");
    old.task("old", "title: Done long ago\nagent: alice\n");
    old.ok(&["tick"]);
    old.ok(&["complete", "old"]);
    old.ok(&["tick"]);
    old.git(&["push", "-q", "origin", "main"]);
    remote.person_pushes_tasks(&["p1", "p2", "p3"]);

    let summary = Runner::new(&remote).run_job();

    let view = remote.look();
    for id in ["p1", "p2", "p3"] {
        assert!(view.where_is(id).starts_with("work/assigned/"), "{id}");
    }
    assert_eq!(view.where_is("old"), "work/archive/2026-01/old.yaml");
    assert!(summary.contains("## coord board"), "{summary}");
    assert!(summary.contains("| assigned | 3 |"), "{summary}");
    let authors = view.git(&["log", "-3", "--format=%an"]);
    assert!(authors.lines().all(|a| a == "coord"), "{authors}");
}

#[test]
fn two_workflow_runs_at_once_assign_every_task_exactly_once() {
    let remote = Remote::new();
    let ids: Vec<String> = (0..12).map(|i| format!("t{i}")).collect();
    remote.person_pushes_tasks(&ids.iter().map(String::as_str).collect::<Vec<_>>());
    let runners = [Runner::new(&remote), Runner::new(&remote)];
    std::thread::scope(|s| {
        for r in &runners {
            s.spawn(|| r.run_job());
        }
    });
    let view = remote.look();
    for id in &ids {
        // where_is asserts exactly one file; the log shows exactly one assignment.
        assert!(view.where_is(id).starts_with("work/assigned/"), "{id}");
        let assigned = view.git(&["log", "--format=%s", "--grep", &format!("assign {id} to")]);
        assert_eq!(assigned.lines().count(), 1, "{id}: {assigned}");
    }
    assert!(view.git_status().is_empty());
}

#[test]
fn init_adopts_an_existing_work_folder_and_says_what_it_found() {
    let r = TestRepo::empty();
    r.git(&["init", "-q", "-b", "main"]);
    r.write("work/inbox/a.yaml", "title: A\n");
    r.write("work/ready/b.yaml", "title: B\n");
    r.write("work/agents/alice.yaml", "capabilities: []\n");
    r.git(&["add", "work"]);
    r.git(&["commit", "-q", "-m", "a backlog kept by hand"]);
    let (_, err) = r.code(&["init"], 0);
    assert!(
        err.contains("found work/ with 2 task files (inbox 1, ready 1) and 1 agents; adopting it"),
        "{err}"
    );
    assert!(
        err.contains("adopted work/; added work/inbox/.gitkeep"),
        "{err}"
    );
    assert!(!err.contains("work/agents/alice.yaml"), "{err}");
    assert_eq!(
        r.read("work/inbox/a.yaml"),
        "title: A\n",
        "task files are left as they are"
    );
    assert_eq!(r.git_status(), "");
}

#[test]
fn init_writes_a_work_gitignore_that_keeps_scratch_files_out() {
    let r = TestRepo::new();
    assert!(r.exists("work/.gitignore"));
    for scratch in [
        "work/inbox/.a.yaml.swp",
        "work/inbox/a.yaml~",
        "work/notes.txt",
        "work/assigned/alice/scratch.json",
    ] {
        r.write(scratch, "x");
    }
    for kept in [
        "work/inbox/a.yaml",
        "work/inbox/b.yml",
        "work/invalid/c.yaml.errors",
        "work/README.md",
    ] {
        r.write(kept, "title: kept\n");
    }
    let untracked = r.git_status();
    let mut seen: Vec<&str> = untracked
        .lines()
        .map(|l| l.trim_start_matches("?? "))
        .collect();
    seen.sort_unstable();
    assert_eq!(
        seen,
        [
            "work/README.md",
            "work/inbox/a.yaml",
            "work/inbox/b.yml",
            "work/invalid/c.yaml.errors"
        ]
    );
}

#[test]
fn init_without_the_workflow_writes_the_rest_and_says_what_to_do_next() {
    let r = TestRepo::empty();
    let (_, err) = r.code(&["init", "--no-workflow", "--agents", "bob"], 0);
    assert!(!r.exists(".github/workflows/coord.yml"));
    assert!(r.exists("coord.yaml") && r.exists("work/agents/bob.yaml"));
    assert_eq!(r.commit_count(), 1);
    assert!(err.contains("next steps:"), "{err}");
    assert!(
        err.contains("coord new \"First task\" --agent bob"),
        "{err}"
    );
    assert!(!err.contains("agents add"), "bob is there already: {err}");
    assert!(!err.contains("git push"), "no workflow to push: {err}");
    // A plain init names the workflow it wrote; one with nothing to do says no more.
    let r = TestRepo::empty();
    let (_, err) = r.code(&["init"], 0);
    assert!(err.contains("coord agents add alice"), "{err}");
    assert!(err.contains("git push"), "{err}");
    let (_, err) = r.code(&["init"], 0);
    assert!(!err.contains("next steps"), "{err}");
}

#[test]
fn init_refuses_a_work_folder_whose_files_its_gitignore_would_hide() {
    let r = TestRepo::empty();
    r.git(&["init", "-q", "-b", "main"]);
    r.write("work/notes.txt", "mine\n");
    r.write("work/src/main.rs", "fn main() {}\n");
    r.write("work/plan.yaml", "a: 1\n");
    r.git(&["add", "work"]);
    r.git(&["commit", "-q", "-m", "a folder that is not coord's"]);
    let (_, err) = r.code(&["init"], 1);
    assert!(
        err.contains("work/ holds files that are not coord's (work/notes.txt, work/src/main.rs)"),
        "{err}"
    );
    assert!(err.contains("`work_dir: tasks` in coord.yaml"), "{err}");
    assert!(!r.exists("work/.gitignore"));
    assert_eq!(r.commit_count(), 1, "nothing committed");
    assert_eq!(r.git_status(), "");
    // The fix the message names: coord takes another folder and leaves work/ alone.
    r.commit_file("coord.yaml", "work_dir: tasks\n", "coord takes tasks/");
    r.ok(&["init"]);
    assert!(r.exists("tasks/inbox/.gitkeep") && r.exists("tasks/.gitignore"));
    r.write("work/more.txt", "still seen by git\n");
    assert_eq!(r.git_status().trim(), "?? work/more.txt");
}

/// A remote where task x was assigned to alice (attempt 1, seen by the returned zombie clone)
/// and a person then reverted the assignment; and a depth-1 clone made after the revert.
fn assigned_reverted_then_cloned_shallow() -> (Remote, TestRepo, TestRepo) {
    let remote = Remote::new();
    remote.person.task("x", "title: Task x\nagent: alice\n");
    remote.person.git(&["add", "work"]);
    remote.person.git(&["commit", "-q", "-m", "add x"]);
    remote.person.git(&["push", "-q", "origin", "main"]);
    let zombie = remote.look();
    zombie.ok(&["sync"]);
    assert_eq!(zombie.where_is("x"), "work/assigned/alice/x.yaml");
    // A person reverts the assignment; the agent that got attempt 1 works on.
    remote
        .person
        .git(&["pull", "-q", "--ff-only", "origin", "main"]);
    let assign = remote.person.git(&["log", "-1", "--format=%H"]);
    remote.person.git(&["revert", "--no-edit", assign.trim()]);
    remote.person.git(&["push", "-q", "origin", "main"]);
    let runner = remote.shallow_clone();
    (remote, zombie, runner)
}

#[test]
fn a_depth_1_clone_never_grants_an_attempt_a_reverted_assignment_granted_before() {
    let (remote, zombie, runner) = assigned_reverted_then_cloned_shallow();
    assert_eq!(runner.where_is("x"), "work/ready/x.yaml");
    runner.ok(&["sync"]);
    let view = remote.look();
    let text = view.read("work/assigned/alice/x.yaml");
    assert!(
        text.contains("attempt: 2\n"),
        "attempt 1 was granted before:\n{text}"
    );
    // The zombie's late result for attempt 1 is set aside, not taken as attempt 2's.
    zombie.write("out.yaml", "answer: 1\n");
    zombie.ok(&[
        "complete",
        "x",
        "--agent",
        "alice",
        "--attempt",
        "1",
        "--output",
        "out.yaml",
    ]);
    let (_, err) = zombie.code(&["sync"], 0);
    let view = remote.look();
    assert_eq!(view.where_is("x"), "work/assigned/alice/x.yaml", "{err}");
    assert!(
        view.read("work/assigned/alice/x.yaml")
            .contains("event: stale_result"),
        "{err}"
    );
}

/// A plain `coord tick` in a depth-1 clone fetches the history it lacks from the remote its
/// branch tracks before it numbers an attempt: a reverted assignment's attempt is never
/// granted again, and the late result of the agent that had it is set aside.
#[test]
fn a_plain_tick_in_a_depth_1_clone_never_grants_a_reverted_attempt_again() {
    let (_remote, _zombie, runner) = assigned_reverted_then_cloned_shallow();
    assert_eq!(runner.where_is("x"), "work/ready/x.yaml");
    runner.ok(&["tick"]);
    let text = runner.read("work/assigned/alice/x.yaml");
    assert!(
        text.contains("attempt: 2\n"),
        "attempt 1 was granted before:\n{text}"
    );
    let (_, err) = runner.code(&["complete", "x", "--agent", "alice", "--attempt", "1"], 1);
    assert!(err.contains("attempt"), "{err}");
    runner.ok(&["tick"]);
    assert_eq!(runner.where_is("x"), "work/assigned/alice/x.yaml");
    assert!(runner
        .read("work/assigned/alice/x.yaml")
        .contains("event: stale_result"));
}
