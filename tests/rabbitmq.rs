//! RabbitMQ, live: the real broker from `scripts/stack up`, its management API and AMQP.
//!
//! Every test works on its own channel name (`orders.<random>`), inside the example target's
//! ownership prefix, and deletes what it created. The invariant checked throughout: after
//! apply, a plan is empty.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::block;
use support::rabbit::{
    Fixture, amqp, api, dead_letter_exchange, delete_queue, publish, publish_on, queue_status,
    take_deliveries, wait_for_messages, with_dead_letter_exchange,
};

#[test]
fn apply_then_plan_is_empty_and_a_second_apply_writes_nothing() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| t);
    let (first, a) = f.first_apply("the orders example");
    first.assert_stdout_contains("Plan: 7 to create, 0 to update, 0 to replace, 0 to delete.");
    assert!(
        a.stderr.contains("[7/7]"),
        "each step is reported\n{}",
        a.stderr
    );
    f.assert_second_apply_writes_nothing("the orders example");

    // The topology is the one docs/rabbitmq.md documents.
    let [main, retry, dlq, _] = f.names();
    let (_, p) = block(api(
        reqwest::Method::GET,
        &format!("/api/policies/%2F/{retry}"),
        None,
    ));
    assert_eq!(
        p["definition"],
        json!({"message-ttl": 5000, "dead-letter-exchange": "", "dead-letter-routing-key": main})
    );
    let (_, p) = block(api(
        reqwest::Method::GET,
        &format!("/api/policies/%2F/{main}"),
        None,
    ));
    assert_eq!(p["definition"]["dead-letter-routing-key"], json!(retry));
    assert_eq!(queue_status(&dlq), 200);

    // The local broker is RabbitMQ 3.10 (Debian), which still counts an `x-death` a client
    // publishes: no consumer-contract note below 3.13, one from 3.13 (the notes themselves:
    // tests/hostile_rabbitmq.rs, against a fake `/api/overview`).
    let (_, overview) = block(api(reqwest::Method::GET, "/api/overview", None));
    let version = overview["rabbitmq_version"].as_str().unwrap_or_default();
    assert!(
        !version.is_empty(),
        "/api/overview reports the version: {overview}"
    );
    let mut numbers = version.split('.').map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    let plan = f.plan();
    assert_eq!(
        plan.stdout.contains("`dlq-attempts`"),
        (major, minor) >= (3, 13),
        "the version note on RabbitMQ {version}\n{}",
        plan.stdout
    );
}

#[test]
fn hand_changes_show_up_in_the_next_plan_with_field_detail() {
    let Some(f) = Fixture::applied() else { return };
    let [main, retry, _, exchange] = f.names();
    block(async {
        // An operator edits the retry policy, deletes the DLQ... no: the retry queue, and a binding.
        let (s, _) = api(
            reqwest::Method::PUT,
            &format!("/api/policies/%2F/{retry}"),
            Some(json!({"pattern": format!("^{}$", retry.replace('.', "\\.")), "apply-to": "queues", "priority": 10,
                        "definition": {"message-ttl": 9000, "dead-letter-exchange": "", "dead-letter-routing-key": main}})),
        )
        .await;
        assert!(s == 201 || s == 204, "policy edit: {s}");
        let (s, _) = api(
            reqwest::Method::DELETE,
            &format!("/api/bindings/%2F/e/{exchange}/q/{main}/process"),
            None,
        )
        .await;
        assert_eq!(s, 204, "binding delete");
    });
    let p = f.plan();
    p.exits(2);
    p.assert_stdout_contains(&format!("~ update     policy {retry}"));
    p.assert_stdout_contains("definition.message-ttl: 9000 → 5000");
    p.assert_stdout_contains(&format!(
        "+ create     binding {exchange} -> {main} [process]"
    ));

    // A deleted queue is re-created.
    delete_queue(&retry);
    let p = f.plan();
    p.assert_stdout_contains(&format!("+ create     queue {retry}"));
    f.apply(&[]).ok();
    f.assert_empty_plan("after repair");
}

