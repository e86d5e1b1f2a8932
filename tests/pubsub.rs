//! Pub/Sub, live: Google's emulator from `scripts/stack up --only pubsub`, through the real
//! binary.
//!
//! Every test works on its own channel (`payments-t<random>`) and deletes its topics and
//! subscriptions when it ends. Hand changes, messages and nacks are made the way a third
//! party would: plain HTTP calls to Pub/Sub's REST API (`support::pubsub::Rest`), never
//! through dlqctl. What the emulator cannot do (IAM, labels in an update mask, a changed
//! expiration policy) is covered by unit tests (src/backend/pubsub/tests.rs).

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::pubsub::{Fixture, Rest};

fn topic(name: &str) -> String {
    Rest::topic_path(name)
}

/// The example with its subscription as a template (`{channel}-processor-sub`, which is
/// `Fixture::subscription`), for tests that start from an applied channel.
fn templated(text: String) -> String {
    text.replace("payment-processor-sub", "\"{channel}-processor-sub\"")
}

#[test]
fn the_issue_example_applies_plans_empty_writes_nothing_again_and_the_api_shows_it() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| f.example(t));
    let (first, _) = f.first_apply("payments-pubsub.yaml");
    // The dead-letter side first: its topic and subscription before the source subscription.
    let order: Vec<usize> = [
        format!("topic {}-dlt", f.channel),
        format!("subscription {}-dlt-sub", f.channel),
        format!("topic {}\n", f.channel),
        format!("subscription {}", f.subscription()),
    ]
    .iter()
    .map(|n| {
        first
            .stdout
            .find(n.as_str())
            .unwrap_or_else(|| panic!("`{n}` in the plan\n{}", first.stdout))
    })
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{}", first.stdout);
    f.assert_second_apply_writes_nothing("payments-pubsub.yaml");

    let sub = f
        .rest
        .get(&format!("subscriptions/{}", f.subscription()))
        .expect("subscription");
    assert_eq!(sub["topic"], json!(topic(&f.channel)));
    assert_eq!(sub["ackDeadlineSeconds"], json!(30));
    assert_eq!(
        sub["deadLetterPolicy"],
        json!({"deadLetterTopic": topic(&format!("{}-dlt", f.channel)), "maxDeliveryAttempts": 5})
    );
    assert_eq!(
        sub["retryPolicy"],
        json!({"minimumBackoff": "10s", "maximumBackoff": "600s"})
    );
    assert_eq!(sub["messageRetentionDuration"], json!("604800s"));
    assert_eq!(sub["expirationPolicy"], json!({}));
    assert_eq!(
        sub["labels"],
        json!({"managed-by": "dlqctl", "dlqctl-channel": f.channel})
    );
    let dl = f
        .rest
        .get(&format!("subscriptions/{}-dlt-sub", f.channel))
        .expect("dead-letter subscription");
    assert_eq!(dl["topic"], json!(topic(&format!("{}-dlt", f.channel))));
    assert_eq!(dl["deadLetterPolicy"], Value::Null, "{dl}");
    assert_eq!(dl["retryPolicy"], Value::Null, "{dl}");
    assert_eq!(dl["messageRetentionDuration"], json!("604800s"));
    for t in [f.channel.clone(), format!("{}-dlt", f.channel)] {
        let v = f.rest.get(&format!("topics/{t}")).expect("topic");
        assert_eq!(v["labels"]["managed-by"], json!("dlqctl"), "{v}");
    }
    // A plan with nothing to do: one GET per topic and subscription.
    let stats = f.run(&["plan", "channel.yaml", "--stats"]);
    stats.assert_stderr_contains("API calls: 4\n");
    // From two channels on, the two listings instead, whatever the number of channels.
    let second = std::fs::read_to_string(f.path().join("channel.yaml"))
        .expect("channel.yaml")
        .replace(
            &format!("  name: {}\n", f.channel),
            &format!("  name: {}-b\n", f.channel),
        )
        .replace(&f.subscription(), &format!("{}-b-processor-sub", f.channel));
    std::fs::write(f.path().join("second.yaml"), second).expect("second.yaml");
    let a = f.run(&["apply", "channel.yaml", "second.yaml", "--auto-approve"]);
    a.ok();
    let stats = f.run(&[
        "plan",
        "channel.yaml",
        "second.yaml",
        "--stats",
        "--detailed-exitcode",
    ]);
    stats.ok();
    stats.assert_stderr_contains("API calls: 2\n");
}

