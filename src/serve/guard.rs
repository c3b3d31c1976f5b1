//! Who may ask what: a `Host` that names this server exactly (a loopback name or address with
//! the server's own port, or a public name given with `--public-host`), so a page of another
//! site that rebinds its name to 127.0.0.1 is refused; the token (`COORD_SERVE_TOKEN`, or an
//! agent's own from `--agent-tokens`) on every request when one is set, checked in constant
//! time, and taken off the URL (a page opened with `?token=` is sent on without it, the token
//! in a cookie); an agent's token acting as that agent only ([`agent_may`]); the same-origin check
//! for writes and event streams from a browser (no CSRF from another site); every refusal and
//! every error answer as `application/problem+json`; and the security headers every answer
//! carries (a restrictive CSP among them). Pure, but for reading the agent tokens file once.

use super::mcp::{Caller, PATH as MCP};
use super::problem::Problem;
use super::App;
use crate::model::AgentName;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

/// The Content-Security-Policy of every answer: own scripts, styles, connections and form
/// targets only.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The cookie a browser keeps the token in after opening a page with `?token=...`.
pub const COOKIE: &str = "coord_token";

/// The path of the event stream, which is checked for its origin like a write.
const EVENTS: &str = "/v1/events";

/// Returns the exact `Host` values (lowercase) a server listening on `addr` answers to: the
/// loopback names with its port, its own address, and the public names given.
pub fn hosts_of(addr: SocketAddr, public: &[String]) -> Vec<String> {
    let port = addr.port();
    let mut hosts = vec![
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ];
    if addr.ip().is_loopback() {
        hosts.push(addr.to_string());
    }
    hosts.extend(public.iter().map(|h| h.to_ascii_lowercase()));
    hosts.sort();
    hosts.dedup();
    hosts
}

/// Checks a request, then adds the security headers to the answer.
pub async fn check(State(app): State<Arc<App>>, mut req: Request, next: Next) -> Response {
    let verdict = host_ok(&app.hosts, req.headers())
        .and_then(|()| who(&app, req.headers(), req.uri().query()))
        .and_then(|who| {
            agent_may(&who, req.method(), req.uri().path())?;
            origin_ok(req.method(), req.uri().path(), req.headers())?;
            Ok(who)
        });
    if let Ok(who) = &verdict {
        // The MCP server reads who calls from here: an agent's token acts as that agent only.
        req.extensions_mut().insert(match who {
            Who::Person => Caller::Person,
            Who::Agent(a) => Caller::Agent(a.clone()),
        });
    }
    let res = match verdict {
        Ok(who) => match without_token(req.uri()) {
            Some(uri) if app.token.is_some() && is_page(req.method(), uri.path()) => {
                token_to_cookie(&uri, who.token(&app))
            }
            Some(uri) => {
                *req.uri_mut() = uri;
                next.run(req).await
            }
            None => next.run(req).await,
        },
        Err(p) => p.into_response(),
    };
    with_headers(as_problem(res))
}

/// Who a request comes from, by its token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// A person or program with the server's token (or anyone, when it has none).
    Person,
    /// An agent with its own token (`--agent-tokens`): it acts as that agent only.
    Agent(AgentName),
}

impl Who {
    /// Returns the token that names this caller, as a page's cookie keeps it.
    fn token<'a>(&self, app: &'a App) -> &'a str {
        match self {
            Who::Person => app.token.as_deref().unwrap_or_default(),
            Who::Agent(a) => app.agent_tokens.token_of(a).unwrap_or_default(),
        }
    }
}

/// Each agent's token, read from the file `coord serve --agent-tokens` names (docs/security.md):
/// a YAML mapping of agent names to tokens, readable by its owner only, each token at least
/// [`super::MIN_TOKEN`] characters, none shared with another agent or the server's token.
#[derive(Debug, Clone, Default)]
pub struct AgentTokens {
    tokens: Vec<(AgentName, String)>,
}

