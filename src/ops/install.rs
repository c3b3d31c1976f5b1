//! `coord prime --install` / `--uninstall`: the files at the repo root that tell the agents
//! people use about coord. `AGENTS.md` gets coord's marked section (instructions valid for
//! every agent), `.mcp.json` (Claude Code) and `.codex/config.toml` (Codex) get an MCP server
//! entry named `coord` that runs `coord mcp`. Each file is merged with what is there (other
//! entries and text kept; a `coord` entry that is not coord's own is refused, naming it),
//! written with a temporary file and a rename, and never given a second entry. Before a file
//! changes, the file as it was is kept in `.git/coord/prime/`, with the bytes written;
//! `--uninstall` puts that copy back when the file was not changed since, and otherwise takes
//! out coord's entry alone.

use super::prime::{section_text, with_section, without_section};
use super::{Coord, Error};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// What `--install` or `--uninstall` did to one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Touched {
    /// The file, relative to the repo root.
    pub path: String,
    /// Whether it changed.
    pub changed: bool,
}

/// The files written, relative to the repo root.
const FILES: [&str; 3] = ["AGENTS.md", ".mcp.json", ".codex/config.toml"];

/// Codex's table for coord's MCP server.
const CODEX_TABLE: &str = "[mcp_servers.coord]\ncommand = \"coord\"\nargs = [\"mcp\"]\n";

/// Returns coord's MCP server entry as `.mcp.json` holds it.
fn mcp_entry() -> Value {
    json!({"command": "coord", "args": ["mcp"]})
}

impl Coord {
    /// Writes coord's section into AGENTS.md and its MCP server entry into `.mcp.json` and
    /// `.codex/config.toml`; refuses, writing nothing, when a file holds a conflicting entry.
    pub fn install_prime(&self) -> Result<Vec<Touched>, Error> {
        let text = self.prime(None);
        let root = self.store().root().to_path_buf();
        let mut planned = Vec::new();
        for rel in FILES {
            let path = through_link(&root.join(rel))?;
            let old = read(&path)?;
            let new = merged(rel, old.as_deref().unwrap_or(""), &text).map_err(|no| {
                let at = no.line.map(|n| format!(":{n}")).unwrap_or_default();
                Error::Refused(format!(
                    "{}{at}: {}; nothing was written",
                    path.display(),
                    no.why
                ))
            })?;
            planned.push((rel, path, old, new));
        }
        let kept = self.kept();
        let mut touched = Vec::new();
        for (rel, path, old, new) in planned {
            let changed = old.as_deref() != Some(new.as_str());
            if changed {
                back_up(&kept, rel, old.as_deref())?;
                write(&path, &new)?;
                keep(&kept, rel, "after", &new)?;
            }
            touched.push(Touched {
                path: rel.to_string(),
                changed,
            });
        }
        Ok(touched)
    }

    /// Takes out what [`Coord::install_prime`] wrote: a file not changed since is put back as
    /// it was (or removed, when it was not there); in another, coord's entry alone is taken
    /// out.
    pub fn uninstall_prime(&self) -> Result<Vec<Touched>, Error> {
        let root = self.store().root().to_path_buf();
        let kept = self.kept();
        let mut ours = vec![self.prime(None)];
        let installed = read(&kept_path(&kept, "AGENTS.md", "after"))?;
        ours.extend(
            installed
                .as_deref()
                .and_then(section_text)
                .map(str::to_string),
        );
        let mut touched = Vec::new();
        for rel in FILES {
            let path = root.join(rel);
            let path = through_link(&path).unwrap_or(path);
            let changed = match read(&path)? {
                Some(now) => restore(&kept, rel, &path, &now, &ours)?,
                None => false,
            };
            for what in ["before", "after", "absent"] {
                let _ = std::fs::remove_file(kept_path(&kept, rel, what));
            }
            touched.push(Touched {
                path: rel.to_string(),
                changed,
            });
        }
        Ok(touched)
    }

    /// Returns the folder of the copies kept of the files as they were.
    fn kept(&self) -> PathBuf {
        self.store().repo.git_dir().join("coord").join("prime")
    }
}

