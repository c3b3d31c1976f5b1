//! `coord serve` against the requests a hostile web page or a careless client sends: Host
//! names that are not this server (DNS rebinding), other origins on writes and on the event
//! stream, connections that never finish their headers, too many event streams, conditional
//! writes, short or oddly written tokens, and the problem bodies of every refusal.

use crate::harness::TestRepo;
use crate::http::{Events, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A token long enough for `coord serve`.
const TOKEN: &str = "0123456789abcdef0123";

fn port_of(s: &Server) -> &str {
    s.addr.rsplit_once(':').map(|(_, p)| p).expect("a port")
}

/// Sends `head` (a whole request head) and returns the status of the answer, reading only
/// its first line (an event stream never ends).
fn status_of(addr: &str, head: &str) -> u16 {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(head.as_bytes()).expect("send");
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
        got.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&got);
    line.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {line:?}"))
}

#[test]
fn serve_guard_refuses_every_host_but_this_server_with_its_port() {
    let r = TestRepo::with_agents(&["writer"]);
    let s = Server::start(&r);
    let port = port_of(&s).to_string();
    let other = if port == "9" { "10" } else { "9" };
    let refused = [
        format!("127.evil.example:{port}"),
        format!("localhost.evil.example:{port}"),
        format!("127.0.0.1.evil.example:{port}"),
        format!("[::2]:{port}"),
        format!("[fe80::1]:{port}"),
        format!("[::ffff:127.0.0.1]:{port}"),
        format!("127.0.0.2:{port}"),
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        "[::1]".to_string(),
        format!("127.0.0.1:{other}"),
        format!("localhost:{other}"),
        format!("127.0.0.1:{port}@evil.example"),
        String::new(),
    ];
    for host in &refused {
        let read = s.req("GET", "/v1/board", &[("Host", host)], "");
        assert_eq!(read.status, 403, "GET with Host {host:?}: {}", read.body);
        assert_eq!(read.json()["status"], 403);
        let write = s.req("POST", "/v1/tasks", &[("Host", host)], r#"{"title": "x"}"#);
        assert_eq!(write.status, 403, "POST with Host {host:?}: {}", write.body);
        let events = format!("GET /v1/events HTTP/1.1\r\nHost: {host}\r\n\r\n");
        assert_eq!(
            status_of(&s.addr, &events),
            403,
            "events with Host {host:?}"
        );
    }
    assert!(r.find("x").is_empty());
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("LocalHost:{port}"),
        format!("[::1]:{port}"),
    ] {
        let a = s.req("GET", "/v1/board", &[("Host", &host)], "");
        assert_eq!(a.status, 200, "Host {host:?}: {}", a.body);
    }
    drop(s);

    // With a token the right token does not make another name this server's; a public name
    // given with --public-host does.
    let env = [("COORD_SERVE_TOKEN", TOKEN)];
    let args = [
        "--listen",
        "127.0.0.1:0",
        "--public-host",
        "coord.example.org:8443",
    ];
    let t = Server::start_with(&r, &args, &env);
    let bearer = format!("Bearer {TOKEN}");
    let port = port_of(&t).to_string();
    for (host, status) in [
        (format!("127.evil.example:{port}"), 403),
        ("coord.example.org".to_string(), 403),
        ("coord.example.org:8443".to_string(), 200),
        (format!("localhost:{port}"), 200),
    ] {
        let h = [("Host", host.as_str()), ("Authorization", bearer.as_str())];
        let a = t.req("GET", "/v1/board", &h, "");
        assert_eq!(a.status, status, "Host {host:?}: {}", a.body);
    }
    drop(t);
    let (_, err) = r.code(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--public-host",
            "coord.example.org",
        ],
        1,
    );
    assert!(err.contains("--public-host needs a token"), "{err}");
}