/// Why the agent tokens file cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{}: {why}", path.display())]
pub struct TokensError {
    /// The file.
    pub path: std::path::PathBuf,
    /// What is wrong with it.
    pub why: String,
}

impl AgentTokens {
    /// Reads the agent tokens file at `path`; `server` is the server's own token.
    pub fn load(path: &Path, server: &str) -> Result<AgentTokens, TokensError> {
        let bad = |why: String| TokensError {
            path: path.to_path_buf(),
            why,
        };
        let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(bad(
                "others may read it; make it the owner's alone (chmod 600)".into(),
            ));
        }
        let bytes = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
        let doc = crate::yaml::parse_bytes(&bytes, &crate::yaml::Limits::default())
            .map_err(|e| bad(format!("{}:{}: {}", e.pos.line, e.pos.col, e.message)))?;
        let map: std::collections::BTreeMap<AgentName, String> = serde_json::from_value(doc.value)
            .map_err(|e| bad(format!("not a mapping of agent names to tokens: {e}")))?;
        let mut tokens: Vec<(AgentName, String)> = Vec::new();
        for (agent, token) in map {
            let n = token.chars().count();
            if n < super::MIN_TOKEN {
                return Err(bad(format!(
                    "the token of {agent} is {n} characters; a token needs at least {}",
                    super::MIN_TOKEN
                )));
            }
            if same_secret(&token, server) || tokens.iter().any(|(_, t)| same_secret(t, &token)) {
                return Err(bad(format!(
                    "the token of {agent} is another's too; give each agent a token of its own"
                )));
            }
            tokens.push((agent, token));
        }
        Ok(AgentTokens { tokens })
    }

    /// Returns the agents the file names.
    pub fn agents(&self) -> impl Iterator<Item = &AgentName> {
        self.tokens.iter().map(|(a, _)| a)
    }

    /// Returns the agent whose token `given` is (every token compared, in constant time).
    fn agent_of(&self, given: &str) -> Option<&AgentName> {
        self.tokens
            .iter()
            .fold(None, |found, (a, t)| match same_secret(given, t) {
                true => Some(a),
                false => found,
            })
    }

    /// Returns `agent`'s token.
    fn token_of(&self, agent: &AgentName) -> Option<&str> {
        self.tokens
            .iter()
            .find(|(a, _)| a == agent)
            .map(|(_, t)| t.as_str())
    }
}

/// Returns who sent the request: a person when the server has no token or the request
/// carries the server's, the agent whose token it carries, else 401.
fn who(app: &App, headers: &HeaderMap, query: Option<&str>) -> Result<Who, Problem> {
    let Some(token) = &app.token else {
        return Ok(Who::Person);
    };
    let given = tokens_given(headers, query);
    if given.iter().flatten().any(|g| same_secret(g, token)) {
        return Ok(Who::Person);
    }
    if let Some(agent) = given
        .iter()
        .flatten()
        .find_map(|g| app.agent_tokens.agent_of(g))
    {
        return Ok(Who::Agent(agent.clone()));
    }
    let mut p = Problem::fixed(
        StatusCode::UNAUTHORIZED,
        "this server needs its token: send 'Authorization: Bearer <COORD_SERVE_TOKEN>'",
    );
    p.challenge = true;
    Err(p)
}