/// Why a file cannot take coord's entry, and the line at fault when one is.
struct Unmergeable {
    line: Option<usize>,
    why: String,
}

impl From<String> for Unmergeable {
    fn from(why: String) -> Unmergeable {
        Unmergeable { line: None, why }
    }
}

/// Returns `doc` (the text of `rel`) with coord's entry, or why it cannot have it.
fn merged(rel: &str, doc: &str, text: &str) -> Result<String, Unmergeable> {
    match rel {
        "AGENTS.md" => with_section(doc, text).map_err(|why| {
            format!("{why}; keep one coord:prime:begin line followed by one coord:prime:end line, or remove both").into()
        }),
        ".mcp.json" => Ok(with_mcp_server(doc)?),
        _ => {
            valid_toml(doc)?;
            Ok(with_codex_table(doc)?)
        }
    }
}

/// Refuses a Codex config that is not valid TOML: coord's table appended to it would leave
/// it as broken, and Codex would read neither.
fn valid_toml(doc: &str) -> Result<(), Unmergeable> {
    let Err(e) = doc.parse::<toml_edit::DocumentMut>() else {
        return Ok(());
    };
    let line = e.span().map(|s| doc[..s.start].matches('\n').count() + 1);
    let message: Vec<&str> = e.message().split_whitespace().collect();
    Err(Unmergeable {
        line,
        why: format!(
            "not valid TOML ({}); fix it (or move the file away), then run coord prime --install again",
            message.join(" ")
        ),
    })
}

/// Returns the file a symbolic link at `path` leads to, so that it is written through the
/// link and the link stays; `path` itself when it is no link. A link to nothing is refused.
fn through_link(path: &Path) -> Result<PathBuf, Error> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).map_err(|e| {
            let to = std::fs::read_link(path).unwrap_or_default();
            Error::Refused(format!(
                "{} is a symbolic link to {}, which cannot be read ({e}); create that file or remove the link; nothing was written",
                path.display(),
                to.display()
            ))
        }),
        _ => Ok(path.to_path_buf()),
    }
}

/// Returns `doc` without coord's entry; None when it has none of coord's own (`ours`: the
/// texts coord's section of AGENTS.md was written with).
fn taken_out(rel: &str, doc: &str, ours: &[String]) -> Option<String> {
    match rel {
        "AGENTS.md" => without_section(doc, ours),
        ".mcp.json" => without_mcp_server(doc),
        _ => without_codex_table(doc),
    }
}

/// Puts `rel` back: the copy kept when the file is as coord wrote it, else the file without
/// coord's entry. Returns whether it changed.
fn restore(kept: &Path, rel: &str, path: &Path, now: &str, ours: &[String]) -> Result<bool, Error> {
    let written = read(&kept_path(kept, rel, "after"))?;
    if written.as_deref() == Some(now) {
        if let Some(before) = read(&kept_path(kept, rel, "before"))? {
            write(path, &before)?;
            return Ok(true);
        }
        if kept_path(kept, rel, "absent").exists() {
            std::fs::remove_file(path).map_err(io("remove", path))?;
            if let Some(dir) = path.parent().filter(|_| rel.contains('/')) {
                // Only when empty: the folder was made for this file.
                let _ = std::fs::remove_dir(dir);
            }
            return Ok(true);
        }
    }
    match taken_out(rel, now, ours) {
        Some(new) if new != now => {
            write(path, &new)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Keeps `rel` as it was before coord first changed it (`absent`: it was not there); a copy
/// kept by an earlier install stays, so uninstall goes back to the person's own file.
fn back_up(kept: &Path, rel: &str, old: Option<&str>) -> Result<(), Error> {
    let before = kept_path(kept, rel, "before");
    let absent = kept_path(kept, rel, "absent");
    if before.exists() || absent.exists() {
        return Ok(());
    }
    match old {
        Some(text) => keep(kept, rel, "before", text),
        None => keep(kept, rel, "absent", ""),
    }
}

fn keep(kept: &Path, rel: &str, what: &str, text: &str) -> Result<(), Error> {
    let path = kept_path(kept, rel, what);
    crate::fsx::write_with_mode(&path, text.as_bytes(), true, 0o600).map_err(io("write", &path))
}

/// Returns the file of `.git/coord/prime/` that keeps `what` of `rel`.
fn kept_path(kept: &Path, rel: &str, what: &str) -> PathBuf {
    kept.join(format!("{}.{what}", rel.replace('/', "%")))
}

/// Reads a file; None when it is not there.
fn read(path: &Path) -> Result<Option<String>, Error> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("read", path)(e)),
    }
}

