//! A `coord serve` started on an ephemeral port for a test, and a plain HTTP/1.1 client over
//! std's TcpStream (one request per connection), with a reader of server-sent events.

#![allow(dead_code)]

use crate::harness::TestRepo;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A running `coord serve`; killed when dropped.
pub struct Server {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Server {
    /// Starts `coord serve --listen 127.0.0.1:0` in the repo and waits for its address.
    pub fn start(repo: &TestRepo) -> Server {
        Server::start_with(repo, &["--listen", "127.0.0.1:0"], &[])
    }

    /// Starts `coord serve` with these arguments and environment.
    pub fn start_with(repo: &TestRepo, args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut cmd = repo.spawn_cmd(&[&["serve"], args].concat());
        cmd.envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("spawn coord serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read address");
        let addr = line
            .trim()
            .strip_prefix("http://")
            .unwrap_or_else(|| panic!("coord serve printed {line:?}, not its address"))
            .to_string();
        Server { child, addr }
    }

    /// Sends a GET.
    pub fn get(&self, path: &str) -> Resp {
        self.req("GET", path, &[], "")
    }

    /// Sends a POST with a JSON body.
    pub fn post(&self, path: &str, body: &str) -> Resp {
        self.req("POST", path, &[], body)
    }

    /// Sends a request.
    pub fn req(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Resp {
        request(&self.addr, method, path, headers, body.as_bytes())
    }

    /// Sends SIGTERM and returns the exit code once the server has stopped.
    pub fn stop(mut self) -> Option<i32> {
        let pid = self.child.id().to_string();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(sent.success());
        self.child.wait().expect("wait for coord serve").code()
    }

    /// Returns the server's peak resident memory so far in MB (`VmHWM` in /proc).
    pub fn peak_memory_mb(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc/PID/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .expect("a VmHWM line")
            / 1024.0
    }

    /// Opens `/v1/events` and returns a reader of its events.
    pub fn events(&self) -> Events {
        let mut s = TcpStream::connect(&self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        write!(
            s,
            "GET /v1/events HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
            self.addr
        )
        .expect("send");
        let mut ev = Events {
            reader: BufReader::new(s),
            partial: Vec::new(),
            seen: String::new(),
        };
        assert!(
            ev.until(Duration::from_secs(10), |t| t.contains("event: ready")),
            "no ready event: {}",
            ev.seen
        );
        ev
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
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
    s.write_all(head.as_bytes()).expect("send head");
    // A server may answer (413) before reading the whole body and close.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    parse(&raw)
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

/// A line of the stream that arrives in two parts, the second after the reader's 200 ms
/// timeout (a loaded machine), is still read whole.
#[test]
fn http_events_keep_a_line_split_by_a_read_timeout() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let writer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        s.write_all(b"event: transition\ndata: {\"task\":")
            .expect("first part");
        std::thread::sleep(Duration::from_millis(500));
        s.write_all(b"\"docs\"}\n").expect("second part");
    });
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut ev = Events {
        reader: BufReader::new(s),
        partial: Vec::new(),
        seen: String::new(),
    };
    let whole = ev.until(Duration::from_secs(10), |t| {
        t.contains("data: {\"task\":\"docs\"}\n")
    });
    writer.join().expect("writer");
    assert!(whole, "read: {:?}", ev.seen);
}