/// An agent's token reads everything, writes new tasks, and acts under its own
/// `/v1/agents/<agent>/` routes only: it cannot claim, report or heartbeat as another agent,
/// nor approve, reject, cancel or retry (403). At `/mcp` each tool checks the same
/// ([`crate::mcp`]).
fn agent_may(who: &Who, method: &Method, path: &str) -> Result<(), Problem> {
    let Who::Agent(agent) = who else {
        return Ok(());
    };
    let read = matches!(*method, Method::GET | Method::HEAD);
    let own = format!("/v1/agents/{agent}/");
    if (read && !path.starts_with("/v1/agents/"))
        || path.starts_with(&own)
        || (*method == Method::POST && path == "/v1/tasks")
        || (read && path == "/v1/agents")
        || path == MCP
    {
        return Ok(());
    }
    let detail = match path
        .strip_prefix("/v1/agents/")
        .and_then(|r| r.split('/').next())
    {
        Some(other) if !other.is_empty() => {
            format!("the token of agent {agent} cannot act as agent {other}")
        }
        _ => format!(
            "the token of agent {agent} may only add tasks and act under {own}; this needs the \
             server's token"
        ),
    };
    Err(Problem::new(StatusCode::FORBIDDEN, detail))
}

/// Adds the security headers.
fn with_headers(mut res: Response) -> Response {
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

/// Turns an error answer that is not a problem already (axum's own 405 and 413) into one,
/// keeping its `Allow`.
fn as_problem(res: Response) -> Response {
    let status = res.status();
    let problem = res
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|c| c.as_bytes().starts_with(b"application/problem+json"));
    if problem || !(status.is_client_error() || status.is_server_error()) {
        return res;
    }
    let allow = res.headers().get(header::ALLOW).cloned();
    let detail = match (status, allow.as_ref().and_then(|a| a.to_str().ok())) {
        (StatusCode::PAYLOAD_TOO_LARGE, _) => format!(
            "the body is over {} bytes, the most this server reads",
            super::BODY_LIMIT
        ),
        (StatusCode::METHOD_NOT_ALLOWED, Some(a)) => format!("this path answers {a} only"),
        _ => status.canonical_reason().unwrap_or("error").to_string(),
    };
    let mut out = Problem::new(status, detail).into_response();
    if let Some(a) = allow {
        out.headers_mut().insert(header::ALLOW, a);
    }
    out
}

/// True for the board's pages (what a person opens in a browser), not the API.
fn is_page(method: &Method, path: &str) -> bool {
    *method == Method::GET
        && !["/v1/", "/assets/"].iter().any(|p| path.starts_with(p))
        && !matches!(path, "/metrics" | "/healthz")
}

/// Returns the URI without its `token` parameters, or `None` when it has none.
fn without_token(uri: &Uri) -> Option<Uri> {
    let query = uri.query()?;
    let is_token = |kv: &&str| kv.split('=').next() == Some("token");
    if !query.split('&').any(|kv| is_token(&kv)) {
        return None;
    }
    let rest: Vec<&str> = query
        .split('&')
        .filter(|kv| !kv.is_empty() && !is_token(kv))
        .collect();
    let path = if rest.is_empty() {
        uri.path().to_string()
    } else {
        format!("{}?{}", uri.path(), rest.join("&"))
    };
    path.parse().ok()
}

/// Answers a page opened with `?token=`: the token goes into a cookie and the browser to the
/// same page without it, so the token stays out of the address bar, history and links.
fn token_to_cookie(uri: &Uri, token: &str) -> Response {
    let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
    let location = uri
        .path_and_query()
        .map(|p| p.as_str())
        .filter(|p| on_this_server(p))
        .unwrap_or("/");
    let mut r = (StatusCode::SEE_OTHER, "").into_response();
    let h = r.headers_mut();
    if let (Ok(c), Ok(l)) = (
        HeaderValue::from_str(&cookie),
        HeaderValue::from_str(location),
    ) {
        h.insert(header::SET_COOKIE, c);
        h.insert(header::LOCATION, l);
    }
    r
}

/// Whether a browser reads `path` as a path on this server, not as another site's address
/// (`//host`, `/\host`) or a header break.
pub(super) fn on_this_server(path: &str) -> bool {
    path.starts_with('/')
        && !path.starts_with("//")
        && !path.starts_with("/\\")
        && !path.chars().any(|c| c.is_control())
}

