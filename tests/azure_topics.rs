//! Azure Service Bus topic channels (a topic and one subscription, `azure-servicebus.
//! subscription`): the contract fake's topics and subscriptions (tests/support/azure/
//! topics.rs) held to what they claim, then dlqctl driven against them: apply, plan, import,
//! prune, status. Nothing here leaves 127.0.0.1 (docs/azure.md).

mod support;

use serde_json::{Value, json};
use support::azure::data::Client;
use support::azure::{API_VERSION, AzureFake, Fixture};

/// The channel's subscription: inside the ownership prefix (`shipments-`), as lint asks.
const SUB: &str = "shipments-labels";

async fn call(method: reqwest::Method, url: &str, body: Option<Value>) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut req = client
        .request(method, url)
        .header("authorization", "Bearer test-token");
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("the fake answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn topic_url(fake: &AzureFake, topic: &str) -> String {
    format!(
        "{}{}/topics/{topic}?api-version={API_VERSION}",
        fake.url(),
        AzureFake::namespace_path()
    )
}

fn subscription_url(fake: &AzureFake, topic: &str, sub: &str) -> String {
    format!(
        "{}{}/topics/{topic}/subscriptions/{sub}?api-version={API_VERSION}",
        fake.url(),
        AzureFake::namespace_path()
    )
}

fn put(url: &str, body: Value) -> (u16, Value) {
    support::block(call(reqwest::Method::PUT, url, Some(body)))
}

/// The example as a topic channel: topic `{channel}`, subscription `labels`; with `forward`,
/// its dead letters forwarded to a queue `{channel}-dlq`.
fn topic_channel(forward: bool) -> Fixture {
    let f = Fixture::new();
    f.ws.write_example(|t| {
        let t = t.replace(
            "  azure-servicebus:\n",
            &format!("  azure-servicebus:\n    subscription: {SUB}\n"),
        );
        if forward {
            t.replace(
                "  retry:\n",
                "  deadLetter: {name: \"{channel}-dlq\", discard: {after: 30d, reason: a test}}\n  retry:\n",
            )
        } else {
            t
        }
    });
    f
}

fn sub_path(f: &Fixture) -> String {
    format!("{}/subscriptions/{SUB}", f.ws.channel)
}

// ---------------------------------------------------------------------------------------------
// The fake's topics and subscriptions, held to the contract
// ---------------------------------------------------------------------------------------------

#[test]
fn topics_and_subscriptions_refuse_undocumented_and_read_only_properties() {
    let fake = AzureFake::start();
    let t = topic_url(&fake, "orders");
    for body in [
        json!({"tags": {"a": "b"}, "properties": {}}),
        json!({"properties": {"maxDeliveryCount": 5}}),
        json!({"properties": {"subscriptionCount": 0}}),
        json!({"properties": {"lockDuration": "PT1M"}}),
    ] {
        let (status, e) = put(&t, body.clone());
        assert_eq!(status, 400, "topic {body} → {e}");
    }
    let (status, e) = put(
        &subscription_url(&fake, "orders", SUB),
        json!({"properties": {}}),
    );
    assert_eq!(status, 404, "a subscription of a missing topic: {e}");
    let (status, e) = put(
        &t,
        json!({"properties": {"defaultMessageTimeToLive": "P14D"}}),
    );
    assert_eq!(status, 200, "{e}");
    assert_eq!(e["properties"]["subscriptionCount"], 0);
    let s = subscription_url(&fake, "orders", SUB);
    for body in [
        json!({"properties": {"maxReceiveCount": 5}}),
        json!({"properties": {"messageCount": 0}}),
        json!({"properties": {"sizeInBytes": 0}}),
        json!({"properties": {"lockDuration": "PT6M"}}),
        json!({"properties": {"maxDeliveryCount": 0}}),
    ] {
        let (status, e) = put(&s, body.clone());
        assert_eq!(status, 400, "subscription {body} → {e}");
    }
    let (status, e) = put(&s, json!({"properties": {"maxDeliveryCount": 3}}));
    assert_eq!(status, 200, "{e}");
    assert_eq!(e["properties"]["lockDuration"], "PT1M", "the default");
    assert_eq!(e["properties"]["countDetails"]["deadLetterMessageCount"], 0);
}

