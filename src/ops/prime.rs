//! `prime`: the instructions an agent working in this repo needs (its name, how to take work,
//! how to report, what not to touch), as text, and coord's marked section of AGENTS.md that
//! `coord prime --install` writes (the files it writes are [`super::setup`]'s).

use super::Coord;
use crate::model::AgentName;

/// The line that opens coord's section of AGENTS.md.
pub const BEGIN: &str =
    "<!-- coord:prime:begin (written by 'coord prime --install'; edits inside are replaced) -->";
/// The line that closes coord's section of AGENTS.md.
pub const END: &str = "<!-- coord:prime:end -->";

impl Coord {
    /// Returns the instructions for `agent` (None: a placeholder the reader fills in).
    pub fn prime(&self, agent: Option<&AgentName>) -> String {
        let agent = agent.map_or("<you>", |a| a.as_str());
        instructions(agent, self.store().work_dir())
    }

    /// Returns the instructions for a command `coord run` started for `agent`: the runner
    /// reports for it, so it says how to end instead of how to report.
    pub fn prime_under_run(&self, agent: Option<&AgentName>) -> String {
        let agent = agent.map_or("<you>", |a| a.as_str());
        let text = instructions(agent, self.store().work_dir());
        let (Some(from), Some(to)) = (text.find(REPORT), text.find("Do not touch:")) else {
            return text;
        };
        format!("{}{UNDER_RUN}{}", &text[..from], &text[to..])
    }
}

/// Returns `doc` with coord's section set to `text`; people's text around it is kept byte
/// for byte.
pub(super) fn with_section(doc: &str, text: &str) -> Result<String, &'static str> {
    let section = format!("{BEGIN}\n{}\n{END}\n", text.trim_end());
    let begin = find_line(doc, BEGIN);
    let end = find_line(doc, END);
    match (begin, end) {
        (None, None) => {
            let mut out = doc.to_string();
            if !out.is_empty() {
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push('\n');
            }
            out.push_str(&section);
            Ok(out)
        }
        (Some(b), Some(e)) if b < e => {
            let after = doc[e..].find('\n').map_or(doc.len(), |n| e + n + 1);
            Ok(format!("{}{section}{}", &doc[..b], &doc[after..]))
        }
        (Some(_), Some(_)) => Err("the end marker comes before the begin marker"),
        (Some(_), None) => Err("the begin marker has no end marker"),
        (None, Some(_)) => Err("the end marker has no begin marker"),
    }
}

/// Returns the text between the marker lines of `doc`'s section, when it has a whole one.
pub(super) fn section_text(doc: &str) -> Option<&str> {
    let (b, e) = (find_line(doc, BEGIN)?, find_line(doc, END)?);
    let start = doc[b..].find('\n').map_or(doc.len(), |n| b + n + 1);
    doc.get(start..e)
}

/// Returns `doc` without coord's section (and the blank line [`with_section`] put before it),
/// or None when it has no whole section, or one whose text is none of `ours` (the texts coord
/// wrote there): a section a person wrote between the markers is theirs, and stays.
pub(super) fn without_section(doc: &str, ours: &[String]) -> Option<String> {
    let text = section_text(doc)?;
    if !ours.iter().any(|o| o.trim_end() == text.trim_end()) {
        return None;
    }
    let (b, e) = (find_line(doc, BEGIN)?, find_line(doc, END)?);
    let after = doc[e..].find('\n').map_or(doc.len(), |n| e + n + 1);
    let before = &doc[..b];
    let before = before
        .strip_suffix('\n')
        .filter(|s| s.ends_with('\n') || s.is_empty());
    Some(format!("{}{}", before.unwrap_or(&doc[..b]), &doc[after..]))
}

/// Returns the byte offset of the line that starts with `marker`'s stem (the text before any
/// parenthesis), so an older wording of the marker is still found.
fn find_line(doc: &str, marker: &str) -> Option<usize> {
    let stem = marker.split(" (").next().unwrap_or(marker);
    let mut at = 0;
    for line in doc.split_inclusive('\n') {
        if line.trim_start().starts_with(stem) {
            return Some(at);
        }
        at += line.len();
    }
    None
}

