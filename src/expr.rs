//! Expressions in task `input` (docs/behaviour.md): `${tasks.<id>.result.output.<path>}` with an
//! optional
//! `?? "default"`. Nothing is evaluated: a path of map keys and `[n]` indexes into one task's
//! output, at most 10 deep, expanding to at most 64 KiB. Pure.

use crate::model::TaskId;
use serde_json::Value;

/// Deepest path into an output.
pub const MAX_DEPTH: usize = 10;
/// Largest expansion of one input.
pub const MAX_EXPANSION: usize = 64 * 1024;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A map key.
    Key(String),
    /// A list index.
    Index(usize),
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expr {
    /// The task whose output it reads.
    pub task: TaskId,
    /// The path into that output.
    pub path: Vec<Step>,
    /// The text used when the value is missing.
    pub default: Option<String>,
    /// Byte range of `${...}` in the string.
    pub span: (usize, usize),
}

/// Returns every expression in `s`, or what is wrong with the first malformed one.
pub fn find_all(s: &str) -> Result<Vec<Expr>, String> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(rel) = s[from..].find("${") {
        let start = from + rel;
        let end = closing_brace(s, start + 2)
            .ok_or_else(|| format!("unclosed expression at {:?}", excerpt(&s[start..])))?;
        out.push(parse_one(&s[start + 2..end], (start, end + 1))?);
        from = end + 1;
    }
    Ok(out)
}

/// Returns every expression anywhere in `input` with the JSON pointer of its string.
pub fn collect(input: &Value) -> Result<Vec<(String, Expr)>, (String, String)> {
    let mut out = Vec::new();
    walk(input, String::new(), &mut |ptr, s| {
        for e in find_all(s).map_err(|m| (ptr.to_string(), m))? {
            out.push((ptr.to_string(), e));
        }
        Ok(())
    })?;
    Ok(out)
}

/// Where a task's output can be read in git: the commit (when known) and the file's path in
/// it.
pub type Location = (Option<String>, String);

/// How expressions read the board: a done task's output, and where its file is committed.
pub struct Outputs<'a> {
    /// Returns a done task's `result.output`.
    pub output_of: &'a dyn Fn(&TaskId) -> Option<Value>,
    /// Returns where a task's file can be read in git.
    pub locate: &'a dyn Fn(&TaskId) -> Option<Location>,
}

/// Returns `input` with every expression replaced, reading outputs through `outputs`.
/// A string that is exactly one expression takes the JSON value itself, or, when that value
/// does not fit in what is left of the 64 KiB budget, a reference to it (task, commit, path,
/// JSON pointer and size), so a fan-in of large outputs still resolves.
pub fn resolve(input: &Value, outputs: &Outputs<'_>) -> Result<Value, String> {
    let mut budget = MAX_EXPANSION;
    resolve_value(input, outputs, &mut budget)
}