#[test]
fn a_send_to_a_topic_reaches_every_subscription_and_abandoned_copies_are_dead_lettered() {
    let fake = AzureFake::start();
    put(&topic_url(&fake, "orders"), json!({"properties": {}}));
    for (s, n) in [("billing", 2), ("audit", 5)] {
        let (status, e) = put(
            &subscription_url(&fake, "orders", s),
            json!({"properties": {"maxDeliveryCount": n}}),
        );
        assert_eq!(status, 200, "{e}");
    }
    let c = Client::new(&fake);
    support::block(async {
        assert_eq!(c.send("orders", "m-1", "{}", &[]).await, 201);
        assert_eq!(
            c.send("orders/subscriptions/billing", "m-2", "{}", &[])
                .await,
            400,
            "messages are sent to the topic, not to a subscription"
        );
        // billing's consumer fails twice (its maxDeliveryCount).
        for _ in 0..2 {
            let m = c
                .peek_lock("orders/subscriptions/billing")
                .await
                .expect("a copy");
            assert_eq!(c.unlock(&m).await, 200);
        }
        assert!(c.peek_lock("orders/subscriptions/billing").await.is_none());
    });
    let dead = fake.dead_letters("orders/subscriptions/billing");
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0].property("DeadLetterReason").as_deref(),
        Some("MaxDeliveryCountExceeded")
    );
    assert_eq!(
        fake.messages("orders/subscriptions/audit").len(),
        1,
        "the other subscription's copy is untouched"
    );
    let (_, s) = support::block(call(
        reqwest::Method::GET,
        &subscription_url(&fake, "orders", "billing"),
        None,
    ));
    assert_eq!(s["properties"]["countDetails"]["deadLetterMessageCount"], 1);
}

// ---------------------------------------------------------------------------------------------
// dlqctl against the fake
// ---------------------------------------------------------------------------------------------

#[test]
fn a_topic_channel_applies_then_plans_empty_with_the_settings_on_the_subscription() {
    let f = topic_channel(false);
    let (first, _) = f.ws.first_apply("azure topic first apply");
    first.assert_stdout_contains("$DeadLetterQueue");
    assert!(f.fake.topic(&f.ws.channel).is_some(), "the topic exists");
    let s = f
        .fake
        .subscription(&f.ws.channel, SUB)
        .expect("the subscription exists");
    assert_eq!(s["maxDeliveryCount"], 8);
    assert_eq!(s["lockDuration"], 120_000, "2m");
    assert_eq!(s["defaultMessageTimeToLive"], 14 * 86_400_000_u64);
    assert_eq!(s["deadLetteringOnMessageExpiration"], true);
    assert!(
        f.fake.queue(&f.ws.channel).is_none(),
        "no queue of that name"
    );
    f.ws.assert_second_apply_writes_nothing("azure topic second apply");
}

#[test]
fn a_topic_channel_forwarding_its_dead_letters_applies_then_plans_empty() {
    let f = topic_channel(true);
    f.ws.first_apply("azure topic forward");
    let dlq = format!("{}-dlq", f.ws.channel);
    let s = f
        .fake
        .subscription(&f.ws.channel, SUB)
        .expect("subscription");
    assert_eq!(s["forwardDeadLetteredMessagesTo"], json!(dlq));
    let q = f.fake.queue(&dlq).expect("the forward queue");
    assert_eq!(q["defaultMessageTimeToLive"], 30 * 86_400_000_u64);
    f.ws.assert_second_apply_writes_nothing("azure topic forward second apply");
}

