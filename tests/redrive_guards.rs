//! Issue 52, the guards of a redrive at their edges (M3, L1, L6, L9), through the binary.
//! A `--health-check` that is no http(s) URL, a `--rate` too small to honour, an empty
//! `--class`, `--to` or `--from` are usage errors (64) naming the flag and the value before
//! anything runs. A gate that hangs is left at once by SIGTERM (exit 1, as any interrupted
//! run); a refused connection and a redirect loop are said as what they are, not as a
//! timeout; a dry run asks the gates and says what they answered without failing; a gate's
//! `access_token` and password never reach the report or the journal; a `message_id` that is
//! a card number is masked in `movedIds`, in the report and in the journal. The gates are
//! this file's own HTTP servers on 127.0.0.1; the channel is RabbitMQ's, whose messages are
//! put in and counted with lapin.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use support::redrive::{finish, redrive, spawn_json};
use support::{block, rabbit};

/// How a gate of this file answers.
#[derive(Clone, Copy)]
enum Answer {
    /// Reads the request and never answers (until the server stops).
    Hang,
    /// `302` to itself, every time.
    RedirectLoop,
    /// This status and body.
    With(&'static str, &'static str),
}

/// A gate on 127.0.0.1: answers every request as `answer`, counting them. Stops when dropped.
struct Gate {
    url: String,
    asked: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Gate {
    fn start(answer: Answer) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}/health", listener.local_addr().expect("addr"));
        let asked = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, done, here) = (Arc::clone(&asked), Arc::clone(&stop), url.clone());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while !done.load(Ordering::SeqCst) {
                let Ok((mut s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                count.fetch_add(1, Ordering::SeqCst);
                match answer {
                    Answer::Hang => held.push(s),
                    Answer::RedirectLoop => {
                        let _ = write!(
                            s,
                            "HTTP/1.1 302 Found\r\nlocation: {here}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        );
                    }
                    Answer::With(status, body) => {
                        let _ = write!(
                            s,
                            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                    }
                }
            }
        });
        Gate { url, asked, stop }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// `dlqctl ARGS` with no workspace and no server: what clap refuses before anything runs.
fn usage(args: &[&str]) -> support::Output {
    let o = support::dlqctl()
        .args(args)
        .args(["--color", "never"])
        .output()
        .expect("dlqctl runs");
    support::Output {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// M3: a malformed `--health-check` (or `--prometheus`) was "unhealthy", exit 75 forever; a
/// CronJob that ignores 75 never ran the redrive and nobody was told.
#[test]
fn a_health_check_that_is_no_http_url_is_a_usage_error_naming_the_flag_and_the_value() {
    for bad in [
        "notaurl",
        "ftp://orders-api.internal/healthz",
        "http://",
        "unix:///var/run/orders.sock",
        "https://",
        "",
    ] {
        let o = usage(&["redrive", "orders", "--health-check", bad, "--yes"]);
        assert_eq!(
            o.code, 64,
            "--health-check {bad:?}\n{}{}",
            o.stdout, o.stderr
        );
        assert!(
            o.stderr.contains("--health-check") && o.stderr.contains(&format!("'{bad}'")),
            "--health-check {bad:?}: the flag and the value\n{}",
            o.stderr
        );
    }
    let o = usage(&[
        "redrive",
        "orders",
        "--health-query",
        "up",
        "--prometheus",
        "prometheus:9090",
        "--yes",
    ]);
    assert_eq!(o.code, 64, "{}", o.stderr);
    assert!(o.stderr.contains("--prometheus"), "{}", o.stderr);
    // Good ones pass the command line (and fail later on the missing spec, not as usage).
    for good in [
        "http://127.0.0.1:9/healthz",
        "https://orders-api.internal/healthz?deep=1",
    ] {
        let o = usage(&[
            "redrive",
            "orders",
            "/nonexistent-dir",
            "--health-check",
            good,
        ]);
        assert_ne!(o.code, 64, "{good}\n{}", o.stderr);
    }
}

/// L9: `--rate 1e-300`, `--class ''` and `--to ''` (in a dry run) were accepted.
#[test]
fn a_rate_too_small_and_empty_class_to_or_from_are_usage_errors_naming_the_flag() {
    for (flag, value) in [
        ("--rate", "1e-300"),
        ("--rate", "0.0001"),
        ("--rate", "0"),
        ("--rate", "NaN"),
        ("--class", ""),
        ("--class", "   "),
        ("--to", ""),
        ("--from", ""),
    ] {
        for verb in ["redrive", "archive"] {
            if verb == "archive" && matches!(flag, "--to" | "--from") {
                continue;
            }
            let mut args = vec![verb, "orders", flag, value, "--dry-run"];
            if verb == "archive" {
                args.extend(["--to", "/tmp/nowhere"]);
            }
            let o = usage(&args);
            assert_eq!(
                o.code, 64,
                "{verb} {flag} {value:?}\n{}{}",
                o.stdout, o.stderr
            );
            assert!(
                o.stderr.contains(flag),
                "{verb} {flag} {value:?}: names the flag\n{}",
                o.stderr
            );
        }
    }
    let o = usage(&[
        "redrive",
        "orders",
        "/nonexistent-dir",
        "--rate",
        "0.001",
        "--dry-run",
    ]);
    assert_ne!(o.code, 64, "0.001/s is honoured\n{}", o.stderr);
}

/// Issue 52 (fixjq 6): these exited 1 (or were accepted) instead of exiting 64 naming the
/// flag.
#[test]
fn an_empty_or_malformed_group_where_transform_or_port_0_gate_is_a_usage_error() {
    for (verb, flag, value) in [
        ("redrive", "--group", ""),
        ("redrive", "--group", "zzzzzzzzzzzz"),
        ("redrive", "--group", "641a4d89f69"),
        ("status", "--group", "zzzzzzzzzzzz"),
        ("archive", "--group", ""),
        ("redrive", "--where", ""),
        ("redrive", "--where", "  "),
        ("status", "--where", ""),
        ("archive", "--where", ""),
        ("redrive", "--transform", ""),
        ("redrive", "--health-check", "http://127.0.0.1:0/"),
    ] {
        let mut args = vec![verb];
        if verb != "status" {
            args.push("orders");
        }
        args.extend([flag, value]);
        match verb {
            "archive" => args.extend(["--to", "/tmp/nowhere", "--dry-run"]),
            "redrive" => args.push("--dry-run"),
            _ => {}
        }
        let o = usage(&args);
        assert_eq!(
            o.code, 64,
            "{verb} {flag} {value:?}\n{}{}",
            o.stdout, o.stderr
        );
        assert!(
            o.stderr.contains(flag),
            "{verb} {flag} {value:?}: names the flag\n{}",
            o.stderr
        );
    }
    // A good group id passes the command line (and fails later on the missing spec).
    for good in ["641a4d89f69d", "641A4D89F69D"] {
        let o = usage(&["redrive", "orders", "/nonexistent-dir", "--group", good]);
        assert_ne!(o.code, 64, "{good}\n{}", o.stderr);
    }
}

/// Puts one dead letter `id` in the fixture's DLQ.
fn put(dlq: &str, id: &str) {
    block(rabbit::publish_with(
        "",
        dlq,
        format!("order {id}").as_bytes(),
        lapin::BasicProperties::default().with_message_id(id.into()),
    ));
}

/// L1: a hanging gate answered by SIGTERM waited out its 5 s and exited 75.
#[test]
fn sigterm_while_a_gate_hangs_stops_at_once_and_exits_as_an_interrupted_run() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    put(&dlq, "h-1");
    rabbit::wait_for_messages(&dlq, 1);
    let gate = Gate::start(Answer::Hang);
    let run = spawn_json(&f, &["--health-check", gate.url.as_str()]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while gate.asked.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(gate.asked.load(Ordering::SeqCst), 1, "the gate was asked");
    std::thread::sleep(Duration::from_millis(300));
    let pid = i32::try_from(run.id()).expect("pid");
    // SAFETY: a signal to the child this test started.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let signalled = Instant::now();
    let (code, doc, err) = finish(run, Duration::from_secs(20));
    assert!(
        signalled.elapsed() < Duration::from_secs(3),
        "stopped {:?} after SIGTERM\n{doc}\n{err}",
        signalled.elapsed()
    );
    assert_eq!(code, 1, "{doc}\n{err}");
    assert_eq!(doc["interrupted"], json!(true), "{doc}");
    assert_eq!(doc["moved"], json!(0), "{doc}");
    assert_eq!(
        doc["unhealthy"],
        json!(null),
        "not the gate's verdict: {doc}"
    );
    assert_eq!(rabbit::count(&dlq), 1, "the message stays");
}

/// L1: "did not answer within 5s" was said of a refused connection and a redirect loop that
/// answered at once.
#[test]
fn a_refused_gate_and_a_redirect_loop_are_said_as_what_they_are() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    put(&dlq, "r-1");
    rabbit::wait_for_messages(&dlq, 1);
    // A port nothing listens on: bound, then closed.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}/health", l.local_addr().expect("addr"))
    };
    let redirect = Gate::start(Answer::RedirectLoop);
    for (url, want) in [
        (closed.as_str(), "connection refused"),
        (redirect.url.as_str(), "redirect"),
    ] {
        let started = Instant::now();
        let (code, doc, err) = redrive(&f, &["--yes", "--health-check", url]);
        assert_eq!(code, 75, "{doc}\n{err}");
        let why = doc["unhealthy"].as_str().unwrap_or_default().to_owned();
        assert!(why.contains(want), "{url}: {why}");
        assert!(!why.contains("within"), "{url}: not a timeout: {why}");
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{:?}",
            started.elapsed()
        );
    }
    assert_eq!(rabbit::count(&dlq), 1, "the message stays");
}

/// L1: Prometheus answering `NaN` or `-Inf` counted as healthy.
#[test]
fn a_prometheus_nan_or_infinite_value_is_not_healthy() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    put(&dlq, "p-1");
    rabbit::wait_for_messages(&dlq, 1);
    for value in ["NaN", "-Inf", "+Inf"] {
        let body: &'static str = Box::leak(
            format!(
                r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{}},"value":[1765000000,"{value}"]}}]}}}}"#
            )
            .into_boxed_str(),
        );
        let prom = Gate::start(Answer::With("200 OK", body));
        let base = prom.url.trim_end_matches("/health").to_owned();
        let (code, doc, err) = redrive(
            &f,
            &[
                "--yes",
                "--health-query",
                "up",
                "--prometheus",
                base.as_str(),
            ],
        );
        assert_eq!(code, 75, "{value}: {doc}\n{err}");
        assert_eq!(doc["moved"], json!(0), "{doc}");
        assert!(prom.asked.load(Ordering::SeqCst) >= 1);
    }
    assert_eq!(rabbit::count(&dlq), 1, "the message stays");
}

