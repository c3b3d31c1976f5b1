//! Completions of task ids and agent names: the hidden `coord __complete -- WORD...` that the
//! scripts of `coord completions` call at every completion, and the few lines each script gets
//! to call it. The words are the command line up to the cursor, the word being completed
//! last. Where the command takes a task id (an argument typed [`TaskId`]) it prints the ids of
//! the board, where it takes an agent ([`AgentName`]) the agents, one a line, and exits 0;
//! anywhere else it prints nothing and exits 1, and the script completes as clap's static
//! script does. It never prints an error: a completion must not break the prompt.

use super::Cli;
use crate::model::{AgentName, TaskId};
use crate::store::Store;
use clap::{Arg, Command, CommandFactory};
use clap_complete::Shell;
use std::any::TypeId;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// What a place on the command line takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// A task id.
    Ids,
    /// An agent's name.
    Agents,
}

/// Answers `coord __complete -- WORD...` (None for any other command line): prints the
/// candidates for the last word and exits 0, or prints nothing and exits 1 where none are
/// dynamic. Read before clap parses, so the command stays out of help, man pages and the
/// scripts' own lists.
pub fn answer(args: &[OsString]) -> Option<ExitCode> {
    let (_, rest) = args.split_first()?;
    let (first, rest) = rest.split_first()?;
    if first != "__complete" {
        return None;
    }
    let rest = rest
        .strip_prefix([OsString::from("--")].as_slice())
        .unwrap_or(rest);
    let words: Vec<String> = rest
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    let words = joined(&words);
    let Some((slot, dir)) = slot_at(&words) else {
        return Some(ExitCode::from(1));
    };
    let prefix = words.last().map_or("", |w| value_part(w));
    for name in candidates(slot, &dir) {
        if name.starts_with(prefix) {
            out!("{name}");
        }
    }
    Some(ExitCode::SUCCESS)
}

/// Returns the words with bash's `--opt` `=` `value` split (`=` is a word break there) joined
/// back into `--opt=value`.
fn joined(words: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut iter = words.iter().peekable();
    while let Some(w) = iter.next() {
        let glue = w == "=" && out.last().is_some_and(|p| p.starts_with("--"));
        match out.last_mut() {
            Some(last) if glue => {
                last.push('=');
                if let Some(v) = iter.next() {
                    last.push_str(v);
                }
            }
            _ => out.push(w.clone()),
        }
    }
    out
}

/// Returns the value part of a word: after `=` in `--opt=value`, else the word.
fn value_part(word: &str) -> &str {
    match word.split_once('=') {
        Some((opt, value)) if opt.starts_with("--") => value,
        _ => word,
    }
}

/// Returns what the last of `words` takes, and the directory `-C` names (else the current
/// one), when it is a task id or an agent.
fn slot_at(words: &[String]) -> Option<(Slot, PathBuf)> {
    let (current, before) = words.split_last()?;
    let mut cmd = Cli::command();
    cmd.build();
    let mut dir = PathBuf::from(".");
    let mut path: Vec<String> = Vec::new();
    let mut positionals = 0;
    let mut rest = before.iter().skip(1);
    let mut only_values = false;
    while let Some(word) = rest.next() {
        if !only_values && word == "--" {
            only_values = true;
        } else if let Some(arg) = (!only_values).then(|| option(&cmd, word)).flatten() {
            if takes_value(arg) && !word.contains('=') {
                let value = rest.next();
                if arg.get_id() == "dir" {
                    dir = value.map_or(dir, PathBuf::from);
                }
                if value.is_none() {
                    return slot_of(arg, &path).map(|s| (s, dir));
                }
            }
        } else if !only_values && word.starts_with('-') {
            continue;
        } else if let Some(sub) = cmd.find_subcommand(word).cloned() {
            path.push(sub.get_name().to_string());
            cmd = sub;
            positionals = 0;
        } else {
            positionals += 1;
        }
    }
    let arg = match current.split_once('=') {
        Some((opt, _)) if opt.starts_with("--") => option(&cmd, opt)?,
        _ if current.starts_with('-') && !only_values => return None,
        _ => positional(&cmd, positionals)?,
    };
    slot_of(arg, &path).map(|s| (s, dir))
}

/// Returns the option `word` names (`--long`, `--long=value`, `-s`), when `cmd` has it.
fn option<'c>(cmd: &'c Command, word: &str) -> Option<&'c Arg> {
    if let Some(long) = word.strip_prefix("--") {
        let name = long.split('=').next().unwrap_or(long);
        return cmd.get_arguments().find(|a| a.get_long() == Some(name));
    }
    let mut short = word.strip_prefix('-')?.chars();
    let c = short.next()?;
    (short.next().is_none())
        .then(|| cmd.get_arguments().find(|a| a.get_short() == Some(c)))
        .flatten()
}

/// Returns whether an option reads the next word as its value.
fn takes_value(arg: &Arg) -> bool {
    arg.get_action().takes_values() && arg.get_num_args().is_none_or(|n| n.min_values() > 0)
}

/// Returns the positional argument at `index` (0-based), the last one when it takes many.
fn positional(cmd: &Command, index: usize) -> Option<&Arg> {
    let all: Vec<&Arg> = cmd.get_positionals().collect();
    all.get(index).copied().or_else(|| {
        all.last()
            .copied()
            .filter(|a| a.get_num_args().is_some_and(|n| n.max_values() > 1))
    })
}

