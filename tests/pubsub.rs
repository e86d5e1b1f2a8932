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
