//! The stdio lines under `coord mcp`: each line read from stdin that is not JSON is answered
//! on stdout with a JSON-RPC parse error (code -32700, id null), and the others go on to the
//! MCP service; the service's lines and those replies share stdout whole line by whole line.
//! The SDK's own stdio transport drops such lines without a word.

use std::future::Future;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// The JSON-RPC code of a line that is not JSON.
const PARSE_ERROR: i64 = -32700;

/// Room for lines in flight between the pumps and the service.
const PIPE_BYTES: usize = 1 << 16;

/// The service's ends of the two pipes, and the pumps that join them to `input` and `output`.
pub struct Lines<R, W, P, Q> {
    /// What the service reads: the lines of `input` that are JSON.
    pub reader: R,
    /// What the service writes: copied to `output` line by line.
    pub writer: W,
    /// Pumps `input` into `reader`, answering bad lines; ends when `input` ends.
    pub reading: P,
    /// Pumps `writer` to `output`; ends once the service has let go of `writer`.
    pub writing: Q,
}

/// Splits `input` and `output` (stdin and stdout) into the service's pipes and their pumps.
pub fn split(
    input: impl AsyncRead + Unpin + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> Lines<
    impl AsyncRead,
    impl AsyncWrite,
    impl Future<Output = ()> + Send,
    impl Future<Output = ()> + Send,
> {
    let (reader, feed) = tokio::io::duplex(PIPE_BYTES);
    let (writer, drain) = tokio::io::duplex(PIPE_BYTES);
    let output = Arc::new(Mutex::new(output));
    Lines {
        reader,
        writer,
        reading: read_lines(input, feed, output.clone()),
        writing: copy_lines(drain, output),
    }
}

/// Passes each JSON line of `input` to `feed`; answers the others on `output`. Blank lines are
/// passed on (the service skips them).
async fn read_lines<O: AsyncWrite + Unpin>(
    input: impl AsyncRead + Unpin,
    mut feed: impl AsyncWrite + Unpin,
    output: Arc<Mutex<O>>,
) {
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let written = match parse_error(&line) {
            None => write_line(&mut feed, &line).await,
            Some(reply) => write_line(&mut *output.lock().await, &reply).await,
        };
        if written.is_err() {
            break;
        }
    }
}

/// Copies the service's lines from `drain` to `output`, each whole.
async fn copy_lines<O: AsyncWrite + Unpin>(drain: impl AsyncRead + Unpin, output: Arc<Mutex<O>>) {
    let mut drain = BufReader::new(drain);
    let mut line = Vec::new();
    loop {
        line.clear();
        match drain.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if write_line(&mut *output.lock().await, &line).await.is_err() {
            break;
        }
    }
}

/// Writes `line`, ending it with a newline when it has none, and flushes.
async fn write_line(out: &mut (impl AsyncWrite + Unpin), line: &[u8]) -> std::io::Result<()> {
    out.write_all(line).await?;
    if !line.ends_with(b"\n") {
        out.write_all(b"\n").await?;
    }
    out.flush().await
}

/// Returns the parse-error reply to `line` when it is neither blank nor JSON (a leading
/// byte-order mark is allowed, as the SDK allows it).
fn parse_error(line: &[u8]) -> Option<Vec<u8>> {
    let text = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
    if text.trim_ascii().is_empty() {
        return None;
    }
    let error = serde_json::from_slice::<serde::de::IgnoredAny>(text).err()?;
    let reply = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": PARSE_ERROR, "message": format!("Parse error: {error}")},
    });
    serde_json::to_vec(&reply).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lines_that_are_not_json_get_a_reply() {
        assert!(parse_error(b"{\"jsonrpc\":\"2.0\"}\n").is_none());
        assert!(parse_error("\u{feff}{}\n".as_bytes()).is_none());
        assert!(parse_error(b"  \n").is_none());
        let reply = parse_error(b"nope\n").expect("a reply");
        let reply: serde_json::Value = serde_json::from_slice(&reply).expect("json");
        assert_eq!(reply["error"]["code"], PARSE_ERROR);
        assert!(reply["id"].is_null());
    }
}