/// Returns what `arg` of the command at `path` takes: an existing task or agent, by its
/// type. `init --agents` and `agents add` name new agents, so they are left out.
fn slot_of(arg: &Arg, path: &[String]) -> Option<Slot> {
    let new_names = matches!(path, [p] if p == "init") || path == ["agents", "add"];
    let parser = arg.get_value_parser().type_id();
    if parser == TypeId::of::<TaskId>() {
        Some(Slot::Ids)
    } else if parser == TypeId::of::<AgentName>() && !new_names {
        Some(Slot::Agents)
    } else {
        None
    }
}

/// Returns the task ids or agent names of the repository around `dir`, sorted (none outside
/// a repository).
fn candidates(slot: Slot, dir: &std::path::Path) -> Vec<String> {
    let Ok((board, _)) = Store::open(dir).and_then(|s| s.session(None).load()) else {
        return Vec::new();
    };
    let mut names: Vec<String> = match slot {
        Slot::Ids => board.tasks.iter().map(|t| t.id.to_string()).collect(),
        Slot::Agents => board.agents.keys().map(|a| a.to_string()).collect(),
    };
    names.sort();
    names.dedup();
    names
}

/// Returns the lines that make `shell`'s static script ask `coord __complete` first (empty
/// for shells without dynamic completions), and the script with clap's entry point renamed
/// where the shell needs it.
pub fn dynamic(shell: Shell, script: String) -> String {
    match shell {
        Shell::Bash => script + BASH,
        Shell::Zsh => zsh(&script),
        Shell::Fish => script + FISH,
        _ => script,
    }
}

/// bash: a function asked first, falling back to clap's `_coord`.
const BASH: &str = r#"
# Task ids and agent names, from the repository: `coord __complete` prints them.
_coord_ids_and_agents() {
    local found
    if found="$("${COMP_WORDS[0]}" __complete -- "${COMP_WORDS[@]:0:COMP_CWORD+1}" 2>/dev/null)"; then
        local IFS=$'\n'
        COMPREPLY=($(compgen -W "${found}" -- "${COMP_WORDS[COMP_CWORD]}"))
        compopt +o default +o bashdefault 2>/dev/null
        return 0
    fi
    _coord "$@"
}
complete -F _coord_ids_and_agents -o bashdefault -o default coord
"#;

/// fish: candidates added where `coord __complete` answers.
const FISH: &str = r#"
# Task ids and agent names, from the repository: `coord __complete` prints them.
function __fish_coord_ids_and_agents
    set -l words (commandline -opc) (commandline -ct)
    command $words[1] __complete -- $words 2>/dev/null
end
complete -c coord -f -n '__fish_coord_ids_and_agents >/dev/null' -a '(__fish_coord_ids_and_agents)'
"#;

/// zsh: clap's `_coord` renamed `_coord_static`, and a `_coord` asking `coord __complete`
/// first put before the script's entry lines.
fn zsh(script: &str) -> String {
    const ASK: &str = r#"# Task ids and agent names, from the repository: `coord __complete` prints them.
_coord() {
    local found
    if found="$(${words[1]} __complete -- "${(@)words[1,CURRENT]}" 2>/dev/null)"; then
        local -a names
        names=(${(f)found})
        compset -P '*='
        compadd -a names
        return 0
    fi
    _coord_static "$@"
}

"#;
    let renamed = script.replacen("\n_coord() {", "\n_coord_static() {", 1);
    match renamed.rfind("if [ \"$funcstack[1]\" = \"_coord\" ]") {
        Some(at) => format!("{}{ASK}{}", &renamed[..at], &renamed[at..]),
        None => script.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(line: &str) -> Option<Slot> {
        let mut words: Vec<String> = line.split(' ').map(String::from).collect();
        if line.ends_with(' ') {
            words.pop();
            words.push(String::new());
        }
        slot_at(&words).map(|(s, _)| s)
    }

    #[test]
    fn ids_and_agents_are_found_by_the_arguments_type() {
        assert_eq!(slot("coord show "), Some(Slot::Ids));
        assert_eq!(slot("coord -C /tmp --json approve a"), Some(Slot::Ids));
        assert_eq!(slot("coord reassign t1 "), Some(Slot::Agents));
        assert_eq!(slot("coord list --agent "), Some(Slot::Agents));
        assert_eq!(slot("coord list --agent=al"), Some(Slot::Agents));
        assert_eq!(slot("coord new x --depends-on "), Some(Slot::Ids));
        assert_eq!(slot("coord agents disable "), Some(Slot::Agents));
        assert_eq!(slot("coord agents add "), None);
        assert_eq!(slot("coord new "), None);
        assert_eq!(slot("coord "), None);
        assert_eq!(slot("coord show --"), None);
        assert_eq!(slot("coord show t1 "), None);
    }

    #[test]
    fn bash_splits_an_options_value_at_the_equals_sign() {
        let words: Vec<String> = ["coord", "list", "--agent", "=", "al"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            joined(&words).last().map(String::as_str),
            Some("--agent=al")
        );
        assert_eq!(value_part("--agent=al"), "al");
    }
}
