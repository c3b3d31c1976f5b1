//! Installing a release: the archive packed by release.yml's own step, served from a local
//! folder standing in for the GitHub release download, installed by the install step of the
//! workflow `coord init` writes, and `cargo binstall`'s metadata pointing at the same names.

use crate::harness::TestRepo;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `run:` script of the step with this `id` in a workflow file of this repository.
fn step_script(file: &str, job: &str, id: &str) -> String {
    let text = std::fs::read_to_string(manifest_dir().join(file)).expect("read the workflow");
    let doc = coord::yaml::parse(&text, &coord::yaml::Limits::default()).expect("it parses");
    let steps = doc.value["jobs"][job]["steps"].as_array().expect("steps");
    let step = steps
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("{file}: no step {id} in job {job}"));
    step["run"].as_str().expect("a run: step").to_string()
}

/// The env of a job of a workflow file of this repository.
fn job_env(file: &str, job: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(manifest_dir().join(file)).expect("read the workflow");
    let doc = coord::yaml::parse(&text, &coord::yaml::Limits::default()).expect("it parses");
    doc.value["jobs"][job]["env"]
        .as_object()
        .expect("job env")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().map_or(v.to_string(), str::to_string)))
        .collect()
}

/// This machine as a GitHub runner names it (`RUNNER_OS`, `RUNNER_ARCH`) and as release.yml's
/// matrix names its target.
fn this_runner() -> (&'static str, &'static str, &'static str) {
    match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => ("Linux", "X64", "x86_64-unknown-linux-gnu"),
        ("linux", "aarch64") => ("Linux", "ARM64", "aarch64-unknown-linux-gnu"),
        ("macos", "aarch64") => ("macOS", "ARM64", "aarch64-apple-darwin"),
        ("macos", "x86_64") => ("macOS", "X64", "x86_64-apple-darwin"),
        other => panic!("no release target for {other:?}"),
    }
}

/// Runs a workflow step's script as a runner does (`bash --noprofile --norc -eo pipefail`)
/// with a cleared environment plus `env`.
fn run_step(script: &str, dir: &Path, env: &[(String, String)]) -> Output {
    Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
        .current_dir(dir)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .expect("run bash")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A release download: `<root>/v<version>/<archive>` and its `.sha256`, packed by release.yml's
/// `pack` step from the binary under test, as the release job would publish them.
struct Download {
    dir: TestRepo,
    archive: String,
}

impl Download {
    fn pack() -> Download {
        let dir = TestRepo::empty_in_memory();
        let (_, _, target) = this_runner();
        let build = dir.abs("build");
        let bin = build.join(format!("target/{target}/release"));
        std::fs::create_dir_all(&bin).expect("mkdir");
        std::fs::copy(assert_cmd::cargo::cargo_bin("coord"), bin.join("coord")).expect("copy");
        std::fs::copy(manifest_dir().join("README.md"), build.join("README.md")).expect("copy");
        let env = vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("GITHUB_REF_NAME".into(), format!("v{VERSION}")),
            ("TARGET".into(), target.to_string()),
        ];
        let script = step_script(".github/workflows/release.yml", "build", "pack");
        let out = run_step(&script, &build, &env);
        assert!(out.status.success(), "pack: {}", text(&out));
        let archive = format!("coord-v{VERSION}-{target}.tar.gz");
        let published = dir.abs(&format!("releases/download/v{VERSION}"));
        std::fs::create_dir_all(&published).expect("mkdir");
        for f in [archive.clone(), format!("{archive}.sha256")] {
            std::fs::rename(build.join(&f), published.join(&f)).expect("publish");
        }
        Download { dir, archive }
    }

    /// The URL the workflow's `COORD_DOWNLOAD` names (a `file://` URL here).
    fn url(&self) -> String {
        format!("file://{}", self.dir.abs("releases/download").display())
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir
            .abs(&format!("releases/download/v{VERSION}/{name}"))
    }
}

/// Runs the install step of the workflow `coord init` writes with the job's env, this
/// machine as the runner, `COORD_DOWNLOAD` pointed at `download` and `path` as PATH.
fn install(home: &Path, download: &str, path: &str) -> Output {
    let (os, arch, _) = this_runner();
    let mut env = job_env("templates/coord-workflow.yml", "sync");
    env.retain(|(k, _)| k != "COORD_DOWNLOAD");
    env.extend([
        ("COORD_DOWNLOAD".to_string(), download.to_string()),
        ("RUNNER_OS".into(), os.into()),
        ("RUNNER_ARCH".into(), arch.into()),
        ("HOME".into(), home.display().to_string()),
        ("PATH".into(), path.to_string()),
    ]);
    let script = step_script("templates/coord-workflow.yml", "sync", "install");
    run_step(&script, home, &env)
}

fn system_path() -> String {
    std::env::var("PATH").unwrap_or_default()
}