#[test]
fn a_hand_change_of_the_subscription_shows_and_apply_restores_it() {
    let f = topic_channel(false);
    f.ws.first_apply("azure topic first apply");
    let (status, e) = put(
        &subscription_url(&f.fake, &f.ws.channel, SUB),
        json!({"properties": {
            "maxDeliveryCount": 3, "lockDuration": "PT2M",
            "defaultMessageTimeToLive": "P14D", "deadLetteringOnMessageExpiration": true,
            "enableBatchedOperations": false
        }}),
    );
    assert_eq!(status, 200, "{e}");
    let p = f.ws.plan();
    assert_eq!(p.code, 2, "{}{}", p.stdout, p.stderr);
    p.assert_stdout_contains("maxDeliveryCount");
    assert!(
        p.stdout.contains("3 → 8") || p.stdout.contains("3 -> 8"),
        "{}",
        p.stdout
    );
    assert!(
        !p.stdout.contains("lockDuration:"),
        "unchanged\n{}",
        p.stdout
    );
    f.ws.apply(&[]).ok_with("apply restores");
    f.ws.assert_empty_plan("after the restore");
    let s = f
        .fake
        .subscription(&f.ws.channel, SUB)
        .expect("subscription");
    assert_eq!(s["maxDeliveryCount"], 8);
    assert_eq!(
        s["enableBatchedOperations"], false,
        "the update sent back what dlqctl does not own"
    );
}

#[test]
fn a_hand_made_topic_and_subscription_import_and_plan_empty() {
    let f = Fixture::new();
    let c = &f.ws.channel;
    let (status, e) = put(&topic_url(&f.fake, c), json!({"properties": {}}));
    assert_eq!(status, 200, "{e}");
    let (status, e) = put(
        &subscription_url(&f.fake, c, SUB),
        json!({"properties": {"maxDeliveryCount": 4, "lockDuration": "PT45S",
               "defaultMessageTimeToLive": "P7D", "deadLetteringOnMessageExpiration": true}}),
    );
    assert_eq!(status, 200, "{e}");
    let o = f.ws.run(&[
        "import",
        "--target",
        "azure-servicebus",
        "--prefix",
        c,
        "--out",
        "imported",
    ]);
    o.ok_with("import");
    let text = std::fs::read_dir(f.ws.path().join("imported"))
        .expect("imported/")
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .collect::<Vec<_>>()
        .join("---\n");
    for expected in [
        "maxAttempts: 4",
        "lockDuration: 45s",
        "retention: 7d",
        "subscription: shipments-labels",
    ] {
        assert!(text.contains(expected), "missing `{expected}`\n{text}");
    }
    assert_eq!(text.matches("kind: Channel").count(), 1, "{text}");
    f.ws.assert_empty_plan_of(&["imported"], &[], "a hand-made topic after import", || {
        text.clone()
    });
}

#[test]
fn prune_lists_only_topics_and_subscriptions_inside_the_ownership_prefixes() {
    let f = topic_channel(false);
    f.ws.first_apply("azure topic first apply");
    let stray = support::unique("shipments-stray-");
    let other = support::unique("billing-");
    for t in [&stray, &other] {
        assert_eq!(
            put(&topic_url(&f.fake, t), json!({"properties": {}})).0,
            200
        );
        assert_eq!(
            put(
                &subscription_url(&f.fake, t, "shipments-s1"),
                json!({"properties": {}})
            )
            .0,
            200
        );
    }
    // On the channel's own topic, made by hand: one owned subscription not in the spec, and
    // another team's.
    for s in ["shipments-extra", "billing-audit"] {
        assert_eq!(
            put(
                &subscription_url(&f.fake, &f.ws.channel, s),
                json!({"properties": {}})
            )
            .0,
            200
        );
    }
    let (mut deleted, p) = f.ws.prune_plan();
    deleted.sort();
    let mut want = vec![
        stray.clone(),
        format!("{stray}/subscriptions/shipments-s1"),
        format!("{}/subscriptions/shipments-extra", f.ws.channel),
    ];
    want.sort();
    assert_eq!(deleted, want, "{}", p.stdout);
    let pruned = f.ws.apply(&["--prune", "--allow-delete"]);
    assert_eq!(pruned.code, 0, "{}{}", pruned.stdout, pruned.stderr);
    assert!(f.fake.topic(&stray).is_none());
    assert!(f.fake.topic(&other).is_some(), "another team's topic stays");
    assert!(f.fake.subscription(&other, "shipments-s1").is_some());
    assert!(f.fake.subscription(&f.ws.channel, SUB).is_some());
    assert!(
        f.fake
            .subscription(&f.ws.channel, "shipments-extra")
            .is_none()
    );
    assert!(
        f.fake
            .subscription(&f.ws.channel, "billing-audit")
            .is_some(),
        "another team's subscription on our topic stays"
    );
}

