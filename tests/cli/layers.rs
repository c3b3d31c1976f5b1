//! The layering of docs/design.md, kept true: every `crate::…` path (and every `super::` that
//! climbs to the crate root) in the library's production code is read, and an import between
//! top-level modules that the rules below do not allow fails the test, naming the file.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The layers, bottom first: a module may import any module of a lower layer, and a module
/// listed before it in its own layer (so a layer has no cycle).
const LAYERS: &[(&str, &[&str])] = &[
    ("helpers", &["hash", "fsx", "term", "redact"]),
    (
        "data",
        &[
            "model", "yaml", "expr", "schema", "text", "check", "config", "clock",
        ],
    ),
    ("pure core", &["board", "engine", "sign"]),
    ("doing", &["lock", "git", "store", "sync"]),
    ("operations", &["view", "watch", "ops", "client", "error"]),
    ("front ends", &["fuzz", "run", "mcp", "serve", "cli"]),
];

/// Front ends reach the library through the operations: none imports the pure core or the
/// doing layer.
const FRONT_ENDS_SKIP: &[&str] = &["pure core", "doing"];

/// Imports the rules forbid that the code still makes, each with why it stays for now.
/// Nothing may be added here without a line in docs/design.md.
const KNOWN: &[(&str, &str, &str)] = &[
    (
        "serve",
        "store",
        "the live board's hub loads and watches the store itself",
    ),
    ("serve", "board", "the live board's pages read task files"),
    (
        "serve",
        "git",
        "the hub reads HEAD to tell when the board changed",
    ),
    (
        "serve",
        "lock",
        "the hub asks whether a writer holds the lock",
    ),
    (
        "cli",
        "store",
        "`demo` and the context's `store()` open the store",
    ),
    ("cli", "engine", "`tick --dry-run` prints the engine's plan"),
    ("cli", "sync", "`sync` takes the sync's own options"),
    ("cli", "sign", "`keygen` writes a signing key"),
];

fn layer_of(module: &str) -> Option<(usize, usize, &'static str)> {
    LAYERS.iter().enumerate().find_map(|(l, (name, mods))| {
        mods.iter()
            .position(|m| *m == module)
            .map(|p| (l, p, *name))
    })
}

/// Returns why the import `from` → `to` is refused, or None when a rule allows it.
fn refused(from: &str, to: &str) -> Option<String> {
    let Some((lf, pf, name_from)) = layer_of(from) else {
        return Some(format!(
            "`{from}` is in no layer: add it to LAYERS and docs/design.md"
        ));
    };
    let Some((lt, pt, name_to)) = layer_of(to) else {
        return Some(format!(
            "`{to}` is in no layer: add it to LAYERS and docs/design.md"
        ));
    };
    if KNOWN.iter().any(|(f, t, _)| *f == from && *t == to) {
        return None;
    }
    if lt > lf || (lt == lf && pt >= pf) {
        return Some(format!(
            "{from} ({name_from}) may not import {to} ({name_to}): upward"
        ));
    }
    if name_from == "front ends" && FRONT_ENDS_SKIP.contains(&name_to) {
        return Some(format!(
            "front end {from} may not import {to} ({name_to}): call ops"
        ));
    }
    None
}

/// Blanks comments, keeping line breaks (string contents are kept: a path in a string is
/// rare and would only make the test stricter).
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let code = match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// Drops every item marked `#[cfg(test)]` (a `mod x;` line or a braced block): tests may
/// drive any layer.
fn without_tests(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != "#[cfg(test)]" {
            out.push_str(lines[i]);
            out.push('\n');
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < lines.len() && lines[j].trim().starts_with("#[") {
            j += 1;
        }
        if j < lines.len() && lines[j].trim_end().ends_with(';') {
            i = j + 1;
            continue;
        }
        let (mut depth, mut opened) = (0i64, false);
        while j < lines.len() {
            let line = lines[j];
            depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
            opened |= line.contains('{');
            j += 1;
            if opened && depth <= 0 {
                break;
            }
        }
        i = j;
    }
    out
}

/// The words of `text` right after each `crate::`, and after `crate::{` each path's first.
fn crate_targets(text: &str) -> BTreeSet<String> {
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let before = text[..at].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            out.extend(group.split(',').map(|p| word(p.trim())));
        } else {
            out.insert(word(rest));
        }
    }
    out.retain(|w| !w.is_empty() && w != "self");
    out
}

