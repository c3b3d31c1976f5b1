//! Errors as HTTP answers: an `application/problem+json` body (RFC 9457) with the status, a
//! title and the one-line message the command line would print; 503 with `Retry-After` while
//! another coordinator holds the lock (naming no path, process or command line of this
//! machine); 401 with `WWW-Authenticate: Bearer`. Every library error maps to one status here.

use crate::error::UsageError;
use crate::ops;
use crate::ops::CommandError;
use crate::ops::LockError;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answer.
#[derive(Debug, Clone)]
pub struct Problem {
    /// The status.
    pub status: StatusCode,
    /// What went wrong, in one line.
    pub detail: String,
    /// Seconds after which a retry may succeed (503).
    pub retry_after: Option<u64>,
    /// Whether the answer asks for a bearer token (`WWW-Authenticate: Bearer`, with 401).
    pub challenge: bool,
    /// The kind of error as the command line names it (`stale`, `locked`, ...), so a hub
    /// client exits as the command would here; in the body as `code`.
    pub code: Option<&'static str>,
}

impl Problem {
    /// Returns a problem with this status and detail.
    pub fn new(status: StatusCode, detail: impl Into<String>) -> Problem {
        Problem::fixed(status, crate::redact::error_line(&detail.into()))
    }

    /// Returns a problem whose detail is the server's own text, holding no secret, and so
    /// not redacted (a redactor would take `Authorization: Bearer <...>` for a secret).
    pub fn fixed(status: StatusCode, detail: impl Into<String>) -> Problem {
        Problem {
            status,
            detail: detail.into(),
            retry_after: None,
            challenge: false,
            code: None,
        }
    }

    /// Returns a 503 with `Retry-After` (seconds).
    pub fn unavailable(detail: impl Into<String>, retry_after: u64) -> Problem {
        let mut p = Problem::new(StatusCode::SERVICE_UNAVAILABLE, detail);
        p.retry_after = Some(retry_after);
        p
    }

    /// Returns a 400 Bad Request.
    pub fn bad(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::BAD_REQUEST, detail)
    }

    /// Returns a 409 Conflict.
    pub fn conflict(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::CONFLICT, detail)
    }

    /// Returns a 404 Not Found.
    pub fn not_found(detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::NOT_FOUND, detail)
    }

    /// Returns the status for a single-task command's refusal.
    pub fn of_command(e: &CommandError) -> Problem {
        let status = match e {
            CommandError::NotFound(_) => StatusCode::NOT_FOUND,
            CommandError::UnknownAgent { .. } | CommandError::Sign(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::CONFLICT,
        };
        let mut p = Problem::new(status, e.to_string());
        p.code = crate::error::kind_code(e);
        p
    }

    /// Returns the answer for an error of an operation: the first cause that has a status of
    /// its own decides, else 500 with the message.
    pub fn of(e: &(dyn std::error::Error + 'static)) -> Problem {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(c) = cause {
            if let Some(mut p) = Problem::of_one(c) {
                p.code = p.code.or_else(|| crate::error::kind_code(c));
                return p;
            }
            cause = c.source();
        }
        Problem::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
    }

    fn of_one(c: &(dyn std::error::Error + 'static)) -> Option<Problem> {
        // The holder's pid and command line and the lock's path are for the machine's own
        // user (the command line prints them), not for every HTTP client.
        if let Some(LockError::Held { .. }) = c.downcast_ref::<LockError>() {
            return Some(Problem::unavailable(
                "another coordinator (a tick, a sync or an agent's command) holds the \
                 repository's lock; retry in a moment",
                1,
            ));
        }
        if let Some(e) = c.downcast_ref::<CommandError>() {
            return Some(Problem::of_command(e));
        }
        // Git in the middle of something (a merge, a sparse checkout leaving tasks out): a
        // person settles it, as the message says.
        if let Some(crate::git::GitError::Unfinished(_)) = c.downcast_ref::<crate::git::GitError>()
        {
            return Some(Problem::conflict(c.to_string()));
        }
        let refused = matches!(
            c.downcast_ref::<ops::Error>(),
            Some(ops::Error::Usage(_) | ops::Error::Refused(_))
        );
        (refused || c.downcast_ref::<UsageError>().is_some()).then(|| Problem::bad(c.to_string()))
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut body = json!({
            "type": "about:blank",
            "title": self.status.canonical_reason().unwrap_or("Error"),
            "status": self.status.as_u16(),
            "detail": self.detail,
        });
        if let Some(code) = self.code {
            body["code"] = json!(code);
        }
        let mut r = (self.status, body.to_string()).into_response();
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(s) = self.retry_after {
            h.insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        if self.challenge {
            h.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        r
    }
}