/// Sends `n` messages (`m-0000`…) to the channel's topic and abandons each copy on the
/// channel's subscription until it is dead-lettered (maxDeliveryCount 8).
fn dead_lettered(f: &Fixture, n: usize) {
    let c = Client::new(&f.fake);
    let topic = f.ws.channel.clone();
    let sub = sub_path(f);
    support::block(async {
        for i in 0..n {
            assert_eq!(
                c.send(
                    &topic,
                    &format!("m-{i:04}"),
                    &format!("{{\"n\": {i}}}"),
                    &[]
                )
                .await,
                201
            );
        }
        for _ in 0..n * 8 {
            let Some(m) = c.peek_lock(&sub).await else {
                break;
            };
            assert_eq!(c.unlock(&m).await, 200);
        }
    });
    assert_eq!(f.fake.dead_letters(&sub).len(), n, "all dead-lettered");
}

#[test]
fn status_of_a_topic_channel_reads_the_subscriptions_dead_letters_and_leaves_them() {
    let f = topic_channel(false);
    f.ws.first_apply("azure topic first apply");
    dead_lettered(&f, 2);
    let sub = sub_path(&f);
    let s = f.ws.run(&["status", "channel.yaml", "--format", "json"]);
    s.ok_with("status");
    let v = s.json("status JSON");
    let ch = &v["channels"][0];
    assert_eq!(ch["deadLetter"]["depth"], 2, "{ch}");
    assert_eq!(ch["deadLetter"]["sampled"], 2, "{ch}");
    assert!(ch.to_string().contains("MaxDeliveryCountExceeded"), "{ch}");
    let after = f.fake.dead_letters(&sub);
    assert_eq!(after.len(), 2, "nothing left the subqueue");
    assert!(
        after.iter().all(|m| m.lock.is_none()),
        "every lock handed back"
    );
    assert!(
        f.fake
            .data_requests()
            .iter()
            .filter(|(m, _)| m == "POST")
            .filter(|(_, p)| p.ends_with("/messages/head"))
            .all(|(_, p)| p.starts_with(&format!("{sub}/"))),
        "read from the subscription only"
    );
}

// ---------------------------------------------------------------------------------------------
// Redrive of a subscription's dead letters: only the topic can be sent to
// ---------------------------------------------------------------------------------------------

/// The MessageIds of `msgs`, sorted.
fn ids(msgs: &[support::azure::data::Msg]) -> Vec<String> {
    let mut out: Vec<String> = msgs.iter().map(|m| m.message_id.clone()).collect();
    out.sort_unstable();
    out
}

fn want(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("m-{i:04}")).collect()
}

#[test]
fn a_subscriptions_dead_letters_go_back_through_its_topic_when_it_is_the_only_subscription() {
    let f = topic_channel(false);
    f.ws.first_apply("azure topic first apply");
    dead_lettered(&f, 3);
    let sub = sub_path(&f);
    let dry = support::redrive::redrive_ok(&f.ws, &["--dry-run"]);
    assert_eq!(dry["moved"], 0, "{dry}");
    assert_eq!(
        f.fake.dead_letters(&sub).len(),
        3,
        "a dry run moves nothing"
    );
    let doc = support::redrive::redrive_ok(&f.ws, &["--yes"]);
    assert_eq!(doc["moved"], 3, "{doc}");
    assert_eq!(doc["possiblyDuplicated"], 0, "{doc}");
    assert_eq!(
        doc["destination"]["fanout"],
        Value::Null,
        "no fan-out: {doc}"
    );
    assert!(
        f.fake.dead_letters(&sub).is_empty(),
        "the subqueue is empty"
    );
    let back = f.fake.messages(&sub);
    assert_eq!(ids(&back), want(3), "every message is back, by id");
    for m in &back {
        assert_eq!(m.property("dlq-redrive-count").as_deref(), Some("1"));
        assert_eq!(m.property("DeadLetterReason"), None);
        assert_eq!(m.delivery_count, 0, "a fresh copy");
    }
    // The fake refuses a send to a subscription and records a send to the topic as its
    // delivery to each subscription: the three the test sent, then the three copies.
    let deliveries = f
        .fake
        .data_requests()
        .iter()
        .filter(|(m, p)| m == "POST" && *p == format!("{sub}/messages"))
        .count();
    assert_eq!(deliveries, 6, "delivered through the topic");
    f.ws.assert_empty_plan("after a subscription's redrive");
}

