//! What the board shows of its tasks: which tasks a page's query keeps (state, agent and
//! priority as `coord list` filters them, a label, a text searched in ids and titles), the
//! order of a column (priority, then age, the oldest first) and the facts of one card
//! (priority, age, due, agent, attempt). The filters read each task's summary, which the stat
//! cache keeps, so a filtered board of 10,000 tasks parses none; a card's fields are read
//! through `Task::peek`, which leaves no parse behind. Pure: the clock comes in.

use super::api::filter_of;
use super::problem::Problem;
use crate::board::TaskFile;
use crate::model::{AgentName, Priority, State};
use crate::ops::TaskFilter;
use jiff::Timestamp;
use std::cmp::Reverse;
use std::collections::BTreeMap;

/// The query parameters of the board's pages besides a column page's `from`.
pub const KEYS: [&str; 6] = ["state", "agent", "priority", "label", "q", "wall"];

/// A board page's filters and mode, from its query.
#[derive(Debug, Clone, Default)]
pub struct BoardQuery {
    /// State, agent and priority, as `coord list` and `GET /v1/tasks` filter them.
    pub filter: TaskFilter,
    /// Only tasks with this label.
    pub label: Option<String>,
    /// Only tasks whose id or title contains this text, in any case (kept lowercase).
    pub text: Option<String>,
    /// The wall-screen mode: large type, no controls.
    pub wall: bool,
    /// The parameters given, empty ones left out, in name order.
    given: BTreeMap<String, String>,
}

impl BoardQuery {
    /// Reads a page's query (`from` and empty values are passed over); 400 on a value that
    /// names no state, agent or priority, or a `wall` other than `1`.
    pub fn of(mut q: BTreeMap<String, String>) -> Result<BoardQuery, Problem> {
        q.retain(|k, v| k != "from" && !v.trim().is_empty());
        let filter = filter_of(&q)?;
        let wall = match q.get("wall").map(String::as_str) {
            None => false,
            Some("1") => true,
            Some(w) => return Err(Problem::bad(format!("wall {w:?} is not 1"))),
        };
        Ok(BoardQuery {
            filter,
            label: q.get("label").cloned(),
            text: q.get("q").map(|t| t.trim().to_lowercase()),
            wall,
            given: q,
        })
    }

    /// Returns the query string (`?name=value&...`, empty when nothing was given), each
    /// value percent-encoded.
    pub fn query(&self) -> String {
        let pairs: Vec<String> = self
            .given
            .iter()
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect();
        if pairs.is_empty() {
            String::new()
        } else {
            format!("?{}", pairs.join("&"))
        }
    }

    /// Returns the value given for `key`, or "".
    pub fn value(&self, key: &str) -> &str {
        self.given.get(key).map_or("", String::as_str)
    }

    /// Returns whether a filter or a search is given (the wall mode is neither).
    pub fn narrows(&self) -> bool {
        self.given.keys().any(|k| k != "wall")
    }

    /// Returns whether a task, whose facts are `f`, passes every filter and the search.
    fn keeps(&self, t: &TaskFile, f: &Facts<'_>, default: Priority) -> bool {
        let filter = &self.filter;
        filter.state.is_none_or(|s| t.folder.state == s)
            && filter
                .agent
                .as_ref()
                .is_none_or(|a| t.folder.agent.as_ref() == Some(a) || f.agent == Some(a))
            && filter
                .priority
                .is_none_or(|p| f.priority.unwrap_or(default) == p)
            && self.label.as_ref().is_none_or(|l| f.labels.contains(l))
            && self
                .text
                .as_ref()
                .is_none_or(|q| f.text.contains(q.as_str()))
    }
}

/// What the board's filters read of a task: from its summary ([`crate::check::Shown`]),
/// so filtering parses no task.
struct Facts<'t> {
    /// The id and the title, lowercase, on two lines.
    text: String,
    labels: &'t [String],
    priority: Option<Priority>,
    agent: Option<&'t AgentName>,
}

