//! Carrying out an [`Op::Edit`](crate::engine::Op::Edit) against the bytes on disk now, not the
//! ones it was planned from: an agent may have written its `result:` between the plan (or a
//! killed run) and this write. Does I/O (reads and atomically rewrites one file).

use super::{io_err, Session, StoreError};
use crate::fsx;
use crate::yaml::{self, Limits};

/// What an edit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Edited {
    /// The file holds the planned `coord:` block (written, spliced, or already there).
    Done,
    /// The file was left as found, for this reason.
    LeftAsFound(String),
}

impl Session<'_> {
    /// Applies the coordinator's edit `text` (planned from bytes whose part outside `coord:`
    /// hashes to `rest`) to the file at `path` as it is now: the planned text while that part
    /// is unchanged; else, when the edit changes nothing outside `coord:`, the bytes there
    /// now with the planned `coord:` block spliced in; else nothing.
    pub(super) fn edit(&self, path: &str, text: &str, rest: u64) -> Result<Edited, StoreError> {
        let now = match fsx::read_limited(self.root(), path, usize::MAX - 1) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Edited::LeftAsFound("the file is gone".to_string()))
            }
            Err(e) => return Err(io_err(&self.abs(path))(e)),
        };
        if now == text.as_bytes() {
            return Ok(Edited::Done);
        }
        let new = match merge(&now, text, rest) {
            Ok(new) => new,
            Err(why) => return Ok(Edited::LeftAsFound(why)),
        };
        self.write_file(path, new.as_bytes())?;
        Ok(Edited::Done)
    }
}

/// Returns what the file holding `now` should hold after the edit `text` planned from bytes
/// whose part outside `coord:` hashes to `rest`, or why it must be left as it is.
fn merge(now: &[u8], text: &str, rest: u64) -> Result<String, String> {
    let changed = || "it changed since the plan was made".to_string();
    let now = std::str::from_utf8(now).map_err(|_| changed())?;
    let now_doc = yaml::parse(now, &Limits::default()).map_err(|_| changed())?;
    if crate::engine::rest_hash(now, &now_doc) == Some(rest) {
        return Ok(text.to_string());
    }
    let planned = yaml::parse(text, &Limits::default()).map_err(|_| changed())?;
    if crate::engine::rest_hash(text, &planned) != Some(rest) {
        return Err(format!(
            "{} and the planned edit changes more than the coord: block",
            changed()
        ));
    }
    let coord = planned
        .value
        .get("coord")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    yaml::set_block(now, &now_doc, "coord", &coord).map_err(|e| format!("{}: {e}", changed()))
}

#[cfg(test)]
mod tests {
    use super::merge;
    use crate::yaml::{parse, Limits};

    fn rest_of(text: &str) -> u64 {
        let doc = parse(text, &Limits::default()).expect("parses");
        crate::engine::rest_hash(text, &doc).expect("rest")
    }

    #[test]
    fn writes_the_plan_while_only_coord_differs() {
        let base = "title: x\ncoord:\n  state: ready\n";
        let now = "title: x\ncoord:\n  state: weird\n";
        let text = "title: x\ncoord:\n  state: assigned\n";
        assert_eq!(merge(now.as_bytes(), text, rest_of(base)), Ok(text.into()));
    }

    #[test]
    fn splices_coord_into_a_result_written_meanwhile() {
        let base = "# c\ntitle: x\ncoord:\n  state: ready\n";
        let now = "# c\ntitle: x\nresult:\n  status: success\ncoord:\n  state: ready\n";
        let text = "# c\ntitle: x\ncoord:\n  state: assigned\n";
        assert_eq!(
            merge(now.as_bytes(), text, rest_of(base)),
            Ok("# c\ntitle: x\nresult:\n  status: success\ncoord:\n  state: assigned\n".into())
        );
    }

    #[test]
    fn leaves_a_file_whose_result_the_plan_would_drop() {
        let base = "title: x\nresult:\n  status: failure\ncoord:\n  attempt: 1\n";
        let now = "title: x\nresult:\n  status: success\ncoord:\n  attempt: 1\n";
        let text = "title: x\ncoord:\n  attempt: 1\n  history: [failure]\n";
        let why = merge(now.as_bytes(), text, rest_of(base)).expect_err("left alone");
        assert!(why.contains("changed since the plan"), "{why}");
    }

    #[test]
    fn leaves_a_file_that_does_not_parse() {
        let text = "title: x\ncoord:\n  state: assigned\n";
        assert!(merge(b"title: [x\n", text, 0).is_err());
    }
}