#[test]
fn a_redrive_through_a_topic_with_other_subscriptions_is_refused_without_allow_fanout() {
    let f = topic_channel(false);
    f.ws.first_apply("azure topic first apply");
    let other = "billing-audit";
    assert_eq!(
        put(
            &subscription_url(&f.fake, &f.ws.channel, other),
            json!({"properties": {}})
        )
        .0,
        200
    );
    dead_lettered(&f, 2);
    let sub = sub_path(&f);
    let other_path = format!("{}/subscriptions/{other}", f.ws.channel);
    let theirs = f.fake.messages(&other_path).len();
    let counts = |f: &Fixture| -> Vec<u64> {
        f.fake
            .dead_letters(&sub_path(f))
            .iter()
            .map(|m| m.delivery_count)
            .collect()
    };
    let before = counts(&f);
    for to in ["source", "failed-consumer"] {
        for dry in [true, false] {
            let mut args = vec!["--yes", "--to", to];
            if dry {
                args.push("--dry-run");
            }
            let mut cmd = vec!["redrive", f.ws.channel.as_str(), "channel.yaml"];
            cmd.extend(&args);
            let out = f.ws.run(&cmd);
            let all = format!("{}{}", out.stdout, out.stderr);
            assert_ne!(out.code, 0, "--to {to}: {all}");
            for word in ["--allow-fanout", "`billing-audit`", "`shipments-labels`"] {
                assert!(all.contains(word), "--to {to} names {word}: {all}");
            }
            assert!(all.contains("nothing was read or moved"), "{all}");
        }
        let dead = f.fake.dead_letters(&sub);
        assert_eq!(dead.len(), 2, "nothing left the subqueue");
        assert!(dead.iter().all(|m| m.lock.is_none()), "nor was locked");
        assert_eq!(counts(&f), before, "nor read");
        assert_eq!(f.fake.messages(&other_path).len(), theirs);
    }
    let doc = support::redrive::redrive_ok(
        &f.ws,
        &["--yes", "--to", "failed-consumer", "--allow-fanout"],
    );
    assert_eq!(doc["moved"], 2, "{doc}");
    let fanout = doc["destination"]["fanout"].to_string();
    assert!(
        fanout.contains(other) && fanout.contains(SUB),
        "the report names every subscription: {doc}"
    );
    assert!(f.fake.dead_letters(&sub).is_empty());
    assert_eq!(ids(&f.fake.messages(&sub)), want(2));
    assert_eq!(
        f.fake.messages(&other_path).len(),
        theirs + 2,
        "the other subscription received the copies too, as it was told"
    );
}

#[test]
fn a_subscriptions_dead_letters_redrive_to_a_queue_only_the_failed_consumer_reads() {
    let f = topic_channel(false);
    f.ws.first_apply("azure topic first apply");
    assert_eq!(
        put(
            &subscription_url(&f.fake, &f.ws.channel, "billing-audit"),
            json!({"properties": {}})
        )
        .0,
        200
    );
    let replay = format!("{}-replay", f.ws.channel);
    assert_eq!(put(&f.queue_url(&replay), json!({"properties": {}})).0, 200);
    dead_lettered(&f, 2);
    let sub = sub_path(&f);
    let doc = support::redrive::redrive_ok(&f.ws, &["--yes", "--to", &replay]);
    assert_eq!(doc["moved"], 2, "{doc}");
    assert!(f.fake.dead_letters(&sub).is_empty());
    assert_eq!(ids(&f.fake.messages(&replay)), want(2));
    assert!(f.fake.messages(&sub).is_empty(), "not through the topic");
}

