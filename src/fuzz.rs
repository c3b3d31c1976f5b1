//! The entry point shared by the cargo-fuzz target `task_file` (in `fuzz/`, nightly) and the
//! corpus-replay and property tests that run on stable: parse, validate and edit the `coord:`
//! and `result:` blocks of arbitrary bytes. It must never panic; every edit that succeeds
//! must read back. Pure.

use crate::check;
use crate::schema::Schema;
use crate::yaml::{self, Limits};
use serde_json::json;

/// Runs bytes through everything a tick does with an untrusted task file.
pub fn task_file(bytes: &[u8]) {
    let limits = Limits::default();
    let _ = check::read_task("fuzz", bytes, &Schema::builtin_task(), &limits);
    let Ok(doc) = yaml::parse_bytes(bytes, &limits) else {
        return;
    };
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let coord = json!({"state": "ready", "attempt": 1, "history": [{"note": "a: b\n- c"}]});
    if let Ok(edited) = yaml::set_block(text, &doc, "coord", &coord) {
        let again = yaml::parse(&edited, &limits).expect("an accepted coord edit reads back");
        assert_eq!(
            again.value.get("coord"),
            Some(&coord),
            "coord block as written"
        );
        if let Ok(removed) = yaml::remove_block(&edited, &again, "result") {
            yaml::parse(&removed, &limits).expect("an accepted removal reads back");
        }
    }
    let result = json!({"status": "success", "output": {"k": "v: w", "n": [1, 2.5, null]}});
    if let Ok(edited) = yaml::set_block(text, &doc, "result", &result) {
        let again = yaml::parse(&edited, &limits).expect("an accepted result edit reads back");
        assert_eq!(
            again.value.get("result"),
            Some(&result),
            "result block as written"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::task_file;
    use proptest::prelude::*;
    use std::path::Path;

    fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                files_under(&p, out);
            } else {
                out.push(p);
            }
        }
    }

    #[test]
    fn corpus_and_fixtures_replay_without_panics() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        files_under(&root.join("fuzz/corpus/task_file"), &mut files);
        let seeds = files.len();
        files_under(&root.join("fixtures"), &mut files);
        assert!(
            seeds > 0 && files.len() > seeds,
            "corpus and fixtures are found"
        );
        for f in files {
            task_file(&std::fs::read(&f).expect("read"));
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            task_file(&bytes);
        }

        #[test]
        fn yaml_shaped_text_never_panics(
            lines in proptest::collection::vec(
                "(title|coord|result|  x|- y|#c|\\.\\.\\.|---|&a|\\*a|!!str|\\{a: b\\}|\"q|'s|:)[ :a-z0-9\\[\\]{}|>-]{0,12}",
                0..12,
            )
        ) {
            task_file(lines.join("\n").as_bytes());
        }
    }
}
