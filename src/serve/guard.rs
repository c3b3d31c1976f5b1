//! Who may ask what: the token (`COORD_SERVE_TOKEN`) on every request when one is set, checked
//! in constant time; on loopback without a token, a `Host` that names loopback (no DNS
//! rebinding); the same-origin check for writes from a browser (no CSRF from another site);
//! and the security headers every answer carries (a restrictive CSP among them). Pure.

use super::problem::Problem;
use super::App;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The Content-Security-Policy of every answer: own scripts, styles and connections only.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The cookie a browser keeps the token in after opening `/?token=...`.
pub const COOKIE: &str = "coord_token";

/// Checks a request, then adds the security headers to the answer.
pub async fn check(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let verdict = match &app.token {
        Some(token) => token_ok(req.headers(), req.uri().query(), token),
        None => host_ok(req.headers()),
    }
    .and_then(|()| origin_ok(req.method(), req.headers()));
    let mut res = match verdict {
        Ok(()) => next.run(req).await,
        Err(p) => p.into_response(),
    };
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    res
}

/// Accepts `Authorization: Bearer <token>`, the cookie, or `token=` in the query (how a
/// browser opens the board the first time).
fn token_ok(headers: &HeaderMap, query: Option<&str>, token: &str) -> Result<(), Problem> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(&format!("{COOKIE}=")));
    let in_query = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|kv| kv.strip_prefix("token="));
    let given = [bearer, cookie, in_query];
    if given.iter().flatten().any(|g| same_secret(g, token)) {
        return Ok(());
    }
    Err(Problem::new(
        StatusCode::UNAUTHORIZED,
        "this server needs its token: send 'Authorization: Bearer <COORD_SERVE_TOKEN>'",
    ))
}

/// Compares two secrets in time independent of where they differ: both are hashed first, so
/// the comparison always runs over 32 bytes whatever their lengths.
pub fn same_secret(given: &str, expected: &str) -> bool {
    let a = Sha256::digest(given.as_bytes());
    let b = Sha256::digest(expected.as_bytes());
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

/// Without a token the server listens on loopback only; a page of another site that resolved
/// its own name to 127.0.0.1 still sends its own name as `Host`, and is refused.
fn host_ok(headers: &HeaderMap) -> Result<(), Problem> {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let name = match host.rsplit_once(':') {
        Some((n, port)) if port.chars().all(|c| c.is_ascii_digit()) => n,
        _ => host,
    };
    if matches!(name, "" | "localhost" | "127.0.0.1" | "[::1]") || name.starts_with("127.") {
        return Ok(());
    }
    Err(Problem::new(
        StatusCode::FORBIDDEN,
        format!("Host '{host}' is not this machine; open the board at http://127.0.0.1"),
    ))
}

/// A write from a browser must come from a page of this server: its `Origin` must name the
/// `Host` it was sent to, and `Sec-Fetch-Site` (when sent) must say same-origin. Programs
/// that send neither header are not browsers and pass.
fn origin_ok(method: &Method, headers: &HeaderMap) -> Result<(), Problem> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    let get = |h| headers.get(h).and_then(|v: &HeaderValue| v.to_str().ok());
    let host = get(header::HOST).unwrap_or("");
    let origin_ok = get(header::ORIGIN).is_none_or(|o| {
        o.strip_prefix("http://")
            .or_else(|| o.strip_prefix("https://"))
            .is_some_and(|rest| rest == host)
    });
    let site_ok = get(header::HeaderName::from_static("sec-fetch-site"))
        .is_none_or(|s| matches!(s, "same-origin" | "none"));
    if origin_ok && site_ok {
        return Ok(());
    }
    Err(Problem::new(
        StatusCode::FORBIDDEN,
        "a write from another site's page is refused (same-origin check)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_by_content() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abd", "abc"));
        assert!(!same_secret("", "abc"));
    }

    #[test]
    fn writes_from_another_site_are_refused() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8088"));
        assert!(origin_ok(&Method::POST, &h).is_ok());
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8088"),
        );
        assert!(origin_ok(&Method::POST, &h).is_ok());
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.example"),
        );
        assert!(origin_ok(&Method::POST, &h).is_err());
        assert!(origin_ok(&Method::GET, &h).is_ok());
    }

    #[test]
    fn other_hosts_are_refused_on_loopback() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("evil.example:8088"));
        assert!(host_ok(&h).is_err());
        h.insert(header::HOST, HeaderValue::from_static("localhost:8088"));
        assert!(host_ok(&h).is_ok());
    }
}