impl<'t> Facts<'t> {
    fn of(t: &'t TaskFile, search: bool) -> Facts<'t> {
        let id = t.id.as_str().to_lowercase();
        match &t.read {
            Ok(task) => {
                let s = &task.summary().shown;
                Facts {
                    text: match search {
                        true => format!("{id}\n{}", s.title.to_lowercase()),
                        false => String::new(),
                    },
                    labels: &s.labels,
                    priority: s.priority,
                    agent: s.agent.as_ref(),
                }
            }
            Err(_) => Facts {
                text: id,
                labels: &[],
                priority: None,
                agent: None,
            },
        }
    }
}

/// Returns the tasks that pass `q`, in the order given.
pub fn filter<'a>(tasks: &'a [TaskFile], q: &BoardQuery, default: Priority) -> Vec<&'a TaskFile> {
    if !q.narrows() {
        return tasks.iter().collect();
    }
    tasks
        .iter()
        .filter(|t| q.filter.state.is_none_or(|s| t.folder.state == s))
        .filter(|t| q.keeps(t, &Facts::of(t, q.text.is_some()), default))
        .collect()
}

/// Percent-encodes a query value (all but letters, digits and `-_.~`).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Orders a column: open tasks by priority (highest first), then age (oldest first, a task
/// without a creation time last), then id; finished ones (most of a big board) by id alone,
/// so a page need not read 10,000 finished tasks to order them.
pub fn sort(tasks: &mut [&TaskFile], state: State, default: Priority) {
    if state.is_final() {
        tasks.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
        return;
    }
    tasks.sort_by_cached_key(|t| {
        let (priority, created) = rank(t, default);
        (
            Reverse(priority),
            created.is_none(),
            created,
            t.id.to_string(),
        )
    });
}

/// A task's priority and creation time: from the summary of a task waiting to start (no
/// parse), else from the task.
fn rank(t: &TaskFile, default: Priority) -> (Priority, Option<Timestamp>) {
    let Ok(task) = &t.read else {
        return (default, None);
    };
    if let Some(w) = &task.summary().waiting {
        return (w.priority.unwrap_or(default), w.created_at);
    }
    task.peek(|d| (d.spec.priority.unwrap_or(default), d.coord.created_at))
}

/// What a card shows of a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    /// The title, or why the file does not read.
    pub title: String,
    /// The priority (the default when it names none).
    pub priority: Priority,
    /// How long ago it was taken in (`3d`, `5h`, `12m`, `now`), when known.
    pub age: Option<String>,
    /// `due`, as written.
    pub due: Option<String>,
    /// Whether `due` has passed.
    pub overdue: bool,
    /// The agent holding it, assigned it or named in it.
    pub agent: Option<String>,
    /// The attempt (0 before the first).
    pub attempt: u32,
}

impl Card {
    /// Returns the card of a task at `now`.
    pub fn of(t: &TaskFile, default: Priority, now: Timestamp) -> Card {
        let folder_agent = t.folder.agent.as_ref().map(|a| a.to_string());
        let Ok(task) = &t.read else {
            return Card {
                title: "(does not read)".to_string(),
                priority: default,
                age: None,
                due: None,
                overdue: false,
                agent: folder_agent,
                attempt: 0,
            };
        };
        task.peek(|d| Card {
            title: d.spec.title.clone(),
            priority: d.spec.priority.unwrap_or(default),
            age: d.coord.created_at.map(|c| age(c, now)),
            due: d.spec.due.clone(),
            overdue: !t.folder.state.is_final() && d.spec.due_at().is_some_and(|at| at < now),
            agent: folder_agent
                .or_else(|| d.coord.assigned_to.as_ref().map(|a| a.to_string()))
                .or_else(|| d.spec.agent.as_ref().map(|a| a.to_string())),
            attempt: d.coord.attempt,
        })
    }
}

