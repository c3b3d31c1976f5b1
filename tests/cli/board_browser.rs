//! The live board in a real browser: headless Chromium (see `cdp`) loads `/` from `coord serve`
//! on an ephemeral port, a `coord tick` in the test moves a task, and the page shows it in its
//! new column without a reload. Skipped, with a message, when no Chromium is installed;
//! `.ci/run` installs one and sets `COORD_BROWSER_TEST=require`, so there it always runs.

use crate::cdp::{chromium_or_skip, Browser};
use crate::harness::TestRepo;
use crate::http::Server;
use std::time::Duration;

/// Set to a path (e.g. `docs/board.png`) to save the screenshot the test takes.
const SCREENSHOT: &str = "COORD_BOARD_SCREENSHOT";

/// True when the card of `id` is in the column of `state`.
fn card_in(id: &str, state: &str) -> String {
    format!(
        "document.querySelector('.column[data-state=\"{state}\"] .card[data-id=\"{id}\"]') !== null"
    )
}

/// The demo's finished pipeline, then two tasks of the test's: the writer's release notes
/// (in the inbox until a tick) and a post that waits for them.
fn demo_repo() -> TestRepo {
    let mut r = TestRepo::empty();
    let dir = r.path().to_str().expect("utf-8 path").to_string();
    r.ok(&["demo", &dir]);
    // The demo's agents ran at the test's clock and a minute later: go on from the real clock.
    let now = jiff::Timestamp::now().to_string();
    r.at(&now);
    r.ok(&[
        "new",
        "Write the release notes",
        "--id",
        "release-notes",
        "--agent",
        "writer",
    ]);
    r.ok(&[
        "new",
        "Post the announcement",
        "--id",
        "post",
        "--depends-on",
        "release-notes",
    ]);
    r
}

#[test]
fn serve_board_in_a_browser_shows_a_tick_without_a_reload() {
    let Some(chromium) = chromium_or_skip("serve_board_in_a_browser_shows_a_tick_without_a_reload")
    else {
        return;
    };
    let r = demo_repo();
    let s = Server::start(&r);
    let mut b = Browser::start(&chromium, 1440, 1000);
    b.open(&format!("http://{}/", s.addr));

    let loaded = format!(
        "document.getElementById('live')?.textContent === 'live' && {} && {}",
        card_in("market-research", "done"),
        card_in("release-notes", "inbox")
    );
    assert!(
        b.until(Duration::from_secs(30), &loaded).is_some(),
        "the board never showed the demo's tasks live: {}",
        b.eval("document.body.innerText")
    );
    // A page that reloads loses this.
    b.eval("window.coordSamePage = true");

    r.ok(&["tick"]);
    let moved = format!(
        "window.coordSamePage === true && {} && {}",
        card_in("release-notes", "assigned"),
        card_in("post", "blocked")
    );
    let took = b.until(Duration::from_secs(30), &moved);
    assert!(
        took.is_some(),
        "the board did not show the tick without a reload: {}",
        b.eval("document.body.innerText")
    );
    eprintln!(
        "the board showed the tick after {:?}",
        took.unwrap_or_default()
    );
    assert!(
        !b.eval(&card_in("release-notes", "inbox"))
            .as_bool()
            .unwrap_or(true),
        "the card left the inbox column"
    );

    let png = b.screenshot();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    if let Some(path) = std::env::var_os(SCREENSHOT) {
        std::fs::write(&path, &png).expect("write the screenshot");
    }
}

/// What a page's script gets when it asks `url` (with `init`, a JavaScript object): the
/// status, or `network error` when the browser refused or could not connect.
fn fetch_status(b: &mut Browser, url: &str, init: &str) -> String {
    let js = format!(
        "fetch({url:?}, {init}).then(r => String(r.status === 0 ? 'opaque' : r.status), \
         () => 'network error')"
    );
    b.eval_async(&js).as_str().unwrap_or("").to_string()
}

#[test]
fn serve_board_in_a_browser_refuses_rebinding_and_cross_origin_writes() {
    let Some(chromium) =
        chromium_or_skip("serve_board_in_a_browser_refuses_rebinding_and_cross_origin_writes")
    else {
        return;
    };
    let r = demo_repo();
    let s = Server::start(&r);
    let port = s.addr.rsplit_once(':').map(|(_, p)| p).expect("port");
    let other: u16 = if port == "8099" { 8098 } else { 8099 };
    // The attacker's names resolve to this machine, as a rebinding DNS server makes them;
    // `noport` reaches the server on port 80 of its URL, `localhost:{other}` on another port.
    let resolve = format!(
        "--host-resolver-rules=MAP 127.evil.example 127.0.0.1, \
         MAP localhost.evil.example 127.0.0.1, MAP noport.evil.example 127.0.0.1:{port}, \
         MAP localhost 127.0.0.1:{port}"
    );
    let mut b = Browser::start_with(&chromium, 1024, 768, &[&resolve]);
    let post = r#"{method: "POST", body: JSON.stringify({title: "Planted", id: "planted"}),
                   headers: {"Content-Type": "application/json"}}"#;
    for origin in [
        format!("http://127.evil.example:{port}"),
        format!("http://localhost.evil.example:{port}"),
        "http://noport.evil.example".to_string(),
        format!("http://localhost:{other}"),
    ] {
        b.open(&format!("{origin}/"));
        let refused = "document.body?.innerText.includes('\"status\":403') === true";
        assert!(
            b.until(Duration::from_secs(30), refused).is_some(),
            "{origin}/ showed: {}",
            b.eval("document.body?.innerText ?? ''")
        );
        for path in ["/v1/board", "/v1/tasks", "/board", "/v1/events"] {
            let got = fetch_status(&mut b, path, "{}");
            assert_eq!(got, "403", "{origin}{path} read by the page");
        }
        assert_eq!(
            fetch_status(&mut b, "/v1/tasks", post),
            "403",
            "{origin} POST"
        );
        let action = "/v1/tasks/release-notes/cancel";
        assert_eq!(fetch_status(&mut b, action, post), "403", "{origin} cancel");
        // The same page writing to the server's real address: a cross-origin write.
        let real = format!("http://{}/v1/tasks", s.addr);
        let no_cors =
            r#"{method: "POST", mode: "no-cors", body: '{"title": "Planted", "id": "planted"}'}"#;
        fetch_status(&mut b, &real, no_cors);
        let cancel = format!("http://{}{action}", s.addr);
        fetch_status(
            &mut b,
            &cancel,
            r#"{method: "POST", mode: "no-cors", body: "{}"}"#,
        );
    }
    assert!(r.find("planted").is_empty(), "a page planted a task");
    assert_eq!(r.where_is("release-notes"), "work/inbox/release-notes.yaml");

    // The server's own page still works.
    b.open(&format!("http://{}/", s.addr));
    let live = "document.getElementById('live')?.textContent === 'live'";
    assert!(
        b.until(Duration::from_secs(30), live).is_some(),
        "{}",
        b.eval("document.body.innerText")
    );
}

