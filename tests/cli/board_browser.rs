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