#[test]
fn serve_guard_checks_the_origin_of_event_streams_and_writes() {
    let r = TestRepo::with_agents(&["writer"]);
    let s = Server::start(&r);
    let a = &s.addr;
    let cross = [
        format!("GET /v1/events HTTP/1.1\r\nHost: {a}\r\nOrigin: http://evil.example\r\n\r\n"),
        format!("GET /v1/events HTTP/1.1\r\nHost: {a}\r\nOrigin: null\r\n\r\n"),
        format!("GET /v1/events HTTP/1.1\r\nHost: {a}\r\nSec-Fetch-Site: cross-site\r\n\r\n"),
        format!("GET /v1/events HTTP/1.1\r\nHost: {a}\r\nSec-Fetch-Site: same-site\r\n\r\n"),
    ];
    for head in &cross {
        assert_eq!(status_of(a, head), 403, "{head}");
    }
    let own = format!(
        "GET /v1/events HTTP/1.1\r\nHost: {a}\r\nOrigin: http://{a}\r\n\
         Sec-Fetch-Site: same-origin\r\n\r\n"
    );
    assert_eq!(status_of(a, &own), 200);
    for origin in [
        "null",
        "http://127.0.0.1.evil.example",
        "http://evil.example",
    ] {
        let w = s.req(
            "POST",
            "/v1/tasks",
            &[("Origin", origin)],
            r#"{"title": "x"}"#,
        );
        assert_eq!(w.status, 403, "Origin {origin}: {}", w.body);
    }
}

#[test]
fn serve_guard_closes_connections_that_never_finish_their_headers() {
    let r = TestRepo::with_agents(&["writer"]);
    let s = Server::start(&r);
    let started = Instant::now();
    let mut slow: Vec<TcpStream> = (0..8)
        .map(|i| {
            let mut c = TcpStream::connect(&s.addr).expect("connect");
            // Half of them send part of a head, the others nothing at all.
            if i % 2 == 0 {
                write!(c, "GET /v1/board HTTP/1.1\r\nHost: {}\r\nX-Slow: ", s.addr).expect("send");
            }
            c.set_read_timeout(Some(Duration::from_secs(30)))
                .expect("timeout");
            c
        })
        .collect();
    // The server still answers others meanwhile.
    assert_eq!(s.get("/healthz").status, 200);
    for c in &mut slow {
        let mut rest = Vec::new();
        let _ = c.read_to_end(&mut rest);
    }
    let took = started.elapsed();
    eprintln!("8 connections without a whole head were closed after {took:?}");
    assert!(
        took < Duration::from_secs(20),
        "connections that never finished their headers were held {took:?}"
    );
}

#[test]
fn serve_guard_caps_event_streams() {
    let r = TestRepo::with_agents(&["writer"]);
    let s = Server::start(&r);
    let open: Vec<Events> = (0..256).map(|_| s.events()).collect();
    let past = s.get("/v1/events");
    assert_eq!(past.status, 503, "{}", past.body);
    assert_eq!(
        past.header("content-type"),
        Some("application/problem+json")
    );
    assert!(past.header("retry-after").is_some());
    assert!(past.json()["detail"].as_str().unwrap_or("").contains("256"));
    assert_eq!(s.get("/healthz").status, 200);
    drop(open);
}

#[test]
fn serve_guard_tags_board_and_lists_and_honours_if_match() {
    let r = TestRepo::with_agents(&["writer"]);
    r.ok(&["new", "Write the docs", "--id", "docs"]);
    r.ok(&["tick"]);
    let s = Server::start(&r);
    for path in [
        "/v1/board",
        "/v1/tasks",
        "/v1/tasks?state=ready",
        "/v1/agents",
    ] {
        let a = s.get(path);
        let tag = a
            .header("etag")
            .unwrap_or_else(|| panic!("{path} has no ETag"))
            .to_string();
        let again = s.req("GET", path, &[("If-None-Match", &tag)], "");
        assert_eq!((again.status, again.body.as_str()), (304, ""), "{path}");
    }
    let tag = s
        .get("/v1/tasks/docs")
        .header("etag")
        .expect("etag")
        .to_string();
    let stale = s.req(
        "POST",
        "/v1/tasks/docs/cancel",
        &[("If-Match", "\"0123\"")],
        r#"{"reason": "not needed"}"#,
    );
    assert_eq!(stale.status, 412, "{}", stale.body);
    assert_eq!(
        stale.header("content-type"),
        Some("application/problem+json")
    );
    assert!(
        !r.exists("work/cancelled/docs.yaml"),
        "cancelled against a stale tag"
    );
    let fresh = s.req(
        "POST",
        "/v1/tasks/docs/cancel",
        &[("If-Match", &tag)],
        r#"{"reason": "not needed"}"#,
    );
    assert_eq!(fresh.status, 200, "{}", fresh.body);
    assert!(
        r.exists("work/cancelled/docs.yaml"),
        "{}",
        r.where_is("docs")
    );
}

