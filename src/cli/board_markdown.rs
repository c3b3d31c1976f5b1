//! The board as Markdown (`coord status --markdown`), e.g. for a GitHub Actions job summary
//! (`$GITHUB_STEP_SUMMARY`). Reads the same view as `--json`; text from task files is escaped
//! so that it cannot add links, images or HTML to the page.

use serde_json::Value;

/// Returns the board view as a Markdown document.
pub fn render(v: &Value) -> String {
    let mut md = String::from("## coord board\n\n| state | tasks |\n|---|---:|\n");
    if let Some(counts) = v["counts"].as_object() {
        for (state, n) in counts.iter().filter(|(_, n)| n.as_u64() != Some(0)) {
            md.push_str(&format!("| {state} | {n} |\n"));
        }
    }
    let agents = v["agents"].as_array().cloned().unwrap_or_default();
    if !agents.is_empty() {
        md.push_str("\n| agent | active | limit | circuit |\n|---|---:|---:|---|\n");
        for a in &agents {
            md.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                text(&a["name"]),
                a["active"],
                a["limit"],
                text(&a["circuit"])
            ));
        }
    }
    list(&mut md, v, "waiting", "Ready but waiting", |w| {
        format!("`{}`: {}", text(&w["id"]), text(&w["reason"]))
    });
    list(&mut md, v, "blocked", "Blocked", |b| {
        let open: Vec<String> = b["waiting_for"]
            .as_array()
            .map(|a| a.iter().map(|d| format!("`{}`", text(d))).collect())
            .unwrap_or_default();
        let gates = b["gates"].as_array().into_iter().flatten().map(text);
        let open: Vec<String> = open.into_iter().chain(gates).collect();
        format!("`{}` waits for {}", text(&b["id"]), open.join(", "))
    });
    list(&mut md, v, "overdue", "Overdue", |o| {
        format!(
            "`{}` ({}), due {}",
            text(&o["id"]),
            text(&o["state"]),
            text(&o["due"])
        )
    });
    if let Some(m) = v["invalid"].as_object().filter(|m| !m.is_empty()) {
        md.push_str("\n### Invalid\n\n");
        for (id, reason) in m {
            md.push_str(&format!("- `{}`: {}\n", escape(id), text(reason)));
        }
    }
    list(&mut md, v, "problems", "Problems", |p| {
        format!("{}: {}", text(&p["path"]), text(&p["message"]))
    });
    md
}

fn list(md: &mut String, v: &Value, key: &str, title: &str, line: impl Fn(&Value) -> String) {
    if let Some(items) = v[key].as_array().filter(|a| !a.is_empty()) {
        md.push_str(&format!("\n### {title}\n\n"));
        for i in items {
            md.push_str(&format!("- {}\n", line(i)));
        }
    }
}

/// Returns a JSON value as one line of escaped Markdown text.
fn text(v: &Value) -> String {
    let s = match v {
        Value::String(x) => x.clone(),
        other => other.to_string(),
    };
    escape(&crate::redact::one_line(&s))
}

/// Escapes what Markdown or HTML would read as markup; inside a code span only the backtick
/// matters, and it is replaced.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '`' => out.push('\''),
            '|' | '\\' | '*' | '_' | '[' | ']' | '!' | '#' | '(' | ')' | '~' => {
                out.push('\\');
                out.push(c);
            }
            // Plain text in Markdown, and an entity would show as such in a code span.
            '"' | '\'' => out.push(c),
            c if c.is_control() => out.push(' '),
            c => match crate::view::html_entity(c) {
                Some(entity) => out.push_str(entity),
                None => out.push(c),
            },
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn task_text_cannot_add_markup() {
        let v = json!({
            "counts": {"ready": 1, "done": 0},
            "agents": [{"name": "alice", "active": 1, "limit": 2, "circuit": "closed"}],
            "waiting": [{"id": "a`b", "reason": "<img src=x> [link](http://x) | col"}],
            "invalid": {"bad": "line\nbreak **bold**"},
        });
        let md = render(&v);
        assert!(md.contains("| ready | 1 |"), "{md}");
        assert!(!md.contains("| done |"), "{md}");
        assert!(md.contains("| alice | 1 | 2 | closed |"), "{md}");
        assert!(md.contains("`a'b`"), "{md}");
        assert!(
            md.contains("&lt;img src=x&gt; \\[link\\]\\(http://x\\) \\| col"),
            "{md}"
        );
        assert!(!md.contains("<img"), "{md}");
        assert!(md.contains("\\*\\*bold\\*\\*"), "{md}");
    }
}
