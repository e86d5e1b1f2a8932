//! RabbitMQ against a hostile or failing broker (issue 14): answers of a shape the management
//! API never returns, writes that are not acknowledged, and the live paths a hand-made change
//! or a foreign policy opens (replaces with bindings, quorum deletes, policies that disable
//! dead-lettering).
//!
//! The fake management API (`support::fake::FakeApi`) answers canned HTTP responses on
//! 127.0.0.1 and records every request it saw.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use support::fake::FakeApi;

/// An empty vhost, as RabbitMQ lists it.
fn empty_state(path: &str) -> (u16, String) {
    if path.starts_with("/api/queues/") && path.contains("page=") {
        let page = json!({"filtered_count": 0, "item_count": 0, "items": [], "page": 1,
            "page_count": 1, "page_size": 500, "total_count": 0});
        (200, page.to_string())
    } else if path.starts_with("/api/queues/") || one_object(path) {
        (
            404,
            json!({"error": "Object Not Found", "reason": "Not Found"}).to_string(),
        )
    } else {
        (200, "[]".to_owned())
    }
}

/// `/api/policies/{vhost}/{name}` or `/api/exchanges/{vhost}/{name}`: one object, which an
/// empty broker does not have.
fn one_object(path: &str) -> bool {
    let path = path.split('?').next().unwrap_or(path);
    (path.starts_with("/api/policies/") || path.starts_with("/api/exchanges/"))
        && path.trim_start_matches("/api/").split('/').count() >= 3
}

