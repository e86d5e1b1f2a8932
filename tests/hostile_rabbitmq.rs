//! RabbitMQ against a hostile or failing broker (issue 14): answers of a shape the management
//! API never returns, writes that are not acknowledged, and the live paths a hand-made change
//! or a foreign policy opens (replaces with bindings, quorum deletes, policies that disable
//! dead-lettering).
//!
//! The fake management API is a tokio `TcpListener` on 127.0.0.1 answering canned HTTP
//! responses and recording every request it saw.

mod support;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// (method, path) of every request the fake server answered.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// How the fake server answers one request: (status, body).
type Answer = Arc<dyn Fn(&str, &str) -> (u16, String) + Send + Sync>;

/// A fake management API on 127.0.0.1; stops with the test process.
struct FakeApi {
    url: String,
    seen: Seen,
}

impl FakeApi {
    fn start(answer: impl Fn(&str, &str) -> (u16, String) + Send + Sync + 'static) -> FakeApi {
        let answer: Answer = Arc::new(answer);
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
                        let (status, body) = answer(&method, &path);
                        let resp = format!(
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
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

    fn writes(&self) -> Vec<(String, String)> {
        self.seen
            .lock()
            .expect("lock")
            .iter()
            .filter(|(m, _)| m != "GET")
            .cloned()
            .collect()
    }
}

/// An empty vhost, as RabbitMQ lists it.
fn empty_state(path: &str) -> (u16, String) {
    if path.starts_with("/api/queues/") && path.contains("page=") {
        let page = json!({"filtered_count": 0, "item_count": 0, "items": [], "page": 1,
            "page_count": 1, "page_size": 500, "total_count": 0});
        (200, page.to_string())
    } else if path.starts_with("/api/queues/") {
        (
            404,
            json!({"error": "Object Not Found", "reason": "Not Found"}).to_string(),
        )
    } else {
        (200, "[]".to_owned())
    }
}

/// A workspace whose RabbitMQ target is `url`, holding the orders example.
fn workspace(url: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let targets = std::fs::read_to_string(support::root().join("examples/dlqctl.yaml"))
        .expect("targets")
        .replace("http://127.0.0.1:15672", url);
    std::fs::write(dir.path().join("dlqctl.yaml"), targets).expect("write targets");
    let spec = std::fs::read_to_string(support::root().join("examples/orders-rabbitmq.yaml"))
        .expect("example");
    std::fs::write(dir.path().join("channel.yaml"), spec).expect("write spec");
    dir
}

fn run(dir: &tempfile::TempDir, args: &[&str]) -> support::Output {
    support::output(
        support::dlqctl_local(dir.path())
            .args(args)
            .args(["--color", "never"]),
    )
}

#[test]
fn wrong_shaped_json_is_an_error_naming_the_endpoint_never_an_empty_state() {
    let cases: Vec<(&str, &str, Value)> = vec![
        (
            "items as an object",
            "queues",
            json!({"items": {}, "page": 1, "page_count": 1}),
        ),
        (
            "items as a JSON string",
            "queues",
            json!({"items": "[]", "page": 1, "page_count": 1}),
        ),
        (
            "page_count a word",
            "queues",
            json!({"items": [], "page": 1, "page_count": "many"}),
        ),
        (
            "a queue without a name",
            "queues",
            json!({"items": [{"type": "classic"}], "page": 1, "page_count": 1}),
        ),
        ("policies as an object", "policies", json!({"items": []})),
        ("exchanges as a string", "exchanges", json!("[]")),
        ("bindings as an object", "bindings", json!({})),
    ];
    for (what, endpoint, body) in cases {
        let body = body.to_string();
        let api = FakeApi::start(move |_, path| {
            if path.starts_with(&format!("/api/{endpoint}/")) {
                (200, body.clone())
            } else {
                empty_state(path)
            }
        });
        let dir = workspace(&api.url);
        let p = run(&dir, &["plan", "channel.yaml", "--detailed-exitcode"]);
        assert_eq!(
            p.code, 1,
            "{what}: plan must fail\n{}{}",
            p.stdout, p.stderr
        );
        let lines: Vec<&str> = p.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(
            lines.len() == 1
                && lines[0].contains("local-rabbitmq")
                && lines[0].contains(&format!("/api/{endpoint}/")),
            "{what}: one line naming the target and the endpoint:\n{}",
            p.stderr
        );
        let a = run(&dir, &["apply", "channel.yaml", "--auto-approve"]);
        assert_eq!(
            a.code, 1,
            "{what}: apply must fail\n{}{}",
            a.stdout, a.stderr
        );
        assert_eq!(
            api.writes(),
            Vec::new(),
            "{what}: no write after a bad read"
        );
    }
}

#[test]
fn a_write_answered_404_fails_the_step_and_apply() {
    // The vhost was deleted mid-apply: every write is answered "vhost not found".
    let api = FakeApi::start(|method, path| {
        if method == "GET" {
            empty_state(path)
        } else {
            (
                404,
                json!({"error": "not_found", "reason": "vhost_not_found"}).to_string(),
            )
        }
    });
    let dir = workspace(&api.url);
    let a = run(&dir, &["apply", "channel.yaml", "--auto-approve"]);
    assert_ne!(a.code, 0, "apply must fail\n{}{}", a.stdout, a.stderr);
    assert!(
        a.stderr.contains("FAILED") && a.stderr.contains("404"),
        "the first write fails, with the status\n{}",
        a.stderr
    );
    assert!(
        !a.stderr.contains(" done (") && !a.stderr.contains("Apply complete"),
        "no step counts as done\n{}{}",
        a.stdout,
        a.stderr
    );
    assert_eq!(
        api.writes().len(),
        1,
        "apply stops at the first failed write"
    );
}