/// L1: a dry run asked no gate. It asks them now and says what they answered, and still
/// succeeds (a dry run moves nothing either way).
#[test]
fn a_dry_run_asks_the_gates_and_says_what_they_answered() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    put(&dlq, "d-1");
    rabbit::wait_for_messages(&dlq, 1);
    let down = Gate::start(Answer::With("503 Service Unavailable", ""));
    let (code, doc, err) = redrive(&f, &["--dry-run", "--health-check", down.url.as_str()]);
    assert_eq!(code, 0, "{doc}\n{err}");
    assert_eq!(down.asked.load(Ordering::SeqCst), 1, "the gate was asked");
    let health = doc["health"].to_string();
    assert!(health.contains("503"), "{doc}");
    let human = f.run(&[
        "redrive",
        f.channel.as_str(),
        "channel.yaml",
        "--dry-run",
        "--health-check",
        down.url.as_str(),
    ]);
    human.ok();
    assert!(human.stdout.contains("503"), "{}", human.stdout);
    let up = Gate::start(Answer::With("200 OK", ""));
    let (code, doc, err) = redrive(&f, &["--dry-run", "--health-check", up.url.as_str()]);
    assert_eq!(code, 0, "{doc}\n{err}");
    assert_eq!(up.asked.load(Ordering::SeqCst), 1);
    assert_eq!(doc["health"]["healthy"], json!(true), "{doc}");
    assert_eq!(rabbit::count(&dlq), 1, "nothing moved");
}