#[test]
fn changing_a_delay_updates_the_policy_in_place() {
    let Some(f) = Fixture::applied() else { return };
    let p = f.plan_edited(|t| t.replace("backoff: {initial: 5s}", "backoff: {initial: 7s}"));
    p.assert_stdout_contains("definition.message-ttl: 5000 → 7000");
    p.assert_stdout_contains("Plan: 0 to create, 1 to update, 0 to replace, 0 to delete.");
    let a = f.apply(&[]);
    a.ok_with("an in-place update needs no flag");
    f.assert_empty_plan("after the update");
}

#[test]
fn in_arguments_mode_a_delay_change_is_a_guarded_replace_that_never_drops_messages() {
    let Some(f) = Fixture::new() else { return };
    let args_mode = |delay: &'static str| {
        move |t: String| {
            t.replace("dlx: policy", "dlx: arguments")
                .replace("initial: 5s", delay)
        }
    };
    f.write_example(args_mode("initial: 5s"));
    f.apply(&[]).ok();
    f.assert_empty_plan("arguments mode");
    let [main, retry, dlq, _] = f.names();
    // Exactly what a hand-written consumer would declare for this topology.
    let args = |q: String| {
        block(async move {
            api(reqwest::Method::GET, &format!("/api/queues/%2F/{q}"), None)
                .await
                .1["arguments"]
                .clone()
        })
    };
    assert_eq!(
        args(retry.clone()),
        json!({"x-dead-letter-exchange": "", "x-dead-letter-routing-key": main, "x-message-ttl": 5000})
    );
    assert_eq!(args(main.clone()), json!({}));
    assert_eq!(args(dlq), json!({}));

    // A message waits in the retry queue; changing its TTL means rebuilding the queue.
    block(publish("", &retry, b"keep me"));
    wait_for_messages(&retry, 1);
    let p = f.plan_edited(args_mode("initial: 6s"));
    p.assert_stdout_contains(&format!("-/+ replace    queue {retry}"));
    p.assert_stdout_contains("holds 1 messages that would be lost");
    p.assert_stdout_contains("arguments.x-message-ttl: 5000 → 6000");

    let refused = f.apply_refused_replace();
    refused.assert_stderr_contains("--allow-message-loss");
    refused.assert_zero_writes();
    assert_eq!(
        args(retry.clone())["x-message-ttl"],
        json!(5000),
        "the queue is untouched"
    );
    wait_for_messages(&retry, 1);

    let done = f.apply(&["--allow-replace", "--allow-message-loss"]);
    done.ok();
    assert_eq!(args(retry)["x-message-ttl"], json!(6000));
    f.assert_empty_plan("after the replace");
}

#[test]
fn a_saved_plan_is_refused_when_the_live_state_changed() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| t);
    f.save_plan();
    let [main, ..] = f.names();
    // Someone creates the main queue by hand between plan and apply.
    block(api(
        reqwest::Method::PUT,
        &format!("/api/queues/%2F/{main}"),
        Some(json!({"durable": true})),
    ));
    let a = f.run(&["apply", "plan.json"]);
    a.exits(1);
    a.assert_stderr_contains("refused");
    a.assert_stderr_contains(&format!(
        "queue {main} (vhost /) on target `local-rabbitmq` was created"
    ));
    assert_eq!(
        queue_status(&format!("{}.dlq", f.channel)),
        404,
        "zero writes: the DLQ the plan would create does not exist"
    );

    // An unchanged saved plan applies.
    delete_queue(&main);
    let a = f.run(&["apply", "plan.json"]);
    a.ok();
    f.assert_empty_plan("after applying the saved plan");
}

