//! Build script: records the git commit coord is built from, for `coord --version`.
//!
//! In a git checkout of this package it asks `git rev-parse`; in a package build (crates.io,
//! `cargo package`) it reads the commit cargo stored in `.cargo_vcs_info.json`; when neither is
//! there (no git, a tarball) the version stands alone. It never fails the build.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    println!("cargo:rerun-if-changed=build.rs");
    let commit = from_checkout(&dir).or_else(|| from_vcs_info(&dir));
    let suffix = commit.map_or_else(String::new, |c| format!(" (commit {c})"));
    println!("cargo:rustc-env=COORD_BUILD_COMMIT={suffix}");
}

/// Returns the abbreviated HEAD commit when `dir` is the top of a git work tree (not a package
/// unpacked somewhere inside another repository), and asks cargo to rerun when HEAD moves.
fn from_checkout(dir: &Path) -> Option<String> {
    let top = git(dir, &["rev-parse", "--show-toplevel"])?;
    if Path::new(&top).canonicalize().ok()? != dir.canonicalize().ok()? {
        return None;
    }
    let commit = git(dir, &["rev-parse", "--short=12", "HEAD"])?;
    for name in ["HEAD", "packed-refs"] {
        rerun_on_git_path(dir, name);
    }
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        rerun_on_git_path(dir, &branch);
    }
    Some(commit)
}

fn rerun_on_git_path(dir: &Path, name: &str) {
    // A path that does not exist would make cargo rerun this script on every build.
    let path = git(
        dir,
        &["rev-parse", "--path-format=absolute", "--git-path", name],
    );
    if let Some(path) = path.filter(|p| Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
}

/// Returns the commit cargo recorded when it packaged the crate.
fn from_vcs_info(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(".cargo_vcs_info.json")).ok()?;
    let start = text.find("\"sha1\"")? + "\"sha1\"".len();
    let hex: String = text[start..]
        .trim_start_matches([' ', ':', '"'])
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .take(12)
        .collect();
    (hex.len() == 12).then_some(hex)
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}
