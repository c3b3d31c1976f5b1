//! `GET /v1/events` (server-sent events: a `ready` event when the stream starts, then one
//! `transition` per transition and a `board` event after each change of the snapshot) and
//! `GET /metrics`. A client too slow to keep up gets a `board` event and goes on from there.
//! At most [`super::MAX_STREAMS`] streams are open at once; past that the answer is 503.

use super::hub::Event as HubEvent;
use super::problem::Problem;
use super::App;
use axum::extract::State as With;
use axum::http::header;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt};
use serde_json::json;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;

/// `GET /v1/events`.
pub async fn events(
    With(app): With<Arc<App>>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Problem> {
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
    let rx = app.hub.subscribe();
    let snap = app.hub.snapshot();
    let hello = Event::default()
        .event("ready")
        .data(json!({"generation": snap.generation, "head": snap.head_hex()}).to_string());
    let rest = stream::unfold((rx, permit), |(mut rx, permit)| async move {
        let ev = match rx.recv().await {
            Ok(ev) => sse(&ev),
            Err(RecvError::Lagged(_)) => Event::default()
                .event("board")
                .data(json!({"lagged": true}).to_string()),
            Err(RecvError::Closed) => return None,
        };
        Some((Ok(ev), (rx, permit)))
    });
    Ok(Sse::new(stream::once(async { Ok(hello) }).chain(rest)).keep_alive(KeepAlive::default()))
}

fn sse(ev: &HubEvent) -> Event {
    Event::default()
        .id(ev.id.to_string())
        .event(ev.kind)
        .data(ev.data.to_string())
}

/// `GET /metrics`.
pub async fn metrics(With(app): With<Arc<App>>) -> Response {
    let snap = app.hub.snapshot();
    let now = app.hub.opener().now();
    let text = {
        let counters = app.hub.counters.lock().unwrap_or_else(|e| e.into_inner());
        let stats = crate::store::Stats::read(&app.hub.git_dir);
        super::metrics::render(&snap, &counters, &stats, app.hub.listeners(), now)
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