fn resolve_value(v: &Value, outputs: &Outputs<'_>, budget: &mut usize) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) => resolve_string(s, outputs, budget)?,
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|x| resolve_value(x, outputs, budget))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| Ok((k.clone(), resolve_value(x, outputs, budget)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

fn resolve_string(s: &str, outputs: &Outputs<'_>, budget: &mut usize) -> Result<Value, String> {
    let output_of = outputs.output_of;
    let exprs = find_all(s)?;
    if exprs.is_empty() {
        return Ok(Value::String(s.to_string()));
    }
    let left = *budget;
    let mut charge = |v: &Value| -> Result<(), String> {
        let size = serde_json::to_string(v).map_or(usize::MAX, |t| t.len());
        *budget = budget
            .checked_sub(size)
            .ok_or_else(|| format!("expressions expand to more than {MAX_EXPANSION} bytes"))?;
        Ok(())
    };
    if exprs.len() == 1 && exprs[0].span == (0, s.len()) {
        let v = lookup(&exprs[0], output_of)?;
        let size = serde_json::to_string(&v).map_or(usize::MAX, |t| t.len());
        let located = (size > left)
            .then(|| (outputs.locate)(&exprs[0].task))
            .flatten();
        let v = match located {
            Some(at) => reference(&exprs[0], at, size),
            None => v,
        };
        charge(&v)?;
        return Ok(v);
    }
    let mut out = String::new();
    let mut at = 0;
    for e in &exprs {
        out.push_str(&s[at..e.span.0]);
        let v = lookup(e, output_of)?;
        charge(&v)?;
        match v {
            Value::String(t) => out.push_str(&t),
            other => out.push_str(&other.to_string()),
        }
        at = e.span.1;
    }
    out.push_str(&s[at..]);
    Ok(Value::String(out))
}

fn lookup(e: &Expr, output_of: &dyn Fn(&TaskId) -> Option<Value>) -> Result<Value, String> {
    let found = output_of(&e.task).and_then(|out| {
        e.path.iter().try_fold(out, |cur, step| match step {
            Step::Key(k) => cur.get(k).cloned(),
            Step::Index(i) => cur.get(*i).cloned(),
        })
    });
    match (found, &e.default) {
        (Some(v), _) => Ok(v),
        (None, Some(d)) => Ok(Value::String(d.clone())),
        (None, None) => Err(format!(
            "${{tasks.{}.result.output{}}} has no value and no ?? default",
            e.task,
            render_path(&e.path)
        )),
    }
}

/// Returns what stands in for a value too large to inline: where to read it.
fn reference(e: &Expr, (commit, path): Location, size: usize) -> Value {
    let pointer: String = std::iter::once("/result/output".to_string())
        .chain(e.path.iter().map(|s| match s {
            Step::Key(k) => format!("/{}", k.replace('~', "~0").replace('/', "~1")),
            Step::Index(i) => format!("/{i}"),
        }))
        .collect();
    let read = match &commit {
        Some(c) => format!("git show {c}:{path}"),
        None => format!("coord show {}", e.task),
    };
    serde_json::json!({
        "ref": {"task": e.task, "commit": commit, "path": path, "pointer": pointer, "bytes": size},
        "note": format!("{size} bytes, too large to copy here; read {pointer} of {read}"),
    })
}

fn render_path(path: &[Step]) -> String {
    path.iter()
        .map(|s| match s {
            Step::Key(k) => format!(".{k}"),
            Step::Index(i) => format!("[{i}]"),
        })
        .collect()
}

/// A malformed expression: the JSON pointer of its string and what is wrong.
type Malformed = (String, String);

fn walk(
    v: &Value,
    ptr: String,
    f: &mut dyn FnMut(&str, &str) -> Result<(), Malformed>,
) -> Result<(), Malformed> {
    match v {
        Value::String(s) => f(&ptr, s),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .try_for_each(|(i, x)| walk(x, format!("{ptr}/{i}"), f)),
        Value::Object(m) => m
            .iter()
            .try_for_each(|(k, x)| walk(x, format!("{ptr}/{}", crate::yaml::pointer_token(k)), f)),
        _ => Ok(()),
    }
}

fn closing_brace(s: &str, from: usize) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in s[from..].char_indices() {
        match (quote, c) {
            (Some(_), _) if escaped => escaped = false,
            (Some('"'), '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, '}') => return Some(from + i),
            _ => {}
        }
    }
    None
}

fn excerpt(s: &str) -> String {
    s.chars().take(40).collect()
}

fn parse_one(body: &str, span: (usize, usize)) -> Result<Expr, String> {
    let shape = || {
        format!(
            "bad expression ${{{}}}: write ${{tasks.<id>.result.output.<path>}} with an optional ?? \"default\"",
            excerpt(body)
        )
    };
    let (reference, default) = match body.split_once("??") {
        Some((r, d)) => (r.trim(), Some(parse_default(d.trim()).ok_or_else(shape)?)),
        None => (body.trim(), None),
    };
    let rest = reference.strip_prefix("tasks.").ok_or_else(shape)?;
    let split = rest.find(".result.output").ok_or_else(shape)?;
    let task = TaskId::new(&rest[..split]).map_err(|e| format!("{}: task id {e}", shape()))?;
    let path = parse_path(&rest[split + ".result.output".len()..]).ok_or_else(shape)?;
    if path.len() > MAX_DEPTH {
        return Err(format!("expression path deeper than {MAX_DEPTH} steps"));
    }
    Ok(Expr {
        task,
        path,
        default,
        span,
    })
}

fn parse_default(d: &str) -> Option<String> {
    if d.len() >= 2 && d.starts_with('"') && d.ends_with('"') {
        return serde_json::from_str(d).ok();
    }
    if d.len() >= 2 && d.starts_with('\'') && d.ends_with('\'') {
        return Some(d[1..d.len() - 1].to_string());
    }
    None
}

fn parse_path(mut s: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    while !s.is_empty() {
        if let Some(rest) = s.strip_prefix('.') {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            let key = &rest[..end];
            let ok = !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !ok {
                return None;
            }
            steps.push(Step::Key(key.to_string()));
            s = &rest[end..];
        } else if let Some(rest) = s.strip_prefix('[') {
            let end = rest.find(']')?;
            steps.push(Step::Index(rest[..end].parse().ok()?));
            s = &rest[end + 1..];
        } else {
            return None;
        }
    }
    Some(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn research(id: &TaskId) -> Option<Value> {
        (id.as_str() == "research").then(|| json!({"summary": "ok", "items": [{"n": 1}, {"n": 2}]}))
    }

    fn nowhere(_: &TaskId) -> Option<Location> {
        None
    }

    const OUTPUTS: Outputs<'static> = Outputs {
        output_of: &research,
        locate: &nowhere,
    };

    #[test]
    fn parses_paths_and_defaults() {
        let e = find_all("x ${tasks.a.b.result.output.items[1].n ?? \"none\"} y").expect("ok");
        assert_eq!(e[0].task.as_str(), "a.b");
        assert_eq!(
            e[0].path,
            vec![
                Step::Key("items".into()),
                Step::Index(1),
                Step::Key("n".into())
            ]
        );
        assert_eq!(e[0].default.as_deref(), Some("none"));
    }

    #[test]
    fn rejects_malformed_and_escaping() {
        for s in [
            "${tasks.a.result}",
            "${env.HOME}",
            "${tasks.../x.result.output}",
            "${tasks.a.result.output.__proto__.constructor()}",
            "${tasks.a.result.output.a.b.c.d.e.f.g.h.i.j.k}",
            "${tasks.a.result.output",
            "${tasks.a.result.output ?? none}",
        ] {
            assert!(find_all(s).is_err(), "{s}");
        }
    }

    #[test]
    fn resolves_whole_values_and_interpolates() {
        let input = json!({
            "whole": "${tasks.research.result.output.items}",
            "text": "n=${tasks.research.result.output.items[1].n}!",
            "missing": "${tasks.research.result.output.nope ?? 'none'}",
        });
        let out = resolve(&input, &OUTPUTS).expect("resolves");
        assert_eq!(out["whole"], json!([{"n": 1}, {"n": 2}]));
        assert_eq!(out["text"], json!("n=2!"));
        assert_eq!(out["missing"], json!("none"));
    }

    #[test]
    fn unresolvable_without_default_fails() {
        let input = json!("${tasks.other.result.output.x}");
        assert!(resolve(&input, &OUTPUTS).is_err());
    }

    #[test]
    fn caps_expansion_and_references_whole_values_past_it() {
        let big = json!({"s": "x".repeat(40_000)});
        let of = |_: &TaskId| Some(big.clone());
        let text = json!([
            "a ${tasks.a.result.output.s}",
            "b ${tasks.a.result.output.s}"
        ]);
        let located =
            |_: &TaskId| Some((Some("c0ffee".to_string()), "work/done/a.yaml".to_string()));
        let outputs = Outputs {
            output_of: &of,
            locate: &located,
        };
        assert!(
            resolve(&text, &outputs).is_err(),
            "text cannot hold a reference"
        );
        let whole = json!(["${tasks.a.result.output.s}", "${tasks.a.result.output.s}"]);
        let out = resolve(&whole, &outputs).expect("the second is referenced");
        assert_eq!(out[0], json!("x".repeat(40_000)));
        assert_eq!(out[1]["ref"]["commit"], json!("c0ffee"));
        assert_eq!(out[1]["ref"]["path"], json!("work/done/a.yaml"));
        assert_eq!(out[1]["ref"]["pointer"], json!("/result/output/s"));
        let unlocated = Outputs {
            output_of: &of,
            locate: &nowhere,
        };
        assert!(resolve(&whole, &unlocated).is_err());
    }
}