#[test]
fn a_message_nacked_five_times_lands_on_the_dead_letter_subscription_with_the_emulators_attributes()
{
    let Some(f) = Fixture::new() else { return };
    // No retry policy: Pub/Sub redelivers a nacked message at once (the backoff would make
    // this test wait 10 s a delivery).
    f.write_example(|t| {
        f.example(t)
            .replace("    backoff: {initial: 10s, max: 10m}\n", "")
    });
    let a = f.apply(&[]);
    a.ok();
    f.assert_empty_plan("without a backoff");
    let sub = f.subscription();
    let dl_sub = format!("{}-dlt-sub", f.channel);
    let id = f.rest.publish(&f.channel, "charge 42");
    let mut deliveries = 0;
    let started = Instant::now();
    while deliveries < 5 && started.elapsed() < Duration::from_secs(60) {
        for m in f.rest.pull(&sub, 10) {
            assert_eq!(m["message"]["messageId"], json!(id));
            deliveries += 1;
            f.rest.nack(&sub, m["ackId"].as_str().expect("ackId"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(deliveries, 5, "five deliveries, each nacked");
    // The emulator forwards a message that used its attempts when the subscription is pulled
    // again: the next pull gets nothing, and the dead-letter subscription gets it.
    let mut dead = Vec::new();
    let started = Instant::now();
    while dead.is_empty() && started.elapsed() < Duration::from_secs(60) {
        assert!(f.rest.pull(&sub, 10).is_empty(), "no sixth delivery");
        dead = f.rest.pull(&dl_sub, 10);
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(dead.len(), 1, "{dead:?}");
    let m = &dead[0]["message"];
    assert_eq!(
        m["data"],
        json!("Y2hhcmdlIDQy"),
        "the payload, base64: `charge 42`"
    );
    let attrs = &m["attributes"];
    assert_eq!(
        attrs["CloudPubSubDeadLetterSourceDeliveryCount"],
        json!("5"),
        "{m}"
    );
    assert!(
        attrs["CloudPubSubDeadLetterSourceSubscription"]
            .as_str()
            .is_some_and(|s| s.ends_with(&sub)),
        "{m}"
    );
    // Handed back so that `dlqctl status` can sample it: pull and nack, nothing consumed.
    f.rest
        .nack(&dl_sub, dead[0]["ackId"].as_str().expect("ackId"));
    let st = f.run(&[
        "status",
        "channel.yaml",
        "--format",
        "json",
        "--samples",
        "5",
    ]);
    st.ok();
    let doc: Value = serde_json::from_str(&st.stdout).expect("status JSON");
    let dl = &doc["channels"][0]["deadLetter"];
    let samples = dl["samples"].as_array().expect("samples");
    assert_eq!(samples.len(), 1, "{dl}");
    assert_eq!(samples[0]["attempts"], 5, "{dl}");
    assert!(
        samples[0]["source"]
            .as_str()
            .is_some_and(|s| s.ends_with(&sub)),
        "{dl}"
    );
    // Still there after status, once: counted back by the third party, then acked.
    let again = f.rest.pull_wait(dl_sub.as_str());
    assert_eq!(again.len(), 1, "status consumed nothing");
    assert_eq!(
        again[0]["message"]["messageId"],
        dead[0]["message"]["messageId"]
    );
    f.rest
        .nack(&dl_sub, again[0]["ackId"].as_str().expect("ackId"));
    // Nothing more on the source subscription.
    assert!(f.rest.pull(&sub, 10).is_empty());

    // Redrive back to the main topic: published there, then acked on the dead-letter side.
    let doc = support::redrive::redrive_ok(&f, &["--yes"]);
    assert_eq!(doc["moved"], 1, "{doc}");
    let back = f.rest.pull_wait(sub.as_str());
    assert_eq!(back.len(), 1, "the consumer gets it once more");
    let m = &back[0]["message"];
    assert_eq!(m["data"], json!("Y2hhcmdlIDQy"));
    assert_eq!(m["attributes"]["dlq-redrive-count"], json!("1"), "{m}");
    assert!(
        m["attributes"]["CloudPubSubDeadLetterSourceDeliveryCount"].is_null(),
        "the dead-letter attributes stay behind: {m}"
    );
    f.rest.ack(&sub, back[0]["ackId"].as_str().expect("ackId"));
    assert!(
        f.rest.pull(&dl_sub, 10).is_empty(),
        "nothing left on the dead-letter side"
    );
}

#[test]
fn hand_changes_show_in_the_next_plan_field_by_field_and_apply_puts_them_back() {
    let Some(f) = Fixture::applied_with(templated) else {
        return;
    };
    let sub = f.subscription();
    f.rest.patch_subscription(
        &sub,
        json!({
            "deadLetterPolicy": {"deadLetterTopic": topic(&format!("{}-dlt", f.channel)), "maxDeliveryAttempts": 7},
            "retryPolicy": {"minimumBackoff": "1s", "maximumBackoff": "60s"}
        }),
        "deadLetterPolicy,retryPolicy",
    );
    f.rest
        .delete(&format!("subscriptions/{}-dlt-sub", f.channel));
    let p = f.plan();
    p.exits(2);
    for needle in [
        "deadLetterPolicy.maxDeliveryAttempts",
        "7 → 5",
        "retryPolicy.minimumBackoff",
        "1 → 10",
        "retryPolicy.maximumBackoff",
    ] {
        p.assert_stdout_contains(needle);
    }
    let recreate = format!("subscription {}-dlt-sub", f.channel);
    assert!(
        p.stdout
            .lines()
            .any(|l| l.contains("+ create") && l.ends_with(&recreate)),
        "the deleted dead-letter subscription is created again\n{}",
        p.stdout
    );
    let a = f.apply(&[]);
    a.ok();
    f.assert_empty_plan("after the hand changes were put back");
    let v = f
        .rest
        .get(&format!("subscriptions/{sub}"))
        .expect("subscription");
    assert_eq!(v["deadLetterPolicy"]["maxDeliveryAttempts"], json!(5));
}

#[test]
fn a_subscription_made_by_hand_imports_and_plans_empty() {
    let Some(f) = Fixture::new() else { return };
    let c = &f.channel;
    let dlt = format!("{c}-dlt");
    f.rest.create_topic(c);
    f.rest.create_topic(&dlt);
    f.rest.create_subscription(
        &f.subscription(),
        json!({
            "topic": topic(c),
            "ackDeadlineSeconds": 30,
            "deadLetterPolicy": {"deadLetterTopic": topic(&dlt), "maxDeliveryAttempts": 5},
            "retryPolicy": {"minimumBackoff": "5s", "maximumBackoff": "300s"},
            "messageRetentionDuration": "86400s",
        }),
    );
    f.rest.create_subscription(
        &format!("{dlt}-sub"),
        json!({"topic": topic(&dlt), "messageRetentionDuration": "604800s"}),
    );
    // A topic nobody dead-letters into, read by no dead-lettering subscription.
    f.rest.create_topic(&format!("{c}-misc"));
    let o = f.run(&[
        "import",
        "--target",
        "local-pubsub",
        "--prefix",
        c,
        "--out",
        "imported",
    ]);
    o.ok();
    o.assert_stderr_contains(&format!("topic {c}-misc: fits no channel"));
    let text = std::fs::read_dir(f.path().join("imported"))
        .expect("imported/")
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .collect::<Vec<_>>()
        .join("---\n");
    for expected in [
        "maxAttempts: 5",
        "initial: 5s",
        "max: 5m",
        "ackDeadline: 30s",
        "retention: 1d",
        "name: \"{channel}-dlt\"",
        "subscription: \"{channel}-dlt-sub\"",
        "subscription: \"{channel}-processor-sub\"",
    ] {
        assert!(text.contains(expected), "missing `{expected}`\n{text}");
    }
    f.assert_empty_plan_of(
        &["imported"],
        &[],
        "a hand-made subscription after import",
        || text.clone(),
    );
}

#[test]
fn prune_lists_only_labelled_objects_inside_the_ownership() {
    let Some(f) = Fixture::applied_with(templated) else {
        return;
    };
    let c = &f.channel;
    // Prune needs a bound on a Pub/Sub target (tests/pubsub_hostile.rs).
    f.edit_targets(|t| {
        t.replace(
            "    backend: pubsub\n",
            &format!("    backend: pubsub\n    ownership:\n      prefixes: [\"{c}\"]\n"),
        )
    });
    // Left behind by a channel that no spec names any more, and one nobody labelled.
    f.rest.ok(
        reqwest::Method::PUT,
        &format!("topics/{c}-orphan"),
        json!({"labels": {"managed-by": "dlqctl", "dlqctl-channel": format!("{c}-gone")}}),
    );
    f.rest.ok(
        reqwest::Method::PUT,
        &format!("topics/{c}-foreign"),
        json!({"labels": {"managed-by": "terraform"}}),
    );
    f.rest.create_topic(&format!("{c}-unlabelled"));
    let (mut deleted, p) = f.prune_plan();
    deleted.retain(|n| n.starts_with(c.as_str()));
    assert_eq!(deleted, [format!("{c}-orphan")], "{}", p.stdout);
}

/// Issue 34: an envelope declared on the producer's own message attributes (`err-type`,
/// `err-msg`, `tries`, `origin`, and `failed-at` in seconds since the epoch), published to the
/// dead-letter topic as a consumer that gives up would: status gives the class the rules map
/// it to (one rule on the class, one on the message), the raw class, attempts, source and the
/// age since `failed-at`; `redrive --class transient_exhausted` moves exactly those, and a
/// class the channel does not declare is refused.
#[test]
fn an_envelope_declared_on_attributes_is_read_and_redrive_class_selects_by_the_mapped_class() {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| {
        f.example(t).replace(
            "    retention: 7d\n",
            "    retention: 7d
    envelope:
      from: none
      errorClass: {header: err-type}
      errorMessage: {header: err-msg}
      attempts: {header: tries}
      source: {header: origin}
      deadLetteredAt: {header: failed-at, format: epoch-seconds}
    classes:
      - {name: poison, errorClass: \"*.SyntaxError\"}
      - {name: transient_exhausted, errorClass: \"grpc.UNAVAILABLE\"}
      - {name: transient_exhausted, errorMessage: \"*deadline exceeded*\"}
",
        )
    });
    f.apply(&[]).ok();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    let dlt = format!("{}-dlt", f.channel);
    let dl_sub = format!("{}-dlt-sub", f.channel);
    // (data, err-type, err-msg, tries, seconds ago, mapped class)
    let sent = [
        (
            "e1",
            "grpc.UNAVAILABLE",
            "ledger unavailable",
            "5",
            600.0,
            "transient_exhausted",
        ),
        (
            "e2",
            "grpc.DEADLINE_EXCEEDED",
            "deadline exceeded after 30s",
            "4",
            900.0,
            "transient_exhausted",
        ),
        (
            "e3",
            "json.SyntaxError",
            "unexpected token",
            "1",
            300.0,
            "poison",
        ),
        ("e4", "com.acme.Weird", "who knows", "2", 120.0, "unknown"),
    ];
    let messages: Vec<Value> = sent
        .iter()
        .map(|(data, class, msg, tries, ago, _)| {
            json!({"data": b64(data), "attributes": {
                "err-type": class, "err-msg": msg, "tries": tries,
                "origin": "payments-processor", "failed-at": format!("{}", (now - ago) as i64),
                "dlq-error-class": "not read: from none"}})
        })
        .collect();
    f.rest.ok(
        reqwest::Method::POST,
        &format!("topics/{dlt}:publish"),
        json!({ "messages": messages }),
    );

    let before = now;
    let st = f.run(&[
        "status",
        "channel.yaml",
        "--format",
        "json",
        "--samples",
        "5",
    ]);
    st.ok();
    let after = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    let doc: Value = serde_json::from_str(&st.stdout).expect("status JSON");
    let dl = &doc["channels"][0]["deadLetter"];
    assert_eq!(
        dl["byErrorClass"],
        json!({"transient_exhausted": 2, "poison": 1, "unknown": 1}),
        "{dl}"
    );
    let samples = dl["samples"].as_array().expect("samples");
    assert_eq!(samples.len(), sent.len(), "{dl}");
    for (data, class, msg, tries, ago, mapped) in &sent {
        let s = samples
            .iter()
            .find(|s| s["body"]["text"] == json!(data))
            .unwrap_or_else(|| panic!("no sample of {data} in {dl}"));
        assert_eq!(s["errorClass"], json!(mapped), "{s}");
        assert_eq!(s["rawErrorClass"], json!(class), "{s}");
        assert_eq!(s["errorMessage"], json!(msg), "{s}");
        assert_eq!(
            s["attempts"],
            json!(tries.parse::<u64>().expect("tries")),
            "{s}"
        );
        assert_eq!(s["source"], "payments-processor", "{s}");
        assert_eq!(s["ageSince"], "dead-lettered", "{s}");
        // Whole seconds: the time was sent truncated to the second.
        let age = s["ageSeconds"].as_f64().expect("age");
        assert!(
            age >= before - (before - ago).floor() - 1.0
                && age <= after - (before - ago).floor() + 1.0,
            "{data}: age {age}, sent {ago} s ago: {s}"
        );
    }

    // A class the channel does not declare is refused.
    let refused = f.run(&[
        "redrive",
        &f.channel,
        "channel.yaml",
        "--class",
        "nosuch",
        "--yes",
    ]);
    refused.exits(1);
    refused.assert_stderr_contains(&format!(
        "--class nosuch: channel `{}` declares the classes `poison`, `transient_exhausted`",
        f.channel
    ));

    // The mapped class selects: e1 (by its class) and e2 (by its message) go back.
    let doc = support::redrive::redrive_ok(&f, &["--class", "transient_exhausted", "--yes"]);
    assert_eq!(doc["moved"], 2, "{doc}");
    let sub = f.subscription();
    let take = |s: &str, want: usize| {
        let mut got: Vec<String> = Vec::new();
        let started = Instant::now();
        while got.len() < want && started.elapsed() < Duration::from_secs(30) {
            for m in f.rest.pull(s, 10) {
                let data = m["message"]["data"].as_str().unwrap_or_default();
                let text = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .expect("base64");
                got.push(String::from_utf8(text).expect("utf-8"));
                f.rest.ack(s, m["ackId"].as_str().expect("ackId"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        got.sort();
        got
    };
    assert_eq!(take(&sub, 2), ["e1", "e2"], "exactly the transient ones");
    assert_eq!(take(&dl_sub, 2), ["e3", "e4"], "the others stay");
    assert!(f.rest.pull(&sub, 10).is_empty(), "nothing more came back");
}

/// Issue 36: the emulator has no backlog count, so `status` (and the exporter with `--peek`)
/// count the dead-letter subscription by pulling to an empty pull, holding every lease, then
/// nacking them all: the depth equals what a third-party client reads afterwards, and nothing
/// is consumed. Stopped at `--scan`, the depth is a lower bound, and says so.
#[test]
fn the_dead_letter_subscription_is_counted_without_consuming_it() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| f.example(t));
    f.apply(&[]).ok();
    let dlt = format!("{}-dlt", f.channel);
    let dl_sub = format!("{}-dlt-sub", f.channel);
    for i in 0..7 {
        f.rest.publish(&dlt, &format!("dead {i}"));
    }
    let depth = |extra: &[&str]| -> Value {
        let mut args = vec!["status", "channel.yaml", "--format", "json"];
        args.extend_from_slice(extra);
        let out = f.run(&args);
        let doc: Value = serde_json::from_str(&out.stdout).expect("status JSON");
        doc["channels"][0]["deadLetter"]["depthDetail"].clone()
    };
    for _ in 0..2 {
        let d = depth(&[]);
        assert_eq!(d["total"], 7, "{d}");
        assert!(d.get("lowerBound").is_none(), "exact: {d}");
    }
    let d = depth(&["--scan", "5", "--samples", "5"]);
    assert_eq!(
        (d["total"].clone(), d["lowerBound"].clone()),
        (json!(5), json!(true)),
        "{d}"
    );
    // What a third-party client reads afterwards: all 7, each once.
    let seen = f.rest.take_ids(&dl_sub, 7);
    assert_eq!(seen.len(), 7, "nothing consumed by the counts");
    assert_eq!(depth(&[])["total"], 0);
}

/// Issue 37: dead letters of 3 failures interleaved, differing only in ids and amounts, group
/// as 3 × 20 with `status --group-by fingerprint`; a client reads every one afterwards.
#[test]
fn status_groups_dead_letters_by_fingerprint_without_consuming_them() {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let Some(f) = Fixture::new() else { return };
    f.write_example(|t| {
        f.example(t).replace(
            "    retention: 7d\n",
            "    retention: 7d
    envelope:
      from: none
      errorClass: {header: err-type}
      errorMessage: {header: err-msg}
",
        )
    });
    f.apply(&[]).ok();
    let dlt = format!("{}-dlt", f.channel);
    let dl_sub = format!("{}-dlt-sub", f.channel);
    let messages: Vec<Value> = (0..60)
        .map(|i| {
            let (class, msg) = match i % 3 {
                0 => ("OrderRefused", format!("order {} failed: amount {}.5", 100 + i, i)),
                1 => ("Timeout", format!("timeout after {} ms", 3000 + i)),
                _ => ("InvalidField", format!("invalid field '{}'", ["sku", "qty"][i % 2])),
            };
            json!({"data": b64(&format!("g-{i}")), "attributes": {"err-type": class, "err-msg": msg}})
        })
        .collect();
    f.rest.ok(
        reqwest::Method::POST,
        &format!("topics/{dlt}:publish"),
        json!({ "messages": messages }),
    );
    let out = f.run(&[
        "status",
        "channel.yaml",
        "--format",
        "json",
        "--group-by",
        "fingerprint",
        "--scan",
        "1000",
    ]);
    out.ok();
    let doc: Value = serde_json::from_str(&out.stdout).expect("status JSON");
    let dl = &doc["channels"][0]["deadLetter"];
    let mut groups: Vec<(String, String, u64)> = dl["groups"]
        .as_array()
        .unwrap_or_else(|| panic!("groups in {dl}"))
        .iter()
        .map(|g| {
            (
                g["class"].as_str().unwrap_or_default().to_owned(),
                g["message"].as_str().unwrap_or_default().to_owned(),
                g["count"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    groups.sort();
    assert_eq!(
        groups,
        [
            ("InvalidField", "invalid field <str>", 20),
            ("OrderRefused", "order <n> failed: amount <n>", 20),
            ("Timeout", "timeout after <n> ms", 20),
        ]
        .map(|(c, m, n)| (c.to_owned(), m.to_owned(), n)),
        "{}",
        dl["groups"]
    );
    // What a third-party client reads afterwards: all 60, each once.
    assert_eq!(f.rest.take_ids(&dl_sub, 60).len(), 60, "nothing consumed");
}

/// Issue 53: a dead-letter estate as Google's Terraform example makes it
/// (terraform-google-modules/docs-examples, pubsub_subscription_dead_letter/main.tf: a topic,
/// a `-dead-letter` topic, a subscription with `dead_letter_policy`, no expiration policy), with
/// a subscription on the dead-letter topic; subscriptions made without an expiration policy
/// expire after 31 days, which Pub/Sub reports as `expirationPolicy.ttl: 2678400s` (set here
/// explicitly: the emulator does not fill it in). Import planned `expirationPolicy.ttl:
/// 2678400 → "never"` on both subscriptions; now it writes `pubsub.expireAfter: 31d` (lint warns
/// with the fix), the plan is empty, the "Next:" hint speaks of Pub/Sub topics and
/// subscriptions and their labels (it spoke of SQS queues and tags), and after a hand-made
/// change to the subscription only the subscription is refused as not dlqctl's: the unchanged,
/// unlabelled topics are not "impossible".
#[test]
fn a_terraform_made_estate_imports_with_its_expiry_plans_empty_and_refuses_only_what_changes() {
    let Some(f) = Fixture::new() else { return };
    let c = &f.channel;
    let dlt = format!("{c}-dead-letter");
    let expiry = json!({"ttl": "2678400s"});
    f.rest.create_topic(c);
    f.rest.create_topic(&dlt);
    f.rest.create_subscription(
        &f.subscription(),
        json!({
            "topic": topic(c),
            "deadLetterPolicy": {"deadLetterTopic": topic(&dlt), "maxDeliveryAttempts": 10},
            "expirationPolicy": expiry,
        }),
    );
    f.rest.create_subscription(
        &format!("{dlt}-sub"),
        json!({"topic": topic(&dlt), "expirationPolicy": expiry}),
    );
    let o = f.run(&[
        "import",
        "--target",
        "local-pubsub",
        "--prefix",
        c,
        "--out",
        "imported",
    ]);
    o.ok();
    assert!(
        o.stderr
            .contains("Pub/Sub topic(s) and subscription(s) are not labelled")
            && o.stderr.contains("labels")
            && !o.stderr.contains("SQS"),
        "the hint speaks of Pub/Sub\n{}",
        o.stderr
    );
    let text = std::fs::read_dir(f.path().join("imported"))
        .expect("imported/")
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .collect::<Vec<_>>()
        .join("---\n");
    assert!(text.contains("expireAfter: 31d"), "{text}\n{}", o.stderr);
    let lint = f.run(&["lint", "imported"]);
    lint.ok_with("imported specs lint without errors");
    assert!(
        lint.stdout.contains("warning[pubsub/subscription-expires]"),
        "a warning with the fix\n{}",
        lint.stdout
    );
    f.assert_empty_plan_of(
        &["imported"],
        &[],
        "a Terraform-made estate after import",
        || text.clone(),
    );

    // A hand-made change to the subscription: it is not dlqctl's, so that change is refused;
    // the topics, unchanged, are not.
    f.rest.patch_subscription(
        &f.subscription(),
        json!({"ackDeadlineSeconds": 60}),
        "ackDeadlineSeconds",
    );
    let p = f.run(&["plan", "imported", "--detailed-exitcode"]);
    assert_eq!(p.code, 2, "{}{}", p.stdout, p.stderr);
    assert!(p.stdout.contains("ackDeadline"), "{}", p.stdout);
    let impossible: Vec<&str> = p
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with('!'))
        .collect();
    assert!(
        !impossible.is_empty() && impossible.iter().all(|l| !l.contains("topic")),
        "only the changed subscription is refused\n{}",
        p.stdout
    );
}