/// Deliveries made so far, by the consumer contract of docs/rabbitmq.md: the `dlq-attempts`
/// header when the consumer set it (it publishes to the retry queue itself), else what the
/// broker counted in `x-death` (`expired` trips through a retry queue of a message it
/// dead-lettered, after a reject).
fn attempts_so_far(props: &lapin::BasicProperties) -> u64 {
    use lapin::types::AMQPValue;
    let Some(headers) = props.headers() else {
        return 0;
    };
    if let Some(own) = headers.inner().get("dlq-attempts") {
        return support::rabbit::amqp_text(own).trim().parse().unwrap_or(0);
    }
    let Some(AMQPValue::FieldArray(deaths)) = headers.inner().get("x-death") else {
        return 0;
    };
    deaths
        .as_slice()
        .iter()
        .filter_map(|d| match d {
            AMQPValue::FieldTable(t) => Some(t),
            _ => None,
        })
        .filter(|t| matches!(t.inner().get("reason"), Some(AMQPValue::LongString(r)) if r.to_string() == "expired"))
        .map(|t| match t.inner().get("count") {
            Some(AMQPValue::LongLongInt(c)) => *c as u64,
            Some(AMQPValue::LongInt(c)) => *c as u64,
            _ => 0,
        })
        .sum()
}

/// How the consumer of [`consumer_loop`] hands a failed delivery to the retry queue.
#[derive(Clone, Copy, PartialEq)]
enum Retry {
    /// `basic.reject` without requeue: the broker dead-letters it (policy mode) and counts
    /// the trip in `x-death`, on every RabbitMQ version.
    Reject,
    /// Publish a copy to the retry queue with `dlq-attempts` set, then ack (arguments mode):
    /// RabbitMQ 4 ignores an `x-death` a client publishes, so only the consumer's own header
    /// counts on every version.
    Publish,
}

/// The consumer contract from docs/rabbitmq.md, run over AMQP on a channel of 3 attempts 700 ms
/// apart: count the attempts, retry while some remain, then publish the message with the
/// envelope to the DLQ and ack. The loop must end in the DLQ after exactly 3 deliveries.
fn consumer_loop(mode: &'static str, retry_by: Retry) {
    let Some(f) = Fixture::applied_with(move |t| {
        t.replace("maxAttempts: 4", "maxAttempts: 3")
            .replace("initial: 5s", "initial: 700ms")
            .replace("dlx: policy", &format!("dlx: {mode}"))
    }) else {
        return;
    };
    let [main, retry, dlq, exchange] = f.names();
    block(async {
        use lapin::options::{BasicAckOptions, BasicGetOptions, BasicRejectOptions};
        use lapin::types::{AMQPValue, LongString};
        let text = |s: &str| AMQPValue::LongString(LongString::from(s));
        let conn = amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        publish_on(
            &ch,
            &exchange,
            "process",
            b"order-42",
            lapin::BasicProperties::default(),
        )
        .await;
        let mut deliveries: Vec<Instant> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let Some(msg) = ch
                .basic_get(main.as_str().into(), BasicGetOptions::default())
                .await
                .expect("get")
            else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            deliveries.push(Instant::now());
            let props = &msg.delivery.properties;
            let attempt = attempts_so_far(props) + 1;
            assert_eq!(
                attempt as usize,
                deliveries.len(),
                "the contract counts the attempts"
            );
            assert_eq!(msg.delivery.data, b"order-42");
            let mut headers = props.headers().clone().unwrap_or_default();
            headers.insert(
                "dlq-attempts".into(),
                AMQPValue::LongLongInt(attempt as i64),
            );
            if attempt < 3 && retry_by == Retry::Reject {
                msg.delivery
                    .reject(BasicRejectOptions { requeue: false })
                    .await
                    .expect("reject");
            } else if attempt < 3 {
                let copy = props.clone().with_headers(headers);
                publish_on(&ch, "", &retry, &msg.delivery.data, copy).await;
                msg.delivery
                    .ack(BasicAckOptions::default())
                    .await
                    .expect("ack");
            } else {
                headers.insert("dlq-error-class".into(), text("transient_exhausted"));
                headers.insert("dlq-source".into(), text(&main));
                let copy = props.clone().with_headers(headers);
                publish_on(&ch, "", &dlq, &msg.delivery.data, copy).await;
                msg.delivery
                    .ack(BasicAckOptions::default())
                    .await
                    .expect("ack");
                break;
            }
        }
        assert_eq!(deliveries.len(), 3, "delivered maxAttempts times");
        for w in deliveries.windows(2) {
            let gap = w[1] - w[0];
            assert!(
                gap >= Duration::from_millis(650),
                "retried after the 700 ms delay, not {gap:?}"
            );
        }
        let dead = ch
            .basic_get(dlq.as_str().into(), BasicGetOptions::default())
            .await
            .expect("get")
            .expect("the message is in the DLQ");
        assert_eq!(dead.delivery.data, b"order-42", "nothing lost");
        let h = dead
            .delivery
            .properties
            .headers()
            .clone()
            .unwrap_or_default();
        let header = |k: &str| h.inner().get(k).map(support::rabbit::amqp_text);
        assert_eq!(header("dlq-attempts").as_deref(), Some("3"));
        assert_eq!(
            header("dlq-error-class").as_deref(),
            Some("transient_exhausted")
        );
        dead.delivery
            .ack(BasicAckOptions::default())
            .await
            .expect("ack");
        let _ = conn.close(200, "done".into()).await;
    });
}

