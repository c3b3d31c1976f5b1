//! A `coord serve` started on an ephemeral port for a test, asked through the client of
//! [`crate::http_client`].

#![allow(dead_code)]

use crate::harness::TestRepo;
pub use crate::http_client::{request, Events, Resp};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

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
        crate::http_client::memory_mb(self.child.id()).1
    }

    /// Returns the server's environment as it runs (`/proc/PID/environ`), one `NAME=value` per
    /// entry.
    pub fn environment(&self) -> Vec<String> {
        let raw = std::fs::read(format!("/proc/{}/environ", self.child.id())).unwrap_or_default();
        raw.split(|&b| b == 0)
            .map(|e| String::from_utf8_lossy(e).into_owned())
            .collect()
    }

    /// Opens `/v1/events` and returns a reader of its events.
    pub fn events(&self) -> Events {
        Events::open(&self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    let mut ev = Events::over(TcpStream::connect(addr).expect("connect"));
    let whole = ev.until(Duration::from_secs(10), |t| {
        t.contains("data: {\"task\":\"docs\"}\n")
    });
    writer.join().expect("writer");
    assert!(whole, "read: {:?}", ev.seen);
}
