//! The board a team works from, over plain HTTP: the state columns first, cards with their
//! facts in priority-then-age order, filters and search as query parameters, people's actions
//! as same-origin forms that run the CLI's operations, the agents view, a wall-screen mode and
//! the landmarks and labels a keyboard or screen-reader user needs. The browser half (an
//! action updating the page without a reload) is in `board_browser`.

use crate::harness::TestRepo;
use crate::http::{Resp, Server};

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

/// Ready tasks taken in at different times: `z-old` (high, oldest), `m-mid` (normal, labelled
/// `docs`, due), `a-new` (high, newest), and `ask` in review waiting for approval.
fn team_repo() -> TestRepo {
    let mut r = TestRepo::with_agents(&["writer"]);
    // No agent has this capability: the tasks that ask for it wait in ready.
    let nobody = ["--capability", "nobody-has-it"];
    r.at("2026-11-20T10:00:00Z");
    r.ok(&[
        &[
            "new",
            "Old urgent thing",
            "--id",
            "z-old",
            "--priority",
            "high",
        ],
        &nobody[..],
    ]
    .concat());
    r.ok(&["tick"]);
    r.at("2026-11-21T10:00:00Z");
    r.ok(&[
        "new",
        "Write the manual",
        "--id",
        "m-mid",
        "--label",
        "docs",
        "--due",
        "2026-12-01T17:00:00Z",
        nobody[0],
        nobody[1],
    ]);
    r.ok(&["tick"]);
    r.at("2026-11-22T09:00:00Z");
    r.ok(&[
        &[
            "new",
            "New urgent thing",
            "--id",
            "a-new",
            "--priority",
            "high",
        ],
        &nobody[..],
    ]
    .concat());
    r.task(
        "ask",
        "title: Delete the old bucket\nagent: writer\nauthority: ask_me_first\n",
    );
    r.ok(&["tick"]);
    r.at("2026-11-22T09:01:00Z");
    r.ok(&["tick"]);
    r.at("2026-11-22T10:00:00Z");
    assert_eq!(r.where_is("ask"), "work/review/ask.yaml");
    assert_eq!(r.where_is("z-old"), "work/ready/z-old.yaml");
    r
}

/// The part of a page from the column of `state` to the end of that column.
fn column<'a>(page: &'a str, state: &str) -> &'a str {
    let start = format!("data-state=\"{state}\"");
    page.split(&start)
        .nth(1)
        .and_then(|c| c.split("</ul>").next())
        .unwrap_or_else(|| panic!("no column {state} in {page}"))
}