#[test]
fn serve_guard_token_rules_and_the_401() {
    let r = TestRepo::with_agents(&["writer"]);
    r.ok(&["new", "Write the docs", "--id", "docs"]);
    let out = r
        .cmd(&["serve", "--listen", "127.0.0.1:0"])
        .env("COORD_SERVE_TOKEN", "short")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at least 16 characters"), "{err}");

    let t = Server::start_with(
        &r,
        &["--listen", "127.0.0.1:0"],
        &[("COORD_SERVE_TOKEN", TOKEN)],
    );
    let no = t.get("/v1/board");
    assert_eq!(no.status, 401);
    assert_eq!(no.header("www-authenticate"), Some("Bearer"));
    assert_eq!(no.header("content-type"), Some("application/problem+json"));
    let detail = no.json()["detail"].as_str().unwrap_or("").to_string();
    assert!(
        detail.contains("Authorization: Bearer") && !detail.contains("REDACTED"),
        "{detail}"
    );
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let h = format!("{scheme} {TOKEN}");
        let a = t.req("GET", "/v1/board", &[("Authorization", &h)], "");
        assert_eq!(a.status, 200, "{scheme}: {}", a.body);
    }
    // The token in the query works on every path, and never stays in a URL.
    let api = t.get(&format!("/v1/tasks/docs?token={TOKEN}"));
    assert_eq!(api.status, 200, "{}", api.body);
    for page in ["/", "/tasks/docs", "/column/inbox"] {
        let sep = if page.contains('?') { '&' } else { '?' };
        let a = t.get(&format!("{page}{sep}token={TOKEN}"));
        assert_eq!(a.status, 303, "{page}: {}", a.body);
        assert_eq!(a.header("location"), Some(page));
        assert!(a
            .header("set-cookie")
            .is_some_and(|c| c.contains("HttpOnly")));
        assert!(!a.body.contains(TOKEN));
    }
    let paged = t.get(&format!("/column/inbox?from=0&token={TOKEN}"));
    assert_eq!(paged.header("location"), Some("/column/inbox?from=0"));
    // A path that a browser would read as another site's address goes to the board instead.
    for away in ["//evil.example/", "/\\evil.example/"] {
        let a = t.get(&format!("{away}?token={TOKEN}"));
        assert_eq!(a.status, 303, "{away}: {}", a.body);
        assert_eq!(a.header("location"), Some("/"), "{away}");
    }
}

#[test]
fn serve_guard_answers_413_405_and_503_as_problems_without_local_details() {
    let r = TestRepo::with_agents(&["writer"]);
    let s = Server::start(&r);
    let big = format!(r#"{{"title": "{}"}}"#, "x".repeat(2 * 1024 * 1024));
    let too_big = s.post("/v1/tasks", &big);
    assert_eq!(too_big.status, 413);
    assert_eq!(
        too_big.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(too_big.json()["status"], 413);
    let wrong = s.req("DELETE", "/v1/tasks", &[], "");
    assert_eq!(wrong.status, 405);
    assert_eq!(
        wrong.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(wrong.json()["status"], 405);
    assert!(wrong.header("allow").is_some_and(|a| a.contains("POST")));

    let mut lock = r.hold_coord_lock();
    write!(lock, "{}", std::process::id()).expect("our pid in the lock");
    let busy = s.post("/v1/tasks", r#"{"title": "Blocked by the lock"}"#);
    assert_eq!(busy.status, 503, "{}", busy.body);
    assert_eq!(
        busy.header("content-type"),
        Some("application/problem+json")
    );
    let dir = r.path().to_str().expect("utf-8");
    let me = std::env::current_exe().expect("exe");
    let me = me.file_name().and_then(|n| n.to_str()).expect("name");
    assert!(
        !busy.body.contains(dir) && !busy.body.contains(me) && !busy.body.contains("pid"),
        "{}",
        busy.body
    );
}