/// L6: a gate's `?access_token=` and password were journaled in clear; a `message_id` that is
/// a card number was listed in clear in `movedIds`.
#[test]
fn gate_tokens_and_card_number_ids_never_reach_the_report_or_the_journal() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    let down = Gate::start(Answer::With("503 Service Unavailable", ""));
    let secret_url = format!(
        "{}?access_token=t0k3n-in-the-query&check=deep&api_key=k3y-in-the-query",
        down.url.replace("http://", "http://ops:pa55-in-the-url@")
    );
    put(&dlq, "4111111111111111");
    put(&dlq, "order-2");
    rabbit::wait_for_messages(&dlq, 2);
    let (code, doc, err) = redrive(
        &f,
        &[
            "--yes",
            "--health-check",
            secret_url.as_str(),
            "--audit-log",
            "audit.jsonl",
        ],
    );
    assert_eq!(code, 75, "{doc}\n{err}");
    let (code, doc, err) = redrive(&f, &["--yes", "--audit-log", "audit.jsonl"]);
    assert_eq!(code, 0, "{doc}\n{err}");
    assert_eq!(doc["moved"], json!(2), "{doc}");
    let journal = std::fs::read_to_string(f.path().join("audit.jsonl")).expect("journal");
    let report = doc.to_string();
    for (what, text) in [("journal", &journal), ("report", &report), ("stderr", &err)] {
        for s in [
            "t0k3n-in-the-query",
            "k3y-in-the-query",
            "pa55-in-the-url",
            "4111111111111111",
        ] {
            assert!(!text.contains(s), "{what} holds `{s}`:\n{text}");
        }
    }
    assert!(
        journal.contains("check=deep"),
        "the rest of the URL is kept:\n{journal}"
    );
    assert!(report.contains("••••••••••••1111"), "{report}");
    assert_eq!(doc["movedIds"]["count"], json!(2), "{doc}");
    let back = block(rabbit::take_each(&main, |d| {
        d.properties
            .message_id()
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default()
    }));
    let mut back = back;
    back.sort();
    assert_eq!(
        back,
        vec!["4111111111111111".to_owned(), "order-2".to_owned()],
        "the copies carry their ids whole"
    );
}