/// The heading of the instructions' section on reporting.
const REPORT: &str = "Report (always for the attempt you were given):";

/// What replaces that section for a command `coord run` started.
const UNDER_RUN: &str = "\
Report: `coord run` reports for you (COORD_RUN_ID is set). The task is on your stdin. Exit 0
and print your output (YAML or JSON; other text is kept as `text`) on stdout to complete it;
add `next_agent: <name>` to that output to hand off. Exit non-zero to fail it (exit 100: do not
retry); the end of your stderr is the error. Do not run `coord complete`, `fail` or
`heartbeat` for it.

";

/// Returns the instructions for `agent` in a repo whose work folder is `work`.
pub fn instructions(agent: &str, work: &str) -> String {
    format!(
        r#"## Working with coord (tasks in {work}/)

Tasks here are YAML files managed by `coord`; a task's state is the folder it is in. You are
agent `{agent}`: pass `--agent {agent}` (or set `COORD_AGENT={agent}`) on every agent command.

Take work:
- Tasks assigned to you are in `{work}/assigned/{agent}/`. Read one with `coord show <id>`
  (`--json` for machines): `title`, `description`, and `coord.input` (the input with expressions
  resolved; `input.previous` is the previous step's output).
- A pull agent takes the best ready task with `coord claim --agent {agent}`: it prints the id
  and the attempt; exit 4 means nothing to claim.
- Or let coord drive you: `coord run {agent} -- <command>` runs the command once per task (task
  JSON on stdin, COORD_TASK_ID / COORD_ATTEMPT in the environment) and reports for it.

Report (always for the attempt you were given):
- Done: `coord complete <id> --agent {agent} --attempt <n> --output result.yaml` (or
  `--output -` to read YAML/JSON from stdin); `--next-agent <name>` hands off.
- Failed: `coord fail <id> --agent {agent} --attempt <n> --error "what went wrong"`; add
  `--fatal` when another attempt cannot help.
- Long work: `coord heartbeat <id> --agent {agent} --attempt <n>` before the lease in
  `coord.lease_expires_at` ends, or the task is taken back as timed out.
- A refused report (exit 1, stale attempt) means the task moved on: drop your result.

Do not touch:
- The `coord:` block of any task file (coord owns it) and the `result:` block of tasks that are
  not yours; never move task files between folders yourself.
- Other agents' folders under `{work}/assigned/`, `{work}/agents/*.yaml`, and `coord.yaml`.
- To add work, use `coord new "<title>" --agent <name>` rather than writing files by hand.

See the board with `coord status`, a task's history with `coord log <id>`.
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_is_replaced_in_place_and_text_around_it_kept() {
        let doc = "# Notes\n\nmine\n";
        let once = with_section(doc, "v1").expect("ok");
        assert!(once.starts_with("# Notes\n\nmine\n\n"));
        let twice = with_section(&format!("{once}tail\n"), "v2").expect("ok");
        assert_eq!(
            twice,
            format!("# Notes\n\nmine\n\n{BEGIN}\nv2\n{END}\ntail\n")
        );
    }

    #[test]
    fn unbalanced_markers_are_refused() {
        assert!(with_section(&format!("{END}\n{BEGIN}\n"), "x").is_err());
        assert!(with_section(&format!("a\n{BEGIN}\n"), "x").is_err());
    }

    #[test]
    fn under_run_the_report_section_says_the_runner_reports() {
        let text = instructions("a", "work");
        let from = text.find(REPORT).expect("report section");
        assert!(text[from..].contains("Do not touch:"));
    }

    #[test]
    fn instructions_stay_short() {
        let text = instructions("some-agent-name", "work");
        // About four characters a token: well under 1,500 tokens.
        assert!(text.len() < 4000, "{} bytes", text.len());
    }
}
