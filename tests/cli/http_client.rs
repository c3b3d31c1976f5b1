//! A plain HTTP/1.1 client over std's TcpStream (one request per connection), a reader of
//! server-sent events and a reader of a process's memory from /proc: what the `coord serve`
//! tests (`tests/cli/http.rs`) and its benchmark (`benches/serve.rs`, which includes this file)
//! ask a server with. No dependency on the test harness.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// An answer.
#[derive(Debug)]
pub struct Resp {
    /// The status code.
    pub status: u16,
    /// The headers, names in lowercase.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

impl Resp {
    /// Returns a header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Returns the body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }
}

/// Sends one request on a new connection and reads the whole answer.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    try_request(addr, method, path, headers, body)
        .unwrap_or_else(|| panic!("no answer from {addr} to {method} {path}"))
}

/// Sends one request as [`request`] does; None when the server cannot be reached or closes
/// the connection without an answer (it is down, or was killed mid-request).
pub fn try_request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Option<Resp> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).ok()?;
    // A server may answer (413) before reading the whole body and close.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let answered = raw.windows(4).any(|w| w == b"\r\n\r\n") && raw.starts_with(b"HTTP/");
    answered.then(|| parse(&raw))
}

fn parse(raw: &[u8]) -> Resp {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no answer: {text:?}"));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Resp {
        status,
        headers,
        body,
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// An open event stream.
pub struct Events {
    reader: BufReader<TcpStream>,
    /// The start of a line whose end has not come yet (a read can time out mid-line).
    partial: Vec<u8>,
    /// Every whole line read so far.
    pub seen: String,
}

impl Events {
    /// Opens `/v1/events` on `addr` and waits (10 s at most) for its `ready` event.
    pub fn open(addr: &str) -> Events {
        Events::open_at(addr, "/v1/events", "")
    }

    /// Opens `path` (`/v1/events` with a query) on `addr` with the extra header lines
    /// `headers` (each ending in `\r\n`) and waits (10 s at most) for its `ready` event.
    pub fn open_at(addr: &str, path: &str, headers: &str) -> Events {
        let mut s = TcpStream::connect(addr).expect("connect");
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n{headers}\r\n"
        )
        .expect("send");
        let mut ev = Events::over(s);
        assert!(
            ev.until(Duration::from_secs(10), |t| t.contains("event: ready")),
            "no ready event: {}",
            ev.seen
        );
        ev
    }

    /// Reads a stream already open, in reads of at most 200 ms.
    pub fn over(s: TcpStream) -> Events {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        Events {
            reader: BufReader::new(s),
            partial: Vec::new(),
            seen: String::new(),
        }
    }

    /// Reads until `done` holds for everything read so far, or `within` passes; returns
    /// whether it held.
    pub fn until(&mut self, within: Duration, done: impl Fn(&str) -> bool) -> bool {
        let end = Instant::now() + within;
        while Instant::now() < end {
            if done(&self.seen) {
                return true;
            }
            // On a timeout the bytes read so far stay in `partial` for the next read.
            match self.reader.read_until(b'\n', &mut self.partial) {
                Ok(0) => return done(&self.seen),
                Ok(_) if self.partial.ends_with(b"\n") => {
                    self.seen.push_str(&String::from_utf8_lossy(&self.partial));
                    self.partial.clear();
                }
                Ok(_) | Err(_) => {}
            }
        }
        done(&self.seen)
    }
}

/// One event of a stream: its `event:` name, its `id:` (when it has one) and its `data:`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    /// The event's name.
    pub kind: String,
    /// Its id, when it has one.
    pub id: Option<u64>,
    /// Its data, as JSON.
    pub data: serde_json::Value,
}

impl Events {
    /// Returns the whole events read so far, in order.
    pub fn parsed(&self) -> Vec<Sent> {
        let mut out = Vec::new();
        for block in self.seen.split("\n\n") {
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(str::to_string)
            };
            let (Some(kind), Some(data)) = (field("event: "), field("data: ")) else {
                continue;
            };
            let Ok(data) = serde_json::from_str(&data) else {
                continue;
            };
            let id = field("id: ").and_then(|i| i.parse().ok());
            out.push(Sent { kind, id, data });
        }
        out
    }

    /// Returns the transitions read so far.
    pub fn transitions(&self) -> Vec<Sent> {
        let all = self.parsed().into_iter();
        all.filter(|e| e.kind == "transition").collect()
    }
}

/// Returns a process's resident memory now and at its peak (`VmRSS`, `VmHWM`), in MB.
pub fn memory_mb(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let mb = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .expect("a memory line")
            / 1024.0
    };
    (mb("VmRSS:"), mb("VmHWM:"))
}