/// The ids of the cards of a part of a page, in order.
fn card_ids(part: &str) -> Vec<String> {
    part.split("<li class=\"card\" data-id=\"")
        .skip(1)
        .filter_map(|c| c.split('"').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn board_page_shows_state_columns_first_with_card_facts_in_priority_then_age_order() {
    let r = team_repo();
    let s = Server::start(&r);
    let page = s.get("/").body;
    let main = page.split("<main").nth(1).expect("a main");
    assert!(
        main.trim_start_matches(|c| c != '>')
            .trim_start_matches('>')
            .starts_with("<h1"),
        "the board's main opens with its heading: {main}"
    );
    assert!(
        !page.contains("class=\"lanes\""),
        "agents are a view of their own, not the first screen"
    );
    assert!(
        page.contains("href=\"/agents\""),
        "a link to the agents view"
    );
    let ready = column(&page, "ready");
    assert_eq!(card_ids(ready), ["z-old", "a-new", "m-mid"], "{ready}");
    assert!(ready.contains("data-priority=\"high\""), "{ready}");
    assert!(ready.contains("<span class=\"age\""), "an age: {ready}");
    assert!(
        ready.contains(">2d</span>"),
        "z-old is two days old: {ready}"
    );
    assert!(ready.contains("due 2026-12-01"), "the due date: {ready}");
    let review = column(&page, "review");
    assert!(
        review.contains("<span class=\"agent\">writer</span>"),
        "{review}"
    );
    let agents = s.get("/agents");
    assert_eq!(agents.status, 200);
    assert!(
        agents.body.contains("data-agent=\"writer\""),
        "{}",
        agents.body
    );
    assert!(
        agents.body.contains("data-live=\"/agents\""),
        "the agents view is live"
    );
}

#[test]
fn board_page_filters_by_agent_state_label_priority_and_text() {
    let r = team_repo();
    let s = Server::start(&r);
    let ids = |query: &str| {
        let page = s.get(&format!("/?{query}"));
        assert_eq!(page.status, 200, "{query}: {}", page.body);
        let main = page
            .body
            .split("<main")
            .nth(1)
            .unwrap_or_default()
            .to_string();
        let mut ids = card_ids(&main);
        ids.sort();
        ids
    };
    assert_eq!(ids("priority=high"), ["a-new", "z-old"]);
    assert_eq!(ids("label=docs"), ["m-mid"]);
    assert_eq!(ids("q=URGENT"), ["a-new", "z-old"], "search ignores case");
    assert_eq!(
        ids("q=old"),
        ["ask", "z-old"],
        "search reads titles and ids"
    );
    assert_eq!(ids("agent=writer"), ["ask"]);
    assert_eq!(ids("state=review"), ["ask"]);
    assert_eq!(ids("state=ready&priority=high&q=new"), ["a-new"]);
    let filtered = s.get("/?priority=high&q=old").body;
    assert!(
        filtered.contains("data-live=\"/board?priority=high&amp;q=old\""),
        "a filtered board stays filtered when it refreshes: {filtered}"
    );
    assert!(
        filtered.contains("value=\"old\""),
        "the search box keeps its text: {filtered}"
    );
    assert_eq!(s.get("/?priority=urgent").status, 400);
    assert_eq!(s.get("/?state=nowhere").status, 400);
    assert_eq!(s.get("/?colour=red").status, 400);
    let column = s.get("/column/ready?priority=high").body;
    let mut listed = card_ids(&column);
    listed.sort();
    assert_eq!(listed, ["a-new", "z-old"], "a column page filters too");
}

#[test]
fn board_page_forms_run_the_operations_and_refuse_other_origins() {
    let r = team_repo();
    let s = Server::start(&r);
    let page = s.get("/").body;
    let review = column(&page, "review");
    assert!(
        review.contains("<form method=\"post\" action=\"/tasks/ask/approve\"")
            && review.contains(">approve</button>"),
        "the card in review has an approve button: {review}"
    );
    let origin = format!("http://{}", s.addr);
    let post = |path: &str, from: &str, body: &str| -> Resp {
        s.req(
            "POST",
            path,
            &[FORM, ("Origin", from), ("Sec-Fetch-Site", "same-origin")],
            body,
        )
    };
    let evil = s.req(
        "POST",
        "/tasks/ask/approve",
        &[
            FORM,
            ("Origin", "http://evil.example"),
            ("Sec-Fetch-Site", "cross-site"),
        ],
        "back=%2F",
    );
    assert_eq!(evil.status, 403, "{}", evil.body);
    assert_eq!(r.where_is("ask"), "work/review/ask.yaml");

    let approved = post("/tasks/ask/approve", &origin, "back=%2F");
    assert_eq!(approved.status, 303, "{}", approved.body);
    assert_eq!(approved.header("location"), Some("/"));
    assert_eq!(r.where_is("ask"), "work/ready/ask.yaml");

    let cancelled = post(
        "/tasks/m-mid/cancel",
        &origin,
        "reason=not+needed&back=%2Ftasks%2Fm-mid",
    );
    assert_eq!(cancelled.status, 303, "{}", cancelled.body);
    assert_eq!(cancelled.header("location"), Some("/tasks/m-mid"));
    assert_eq!(r.where_is("m-mid"), "work/cancelled/m-mid.yaml");
    assert!(r.read("work/cancelled/m-mid.yaml").contains("not needed"));

    let detail = s.get("/tasks/m-mid").body;
    assert!(
        detail.contains("action=\"/tasks/m-mid/retry\""),
        "a cancelled task offers retry: {detail}"
    );
    let retried = post("/tasks/m-mid/retry", &origin, "back=%2F");
    assert_eq!(retried.status, 303, "{}", retried.body);
    assert_eq!(r.where_is("m-mid"), "work/inbox/m-mid.yaml");

    let again = post("/tasks/ask/approve", &origin, "");
    assert_eq!(again.status, 409, "approving twice: {}", again.body);
    let offsite = post("/tasks/z-old/cancel", &origin, "back=%2F%2Fevil.example%2F");
    assert_eq!(
        offsite.status, 400,
        "a redirect off the server: {}",
        offsite.body
    );
    assert_eq!(r.where_is("z-old"), "work/ready/z-old.yaml");

    let made = post(
        "/tasks",
        &origin,
        "title=Plan+the+launch&priority=high&label=launch&agent=&back=%2F",
    );
    assert_eq!(made.status, 303, "{}", made.body);
    let created: Vec<String> = std::fs::read_dir(r.abs("work/inbox"))
        .expect("inbox")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("plan-the-launch-"))
        .collect();
    assert_eq!(created.len(), 1, "one new task: {created:?}");
    let text = r.read(&format!("work/inbox/{}", created[0]));
    assert!(
        text.contains("priority: high") && text.contains("launch"),
        "{text}"
    );
    assert_eq!(post("/tasks", &origin, "title=").status, 400);
}

#[test]
fn board_page_reassigns_a_held_task_from_its_page() {
    let r = TestRepo::with_agents(&["alice", "bob"]);
    r.ok(&["new", "Write the spec", "--id", "spec", "--agent", "alice"]);
    r.ok(&["tick"]);
    let s = Server::start(&r);
    let page = s.get("/tasks/spec").body;
    let form = page
        .split("action=\"/tasks/spec/reassign\"")
        .nth(1)
        .and_then(|rest| rest.split("</form>").next())
        .unwrap_or_else(|| panic!("the task page has a reassign form: {page}"));
    assert!(
        form.contains("<select") && form.contains(">bob</option>") && form.contains("<label"),
        "{form}"
    );
    let origin = format!("http://{}", s.addr);
    let post = |from: &str, site: &str, body: &str| -> Resp {
        s.req(
            "POST",
            "/tasks/spec/reassign",
            &[FORM, ("Origin", from), ("Sec-Fetch-Site", site)],
            body,
        )
    };
    let evil = post("http://evil.example", "cross-site", "agent=bob&back=%2F");
    assert_eq!(evil.status, 403, "{}", evil.body);
    assert_eq!(r.where_is("spec"), "work/assigned/alice/spec.yaml");
    assert_eq!(post(&origin, "same-origin", "back=%2F").status, 400);
    assert_eq!(post(&origin, "same-origin", "agent=carol").status, 400);
    let moved = post(&origin, "same-origin", "agent=bob&back=%2Ftasks%2Fspec");
    assert_eq!(moved.status, 303, "{}", moved.body);
    assert_eq!(moved.header("location"), Some("/tasks/spec"));
    assert_eq!(r.where_is("spec"), "work/assigned/bob/spec.yaml");
    assert!(r.read("work/assigned/bob/spec.yaml").contains("attempt: 2"));
    let done = s.get("/tasks/spec").body;
    assert!(done.contains("reassign spec from alice to bob"), "{done}");
}

#[test]
fn board_page_has_landmarks_labels_and_a_wall_mode() {
    let r = team_repo();
    let s = Server::start(&r);
    let page = s.get("/").body;
    for needle in [
        "<a class=\"skip\" href=\"#main\">",
        "<nav aria-label=\"pages\">",
        "<form role=\"search\"",
        "<label for=\"q\">",
        "<label for=\"new-title\">",
        "<span id=\"live\" role=\"status\"",
        "aria-labelledby=\"col-ready\"",
    ] {
        assert!(page.contains(needle), "{needle} missing: {page}");
    }
    assert!(!page.contains("<div onclick"), "buttons, not divs");
    let wall = s.get("/?wall=1").body;
    assert!(wall.contains("<body class=\"wall\">"), "{wall}");
    assert!(
        !wall.contains("<form"),
        "no controls on a wall screen: {wall}"
    );
    assert!(
        wall.contains("data-live=\"/board?wall=1\""),
        "a wall screen refreshes itself: {wall}"
    );
    assert_eq!(card_ids(column(&wall, "ready")).len(), 3);
}

#[test]
fn board_page_takes_any_page_start_without_failing() {
    let r = team_repo();
    let s = Server::start(&r);
    for from in ["18446744073709551615", "18446744073709551600", "3"] {
        let page = s.get(&format!("/column/ready?from={from}"));
        assert_eq!(page.status, 200, "from={from}: {}", page.body);
        assert!(!page.body.contains("next page"), "from={from}");
    }
}