/// The top-level modules `super::` chains reach from a file `depth` modules deep.
fn super_targets(text: &str, depth: usize) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices("super::") {
        if text[..at].ends_with("super::") {
            continue;
        }
        let mut rest = &text[at..];
        let mut ups = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            ups += 1;
            rest = r;
        }
        if ups >= depth {
            let w: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.insert(w);
        }
    }
    out
}

/// The files of the modules `text` (the file at `path`) declares with `mod name;`.
fn children(path: &Path, text: &str) -> Vec<(String, PathBuf)> {
    let dir = path.parent().expect("a folder");
    let stem = path.file_stem().expect("a name").to_string_lossy();
    let base = if ["lib", "main", "mod"].contains(&stem.as_ref()) {
        dir.to_path_buf()
    } else {
        dir.join(stem.as_ref())
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let Some(decl) = line.strip_suffix(';') else {
            continue;
        };
        let decl = decl.split_once("mod ").filter(|(vis, _)| {
            let vis = vis.trim_end();
            vis.is_empty() || vis == "pub" || (vis.starts_with("pub(") && vis.ends_with(')'))
        });
        let Some((_, name)) = decl else { continue };
        let name = name.trim();
        let file = [
            base.join(format!("{name}.rs")),
            base.join(name).join("mod.rs"),
        ]
        .into_iter()
        .find(|f| f.exists())
        .unwrap_or_else(|| panic!("module {name} of {} has no file", path.display()));
        out.push((name.to_string(), file));
    }
    out
}

/// Every import between top-level modules: (from, to) → the files that make it.
fn imports() -> BTreeMap<(String, String), BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = BTreeMap::new();
    let mut todo = vec![(Vec::<String>::new(), src.join("lib.rs"))];
    while let Some((modpath, file)) = todo.pop() {
        let raw = fs::read_to_string(&file).expect("a source file");
        let code = without_tests(&without_comments(&raw));
        for (name, child) in children(&file, &code) {
            let mut p = modpath.clone();
            p.push(name);
            todo.push((p, child));
        }
        let Some(top) = modpath.first() else { continue };
        let mut targets = crate_targets(&code);
        targets.extend(super_targets(&code, modpath.len()));
        for to in targets.into_iter().filter(|t| t != top) {
            let rel = file.strip_prefix(&src).unwrap_or(&file);
            found
                .entry((top.clone(), to))
                .or_insert_with(BTreeSet::new)
                .insert(rel.display().to_string());
        }
    }
    found
}

#[test]
fn every_import_follows_the_layers_of_the_design() {
    let found = imports();
    assert!(
        found.contains_key(&("ops".into(), "store".into())),
        "the reader found the imports"
    );
    let broken: Vec<String> = found
        .iter()
        .filter_map(|((from, to), files)| {
            refused(from, to).map(|why| format!("{why} (in {files:?})"))
        })
        .collect();
    assert!(
        broken.is_empty(),
        "imports break the layers:\n{}",
        broken.join("\n")
    );
}

#[test]
fn every_known_exception_is_still_made() {
    let found = imports();
    let gone: Vec<_> = KNOWN
        .iter()
        .filter(|(from, to, _)| !found.contains_key(&(from.to_string(), to.to_string())))
        .collect();
    assert!(
        gone.is_empty(),
        "remove these from KNOWN and docs/design.md: {gone:?}"
    );
}

#[test]
fn the_rules_refuse_an_upward_import_and_a_front_end_reaching_the_store() {
    assert!(
        refused("git", "store").is_some(),
        "git sits below the store"
    );
    assert!(
        refused("board", "engine").is_some(),
        "board sits before engine"
    );
    assert!(
        refused("error", "serve").is_some(),
        "error sits below the front ends"
    );
    assert!(refused("run", "store").is_some(), "front ends call ops");
    assert!(
        refused("fsx", "git").is_some(),
        "helpers import no layer above"
    );
    assert!(refused("store", "fsx").is_none());
    assert!(
        refused("cli", "serve").is_none(),
        "cli dispatches to the front ends"
    );
    assert!(
        refused("newmodule", "fsx").is_some(),
        "every module has a layer"
    );
}
