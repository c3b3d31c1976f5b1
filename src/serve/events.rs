//! `GET /v1/events` (server-sent events: a `ready` event when the stream starts, then one
//! `transition` per transition, each with its id in the clone's event journal, and a `board`
//! event, without id, after each change of the snapshot) and `GET /metrics`. A client that
//! sends `Last-Event-ID` (or `?since=<id>`) first gets the transitions published after that
//! id, then the live ones, none twice; a client too slow to keep up gets the transitions it
//! missed from the journal and a `board` event. At most [`super::MAX_STREAMS`] streams are
//! open at once; past that the answer is 503.

use super::api::Params;
use super::hub::{Event as HubEvent, Hub};
use super::problem::Problem;
use super::App;
use axum::extract::State as With;
use axum::http::{header, HeaderMap};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt};
use serde_json::json;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::broadcast::Receiver;
use tokio::sync::OwnedSemaphorePermit;

/// An open stream: where it is and what it has yet to send.
struct Stream_ {
    rx: Receiver<Arc<HubEvent>>,
    hub: Arc<Hub>,
    /// Events read from the journal, to send before the live ones.
    queue: VecDeque<Arc<HubEvent>>,
    /// The id of the last transition sent (or known to the client).
    last: u64,
    _permit: OwnedSemaphorePermit,
}

/// `GET /v1/events`.
pub async fn events(
    With(app): With<Arc<App>>,
    headers: HeaderMap,
    q: Params,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Problem> {
    let since = since(&headers, q)?;
    // Held by the stream: it is given back when the client goes.
    let permit = Arc::clone(&app.streams).try_acquire_owned().map_err(|_| {
        Problem::unavailable(
            format!(
                "{} event streams are open, the most this server keeps; retry later",
                super::MAX_STREAMS
            ),
            5,
        )
    })?;
    let (rx, published) = app.hub.subscribe();
    // An id past the journal's last is none this clone gave (its journal was deleted): the
    // client starts afresh rather than wait for ids to catch up.
    let since = since.filter(|s| *s <= app.hub.last_id());
    let backlog = match since {
        Some(after) => app.hub.replay(after).map_err(|e| Problem::of(e.as_ref()))?,
        None => Vec::new(),
    };
    let last = since.unwrap_or(published);
    let snap = app.hub.snapshot();
    let mut hello = Event::default();
    if last > 0 {
        hello = hello.id(last.to_string());
    }
    let hello = hello
        .event("ready")
        .data(json!({"generation": snap.generation, "head": snap.head_hex()}).to_string());
    let state = Stream_ {
        rx,
        hub: Arc::clone(&app.hub),
        queue: backlog.into(),
        last,
        _permit: permit,
    };
    let rest = stream::unfold(state, |mut st| async move {
        let ev = next(&mut st).await?;
        Some((Ok(ev), st))
    });
    Ok(Sse::new(stream::once(async { Ok(hello) }).chain(rest)).keep_alive(KeepAlive::default()))
}

/// Returns the id to resume after: `since` in the query, else the `Last-Event-ID` header.
fn since(headers: &HeaderMap, q: Params) -> Result<Option<u64>, Problem> {
    let axum::extract::Query(q) = q.map_err(|e| Problem::bad(format!("bad query: {e}")))?;
    let given = match q.get("since") {
        Some(s) => Some(s.clone()),
        None => headers
            .get("last-event-id")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
    };
    given
        .map(|s| {
            s.trim().parse::<u64>().map_err(|_| {
                Problem::bad(format!(
                    "event id {:?} is not one this server gave: pass the id of a transition event (a number)",
                    crate::redact::one_line(&s)
                ))
            })
        })
        .transpose()
}

/// Returns the next event to send: from the journal first, then live; a transition already
/// sent is skipped. None when the server stops.
async fn next(st: &mut Stream_) -> Option<Event> {
    loop {
        let ev = match st.queue.pop_front() {
            Some(ev) => ev,
            None => match st.rx.recv().await {
                Ok(ev) => ev,
                Err(RecvError::Lagged(_)) => {
                    // Too slow: what it missed comes from the journal, then a board event.
                    st.queue = st.hub.replay(st.last).unwrap_or_default().into();
                    st.queue.push_back(Arc::new(HubEvent {
                        id: None,
                        kind: "board",
                        data: json!({"lagged": true}),
                    }));
                    continue;
                }
                Err(RecvError::Closed) => return None,
            },
        };
        match ev.id {
            Some(id) if id <= st.last => continue,
            Some(id) => st.last = id,
            None => {}
        }
        return Some(sse(&ev));
    }
}

/// The event as sent: its id first and its data last, so a reader that has the data line
/// has the whole event.
fn sse(ev: &HubEvent) -> Event {
    let e = match ev.id {
        Some(id) => Event::default().id(id.to_string()),
        None => Event::default(),
    };
    e.event(ev.kind).data(ev.data.to_string())
}

/// `GET /metrics`.
pub async fn metrics(With(app): With<Arc<App>>) -> Response {
    let snap = app.hub.snapshot();
    let now = app.hub.opener().now();
    let text = {
        let counters = app.hub.counters.lock().unwrap_or_else(|e| e.into_inner());
        let stats = crate::store::Stats::read(&app.hub.git_dir);
        let mut text = super::metrics::render(&snap, &counters, &stats, app.hub.listeners(), now);
        let hooks = crate::ops::webhooks::report(&app.hub.git_dir, &snap.webhooks);
        super::metrics::webhooks(&mut text, &hooks);
        text
    };
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}