/// Returns the time from `then` to `now` in its largest whole unit.
pub fn age(then: Timestamp, now: Timestamp) -> String {
    let secs = (now.as_second() - then.as_second()).max(0);
    match secs {
        s if s >= 86_400 => format!("{}d", s / 86_400),
        s if s >= 3_600 => format!("{}h", s / 3_600),
        s if s >= 60 => format!("{}m", s / 60),
        _ => "now".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> Result<BoardQuery, Problem> {
        BoardQuery::of(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn filters_read_labels_titles_priorities_and_agents() {
        use crate::board::{Board, RawFile};
        use crate::schema::Schema;
        let (t, a) = (Schema::builtin_task(), Schema::builtin_agent());
        let raw = |rel: &str, text: &str| RawFile::new(rel.into(), Ok(text.as_bytes().to_vec()));
        let files = vec![
            raw("inbox/a.yaml", "title: Alpha\nlabels: [docs]\n"),
            raw(
                "inbox/b.yaml",
                "title: Beta\npriority: high\nagent: writer\n",
            ),
        ];
        let limits = crate::yaml::Limits::default();
        let board = Board::build("work", files, vec![], (&t, &a), &limits);
        let ids = |q: &[(&str, &str)]| -> Vec<String> {
            let q = query(q).expect("query");
            let kept = filter(&board.tasks, &q, Priority::Normal);
            kept.iter().map(|t| t.id.to_string()).collect()
        };
        assert_eq!(ids(&[("label", "docs")]), ["a"]);
        assert_eq!(ids(&[("q", "BET")]), ["b"]);
        assert_eq!(ids(&[("q", "a")]), ["a", "b"], "ids and titles");
        assert_eq!(ids(&[("priority", "normal")]), ["a"], "the default");
        assert_eq!(ids(&[("agent", "writer")]), ["b"]);
        assert!(ids(&[("state", "ready"), ("q", "a")]).is_empty());
        assert_eq!(ids(&[]), ["a", "b"], "no filter keeps every task");
    }

    #[test]
    fn a_filtered_board_parses_no_task() {
        use crate::board::{Board, RawFile};
        use crate::schema::Schema;
        let (t, a) = (Schema::builtin_task(), Schema::builtin_agent());
        let files: Vec<RawFile> = (0..50)
            .map(|i| {
                let text = format!(
                    "title: Task {i}\nlabels: [l{}]\npriority: high\nagent: writer\ncoord:\n  state: ready\n",
                    i % 5
                );
                RawFile::new(format!("ready/t{i}.yaml"), Ok(text.into_bytes()))
            })
            .collect();
        let limits = crate::yaml::Limits::default();
        let board = Board::build("work", files, vec![], (&t, &a), &limits);
        let before = crate::check::live::parses();
        for q in [
            &[("label", "l3")][..],
            &[("q", "task 4")],
            &[("priority", "high"), ("agent", "writer")],
        ] {
            let kept = filter(&board.tasks, &query(q).expect("query"), Priority::Normal);
            assert!(!kept.is_empty(), "{q:?}");
        }
        assert_eq!(crate::check::live::parses(), before, "no task was parsed");
    }

    #[test]
    fn ages_read_in_their_largest_unit() {
        let now: Timestamp = "2026-11-22T10:00:00Z".parse().expect("time");
        let at = |s: &str| s.parse::<Timestamp>().expect("time");
        assert_eq!(age(at("2026-11-20T09:00:00Z"), now), "2d");
        assert_eq!(age(at("2026-11-22T04:59:00Z"), now), "5h");
        assert_eq!(age(at("2026-11-22T09:48:00Z"), now), "12m");
        assert_eq!(age(at("2026-11-22T10:00:30Z"), now), "now");
    }

    #[test]
    fn a_query_drops_empty_values_and_encodes_the_rest() {
        let q = query(&[
            ("q", "a b&c"),
            ("agent", ""),
            ("from", "500"),
            ("wall", "1"),
        ])
        .expect("query");
        assert_eq!(q.query(), "?q=a%20b%26c&wall=1");
        assert_eq!(q.text.as_deref(), Some("a b&c"));
        assert!(q.wall && q.narrows());
        assert!(!query(&[("wall", "1")]).expect("query").narrows());
        assert!(query(&[("wall", "yes")]).is_err());
        assert!(query(&[("priority", "urgent")]).is_err());
    }
}