/// Writes a file with a temporary file and a rename, making its folder; a file that is there
/// keeps its mode (a `.mcp.json` holding keys stays the owner's alone).
fn write(path: &Path, text: &str) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).map_or(0o666, |m| m.permissions().mode() & 0o7777);
    crate::fsx::write_with_mode(path, text.as_bytes(), true, mode).map_err(io("write", path))
}

fn io(what: &'static str, path: &Path) -> impl Fn(std::io::Error) -> Error {
    let path = path.display().to_string();
    move |source| Error::Io {
        what,
        path: path.clone(),
        source,
    }
}

/// Returns `.mcp.json`'s text with coord's server in `mcpServers`.
fn with_mcp_server(doc: &str) -> Result<String, String> {
    let mut value = match doc.trim() {
        "" => json!({}),
        text => serde_json::from_str::<Value>(text).map_err(|e| format!("not JSON ({e})"))?,
    };
    let Some(top) = value.as_object_mut() else {
        return Err("not a JSON object".into());
    };
    let servers = top.entry("mcpServers").or_insert_with(|| json!({}));
    let Some(servers) = servers.as_object_mut() else {
        return Err("its mcpServers is not an object".into());
    };
    match servers.get("coord") {
        Some(entry) if *entry == mcp_entry() => return Ok(doc.to_string()),
        Some(entry) => {
            return Err(format!(
                "its MCP server 'coord' is not coord's own ({entry}); remove it, or make it {}",
                mcp_entry()
            ))
        }
        None => {
            servers.insert("coord".into(), mcp_entry());
        }
    }
    Ok(pretty(&value))
}

/// Returns `.mcp.json`'s text without coord's own server.
fn without_mcp_server(doc: &str) -> Option<String> {
    let mut value: Value = serde_json::from_str(doc).ok()?;
    let servers = value.get_mut("mcpServers")?.as_object_mut()?;
    if servers.get("coord") != Some(&mcp_entry()) {
        return None;
    }
    servers.remove("coord");
    Some(pretty(&value))
}

fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// Returns the byte range of the table (header to the next header or the end) whose header
/// is `[mcp_servers.coord]`, and whether the document names that server elsewhere (a
/// sub-table, a dotted key or a key of `[mcp_servers]`).
fn codex_table(doc: &str) -> (Option<(usize, usize)>, bool) {
    let mut table = None;
    let mut elsewhere = false;
    let mut header = String::new();
    let mut at = 0;
    for line in doc.split_inclusive('\n') {
        let t = line.trim();
        if t.starts_with('[') {
            if let Some((start, None)) = table {
                table = Some((start, Some(at)));
            }
            header = t.replace(' ', "");
            if header == "[mcp_servers.coord]" {
                table = Some((at, None));
            } else if header.starts_with("[mcp_servers.coord.") {
                elsewhere = true;
            }
        } else {
            let key = t.replace(' ', "");
            let names =
                |k: &str| key.starts_with(&format!("{k}=")) || key.starts_with(&format!("{k}."));
            elsewhere |= (header.is_empty() && names("mcp_servers.coord"))
                || (header == "[mcp_servers]" && names("coord"));
        }
        at += line.len();
    }
    (table.map(|(s, e)| (s, e.unwrap_or(doc.len()))), elsewhere)
}

