//! Saved plans and apply under pressure (issue 14, items 2, 12, 14, 16), live against the
//! local RabbitMQ: a hand-edited saved plan is re-derived, not trusted; a resource that
//! changes during apply stops it before it is written; `plan --out` overwrites only saved
//! plans; SIGTERM ends apply with a report.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::block;
use support::proxy::{Faults, Proxy};
use support::rabbit::{Fixture, api};

fn saved(f: &Fixture) -> Value {
    let text = std::fs::read_to_string(f.path().join("plan.json")).expect("saved plan");
    serde_json::from_str(&text).expect("plan JSON")
}

fn save(f: &Fixture, plan: &Value) {
    std::fs::write(
        f.path().join("plan.json"),
        serde_json::to_string_pretty(plan).expect("JSON"),
    )
    .expect("write plan");
}

fn plan_out(f: &Fixture) {
    let p = f.run(&["plan", "channel.yaml", "--out", "plan.json"]);
    p.ok();
}

fn status(path: &str) -> u16 {
    block(api(reqwest::Method::GET, path, None)).0
}

/// Zero writes: nothing the plan creates exists.
fn assert_nothing_created(f: &Fixture) {
    for name in &f.names()[..3] {
        assert_eq!(status(&format!("/api/queues/%2F/{name}")), 404, "{name}");
        assert_eq!(status(&format!("/api/policies/%2F/{name}")), 404, "{name}");
    }
}

/// A listener that records every byte sent to it and answers 500.
fn trap() -> (String, Arc<Mutex<Vec<u8>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            match listener.accept() {
                Ok((mut conn, _)) => {
                    let _ = conn.set_nonblocking(false);
                    let _ = conn.set_read_timeout(Some(Duration::from_millis(500)));
                    let mut buf = [0u8; 4096];
                    if let Ok(n) = conn.read(&mut buf) {
                        s.lock().expect("lock").extend_from_slice(&buf[..n]);
                    }
                    let _ = conn.write_all(
                        b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    );
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    });
    (url, seen)
}

#[test]
fn a_saved_plan_takes_targets_and_credentials_from_the_targets_file_not_from_itself() {
    let Some(mut f) = Fixture::new() else { return };
    f.env
        .push(("AWS_SECRET_ACCESS_KEY".into(), "s3cret-never-sent".into()));
    f.write_example(|t| t);
    plan_out(&f);
    let (url, seen) = trap();
    let mut plan = saved(&f);
    plan["targets"]["local-rabbitmq"]["url"] = json!(url);
    plan["targets"]["local-rabbitmq"]["passwordEnv"] = json!("AWS_SECRET_ACCESS_KEY");
    plan["targets"]["local-rabbitmq"]["ownership"] = json!({"prefixes": [""]});
    save(&f, &plan);
    let a = f.run(&["apply", "plan.json"]);
    std::thread::sleep(Duration::from_millis(200));
    let got = String::from_utf8_lossy(&seen.lock().expect("lock")).into_owned();
    assert!(
        got.is_empty(),
        "apply connected to the URL written into the plan file:\n{got}\n{}",
        a.stderr
    );
    // The connection came from dlqctl.yaml: the (unedited) changes applied there.
    a.ok();
    assert_eq!(
        status(&format!("/api/queues/%2F/{}", f.names()[2])),
        200,
        "{}",
        a.stderr
    );
}

#[test]
fn an_edited_change_in_a_saved_plan_is_refused_and_named_with_zero_writes() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| t);
    plan_out(&f);
    let mut plan = saved(&f);
    let [main, ..] = f.names();
    // A policy that matches every queue of the vhost.
    let changes = plan["changes"].as_array_mut().expect("changes");
    let policy = changes
        .iter_mut()
        .find(|c| c["resource"]["kind"] == json!("policy") && c["resource"]["name"] == json!(main))
        .expect("the main queue's policy is created");
    policy["desired"]["pattern"] = json!(".*");
    for field in policy["fields"].as_array_mut().expect("fields") {
        if field["key"] == json!("pattern") {
            field["new"] = json!(".*");
        }
    }
    save(&f, &plan);
    let a = f.run(&["apply", "plan.json"]);
    a.exits(1);
    a.assert_stderr_contains("refused");
    assert!(
        a.stderr.contains(&format!(
            "policy {main} (vhost /) on target `local-rabbitmq`"
        )),
        "names the edited change:\n{}",
        a.stderr
    );
    assert_nothing_created(&f);
}