#[test]
fn serve_board_in_a_browser_updates_task_and_column_pages_without_a_reload() {
    let Some(chromium) =
        chromium_or_skip("serve_board_in_a_browser_updates_task_and_column_pages_without_a_reload")
    else {
        return;
    };
    let r = demo_repo();
    let s = Server::start(&r);
    let mut b = Browser::start(&chromium, 1024, 768);
    let task = "document.querySelector('main .state')?.textContent";
    b.open(&format!("http://{}/tasks/release-notes", s.addr));
    let live = "document.getElementById('live')?.textContent === 'live'";
    let inbox = format!("{live} && {task} === 'inbox'");
    assert!(
        b.until(Duration::from_secs(30), &inbox).is_some(),
        "{}",
        b.eval("document.body.innerText")
    );
    b.eval("window.coordSamePage = true");
    let mut column = Browser::start(&chromium, 1024, 768);
    column.open(&format!("http://{}/column/assigned", s.addr));
    let card = "document.querySelector('main .card[data-id=\"release-notes\"]') !== null";
    assert!(
        column.until(Duration::from_secs(30), live).is_some(),
        "{}",
        column.eval("document.body.innerText")
    );
    assert_eq!(column.eval(card), serde_json::json!(false));
    column.eval("window.coordSamePage = true");

    r.ok(&["tick"]);
    let moved = format!("window.coordSamePage === true && {task} === 'assigned'");
    assert!(
        b.until(Duration::from_secs(30), &moved).is_some(),
        "the task page did not show the tick without a reload: {}",
        b.eval("document.body.innerText")
    );
    let listed = format!("window.coordSamePage === true && {card}");
    assert!(
        column.until(Duration::from_secs(30), &listed).is_some(),
        "the column page did not show the tick without a reload: {}",
        column.eval("document.body.innerText")
    );
}

#[test]
fn serve_board_in_a_browser_approves_from_the_board_without_a_reload() {
    let Some(chromium) =
        chromium_or_skip("serve_board_in_a_browser_approves_from_the_board_without_a_reload")
    else {
        return;
    };
    let mut r = demo_repo();
    r.ok(&[
        "new",
        "Delete the old bucket",
        "--id",
        "ask",
        "--agent",
        "writer",
        "--authority",
        "ask_me_first",
    ]);
    r.ok(&["tick"]);
    let later = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(60);
    r.at(&later.to_string());
    r.ok(&["tick"]);
    assert_eq!(r.where_is("ask"), "work/review/ask.yaml");
    let s = Server::start(&r);
    let mut b = Browser::start(&chromium, 1440, 1000);
    b.open(&format!("http://{}/", s.addr));
    let loaded = format!(
        "document.getElementById('live')?.textContent === 'live' && {}",
        card_in("ask", "review")
    );
    assert!(
        b.until(Duration::from_secs(30), &loaded).is_some(),
        "the board never showed the task in review: {}",
        b.eval("document.body.innerText")
    );
    b.eval("window.coordSamePage = true");
    let button = "document.querySelector('.column[data-state=\"review\"] .card[data-id=\"ask\"] \
                  form[action=\"/tasks/ask/approve\"] button')";
    assert_eq!(
        b.eval(&format!("{button} !== null")),
        serde_json::json!(true),
        "no approve button on the card: {}",
        b.eval("document.body.innerHTML")
    );
    b.eval(&format!("{button}.click()"));
    let moved = format!(
        "window.coordSamePage === true && {} && !({})",
        card_in("ask", "ready"),
        card_in("ask", "review")
    );
    let took = b.until(Duration::from_secs(30), &moved);
    assert!(
        took.is_some(),
        "the board did not show the approval without a reload: {}",
        b.eval("document.body.innerText")
    );
    eprintln!(
        "the board showed the approval after {:?}",
        took.unwrap_or_default()
    );
    assert_eq!(r.where_is("ask"), "work/ready/ask.yaml");
}