/// The README's consumer, by the contract for RabbitMQ 3.13 and 4 (issue 18, part 5): in
/// arguments mode the consumer publishes each retry itself and counts with its own
/// `dlq-attempts`; the loop ends in the DLQ.
#[test]
fn a_consumer_counting_its_own_dlq_attempts_goes_round_the_retry_queue_then_to_the_dlq() {
    consumer_loop("arguments", Retry::Publish);
}

/// The other half of the contract: a message the broker dead-letters (a reject, in policy
/// mode) is counted from `x-death`, which every RabbitMQ version keeps up to date.
#[test]
fn a_rejected_message_goes_round_the_retry_queue_then_to_the_dlq() {
    consumer_loop("policy", Retry::Reject);
}

/// Issue 18's shape, in each mode: the main queue dead-letters through a named exchange into
/// the DLQ. Apply, then the plan is empty; a message the consumer rejects (`requeue=false`)
/// and one that expires on the main queue both arrive in the DLQ through that exchange, with
/// its routing key.
#[test]
fn a_named_dead_letter_exchange_takes_rejected_and_expired_messages_to_the_dlq() {
    for (mode, creates) in [("policy", 7), ("arguments", 6)] {
        let Some(f) = Fixture::new() else { return };
        f.write_example(with_dead_letter_exchange(mode));
        let (first, applied) = f.first_apply(mode);
        first.assert_stdout_contains(&format!(
            "Plan: {creates} to create, 0 to update, 0 to replace, 0 to delete."
        ));
        f.assert_second_apply_writes_nothing(mode);
        let [main, _, dlq, exchange] = f.names();
        let (dlx, key) = dead_letter_exchange(&f.channel);

        // Nothing dead-letters into the exchange before it exists and routes to the DLQ: the
        // DLQ, then the exchange, then its binding, then the main queue. (The main queue's
        // policy may go first: it applies to no queue until the main queue is declared.)
        let step = |what: String| {
            applied
                .stderr
                .find(&what)
                .unwrap_or_else(|| panic!("{mode}: no step `{what}`\n{}", applied.stderr))
        };
        let order = [
            step(format!("queue {dlq} ")),
            step(format!("exchange {dlx} ")),
            step(format!("binding {dlx} -> {dlq} [{key}]")),
            step(format!("queue {main} ")),
        ];
        assert!(
            order.is_sorted(),
            "{mode}: apply order {order:?}\n{}",
            applied.stderr
        );

        // The exchange, the DLQ's binding, and the main queue's settings where the mode puts them.
        let (_, x) = block(api(
            reqwest::Method::GET,
            &format!("/api/exchanges/%2F/{dlx}"),
            None,
        ));
        assert_eq!(
            (x["type"].as_str(), x["durable"].as_bool()),
            (Some("direct"), Some(true))
        );
        let (_, bindings) = block(api(
            reqwest::Method::GET,
            &format!("/api/exchanges/%2F/{dlx}/bindings/source"),
            None,
        ));
        assert_eq!(
            bindings.as_array().map(|b| b
                .iter()
                .map(|b| (b["destination"].clone(), b["routing_key"].clone()))
                .collect::<Vec<_>>()),
            Some(vec![(json!(dlq), json!(key))]),
            "{mode}: {bindings}"
        );
        let settings = if mode == "policy" {
            let (_, p) = block(api(
                reqwest::Method::GET,
                &format!("/api/policies/%2F/{main}"),
                None,
            ));
            p["definition"].clone()
        } else {
            let (_, q) = block(api(
                reqwest::Method::GET,
                &format!("/api/queues/%2F/{main}"),
                None,
            ));
            let a = &q["arguments"];
            json!({"dead-letter-exchange": a["x-dead-letter-exchange"], "dead-letter-routing-key": a["x-dead-letter-routing-key"], "message-ttl": a["x-message-ttl"]})
        };
        assert_eq!(
            settings,
            json!({"dead-letter-exchange": dlx, "dead-letter-routing-key": key, "message-ttl": 2000}),
            "{mode}"
        );

        let dead = block(async {
            use lapin::options::{BasicGetOptions, BasicRejectOptions};
            let conn = amqp().await;
            let ch = conn.create_channel().await.expect("channel");
            let props = lapin::BasicProperties::default;
            publish_on(&ch, &exchange, "process", b"rejected", props()).await;
            let deadline = Instant::now() + Duration::from_secs(10);
            let msg = loop {
                if let Some(m) = ch
                    .basic_get(main.as_str().into(), BasicGetOptions::default())
                    .await
                    .expect("get")
                {
                    break m;
                }
                assert!(Instant::now() < deadline, "{mode}: nothing to consume");
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            msg.delivery
                .reject(BasicRejectOptions { requeue: false })
                .await
                .expect("reject");
            // Nobody consumes this one: it expires after the main queue's 2 s TTL.
            publish_on(&ch, &exchange, "process", b"expired", props()).await;
            let _ = conn.close(200, "done".into()).await;
            take_deliveries(&dlq, 2).await
        });
        let got: Vec<(&str, &str, &[u8], Option<&str>)> = dead
            .iter()
            .map(|(x, k, body, h)| {
                (
                    x.as_str(),
                    k.as_str(),
                    body.as_slice(),
                    h.get("x-first-death-reason").map(String::as_str),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    dlx.as_str(),
                    key.as_str(),
                    &b"rejected"[..],
                    Some("rejected")
                ),
                (dlx.as_str(), key.as_str(), &b"expired"[..], Some("expired")),
            ],
            "{mode}: both dead letters went through the named exchange with its key"
        );
    }
}

#[test]
fn plans_render_in_every_format() {
    let Some(f) = Fixture::applied() else { return };
    // One in-place update, one re-create, and an unmanaged setting to report.
    let [main, retry, dlq, _] = f.names();
    block(async {
        api(
            reqwest::Method::PUT,
            &format!("/api/policies/%2F/{retry}"),
            Some(json!({"pattern": format!("^{}$", retry.replace('.', "\\.")), "apply-to": "queues", "priority": 10,
                        "definition": {"message-ttl": 9000, "dead-letter-exchange": "", "dead-letter-routing-key": main, "max-length": 1000}})),
        )
        .await;
        api(
            reqwest::Method::DELETE,
            &format!("/api/queues/%2F/{dlq}"),
            None,
        )
        .await;
    });
    assert_plan_snapshots!(f, None);
    let json: Value =
        serde_json::from_str(&f.run(&["plan", "channel.yaml", "--format", "json"]).stdout)
            .expect("JSON plan");
    assert_eq!(json["format_version"], 1);
    assert_eq!(json["summary"]["update"], 1);
    assert_eq!(json["summary"]["create"], 1);
}

/// `deadLetter.discard` is the DLQ's `message-ttl` (read back from the management API by
/// hand, in policy and in arguments mode), the plan says why, and after apply it is empty.
#[test]
fn a_discard_decision_is_the_dlq_message_ttl_in_both_modes() {
    for mode in ["policy", "arguments"] {
        let Some(f) = Fixture::new() else { return };
        f.write_example(|t| {
            t.replace(
                "    name: \"{channel}.dlq\"\n",
                "    name: \"{channel}.dlq\"\n    discard: {after: 2h, reason: an order not fulfilled within two hours is cancelled and refunded}\n",
            )
            .replace("critical: 2h}", "critical: 1h}")
            .replace("dlx: policy", &format!("dlx: {mode}"))
        });
        f.plan().assert_stdout_contains(
            "discarded on purpose after 2h: an order not fulfilled within two hours is cancelled and refunded",
        );
        f.first_apply(&format!("a discard decision, {mode} mode"));
        let [_, _, dlq, _] = f.names();
        // Dropped, not dead-lettered further: the DLQ has no dead-letter exchange.
        assert_ttl_and_dead_end(&dlq, mode, 7_200_000);
    }
}

/// `spec.invalid` on RabbitMQ, in policy and arguments mode: the queue `{channel}.invalid`,
/// read back from the management API (durable, its type, its TTL from `invalid.discard`, and
/// no dead-letter exchange: it is a dead end); apply then plan is empty; a poison message
/// published to it over AMQP (lapin, as a consumer would) is still there after a second
/// apply.
#[test]
fn an_invalid_message_queue_is_a_dead_end_that_keeps_what_a_consumer_published() {
    for mode in ["policy", "arguments"] {
        let Some(f) = Fixture::new() else { return };
        f.write_example(|t| {
            t.replace("dlx: policy", &format!("dlx: {mode}")).replace(
                "  rabbitmq:\n",
                "  invalid:\n    discard: {after: 3d, reason: the shop resends a corrected order within a day}\n  rabbitmq:\n",
            )
        });
        let (first, _) = f.first_apply(&format!("an invalid-message queue, {mode} mode"));
        let invalid = format!("{}.invalid", f.channel);
        first.assert_stdout_contains(&format!("+ create     queue {invalid} (vhost /)"));
        first.assert_stdout_contains(
            "discarded on purpose after 3d: the shop resends a corrected order within a day",
        );
        let (code, q) = block(api(
            reqwest::Method::GET,
            &format!("/api/queues/%2F/{invalid}"),
            None,
        ));
        assert_eq!(code, 200, "{q}");
        assert_eq!(q["durable"], json!(true), "{q}");
        assert_eq!(q["type"], json!("classic"), "{q}");
        assert_ttl_and_dead_end(&invalid, mode, 259_200_000);

        block(publish("", &invalid, b"order-17: no such product"));
        wait_for_messages(&invalid, 1);
        f.assert_second_apply_writes_nothing(&format!("{mode}: a poison message waits"));

        // A shorter discard would drop what waits there: guarded like the DLQ (an update that
        // expires messages in policy mode, a replace of the queue in arguments mode).
        let shorter = f.plan_edited(|t| {
            t.replace("dlx: policy", &format!("dlx: {mode}")).replace(
                "  rabbitmq:\n",
                "  invalid:\n    discard: {after: 1d, reason: the shop resends a corrected order within a day}\n  rabbitmq:\n",
            )
        });
        assert_eq!(
            shorter.code, 2,
            "{mode}\n{}{}",
            shorter.stdout, shorter.stderr
        );
        let refused = f.apply(&["--allow-replace"]);
        assert_eq!(
            refused.code, 1,
            "{mode}\n{}{}",
            refused.stdout, refused.stderr
        );
        refused.assert_stderr_contains("--allow-message-loss");
        refused.assert_zero_writes();
        let got = block(support::rabbit::take_all(&invalid));
        assert_eq!(
            got.iter().map(|(b, _)| b.as_slice()).collect::<Vec<_>>(),
            [b"order-17: no such product".as_slice()],
            "{mode}"
        );
    }
}

/// The queue's `message-ttl` is `ms`, read from the management API where the mode puts it
/// (its policy's definition, or its `x-` arguments), and it has no dead-letter exchange: what
/// expires is dropped, not dead-lettered further.
fn assert_ttl_and_dead_end(queue: &str, mode: &str, ms: u64) {
    let (settings, key) = if mode == "policy" {
        let (_, p) = block(api(
            reqwest::Method::GET,
            &format!("/api/policies/%2F/{queue}"),
            None,
        ));
        (p["definition"].clone(), "message-ttl")
    } else {
        let (_, q) = block(api(
            reqwest::Method::GET,
            &format!("/api/queues/%2F/{queue}"),
            None,
        ));
        (q["arguments"].clone(), "x-message-ttl")
    };
    assert_eq!(settings[key], json!(ms), "{queue}, {mode}\n{settings}");
    assert!(
        settings.get("dead-letter-exchange").is_none()
            && settings.get("x-dead-letter-exchange").is_none(),
        "{queue}, {mode}: a dead end\n{settings}"
    );
}

/// A management user made for one test, deleted (with its permissions) on drop.
struct User(String);

impl User {
    /// A user without tags (not an administrator) whose read pattern on `/` is `read`.
    fn reading(read: &str) -> Self {
        let user = User(support::unique("dlqctl-reader-"));
        user.set_read(read);
        user
    }

    fn set_read(&self, read: &str) {
        block(async {
            let (s, _) = api(
                reqwest::Method::PUT,
                &format!("/api/users/{}", self.0),
                Some(json!({"password": "reader-password", "tags": ""})),
            )
            .await;
            assert!(s == 201 || s == 204, "create user: {s}");
            let (s, _) = api(
                reqwest::Method::PUT,
                &format!("/api/permissions/%2F/{}", self.0),
                Some(json!({"configure": "^$", "write": "^$", "read": read})),
            )
            .await;
            assert!(s == 201 || s == 204, "permissions: {s}");
        });
    }
}

impl Drop for User {
    fn drop(&mut self) {
        let _ = block(api(
            reqwest::Method::DELETE,
            &format!("/api/users/{}", self.0),
            None,
        ));
    }
}

#[test]
fn a_user_who_may_read_the_dlq_but_not_its_source_is_noted_in_the_plan() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| t);
    f.first_apply("the orders example");
    let [main, _, dlq, _] = f.names();
    let escaped = f.channel.replace('.', "\\.");

    let user = User::reading(&format!("^{escaped}\\.dlq$"));
    let p = f.plan();
    p.ok_with("a note, no change");
    p.assert_stdout_contains(&format!(
        "queue {dlq} (vhost /) on target local-rabbitmq: user `{}` (not an administrator) may read this dead-letter queue (read permission `^{escaped}\\.dlq$` on vhost `/`) but not its source {main}",
        user.0
    ));

    // Reading the source as well is no wider access: no note.
    user.set_read(&format!("^{escaped}\\."));
    let p = f.plan();
    p.ok();
    assert!(!p.stdout.contains(&user.0), "{}", p.stdout);
}