#[test]
fn a_delete_added_to_a_saved_plan_outside_the_ownership_prefixes_is_refused() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| t);
    plan_out(&f);
    let outsider = support::unique("outsider.t");
    let (s, _) = block(api(
        reqwest::Method::PUT,
        &format!("/api/queues/%2F/{outsider}"),
        Some(json!({"durable": true})),
    ));
    assert!(s == 201 || s == 204, "{s}");
    let mut plan = saved(&f);
    plan["targets"]["local-rabbitmq"]["ownership"] = json!({"prefixes": ["orders.", "outsider."]});
    plan["changes"]
        .as_array_mut()
        .expect("changes")
        .push(json!({
            "resource": {"target": "local-rabbitmq", "backend": "rabbitmq", "kind": "queue",
                         "scope": "/", "name": outsider},
            "channel": "(no spec)", "role": "main", "action": "delete",
            "desired": {}, "messages": 0, "pruned": true
        }));
    plan["summary"]["delete"] = json!(1);
    save(&f, &plan);
    let a = f.run(&[
        "apply",
        "plan.json",
        "--allow-delete",
        "--allow-message-loss",
    ]);
    let still = status(&format!("/api/queues/%2F/{outsider}"));
    block(api(
        reqwest::Method::DELETE,
        &format!("/api/queues/%2F/{outsider}"),
        None,
    ));
    assert_eq!(still, 200, "the outsider queue was deleted:\n{}", a.stderr);
    a.exits(1);
    assert!(
        a.stderr.contains(&format!("queue {outsider} (vhost /)")),
        "names the added delete:\n{}",
        a.stderr
    );
    assert_nothing_created(&f);
}

#[test]
fn an_emptied_fingerprint_list_does_not_skip_the_staleness_check() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| t);
    plan_out(&f);
    let mut plan = saved(&f);
    plan["fingerprints"] = json!([]);
    save(&f, &plan);
    let [main, _, dlq, _] = f.names();
    // Someone creates the main queue by hand between plan and apply.
    let (s, _) = block(api(
        reqwest::Method::PUT,
        &format!("/api/queues/%2F/{main}"),
        Some(json!({"durable": true})),
    ));
    assert!(s == 201 || s == 204, "{s}");
    let a = f.run(&["apply", "plan.json"]);
    a.exits(1);
    a.assert_stderr_contains("refused");
    a.assert_stderr_contains(&format!("queue {main}"));
    assert_eq!(
        status(&format!("/api/queues/%2F/{dlq}")),
        404,
        "zero writes"
    );
}

#[test]
fn a_saved_plan_is_bound_to_the_server_it_was_planned_against() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| t);
    plan_out(&f);
    let mut plan = saved(&f);
    let ids = &mut plan["source"]["identities"];
    assert!(
        ids["local-rabbitmq"]
            .as_str()
            .is_some_and(|s| s.contains("rabbit")),
        "the saved plan records the server's identity: {ids}"
    );
    // As if it had been planned against another broker.
    ids["local-rabbitmq"] = json!("rabbitmq cluster another@elsewhere");
    save(&f, &plan);
    let a = f.run(&["apply", "plan.json"]);
    a.exits(1);
    assert!(
        a.stderr.contains("another@elsewhere") && a.stderr.contains("`local-rabbitmq`"),
        "{}",
        a.stderr
    );
    assert_nothing_created(&f);
}

#[test]
fn plan_out_overwrites_only_a_saved_plan() {
    let Some(f) = Fixture::new() else { return };
    let spec = f.write_example(|t| t);
    let spec_text = std::fs::read_to_string(&spec).expect("spec");
    let targets_text = std::fs::read_to_string(f.path().join("dlqctl.yaml")).expect("targets");
    for victim in ["channel.yaml", "dlqctl.yaml"] {
        let p = f.run(&["plan", "channel.yaml", "--out", victim]);
        assert_eq!(p.code, 1, "--out {victim}: {}{}", p.stdout, p.stderr);
        assert!(
            p.stderr.contains(victim) && p.stderr.contains("not a saved plan"),
            "{}",
            p.stderr
        );
    }
    assert_eq!(std::fs::read_to_string(&spec).expect("spec"), spec_text);
    assert_eq!(
        std::fs::read_to_string(f.path().join("dlqctl.yaml")).expect("targets"),
        targets_text
    );
    // A saved plan is replaced by the next one.
    plan_out(&f);
    plan_out(&f);
}

