//! Fake servers on 127.0.0.1 for the hostile cases (issue 14): what a broken or hostile
//! server may send back, answered one canned way so that a test needs no stack.
//!
//! - [`raw`]: a thread per connection that writes whatever the test wants to the socket
//!   (endless chunked bodies, huge declared lengths, silence, redirects).
//! - [`FakeApi`]: an HTTP server (tokio) that answers each request from `(method, path)` and
//!   records every request it saw, for "no write after a bad read" checks.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A raw fake HTTP server on 127.0.0.1 that answers every connection with `respond` (at most
/// 64 connections, so no loop is unbounded); `hits` counts the requests it saw.
pub struct Raw {
    pub url: String,
    /// Requests it saw.
    pub hits: Arc<AtomicUsize>,
}

pub fn raw(respond: impl Fn(&mut TcpStream) + Send + Sync + 'static) -> Raw {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&hits);
    let respond = Arc::new(respond);
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(mut stream) = stream else { continue };
            let respond = Arc::clone(&respond);
            let counted = Arc::clone(&counted);
            std::thread::spawn(move || {
                if read_request_head(&stream) {
                    counted.fetch_add(1, Ordering::SeqCst);
                    respond(&mut stream);
                }
            });
        }
    });
    Raw { url, hits }
}

/// Reads up to the blank line that ends the request head (bodies are not needed here).
fn read_request_head(stream: &TcpStream) -> bool {
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    for _ in 0..200 {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) if line == "\r\n" => return true,
            Ok(_) => {}
        }
    }
    false
}

/// (method, path) of every request the fake server answered.
pub type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// How the fake server answers one request: (status, body).
pub type Answer = Arc<dyn Fn(&Request) -> (u16, String) + Send + Sync>;

/// How the fake server answers one request: (status, extra headers, body).
pub type HeadedAnswer = Arc<dyn Fn(&Request) -> (u16, Vec<(String, String)>, String) + Send + Sync>;

/// A fake management API on 127.0.0.1; stops with the test process.
pub struct FakeApi {
    pub url: String,
    seen: Seen,
}

/// One request as the fake server saw it: the head lowercased (for headers such as the AWS
/// JSON protocol's `x-amz-target`), and the body.
pub struct Request {
    pub method: String,
    pub path: String,
    pub head: String,
    pub body: String,
}

impl Request {
    /// A header's value (`name` lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    }
}

impl FakeApi {
    pub fn start(answer: impl Fn(&str, &str) -> (u16, String) + Send + Sync + 'static) -> FakeApi {
        Self::start_with(move |r: &Request| answer(&r.method, &r.path))
    }

    /// A fake server that answers from the whole request (head and body).
    pub fn start_with(
        answer: impl Fn(&Request) -> (u16, String) + Send + Sync + 'static,
    ) -> FakeApi {
        Self::start_with_headers(move |r: &Request| {
            let (status, body) = answer(r);
            (status, Vec::new(), body)
        })
    }

    /// A fake server whose answers carry headers of their own (`Retry-After`), besides
    /// `content-type: application/json`.
    pub fn start_with_headers(
        answer: impl Fn(&Request) -> (u16, Vec<(String, String)>, String) + Send + Sync + 'static,
    ) -> FakeApi {
        let answer: HeadedAnswer = Arc::new(answer);
        let seen: Seen = Arc::default();
        let (tx, rx) = std::sync::mpsc::channel();
        let seen2 = Arc::clone(&seen);
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind 127.0.0.1");
                tx.send(listener.local_addr().expect("addr"))
                    .expect("send addr");
                // Bounded: no test makes anywhere near this many requests.
                for _ in 0..1000 {
                    let Ok((mut sock, _)) = listener.accept().await else {
                        return;
                    };
                    let answer = Arc::clone(&answer);
                    let seen = Arc::clone(&seen2);
                    tokio::spawn(async move {
                        let mut buf = Vec::new();
                        let mut chunk = [0u8; 4096];
                        // The request head, then as much body as Content-Length says.
                        let (head_end, len) = loop {
                            let Ok(n) = sock.read(&mut chunk).await else { return };
                            if n == 0 {
                                return;
                            }
                            buf.extend_from_slice(&chunk[..n]);
                            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
                                let len = head
                                    .lines()
                                    .find_map(|l| l.strip_prefix("content-length:"))
                                    .and_then(|v| v.trim().parse::<usize>().ok())
                                    .unwrap_or(0);
                                break (i + 4, len);
                            }
                        };
                        while buf.len() < head_end + len {
                            let Ok(n) = sock.read(&mut chunk).await else { return };
                            if n == 0 {
                                break;
                            }
                            buf.extend_from_slice(&chunk[..n]);
                        }
                        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                        let mut first = head.lines().next().unwrap_or_default().split(' ');
                        let method = first.next().unwrap_or_default().to_owned();
                        let path = first.next().unwrap_or_default().to_owned();
                        seen.lock()
                            .expect("lock")
                            .push((method.clone(), path.clone()));
                        let request = Request {
                            method,
                            path,
                            head: head.to_lowercase(),
                            body: String::from_utf8_lossy(&buf[head_end..]).into_owned(),
                        };
                        let (status, headers, body) = answer(&request);
                        let extra: String = headers
                            .iter()
                            .map(|(k, v)| format!("{k}: {v}\r\n"))
                            .collect();
                        let resp = format!(
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = sock.write_all(resp.as_bytes()).await;
                        let _ = sock.shutdown().await;
                    });
                }
            });
        });
        let addr = rx.recv().expect("fake server address");
        FakeApi {
            url: format!("http://{addr}"),
            seen,
        }
    }

    /// Every request it answered, in order: (method, path with its query).
    pub fn requests(&self) -> Vec<(String, String)> {
        self.seen.lock().expect("lock").clone()
    }

    pub fn writes(&self) -> Vec<(String, String)> {
        self.seen
            .lock()
            .expect("lock")
            .iter()
            .filter(|(m, _)| m != "GET")
            .cloned()
            .collect()
    }
}

/// A RabbitMQ channel whose target is the management API at `url`.
pub fn rabbit_workspace(dir: &std::path::Path, url: &str) {
    std::fs::write(
        dir.join("dlqctl.yaml"),
        format!(
            "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  fake:\n    backend: rabbitmq\n    url: {url}\n    usernameEnv: DLQCTL_RABBITMQ_USER\n    passwordEnv: DLQCTL_RABBITMQ_PASSWORD\n    ownership: {{prefixes: [hostile.]}}\n"
        ),
    )
    .expect("write targets");
    std::fs::write(
        dir.join("c.yaml"),
        "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: hostile}\nspec:\n  target: fake\n  name: \"{channel}.main\"\n  retry: {maxAttempts: 3, backoff: {initial: 1s}}\n  rabbitmq: {queueType: classic}\n  lint: {allow: [alarms/missing]}\n",
    )
    .expect("write spec");
}

/// The error lines of a run (dlqctl says what failed in one line).
pub fn error_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("error:")).collect()
}
