//! Pub/Sub at the edges issue 31's hostile run found, live on the emulator: a redriven copy
//! keeps its ordering key (finding 9), `plan --prune` without ownership prefixes is refused
//! rather than listing another dlqctl user's objects (finding 22), and a foreign
//! subscription that `--adopt` cannot adopt is not offered `--adopt` (finding 22). Messages
//! are published and pulled back by plain REST calls, as a third party would.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};
use support::pubsub::{Fixture, Rest};

/// The example with its subscription as a template (`{channel}-processor-sub`).
fn templated(text: String) -> String {
    text.replace("payment-processor-sub", "\"{channel}-processor-sub\"")
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// Finding 9: 30 dead letters with ordering keys (three keys, ten each) are redriven, and
/// every copy on the consumer's subscription carries its key (before the fix: 0 of 30).
#[test]
fn a_redriven_copy_keeps_its_ordering_key() {
    let Some(f) = Fixture::applied_with(templated) else {
        return;
    };
    let dlt = format!("{}-dlt", f.channel);
    let sub = f.subscription();
    let dl_sub = format!("{}-dlt-sub", f.channel);
    for i in 0..30 {
        f.rest.ok(
            reqwest::Method::POST,
            &format!("topics/{dlt}:publish"),
            json!({"messages": [{
                "data": b64(&format!("o{i:02}")),
                "attributes": {"dlq-error-class": "poison"},
                "orderingKey": format!("key-{}", i % 3),
            }]}),
        );
    }
    let doc = support::redrive::redrive_ok(&f, &["--yes"]);
    assert_eq!(doc["moved"], 30, "{doc}");
    // Pulled back by the consumer's subscription: each once, with its key.
    let mut got: BTreeMap<String, String> = BTreeMap::new();
    let started = Instant::now();
    while got.len() < 30 && started.elapsed() < Duration::from_secs(60) {
        for m in f.rest.pull(&sub, 100) {
            let data = m["message"]["data"].as_str().unwrap_or_default();
            let body = String::from_utf8(
                base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .expect("base64"),
            )
            .expect("utf-8");
            let key = m["message"]["orderingKey"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            assert!(got.insert(body.clone(), key).is_none(), "twice: {body}");
            f.rest.ack(&sub, m["ackId"].as_str().expect("ackId"));
        }
    }
    assert_eq!(got.len(), 30, "{got:?}");
    let kept = got
        .iter()
        .filter(|(body, key)| {
            let i: usize = body[1..].parse().expect("a body we sent");
            **key == format!("key-{}", i % 3)
        })
        .count();
    assert_eq!(kept, 30, "ordering keys kept: {got:?}");
    assert!(f.rest.pull(&dl_sub, 10).is_empty(), "nothing left behind");
}

/// Deletes the topics and subscriptions it names on drop (objects outside the fixture's
/// channel prefix, which the fixture does not clean up).
struct Cleanup(Vec<String>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let rest = Rest::new();
        for path in &self.0 {
            rest.delete(path);
        }
    }
}

/// Finding 22: without `ownership.prefixes`, `plan --prune` would list every labelled topic
/// and subscription of the project that this repository's specs do not name, another
/// dlqctl user's included. It is refused, naming the field; with prefixes it lists only
/// inside them.
#[test]
fn prune_without_ownership_prefixes_is_refused_and_deletes_nothing() {
    let Some(f) = Fixture::applied_with(templated) else {
        return;
    };
    // Another team's dlqctl channel in the same project (outside this channel's names).
    let other = format!("x{}-otherteam", f.channel);
    let _cleanup = Cleanup(vec![
        format!("subscriptions/{other}-sub"),
        format!("topics/{other}"),
    ]);
    let labels = json!({"managed-by": "dlqctl", "dlqctl-channel": other});
    f.rest.ok(
        reqwest::Method::PUT,
        &format!("topics/{other}"),
        json!({ "labels": labels }),
    );
    f.rest.ok(
        reqwest::Method::PUT,
        &format!("subscriptions/{other}-sub"),
        json!({"topic": Rest::topic_path(&other), "labels": labels}),
    );
    // And one of this repository's channels that no spec names any more.
    let orphan = format!("{}-orphan", f.channel);
    f.rest.ok(
        reqwest::Method::PUT,
        &format!("topics/{orphan}"),
        json!({"labels": {"managed-by": "dlqctl", "dlqctl-channel": format!("{}-gone", f.channel)}}),
    );
    let p = f.run(&["plan", "channel.yaml", "--prune", "--format", "json"]);
    p.exits(1);
    p.assert_stderr_contains("declares no `ownership.prefixes`");
    assert!(!p.stdout.contains(&other), "{}", p.stdout);
    assert!(f.rest.get(&format!("topics/{other}")).is_some());
    assert!(f.rest.get(&format!("subscriptions/{other}-sub")).is_some());

    // Bounded by a prefix that holds this repository's channel: the other team's channel
    // is outside it and never listed; the orphan inside it is.
    let mine = f.channel.clone();
    f.edit_targets(|t| {
        t.replace(
            "    backend: pubsub\n",
            &format!("    backend: pubsub\n    ownership:\n      prefixes: [\"{mine}\"]\n"),
        )
    });
    let (deleted, p) = f.prune_plan();
    assert_eq!(deleted, [orphan], "{}", p.stdout);
}

/// Finding 22: an unlabelled subscription under the spec's name but on another topic would
/// need a replace, which `--adopt` does not do: the hint says so instead of offering it.
#[test]
fn a_foreign_subscription_on_another_topic_is_not_offered_adopt() {
    let Some(f) = Fixture::new() else { return };
    f.write_example(templated);
    let foreign_topic = format!("{}-elsewhere", f.channel);
    f.rest.create_topic(&foreign_topic);
    f.rest.create_subscription(
        &f.subscription(),
        json!({"topic": Rest::topic_path(&foreign_topic)}),
    );
    for extra in [&[][..], &["--adopt"][..]] {
        let mut args = vec!["plan", "channel.yaml", "--format", "json"];
        args.extend_from_slice(extra);
        let p = f.run(&args);
        let plan: Value = serde_json::from_str(&p.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}{}", p.stdout, p.stderr));
        let sub = plan["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .find(|c| c["resource"]["name"] == json!(f.subscription()))
            .unwrap_or_else(|| panic!("the subscription is in the plan: {}", p.stdout))
            .clone();
        assert_eq!(sub["action"], "impossible", "{extra:?}: {sub}");
        let reason = sub["reason"].as_str().unwrap_or_default();
        assert!(
            !reason.contains("adopt it with"),
            "{extra:?}: offers --adopt: {reason}"
        );
        assert!(
            reason.contains("`--adopt` cannot adopt it")
                && reason.contains("attached to another topic"),
            "{extra:?}: {reason}"
        );
    }
    // Nothing was changed.
    let live = f.rest.get(&format!("subscriptions/{}", f.subscription()));
    assert_eq!(
        live.expect("still there")["topic"],
        json!(Rest::topic_path(&foreign_topic))
    );
}