#[test]
fn azure_a_subscriptions_redrive_killed_part_way_loses_nothing() {
    const N: usize = 300;
    let f = topic_channel(false);
    f.ws.first_apply("azure topic first apply");
    dead_lettered(&f, N);
    let sub = sub_path(&f);
    let mut run = support::redrive::spawn_quiet(&f.ws, Some("250"));
    support::redrive::kill_part_way(
        &mut run,
        std::time::Duration::from_secs(60),
        std::time::Duration::from_millis(10),
        || f.fake.messages(&sub).len() >= 60,
    );
    let moved_first = f.fake.messages(&sub).len();
    assert!(
        moved_first > 0 && moved_first < N,
        "killed part-way: {moved_first}"
    );
    // A lock the killed run held runs out after the subscription's lockDuration (2m).
    f.fake.advance(std::time::Duration::from_secs(121));
    support::redrive::redrive_ok(&f.ws, &["--yes"]);
    let back = f.fake.messages(&sub);
    let left = f.fake.dead_letters(&sub);
    assert!(left.is_empty(), "the second run finished: {}", left.len());
    let mut unique = ids(&back);
    unique.dedup();
    assert_eq!(unique, want(N), "every message is back, by id");
    assert!(back.len() - N <= 1, "{} duplicated", back.len() - N);
}

#[test]
fn a_subscription_whose_rule_might_not_take_the_copy_is_not_redriven_or_replayed_through_its_topic()
{
    let f = topic_channel(false);
    f.ws.first_apply("azure topic first apply");
    dead_lettered(&f, 2);
    let sub = sub_path(&f);
    // Archived (kept) first, so that a replay can be tried too.
    let arch = f.ws.path().join("arch");
    let arch = arch.to_str().expect("path");
    let doc = support::redrive::archive_ok(&f.ws, &["--to", arch]);
    assert_eq!(doc["archived"], 2, "{doc}");
    let before: Vec<u64> = f
        .fake
        .dead_letters(&sub)
        .iter()
        .map(|m| m.delivery_count)
        .collect();
    // The subscription takes only what its SQL filter matches: a copy sent to the topic
    // might not come back to it.
    f.fake.set_rules(
        &f.ws.channel,
        SUB,
        vec![json!({"name": "urgent-only", "properties": {
            "filterType": "SqlFilter",
            "sqlFilter": {"sqlExpression": "Priority > 3", "compatibilityLevel": 20},
            "action": {}
        }})],
    );
    for extra in [
        &["--yes"][..],
        &["--dry-run"][..],
        &["--from-archive", arch, "--yes"][..],
    ] {
        let mut cmd = vec!["redrive", f.ws.channel.as_str(), "channel.yaml"];
        cmd.extend(extra);
        let out = f.ws.run(&cmd);
        let all = format!("{}{}", out.stdout, out.stderr);
        assert_ne!(out.code, 0, "{extra:?}: {all}");
        assert!(all.contains("`urgent-only`"), "names the rule: {all}");
        assert!(all.contains("--to QUEUE"), "says what to do: {all}");
    }
    let after: Vec<u64> = f
        .fake
        .dead_letters(&sub)
        .iter()
        .map(|m| m.delivery_count)
        .collect();
    assert_eq!(after, before, "nothing read or moved");
    assert!(
        f.fake.messages(&sub).is_empty(),
        "nothing sent to the topic"
    );
    // The $Default rule back: the redrive goes through the topic.
    f.fake.set_rules(
        &f.ws.channel,
        SUB,
        vec![json!({"name": "$Default", "properties": {
            "filterType": "SqlFilter",
            "sqlFilter": {"sqlExpression": "1=1", "compatibilityLevel": 20},
            "action": {}
        }})],
    );
    let doc = support::redrive::redrive_ok(&f.ws, &["--yes"]);
    assert_eq!(doc["moved"], 2, "{doc}");
    assert_eq!(ids(&f.fake.messages(&sub)), want(2));
}