/// A workspace whose RabbitMQ target is `url`, holding the orders example.
fn workspace(url: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let targets = std::fs::read_to_string(support::root().join("examples/dlqctl.yaml"))
        .expect("targets")
        .replace("${DLQCTL_RABBITMQ_URL:-http://127.0.0.1:15672}", url);
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
        (
            // 200 queues with 1 MB names once took plan to 666 MB.
            "a queue name longer than RabbitMQ allows",
            "queues",
            json!({"items": [{"name": format!("orders.{}", "x".repeat(300)),
                "type": "classic", "durable": true, "arguments": {}}],
                "page": 1, "page_count": 1}),
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

/// The race the live test cannot stage: a quorum queue is empty when the plan counts it, and a
/// message lands before apply deletes it. Apply counts again just before the delete (quorum
/// queues refuse `if-empty`) and refuses, so nothing is lost.
#[test]
fn a_message_that_lands_after_the_plan_stops_the_delete_of_a_quorum_queue() {
    let old = json!({"name": "orders.old", "type": "quorum", "durable": true,
        "auto_delete": false, "arguments": {"x-queue-type": "quorum"}});
    let listed = old.clone();
    let counted = AtomicUsize::new(0);
    let api = FakeApi::start(move |method, path| {
        let (route, query) = path.split_once('?').unwrap_or((path, ""));
        match (method, route) {
            ("GET", "/api/queues/%2F") => (
                200,
                json!({"items": [listed], "page": 1, "page_count": 1}).to_string(),
            ),
            // The plan's count (the first): empty. The count just before the delete: a dead
            // letter arrived.
            ("GET", "/api/queues/%2F/orders%2Eold") if query.starts_with("columns=type") => {
                let n = u64::from(counted.fetch_add(1, Ordering::SeqCst) > 0);
                (200, json!({"type": "quorum", "messages": n}).to_string())
            }
            ("GET", "/api/queues/%2F/orders%2Eold") => (200, listed.to_string()),
            ("GET", _) => empty_state(path),
            _ => (201, String::new()),
        }
    });
    let dir = workspace(&api.url);
    // Arguments mode: no policies to wait for; the spec's queues are created, orders.old is
    // pruned.
    let spec = std::fs::read_to_string(dir.path().join("channel.yaml")).expect("spec");
    std::fs::write(
        dir.path().join("channel.yaml"),
        spec.replace("dlx: policy", "dlx: arguments"),
    )
    .expect("write spec");
    let a = run(
        &dir,
        &[
            "apply",
            "channel.yaml",
            "--prune",
            "--allow-delete",
            "--auto-approve",
        ],
    );
    a.exits(1);
    assert!(
        a.stderr.contains("holds 1 messages now"),
        "refused with the count read just before the delete\n{}",
        a.stderr
    );
    let deletes: Vec<_> = api
        .writes()
        .into_iter()
        .filter(|(m, _)| m == "DELETE")
        .collect();
    assert!(deletes.is_empty(), "nothing deleted: {deletes:?}");
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

// ---------------------------------------------------------------------------------------------
// Live: the local broker
// ---------------------------------------------------------------------------------------------

use reqwest::Method;
use support::block;
use support::rabbit::{Fixture, api, wait_for_messages};

/// Publishes one message through AMQP (confirmed by the broker).
async fn publish(exchange: &str, key: &str, body: &[u8]) {
    use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
    let conn =
        lapin::Connection::connect(&support::amqp_url(), lapin::ConnectionProperties::default())
            .await
            .expect("AMQP");
    let ch = conn.create_channel().await.expect("channel");
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirms");
    ch.basic_publish(
        exchange.into(),
        key.into(),
        BasicPublishOptions::default(),
        body,
        lapin::BasicProperties::default(),
    )
    .await
    .expect("publish")
    .await
    .expect("confirm");
    let _ = conn.close(200, "done".into()).await;
}

/// Takes (and acknowledges) one message from a queue; `false` when it is empty.
async fn take_one(queue: &str) -> bool {
    use lapin::options::{BasicAckOptions, BasicGetOptions};
    let conn =
        lapin::Connection::connect(&support::amqp_url(), lapin::ConnectionProperties::default())
            .await
            .expect("AMQP");
    let ch = conn.create_channel().await.expect("channel");
    let got = ch
        .basic_get(queue.into(), BasicGetOptions::default())
        .await
        .expect("basic.get");
    let taken = match got {
        Some(m) => {
            m.delivery
                .acker
                .ack(BasicAckOptions::default())
                .await
                .expect("ack");
            true
        }
        None => false,
    };
    let _ = conn.close(200, "done".into()).await;
    taken
}

/// (source, routing key) of every binding of a queue, the default exchange's left out.
fn bindings_of(queue: &str) -> Vec<(String, String)> {
    let (status, list) = block(api(
        Method::GET,
        &format!("/api/queues/%2F/{queue}/bindings"),
        None,
    ));
    assert_eq!(status, 200, "{list}");
    let mut out: Vec<(String, String)> = list
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["source"] != "")
        .map(|b| {
            (
                b["source"].as_str().unwrap_or_default().to_owned(),
                b["routing_key"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_replace_re_creates_every_binding_of_the_queue_and_the_next_plan_is_empty() {
    let Some(f) = Fixture::applied() else { return };
    let [main, _, _, exchange] = f.names();
    // Another tool binds the main queue to an exchange dlqctl does not own.
    let (status, body) = block(api(
        Method::POST,
        &format!("/api/bindings/%2F/e/amq.direct/q/{main}"),
        Some(json!({"routing_key": "foreign", "arguments": {}})),
    ));
    assert_eq!(status, 201, "{body}");
    let before = bindings_of(&main);
    assert_eq!(
        before,
        vec![
            ("amq.direct".to_owned(), "foreign".to_owned()),
            (exchange.clone(), "process".to_owned())
        ]
    );

    f.write_example(|t| t.replace("queueType: classic", "queueType: quorum"));
    let p = f.plan();
    p.exits(2);
    for b in [
        format!("binding amq.direct -> {main} [foreign]"),
        format!("binding {exchange} -> {main} [process]"),
    ] {
        assert!(
            p.stdout.contains(&b),
            "the replace lists `{b}`\n{}",
            p.stdout
        );
    }
    let a = f.apply(&["--allow-replace"]);
    a.ok();
    assert_eq!(bindings_of(&main), before, "every binding is back");
    let p = f.plan();
    p.ok_with("the next plan is empty");
    // A message published through the exchange is routed to the new queue.
    block(publish(&exchange, "process", b"order-1"));
    wait_for_messages(&main, 1);
}

#[test]
fn a_quorum_queue_is_counted_just_before_it_is_deleted_instead_of_if_empty() {
    let Some(f) = Fixture::new() else { return };
    let [_, _, dlq, _] = f.names();
    f.write_example(|t| t.replace("queueType: classic", "queueType: quorum"));
    let a = f.apply(&[]);
    a.ok();

    // A replace of the (empty) quorum queues, planned and saved.
    f.write_example(|t| t);
    let p = f.run(&["plan", "channel.yaml", "--out", "plan.json"]);
    p.ok();
    assert!(
        p.stdout
            .contains("counts its messages just before the delete"),
        "the plan says how a quorum queue is guarded\n{}",
        p.stdout
    );
    // A dead letter arrives after the plan: apply counts it and refuses to drop it.
    block(publish("", &dlq, b"dead-letter-1"));
    wait_for_messages(&dlq, 1);
    let a = f.run(&["apply", "plan.json", "--allow-replace"]);
    assert_ne!(a.code, 0, "{}{}", a.stdout, a.stderr);
    // Refused with the count: by the re-plan that `apply FILE` makes (it reads the count
    // afresh), or, if the message lands after that, by the count read just before the delete.
    assert!(
        a.stderr.contains("holds 1 messages"),
        "refused with the count\n{}",
        a.stderr
    );
    wait_for_messages(&dlq, 1);

    // Once it is empty, the replace goes through without --allow-message-loss.
    assert!(block(take_one(&dlq)), "the dead letter is still there");
    wait_for_messages(&dlq, 0);
    let a = f.apply(&["--allow-replace"]);
    a.ok();
    let p = f.plan();
    p.ok();
}

/// A policy made by another tool, removed when the test ends (whatever happens).
struct ForeignPolicy(String);

impl Drop for ForeignPolicy {
    fn drop(&mut self) {
        let _ = block(api(
            Method::DELETE,
            &format!("/api/policies/%2F/{}", self.0),
            None,
        ));
    }
}

#[test]
fn a_foreign_policy_that_limits_the_dlq_is_drift_that_apply_refuses() {
    let Some(f) = Fixture::applied() else { return };
    let [_, _, dlq, _] = f.names();

    // Outside the ownership prefixes, higher priority, on every queue of the channel.
    let policy = ForeignPolicy(support::unique("hostile-cap-"));
    let (status, body) = block(api(
        Method::PUT,
        &format!("/api/policies/%2F/{}", policy.0),
        Some(json!({
            "pattern": format!("^{}\\.", f.channel.replace('.', "\\.")),
            "apply-to": "queues",
            "priority": 100,
            "definition": {"max-length": 1, "overflow": "drop-head"},
        })),
    ));
    assert!(status == 201 || status == 204, "{status} {body}");
    // Bounded wait until RabbitMQ applies it to the DLQ.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (_, q) = block(api(
            Method::GET,
            "/api/queues/%2F?disable_stats=true&columns=name,policy",
            None,
        ));
        let applied = q
            .as_array()
            .into_iter()
            .flatten()
            .any(|i| i["name"] == dlq.as_str() && i["policy"] == policy.0.as_str());
        if applied {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "policy never applied: {q}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }

    let p = f.plan();
    assert_eq!(
        p.code, 2,
        "drift, not \"matches\"\n{}{}",
        p.stdout, p.stderr
    );
    assert!(
        p.stdout.contains(&format!("impossible queue {dlq}"))
            && p.stdout
                .contains("effective_policy.max-length: 1 → (absent)")
            && p.stdout.contains(&format!("policy `{}`", policy.0)),
        "the DLQ's drift names the policy\n{}",
        p.stdout
    );
    let a = f.apply(&[]);
    assert_ne!(a.code, 0, "apply refuses\n{}{}", a.stdout, a.stderr);
    a.assert_stderr_contains(&policy.0);
    let (status, _) = block(api(
        Method::GET,
        &format!("/api/policies/%2F/{}", policy.0),
        None,
    ));
    assert_eq!(status, 200, "the foreign policy is left alone");
}

/// Issue 18, part 5: from RabbitMQ 3.13 the plan says what the broker's version means for a
/// consumer that counts attempts (the local broker is 3.10, so a fake `/api/overview` shows
/// the note); below 3.13, and when the overview says no version, it says nothing.
#[test]
fn plan_notes_the_broker_version_from_3_13_for_a_channel_with_a_retry_loop() {
    for (version, expected) in [
        (Some("4.0.5"), Some("4.0 and later")),
        (Some("3.13.7"), Some("on the 3.13 line only")),
        (Some("3.13.1"), Some("3.13.0 to 3.13.2")),
        (Some("3.12.14"), None),
        (None, None),
    ] {
        let api = FakeApi::start(move |_, path| {
            if path.starts_with("/api/overview") {
                let body = match version {
                    Some(v) => json!({"rabbitmq_version": v, "cluster_name": "fake"}),
                    None => json!({"cluster_name": "fake"}),
                };
                (200, body.to_string())
            } else {
                empty_state(path)
            }
        });
        let dir = workspace(&api.url);
        let p = run(&dir, &["plan", "channel.yaml"]);
        p.ok_with(format!("{version:?}"));
        let note = p
            .stdout
            .lines()
            .find(|l| l.contains("`dlq-attempts`"))
            .map(str::to_owned);
        match expected {
            Some(says) => {
                let note = note.unwrap_or_else(|| panic!("{version:?}: no note\n{}", p.stdout));
                let v = version.unwrap_or_default();
                assert!(
                    note.contains("queue orders.process (vhost /) on target local-rabbitmq")
                        && note.contains(&format!("RabbitMQ {v} "))
                        && note.contains(says),
                    "{note}"
                );
            }
            None => assert!(note.is_none(), "{version:?}: {}", p.stdout),
        }
        assert!(api.writes().is_empty(), "plan wrote");
    }
}