/// Runs `apply channel.yaml --auto-approve` through `proxy` as a child, calls `on_line` on
/// each stderr line (it may return true once to say "I acted"), and returns exit code and
/// stderr.
fn apply_watching(
    f: &Fixture,
    mut on_line: impl FnMut(&str, u32) -> bool,
) -> (Option<i32>, String) {
    let mut child = f.spawn_apply();
    let pid = child.id();
    let stderr = child.stderr.take().expect("stderr");
    let mut text = String::new();
    let mut acted = false;
    for line in BufReader::new(stderr).lines().take(200) {
        let Ok(line) = line else { break };
        if !acted {
            acted = on_line(&line, pid);
        }
        text.push_str(&line);
        text.push('\n');
    }
    let status = child.wait().expect("wait");
    (status.code(), text)
}

#[test]
fn sigterm_ends_apply_like_ctrl_c_with_a_report() {
    let proxy = Proxy::start(
        &support::rabbitmq_url(),
        Faults {
            write_delay: Duration::from_millis(300),
            ..Faults::default()
        },
    );
    let Some(f) = Fixture::with_url(&proxy.addr) else {
        return;
    };
    f.write_example(|t| t);
    let (code, stderr) = apply_watching(&f, |line, pid| {
        if line.contains("[1/7]") && line.contains("done") {
            // SAFETY: kill(2) on the child this test started.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
            return true;
        }
        false
    });
    assert_eq!(code, Some(1), "exits non-zero, not killed:\n{stderr}");
    assert!(
        stderr.contains("changes (interrupted).") && stderr.contains("Apply stopped after"),
        "{stderr}"
    );
    assert!(stderr.contains("  not done: "), "{stderr}");
}

#[test]
fn a_resource_changed_during_apply_stops_it_before_that_resource_is_written() {
    let proxy = Proxy::start(
        &support::rabbitmq_url(),
        Faults {
            write_delay: Duration::from_millis(400),
            ..Faults::default()
        },
    );
    let Some(f) = Fixture::with_url(&proxy.addr) else {
        return;
    };
    f.write_example(|t| t);
    let [main, ..] = f.names();
    let (code, stderr) = apply_watching(&f, |line, _| {
        if line.contains("[1/7]") && line.contains("done") {
            // Another apply (or an operator) creates the main queue, differently.
            let (s, _) = block(api(
                reqwest::Method::PUT,
                &format!("/api/queues/%2F/{main}"),
                Some(json!({"durable": true, "arguments": {"x-max-length": 5}})),
            ));
            assert!(s == 201 || s == 204, "{s}");
            return true;
        }
        false
    });
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "queue {main} (vhost /) on target `local-rabbitmq` was created since planning"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("  not done: "), "{stderr}");
    let (_, q) = block(api(
        reqwest::Method::GET,
        &format!("/api/queues/%2F/{main}"),
        None,
    ));
    assert_eq!(q["arguments"], json!({"x-max-length": 5}), "left as found");
}

/// Not an assertion of a number: prints what a 7-create apply costs, for the report.
#[test]
fn apply_call_count() {
    let proxy = Proxy::start(&support::rabbitmq_url(), Faults::default());
    let Some(f) = Fixture::with_url(&proxy.addr) else {
        return;
    };
    f.write_example(|t| t);
    let a = f.apply(&[]);
    a.ok();
    let c = &proxy.counters;
    use std::sync::atomic::Ordering::SeqCst;
    let _ = writeln!(
        std::io::stderr(),
        "apply of 7 creates: {} requests ({} reads, {} writes)",
        c.requests.load(SeqCst),
        c.reads.load(SeqCst),
        c.writes.load(SeqCst)
    );
}