/// Packing a debug binary takes seconds, so one test packs once and checks everything that
/// reads the archive: the install, a tampered copy refused, and binstall's names for it.
#[test]
fn the_workflow_installs_the_packed_release_archive_after_checking_its_checksum() {
    let download = Download::pack();
    let home = TestRepo::empty();
    let started = std::time::Instant::now();
    let out = install(home.path(), &download.url(), &system_path());
    let took = started.elapsed();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("{}: OK", download.archive)),
        "the checksum was checked: {}",
        text(&out)
    );
    assert!(!text(&out).contains("crates.io"), "{}", text(&out));
    assert!(took.as_secs() < 20, "took {took:?}");
    let version = Command::new(home.abs(".coord/bin/coord"))
        .arg("--version")
        .output()
        .expect("run the installed coord");
    let said = String::from_utf8_lossy(&version.stdout);
    assert!(said.starts_with(&format!("coord {VERSION}")), "{said}");

    binstall_metadata_names(&download);

    let mut bytes = std::fs::read(download.file(&download.archive)).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(download.file(&download.archive), bytes).expect("write");
    let home = TestRepo::empty();
    let out = install(home.path(), &download.url(), &system_path());
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("FAILED"), "{}", text(&out));
    assert!(
        !home.exists(".coord/bin/coord"),
        "a tampered archive is not unpacked"
    );
}

/// Writes an executable stand-in for `name` into `dir`: it appends its arguments to
/// `dir/calls` and, as `cargo install --root R` does, leaves a `coord` in `R/bin`.
fn stand_in(dir: &Path, name: &str) {
    let script = format!(
        "#!/bin/sh\n# A stand-in for {name}: records the call; `install --root R` leaves R/bin/coord.\n\
         echo \"{name} $*\" >> \"{calls}\"\n\
         root=''; prev=''\n\
         for a in \"$@\"; do [ \"$prev\" = --root ] && root=$a; prev=$a; done\n\
         if [ -n \"$root\" ]; then mkdir -p \"$root/bin\"; printf '#!/bin/sh\\necho built\\n' > \"$root/bin/coord\"; chmod 755 \"$root/bin/coord\"; fi\n",
        calls = dir.join("calls").display()
    );
    let path = dir.join(name);
    std::fs::write(&path, script).expect("write stand-in");
    let mut perms = std::fs::metadata(&path).expect("stat").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).expect("chmod");
}

#[test]
fn without_a_release_binary_the_workflow_builds_the_pinned_crate_with_cargo_install() {
    let empty = TestRepo::empty();
    let tools = TestRepo::empty();
    stand_in(tools.path(), "cargo");
    stand_in(tools.path(), "rustup");
    let home = TestRepo::empty();
    let path = format!("{}:{}", tools.path().display(), system_path());
    let url = format!("file://{}", empty.path().display());
    let out = install(home.path(), &url, &path);
    assert!(out.status.success(), "{}", text(&out));
    let calls = std::fs::read_to_string(tools.abs("calls")).expect("calls");
    let env = job_env("templates/coord-workflow.yml", "sync");
    let rust = &env
        .iter()
        .find(|(k, _)| k == "COORD_RUST")
        .expect("COORD_RUST")
        .1;
    let want = format!(
        "cargo +{rust} install --locked --root {} git-coord --version ={VERSION}",
        home.abs(".coord").display()
    );
    assert!(calls.contains(&want), "{calls}");
    assert!(home.exists(".coord/bin/coord"));
}

/// Cargo.toml's `package.metadata.binstall`, filled in as `cargo binstall` does, names the
/// archive packed and the binary's path inside it; the workflow's download is the same.
fn binstall_metadata_names(download: &Download) {
    let manifest = std::fs::read_to_string(manifest_dir().join("Cargo.toml")).expect("read");
    let value = |key: &str| -> String {
        let line = manifest
            .lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("Cargo.toml has no {key}"));
        line.split('"').nth(1).expect("a quoted value").to_string()
    };
    let (_, _, target) = this_runner();
    let fill = |s: &str| {
        s.replace("{ repo }", &value("repository"))
            .replace("{ version }", VERSION)
            .replace("{ target }", target)
            .replace("{ bin }", "coord")
            .replace("{ binary-ext }", "")
    };
    let url = fill(&value("pkg-url"));
    let release = format!(
        "https://github.com/coord-dev/coord/releases/download/v{VERSION}/{}",
        download.archive
    );
    assert_eq!(url, release);
    assert_eq!(value("pkg-fmt"), "tgz");
    // bin-dir is the binary's path inside the archive.
    let listing = Command::new("tar")
        .args(["-tzf"])
        .arg(download.file(&download.archive))
        .output()
        .expect("tar");
    let listing = String::from_utf8_lossy(&listing.stdout);
    let bin = fill(&value("bin-dir"));
    assert!(listing.lines().any(|l| l == bin), "{bin} in {listing}");
    // The workflow's default download is the same release.
    let env = job_env("templates/coord-workflow.yml", "sync");
    let base = &env
        .iter()
        .find(|(k, _)| k == "COORD_DOWNLOAD")
        .expect("env")
        .1;
    assert_eq!(format!("{base}/v{VERSION}/{}", download.archive), release);
}