/// Returns Codex's config with coord's MCP server table.
fn with_codex_table(doc: &str) -> Result<String, String> {
    let conflict = || {
        format!(
            "its MCP server 'coord' is not coord's own; remove it, or make it the table\n{CODEX_TABLE}"
        )
    };
    if declares_servers_inline(doc) {
        return Err(format!(
            "it declares mcp_servers as one inline table, which a table cannot be added to; write each server as its own [mcp_servers.<name>] table, or add coord's by hand:\n{CODEX_TABLE}"
        ));
    }
    match codex_table(doc) {
        (_, true) => Err(conflict()),
        (Some((s, e)), false) if doc[s..e].trim_end() == CODEX_TABLE.trim_end() => {
            Ok(doc.to_string())
        }
        (Some(_), false) => Err(conflict()),
        (None, false) => {
            let mut out = doc.to_string();
            if !out.is_empty() {
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push('\n');
            }
            out.push_str(CODEX_TABLE);
            Ok(out)
        }
    }
}

/// Whether the document's top level holds `mcp_servers = { … }` (an inline table: TOML lets
/// no `[mcp_servers.<name>]` table be added to it).
fn declares_servers_inline(doc: &str) -> bool {
    let mut top = true;
    doc.lines().any(|line| {
        let key = line.trim().replace(' ', "");
        top &= !key.starts_with('[');
        top && key.starts_with("mcp_servers=")
    })
}

/// Returns Codex's config without coord's own table (and the blank line put before it).
fn without_codex_table(doc: &str) -> Option<String> {
    let (Some((s, e)), false) = codex_table(doc) else {
        return None;
    };
    if doc[s..e].trim_end() != CODEX_TABLE.trim_end() {
        return None;
    }
    let before = &doc[..s];
    let before = before
        .strip_suffix('\n')
        .filter(|b| b.ends_with('\n') || b.is_empty())
        .unwrap_or(before);
    Some(format!("{before}{}", &doc[e..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codex_table_is_added_once_and_taken_out_again() {
        let mine = "model = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\"\n";
        let once = with_codex_table(mine).expect("merged");
        assert_eq!(once, format!("{mine}\n{CODEX_TABLE}"));
        assert_eq!(with_codex_table(&once).expect("again"), once);
        assert_eq!(without_codex_table(&once).as_deref(), Some(mine));
    }

    #[test]
    fn a_codex_entry_named_coord_that_is_not_coords_is_refused() {
        for doc in [
            "[mcp_servers.coord]\ncommand = \"other\"\n",
            "[mcp_servers]\ncoord = { command = \"other\" }\n",
            "mcp_servers.coord.command = \"other\"\n",
            "[mcp_servers.coord]\ncommand = \"coord\"\nargs = [\"mcp\"]\n[mcp_servers.coord.env]\nA = \"1\"\n",
        ] {
            assert!(with_codex_table(doc).is_err(), "{doc}");
            assert_eq!(without_codex_table(doc), None, "{doc}");
        }
    }

    #[test]
    fn servers_declared_as_one_inline_table_are_refused_not_declared_twice() {
        let doc = "mcp_servers = { other = { command = \"x\" } }\n";
        assert!(with_codex_table(doc).is_err());
        let later = "[other]\nmcp_servers = 1\n";
        assert!(with_codex_table(later).is_ok(), "a key of another table");
    }

    #[test]
    fn the_mcp_server_is_merged_with_others_and_a_foreign_coord_refused() {
        let mine = "{\"mcpServers\": {\"db\": {\"command\": \"db-mcp\"}}, \"x\": 1}";
        let once = with_mcp_server(mine).expect("merged");
        let v: Value = serde_json::from_str(&once).expect("json");
        assert_eq!(v["mcpServers"]["db"]["command"], "db-mcp");
        assert_eq!(v["mcpServers"]["coord"], mcp_entry());
        assert_eq!(with_mcp_server(&once).expect("again"), once);
        let out: Value =
            serde_json::from_str(&without_mcp_server(&once).expect("out")).expect("json");
        assert_eq!(out, serde_json::from_str::<Value>(mine).expect("json"));
        assert!(with_mcp_server("{\"mcpServers\": {\"coord\": {\"command\": \"x\"}}}").is_err());
        assert!(with_mcp_server("[1]").is_err());
    }
}