/// Returns the tokens a request carries: `Authorization: Bearer <token>` (the scheme in any
/// case), the cookie, and `token=` in the query (how a browser opens the board the first
/// time).
fn tokens_given<'a>(headers: &'a HeaderMap, query: Option<&'a str>) -> [Option<&'a str>; 3] {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim());
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| {
            c.trim()
                .strip_prefix(COOKIE)
                .and_then(|c| c.strip_prefix('='))
        });
    let in_query = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|kv| kv.strip_prefix("token="));
    [bearer, cookie, in_query]
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

/// The `Host` must be one of `hosts` exactly: a page of another site that resolved its own
/// name to 127.0.0.1 still sends its own name (`127.evil.example:8088`), and a name without
/// the server's port or with another is not the server's either.
fn host_ok(hosts: &[String], headers: &HeaderMap) -> Result<(), Problem> {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
        return Ok(());
    }
    let own = hosts.first().map_or("localhost", String::as_str);
    Err(Problem::new(
        StatusCode::FORBIDDEN,
        format!("Host '{host}' is not this server; open the board at http://{own}/"),
    ))
}

/// A write or an event stream (`/v1/events`, and the MCP server's at `/mcp`) opened by a
/// browser must come from a page of this server: its
/// `Origin` must name the `Host` it was sent to, and `Sec-Fetch-Site` (when sent) must say
/// same-origin. Programs that send neither header are not browsers and pass.
fn origin_ok(method: &Method, path: &str, headers: &HeaderMap) -> Result<(), Problem> {
    let read = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    if read && path != EVENTS && path != MCP {
        return Ok(());
    }
    let get = |h| headers.get(h).and_then(|v: &HeaderValue| v.to_str().ok());
    let host = get(header::HOST).unwrap_or("");
    let origin_ok = get(header::ORIGIN).is_none_or(|o| {
        o.strip_prefix("http://")
            .or_else(|| o.strip_prefix("https://"))
            .is_some_and(|rest| rest.eq_ignore_ascii_case(host))
    });
    let site_ok = get(header::HeaderName::from_static("sec-fetch-site"))
        .is_none_or(|s| matches!(s, "same-origin" | "none"));
    if origin_ok && site_ok {
        return Ok(());
    }
    Err(Problem::new(
        StatusCode::FORBIDDEN,
        "a write or event stream from another site's page is refused (same-origin check)",
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
        assert!(origin_ok(&Method::POST, "/v1/tasks", &h).is_ok());
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8088"),
        );
        assert!(origin_ok(&Method::POST, "/v1/tasks", &h).is_ok());
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.example"),
        );
        assert!(origin_ok(&Method::POST, "/v1/tasks", &h).is_err());
        assert!(origin_ok(&Method::GET, EVENTS, &h).is_err());
        assert!(origin_ok(&Method::GET, "/v1/board", &h).is_ok());
    }

    #[test]
    fn other_hosts_are_refused_on_loopback() {
        let hosts = hosts_of("127.0.0.1:8088".parse().expect("addr"), &[]);
        let mut h = HeaderMap::new();
        for bad in [
            "evil.example:8088",
            "127.evil.example:8088",
            "localhost",
            "[::1]:9",
        ] {
            h.insert(header::HOST, HeaderValue::from_static(bad));
            assert!(host_ok(&hosts, &h).is_err(), "{bad}");
        }
        h.insert(header::HOST, HeaderValue::from_static("localhost:8088"));
        assert!(host_ok(&hosts, &h).is_ok());
    }

    #[test]
    fn the_token_leaves_the_query() {
        let uri: Uri = "/column/ready?token=x&from=500".parse().expect("uri");
        assert_eq!(
            without_token(&uri).map(|u| u.to_string()),
            Some("/column/ready?from=500".to_string())
        );
        let plain: Uri = "/column/ready?from=500".parse().expect("uri");
        assert_eq!(without_token(&plain), None);
    }
}
