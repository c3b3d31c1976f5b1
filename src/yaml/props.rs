//! Property tests of the splice: generated documents with comments, odd spacing, block
//! scalars and flow collections keep every person-owned byte through coord/result edits.

use super::{parse, remove_block, set_block, Limits};
use proptest::prelude::*;
use serde_json::{json, Value};

fn word() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9]{0,6}"
}

fn comment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[ ]{1,3}# [a-z :#-]{0,12}".prop_map(|c| c)
    ]
}

/// One top-level entry (a key other than result/coord) as YAML text ending in a newline.
fn entry(key: String) -> impl Strategy<Value = String> {
    let k = key.clone();
    prop_oneof![
        (word(), "[ ]{1,4}", comment()).prop_map(move |(v, sp, c)| format!("{k}:{sp}{v}{c}\n")),
        (prop::collection::vec(word(), 0..4), comment()).prop_map({
            let k = key.clone();
            move |(items, c)| format!("{k}: [{}]{c}\n", items.join(" ,  "))
        }),
        (word(), word()).prop_map({
            let k = key.clone();
            move |(a, b)| format!("{k}: {{{a}a: 1, {b}b: [x, \"y # z\"]}}\n")
        }),
        (prop::collection::vec(word(), 1..4), prop::bool::ANY).prop_map({
            let k = key.clone();
            move |(lines, folded)| {
                let ind = if folded { ">-" } else { "|" };
                let body: Vec<String> = lines.iter().map(|l| format!("  {l}\n\n")).collect();
                format!("{k}: {ind}\n{}", body.concat())
            }
        }),
        (prop::collection::vec((word(), comment()), 1..4)).prop_map({
            let k = key.clone();
            move |items| {
                let body: Vec<String> = items
                    .iter()
                    .map(|(w, c)| format!("  -   {w}{c}\n"))
                    .collect();
                format!("{k}:\n{}", body.concat())
            }
        }),
        (word(), word())
            .prop_map(move |(a, b)| format!("{key}:\n  {a}a: 1\n  # inner\n  {b}b: 'q'\n")),
    ]
}

fn filler() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("\n".to_string()),
        "# [a-z ]{0,10}\n"
    ]
}

/// A document: person entries with fillers, maybe a result block, maybe a coord block last.
fn document() -> impl Strategy<Value = (String, bool, bool)> {
    let keys = prop::collection::btree_set("[a-q][a-z]{1,5}", 1..6);
    (keys, prop::bool::ANY, prop::bool::ANY)
        .prop_flat_map(|(keys, has_result, has_coord)| {
            let entries: Vec<_> = keys
                .into_iter()
                .map(|k| (filler(), entry(k)).prop_map(|(f, e)| format!("{f}{e}")))
                .collect();
            (entries, Just(has_result), Just(has_coord), filler())
        })
        .prop_map(|(entries, has_result, has_coord, tail)| {
            let mut text = entries.concat();
            if has_result {
                text.push_str("result:\n  status: success # agent\n  output: {a: 1}\n");
            }
            text.push_str(&tail);
            if has_coord {
                text.push_str("coord:\n  state: ready\n  attempt: 0\n");
            }
            (text, has_result, has_coord)
        })
}

fn coord_value() -> impl Strategy<Value = Value> {
    (word(), 0u32..9, prop::option::of("[ -~]{0,20}")).prop_map(|(state, attempt, note)| {
        json!({"state": state, "attempt": attempt, "history": [{"note": note}]})
    })
}

fn prefix_before(text: &str, key: &str) -> String {
    let doc = parse(text, &Limits::default()).expect("generated YAML parses");
    match doc.top_keys.iter().find(|k| k.key == key) {
        Some(k) => text.split_inclusive('\n').take(k.pos.line - 1).collect(),
        None => text.to_string(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn setting_coord_keeps_every_byte_before_it((text, _, _) in document(), v in coord_value()) {
        let doc = parse(&text, &Limits::default()).expect("generated YAML parses");
        let out = set_block(&text, &doc, "coord", &v).expect("splice");
        let before = prefix_before(&text, "coord");
        prop_assert!(out.starts_with(&before), "lost bytes:\n{text}\n---\n{out}");
        let again = parse(&out, &Limits::default()).expect("output parses");
        prop_assert_eq!(&again.value["coord"], &v);
        prop_assert_eq!(again.top_keys.last().map(|k| k.key.as_str()), Some("coord"));
    }

    #[test]
    fn removing_result_keeps_everything_else((text, has_result, _) in document()) {
        let doc = parse(&text, &Limits::default()).expect("generated YAML parses");
        let out = remove_block(&text, &doc, "result").expect("splice");
        let mut expected = doc.value.clone();
        if let Some(m) = expected.as_object_mut() {
            m.remove("result");
        }
        let again = parse(&out, &Limits::default()).expect("output parses");
        prop_assert_eq!(again.value, expected);
        prop_assert!(out.starts_with(&prefix_before(&text, "result")));
        prop_assert_eq!(has_result, out.len() < text.len());
    }

    #[test]
    fn writing_a_result_goes_before_coord((text, _, has_coord) in document()) {
        let doc = parse(&text, &Limits::default()).expect("generated YAML parses");
        let r = json!({"status": "failure", "error": {"message": "a: b # c"}});
        let out = set_block(&text, &doc, "result", &r).expect("splice");
        let again = parse(&out, &Limits::default()).expect("output parses");
        prop_assert_eq!(&again.value["result"], &r);
        let keys: Vec<&str> = again.top_keys.iter().map(|k| k.key.as_str()).collect();
        if has_coord {
            prop_assert_eq!(keys[keys.len() - 2..].to_vec(), vec!["result", "coord"]);
        }
    }
}
