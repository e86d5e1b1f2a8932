//! Azure Service Bus (issue 40): the contract fake in tests/support/azure.rs (ARM) and
//! tests/support/azure/data.rs (the data plane), held to the documented contracts it claims,
//! then dlqctl driven against it as a user runs it: apply, plan, import, prune, status with
//! samples, redrive (and redrive killed part-way). Each fake test names the documented
//! behaviour it pins. No Service Bus namespace is contacted: nothing here leaves 127.0.0.1
//! (docs/azure.md).

mod support;

use serde_json::{Value, json};
use support::azure::{API_VERSION, AzureFake, MAX_TIME_SPAN, format_duration, parse_duration};

fn queue_url(fake: &AzureFake, name: &str, api: &str) -> String {
    format!(
        "{}{}/queues/{name}?api-version={api}",
        fake.url(),
        AzureFake::namespace_path()
    )
}

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

#[test]
fn iso_durations_round_trip_and_years_months_weeks_are_refused() {
    for (text, ms) in [
        ("PT1M", 60_000),
        ("PT30S", 30_000),
        ("P14D", 14 * 86_400_000),
        (
            "P1DT2H3M4.5S",
            86_400_000 + 2 * 3_600_000 + 3 * 60_000 + 4_500,
        ),
    ] {
        assert_eq!(parse_duration(text), Some(ms), "{text}");
        assert_eq!(format_duration(ms), text);
    }
    assert_eq!(
        format_duration(90_000),
        "PT1M30S",
        "normalised, as the service answers"
    );
    assert_eq!(parse_duration(MAX_TIME_SPAN), Some(u64::MAX));
    for bad in ["P1Y", "P1M", "P1W", "PT", "P", "1M", "PT1.5M", "PTS"] {
        assert_eq!(parse_duration(bad), None, "{bad}");
    }
}

#[tokio::test]
async fn put_creates_with_the_documented_defaults_and_get_reads_it_back() {
    let fake = AzureFake::start();
    let url = queue_url(&fake, "orders", API_VERSION);
    let (status, q) = call(
        reqwest::Method::PUT,
        &url,
        Some(json!({"properties": {"maxDeliveryCount": 5, "lockDuration": "PT90S"}})),
    )
    .await;
    assert_eq!(status, 200, "{q}");
    let p = &q["properties"];
    assert_eq!(p["maxDeliveryCount"], 5);
    assert_eq!(p["lockDuration"], "PT1M30S", "written back normalised");
    assert_eq!(
        p["defaultMessageTimeToLive"], MAX_TIME_SPAN,
        "TimeSpan.MaxValue"
    );
    assert_eq!(p["deadLetteringOnMessageExpiration"], false);
    assert_eq!(p["countDetails"]["deadLetterMessageCount"], 0);
    assert!(q.get("tags").is_none(), "a ProxyResource has no tags");

    fake.set_dead_letters("orders", 3, 1);
    let (status, got) = call(reqwest::Method::GET, &url, None).await;
    assert_eq!(status, 200);
    assert_eq!(
        got["properties"]["countDetails"]["deadLetterMessageCount"],
        3
    );
    assert_eq!(got["properties"]["messageCount"], 4);

    // PUT replaces: what the body leaves out goes back to its default.
    let (status, q) = call(reqwest::Method::PUT, &url, Some(json!({"properties": {}}))).await;
    assert_eq!(status, 200);
    assert_eq!(q["properties"]["maxDeliveryCount"], 10);
    assert_eq!(q["properties"]["lockDuration"], "PT1M");
}

#[tokio::test]
async fn undocumented_read_only_mistyped_and_out_of_range_fields_are_400() {
    let fake = AzureFake::start();
    let url = queue_url(&fake, "orders", API_VERSION);
    for body in [
        json!({"tags": {"managed-by": "dlqctl"}, "properties": {}}),
        json!({"properties": {"maxReceiveCount": 5}}),
        json!({"properties": {"messageCount": 0}}),
        json!({"properties": {"countDetails": {}}}),
        json!({"properties": {"maxDeliveryCount": "5"}}),
        json!({"properties": {"lockDuration": 60}}),
        json!({"properties": {"lockDuration": "P1M"}}),
        json!({"properties": {"lockDuration": "PT6M"}}),
        json!({"properties": {"maxDeliveryCount": 0}}),
        json!({"properties": {"autoDeleteOnIdle": "PT1M"}}),
        json!({"properties": {"status": "Paused"}}),
    ] {
        let (status, e) = call(reqwest::Method::PUT, &url, Some(body.clone())).await;
        assert_eq!(status, 400, "{body} → {e}");
        assert_eq!(e["error"]["code"], "BadRequest", "{e}");
    }
    assert!(fake.queue("orders").is_none(), "nothing was created");
}

#[tokio::test]
async fn missing_queues_api_versions_and_credentials_get_arms_answers() {
    let fake = AzureFake::start();
    let (status, e) = call(
        reqwest::Method::GET,
        &queue_url(&fake, "nosuch", API_VERSION),
        None,
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(e["error"]["code"], "NotFound");
    let (status, _) = call(
        reqwest::Method::DELETE,
        &queue_url(&fake, "nosuch", API_VERSION),
        None,
    )
    .await;
    assert_eq!(status, 204, "nothing to delete: No content");
    let (status, e) = call(
        reqwest::Method::GET,
        &queue_url(&fake, "nosuch", "2017-04-01"),
        None,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(e["error"]["code"], "InvalidApiVersionParameter");
    let resp = reqwest::get(queue_url(&fake, "nosuch", API_VERSION))
        .await
        .expect("answers");
    assert_eq!(resp.status().as_u16(), 401, "no bearer token");
}

#[tokio::test]
async fn the_list_pages_with_next_link() {
    let fake = AzureFake::start();
    for i in 0..5 {
        let url = queue_url(&fake, &format!("q{i}"), API_VERSION);
        let (status, _) = call(reqwest::Method::PUT, &url, Some(json!({}))).await;
        assert_eq!(status, 200);
    }
    let mut next = Some(format!(
        "{}{}/queues?api-version={API_VERSION}&$top=2",
        fake.url(),
        AzureFake::namespace_path()
    ));
    let mut names = Vec::new();
    // Bounded: 5 queues, 2 a page.
    for _ in 0..10 {
        let Some(url) = next.take() else { break };
        let (status, page) = call(reqwest::Method::GET, &url, None).await;
        assert_eq!(status, 200, "{page}");
        for q in page["value"].as_array().expect("value") {
            names.push(q["name"].as_str().expect("name").to_owned());
        }
        next = page["nextLink"]
            .as_str()
            .map(|l| format!("{}{l}", fake.url()));
    }
    assert_eq!(names, ["q0", "q1", "q2", "q3", "q4"]);
    let (status, _) = call(
        reqwest::Method::DELETE,
        &queue_url(&fake, "q0", API_VERSION),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert!(fake.queue("q0").is_none());
}

// ---------------------------------------------------------------------------------------------
// dlqctl against the fake, as a user runs it
// ---------------------------------------------------------------------------------------------

/// A PUT through the fake's ARM API, as a person would make it with `az rest`.
fn hand_put(url: &str, body: Value) -> (u16, Value) {
    support::block(call(reqwest::Method::PUT, url, Some(body)))
}

#[test]
fn apply_then_plan_is_empty_and_the_queue_has_the_specs_settings() {
    let f = support::azure::Fixture::new();
    let (first, _) = f.ws.first_apply("azure first apply");
    first.assert_stdout_contains("$DeadLetterQueue");
    let q = f.fake.queue(&f.ws.channel).expect("the queue exists");
    assert_eq!(q["maxDeliveryCount"], 8);
    assert_eq!(q["lockDuration"], 120_000, "2m");
    assert_eq!(q["defaultMessageTimeToLive"], 14 * 86_400_000_u64);
    assert_eq!(q["deadLetteringOnMessageExpiration"], true);
    f.ws.assert_second_apply_writes_nothing("azure second apply");
}

#[test]
fn a_hand_change_shows_field_by_field_and_apply_restores_it_keeping_unowned_settings() {
    let f = support::azure::Fixture::new();
    f.ws.first_apply("azure first apply");
    let url = f.queue_url(&f.ws.channel);
    // Someone lowers the retry budget and the lock by hand, and turns on batched operations
    // (a setting dlqctl does not own).
    let (status, e) = hand_put(
        &url,
        json!({"properties": {
            "maxDeliveryCount": 3, "lockDuration": "PT30S",
            "defaultMessageTimeToLive": "P14D", "deadLetteringOnMessageExpiration": true,
            "enableBatchedOperations": false
        }}),
    );
    assert_eq!(status, 200, "{e}");
    let p = f.ws.plan();
    assert_eq!(p.code, 2, "{}{}", p.stdout, p.stderr);
    p.assert_stdout_contains("maxDeliveryCount");
    p.assert_stdout_contains("lockDuration");
    assert!(
        p.stdout.contains("3 → 8") || p.stdout.contains("3 -> 8"),
        "{}",
        p.stdout
    );
    assert!(
        !p.stdout.contains("defaultMessageTimeToLive:"),
        "unchanged\n{}",
        p.stdout
    );
    f.ws.apply(&[]).ok_with("apply restores");
    f.ws.assert_empty_plan("after the restore");
    let q = f.fake.queue(&f.ws.channel).expect("queue");
    assert_eq!(q["maxDeliveryCount"], 8);
    assert_eq!(
        q["enableBatchedOperations"], false,
        "a PUT replaces the queue: the update sent back what dlqctl does not own"
    );
}

#[test]
fn a_hand_made_queue_with_the_specs_settings_plans_empty() {
    let f = support::azure::Fixture::new();
    let (status, e) = hand_put(
        &f.queue_url(&f.ws.channel),
        json!({"properties": {
            "maxDeliveryCount": 8, "lockDuration": "PT2M",
            "defaultMessageTimeToLive": "PT1209600S", "deadLetteringOnMessageExpiration": true
        }}),
    );
    assert_eq!(status, 200, "{e}");
    f.ws.assert_empty_plan("a queue made by hand with the same meaning, other spelling");
}

#[test]
fn prune_lists_only_queues_inside_the_ownership_prefixes() {
    let f = support::azure::Fixture::new();
    f.ws.first_apply("azure first apply");
    let stray = support::unique("shipments-stray-");
    let other = support::unique("billing-");
    for name in [&stray, &other] {
        let (status, e) = hand_put(&f.queue_url(name), json!({"properties": {}}));
        assert_eq!(status, 200, "{e}");
    }
    let (deleted, p) = f.ws.prune_plan();
    assert_eq!(deleted, std::slice::from_ref(&stray), "{}", p.stdout);
    let pruned = f.ws.apply(&["--prune", "--allow-delete"]);
    assert_eq!(pruned.code, 0, "{}{}", pruned.stdout, pruned.stderr);
    assert!(f.fake.queue(&stray).is_none(), "the owned stray is deleted");
    assert!(f.fake.queue(&other).is_some(), "another team's queue stays");
    assert!(f.fake.queue(&f.ws.channel).is_some());
}

#[test]
fn status_with_no_peek_reads_the_dead_letter_depth_from_count_details_and_no_message() {
    let f = support::azure::Fixture::new();
    f.ws.first_apply("azure first apply");
    f.fake.set_dead_letters(&f.ws.channel, 3, 2);
    let s =
        f.ws.run(&["status", "channel.yaml", "--format", "json", "--no-peek"]);
    s.ok_with("status");
    let v = s.json("status JSON");
    let ch = &v["channels"][0];
    assert_eq!(ch["deadLetter"]["depth"], 3, "{ch}");
    assert_eq!(
        ch["queues"][0]["depth"], 2,
        "the main queue's active messages\n{ch}"
    );
    assert_eq!(
        ch["deadLetter"]["name"],
        format!("{}/$DeadLetterQueue", f.ws.channel)
    );
    assert_eq!(ch["deadLetter"]["sampled"], 0);
    assert!(
        ch.to_string().contains("no message read (--no-peek)"),
        "the note says why no message was read\n{ch}"
    );
    assert!(
        f.fake.data_requests().is_empty(),
        "no data-plane call: {:?}",
        f.fake.data_requests()
    );
}

#[test]
fn a_named_dead_letter_queue_is_created_first_and_the_queue_forwards_to_it() {
    let f = support::azure::Fixture::new();
    f.ws.write_example(|t| {
        t.replace(
            "  retry:\n",
            "  deadLetter: {name: \"{channel}-dlq\", discard: {after: 30d, reason: a test}}\n  retry:\n",
        )
    });
    let (first, _) = f.ws.first_apply("azure forward");
    let dlq = format!("{}-dlq", f.ws.channel);
    let (at_dlq, at_main) = (
        first.stdout.find(&format!("queue {dlq}")),
        first.stdout.find(&format!("queue {}\n", f.ws.channel)),
    );
    assert!(
        at_dlq.is_some() && at_main.is_some() && at_dlq < at_main,
        "the forward target first\n{}",
        first.stdout
    );
    let main = f.fake.queue(&f.ws.channel).expect("main");
    assert_eq!(main["forwardDeadLetteredMessagesTo"], dlq.as_str());
    let q = f.fake.queue(&dlq).expect("the dead-letter queue");
    assert_eq!(q["defaultMessageTimeToLive"], 30 * 86_400_000_u64);
    assert_eq!(q["deadLetteringOnMessageExpiration"], false);
    f.fake.set_dead_letters(&dlq, 0, 4);
    let s = f.ws.run(&["status", "channel.yaml", "--format", "json"]);
    s.ok_with("status");
    assert_eq!(
        s.json("status")["channels"][0]["deadLetter"]["depth"],
        4,
        "what waits in the forward queue"
    );
}

#[test]
fn a_queue_made_by_hand_imports_and_plans_empty() {
    let f = support::azure::Fixture::new();
    let c = &f.ws.channel;
    let dlq = format!("{c}-parked");
    for (name, props) in [
        (
            dlq.clone(),
            json!({"defaultMessageTimeToLive": "P30D", "deadLetteringOnMessageExpiration": false}),
        ),
        (
            c.clone(),
            json!({"maxDeliveryCount": 4, "lockDuration": "PT45S", "defaultMessageTimeToLive": "P7D",
                   "deadLetteringOnMessageExpiration": true, "forwardDeadLetteredMessagesTo": dlq}),
        ),
    ] {
        let (status, e) = hand_put(&f.queue_url(&name), json!({ "properties": props }));
        assert_eq!(status, 200, "{e}");
    }
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
        "name: \"{channel}-parked\"",
        "after: 30d",
    ] {
        assert!(text.contains(expected), "missing `{expected}`\n{text}");
    }
    assert_eq!(
        text.matches("kind: Channel").count(),
        1,
        "the forward target is no channel of its own\n{text}"
    );
    f.ws.assert_empty_plan_of(&["imported"], &[], "a hand-made queue after import", || {
        text.clone()
    });
}

#[test]
fn what_is_not_built_is_refused_before_anything_is_written_or_moved() {
    let f = support::azure::Fixture::new();
    // A channel that forwards its dead letters to a queue of its own: no redrive from it.
    f.ws.write_example(|t| {
        t.replace(
            "  retry:\n",
            "  deadLetter: {name: \"{channel}-dlq\", discard: {after: 30d, reason: a test}}\n  retry:\n",
        )
    });
    f.ws.first_apply("azure forward");
    let writes_before = f.fake.api.writes().len();
    let r =
        f.ws.run(&["redrive", &f.ws.channel, "channel.yaml", "--yes"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    r.assert_stderr_contains("redrive from a forward queue is not built");
    assert!(
        f.fake.data_requests().is_empty(),
        "no message was read: {:?}",
        f.fake.data_requests()
    );
    // (Topic channels are read and written now: tests/azure_topics.rs.)
    assert_eq!(
        f.fake.api.writes().len(),
        writes_before,
        "nothing was written"
    );
}

// ---------------------------------------------------------------------------------------------
// The fake's data plane, held to the REST reference
// ---------------------------------------------------------------------------------------------

use support::azure::data::Client;

/// A fake with one queue made through ARM with `props`.
fn fake_with(queue: &str, props: Value) -> AzureFake {
    let fake = AzureFake::start();
    let (status, e) = support::block(call(
        reqwest::Method::PUT,
        &queue_url(&fake, queue, API_VERSION),
        Some(json!({ "properties": props })),
    ));
    assert_eq!(status, 200, "{e}");
    fake
}

/// A queue's (active, dead-lettered) counts as ARM's countDetails says them.
async fn counts(fake: &AzureFake, queue: &str) -> (u64, u64) {
    let (_, q) = call(
        reqwest::Method::GET,
        &queue_url(fake, queue, API_VERSION),
        None,
    )
    .await;
    let c = &q["properties"]["countDetails"];
    (
        c["activeMessageCount"].as_u64().expect("active"),
        c["deadLetterMessageCount"].as_u64().expect("dead letters"),
    )
}

/// Peek-lock and unlock (abandon) the queue's head `times` times.
async fn abandon(c: &Client, entity: &str, times: usize) -> Vec<support::azure::data::Received> {
    let mut seen = Vec::new();
    for _ in 0..times {
        let Some(m) = c.peek_lock(entity).await else {
            break;
        };
        assert_eq!(c.unlock(&m).await, 200);
        seen.push(m);
    }
    seen
}

#[test]
fn send_peek_lock_unlock_and_complete_answer_as_the_rest_reference_says() {
    let fake = fake_with("orders", json!({"maxDeliveryCount": 5}));
    let c = Client::new(&fake);
    support::block(async {
        // Send Message: 201; custom properties are headers.
        assert_eq!(
            c.send("orders", "m-1", "hello", &[("Priority", "High")])
                .await,
            201
        );
        // Peek-Lock: 201 with BrokerProperties, Location and the custom property (quoted).
        let m = c.peek_lock("orders").await.expect("a message");
        assert_eq!(m.broker["MessageId"], "m-1");
        assert_eq!(m.broker["DeliveryCount"], 1, "the first delivery");
        assert!(
            m.broker["SequenceNumber"].as_u64().is_some(),
            "{}",
            m.broker
        );
        assert!(m.broker["LockToken"].as_str().is_some(), "{}", m.broker);
        assert!(
            m.broker["EnqueuedTimeUtc"]
                .as_str()
                .is_some_and(|t| t.ends_with(" GMT"))
        );
        assert!(
            m.lock_path.starts_with("/orders/messages/"),
            "{}",
            m.lock_path
        );
        assert!(
            m.headers
                .iter()
                .any(|(k, v)| k == "priority" && v == "\"High\""),
            "{:?}",
            m.headers
        );
        assert_eq!(m.body, b"hello");
        // Locked: nobody else gets it (204, no message within the timeout).
        assert!(c.peek_lock("orders").await.is_none());
        assert_eq!(
            counts(&fake, "orders").await,
            (1, 0),
            "a locked message is still active"
        );
        // Unlock: 200, and the next delivery counts one more.
        assert_eq!(c.unlock(&m).await, 200);
        assert_eq!(c.unlock(&m).await, 404, "the lock is gone");
        let again = c.peek_lock("orders").await.expect("back");
        assert_eq!(again.broker["DeliveryCount"], 2);
        // Delete Message (complete): 200, then gone; its lock with it.
        assert_eq!(c.complete(&again).await, 200);
        assert_eq!(c.complete(&again).await, 404);
        assert!(c.peek_lock("orders").await.is_none());
        assert_eq!(counts(&fake, "orders").await, (0, 0));
    });
}

#[test]
fn undocumented_broker_properties_missing_entities_and_missing_tokens_are_refused() {
    let fake = fake_with("orders", json!({}));
    let url = fake.data_url().to_owned();
    support::block(async {
        let http = reqwest::Client::new();
        let send = |props: Value| {
            http.post(format!("{url}/orders/messages"))
                .bearer_auth("t")
                .header("BrokerProperties", props.to_string())
                .body("x")
                .send()
        };
        for bad in [
            json!({"DeadLetterReason": "x"}),
            json!({"SequenceNumber": 4}),
            json!({"TimeToLive": "60"}),
            json!({"Label": 7}),
        ] {
            let s = send(bad.clone()).await.expect("answers").status().as_u16();
            assert_eq!(s, 400, "{bad}");
        }
        let s = send(json!({"TimeToLive": 60, "Label": "ok"}))
            .await
            .expect("answers")
            .status()
            .as_u16();
        assert_eq!(s, 201);
        // 410: the entity does not exist (Send Message, Peek-Lock).
        let s = http
            .post(format!("{url}/nosuch/messages/head?timeout=0"))
            .bearer_auth("t")
            .send()
            .await
            .expect("answers")
            .status()
            .as_u16();
        assert_eq!(s, 410);
        // Nothing is sent to a dead-letter subqueue but by dead-lettering.
        let s = http
            .post(format!("{url}/orders/$DeadLetterQueue/messages"))
            .bearer_auth("t")
            .body("x")
            .send()
            .await
            .expect("answers")
            .status()
            .as_u16();
        assert_eq!(s, 400);
        let s = http
            .post(format!("{url}/orders/messages/head?timeout=soon"))
            .bearer_auth("t")
            .send()
            .await
            .expect("answers")
            .status()
            .as_u16();
        assert_eq!(s, 400, "timeout is a number of seconds");
        let s = http
            .post(format!("{url}/orders/messages/head"))
            .send()
            .await
            .expect("answers")
            .status()
            .as_u16();
        assert_eq!(s, 401);
    });
    assert_eq!(fake.messages("orders").len(), 1, "only the good send");
}

#[test]
fn a_message_abandoned_max_delivery_count_times_is_dead_lettered_with_the_documented_reason() {
    let fake = fake_with("orders", json!({"maxDeliveryCount": 3}));
    let c = Client::new(&fake);
    support::block(async {
        assert_eq!(c.send("orders", "m-1", "{}", &[("tenant", "a")]).await, 201);
        let seen = abandon(&c, "orders", 10).await;
        assert_eq!(
            seen.len(),
            3,
            "delivered maxDeliveryCount times, then dead-lettered"
        );
        assert_eq!(counts(&fake, "orders").await, (0, 1));
        let m = c
            .peek_lock("orders/$DeadLetterQueue")
            .await
            .expect("in the subqueue");
        let header = |n: &str| {
            m.headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(n))
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            header("DeadLetterReason").as_deref(),
            Some("\"MaxDeliveryCountExceeded\"")
        );
        assert!(
            header("DeadLetterErrorDescription").is_some_and(|d| d.contains("3 delivery attempts")),
            "{:?}",
            m.headers
        );
        assert_eq!(
            header("tenant").as_deref(),
            Some("\"a\""),
            "its own properties kept"
        );
        assert_eq!(m.broker["MessageId"], "m-1");
        assert_eq!(c.unlock(&m).await, 200);
        // Nothing is dead-lettered from the subqueue, however often it is abandoned there.
        let again = abandon(&c, "orders/$DeadLetterQueue", 10).await;
        assert_eq!(again.len(), 10);
        assert_eq!(counts(&fake, "orders").await, (0, 1));
    });
}

#[test]
fn a_lock_that_runs_out_counts_a_delivery_and_expired_messages_are_dead_lettered_or_dropped() {
    let fake = fake_with(
        "orders",
        json!({"maxDeliveryCount": 2, "lockDuration": "PT30S",
               "defaultMessageTimeToLive": "PT10M", "deadLetteringOnMessageExpiration": true}),
    );
    let (status, e) = support::block(call(
        reqwest::Method::PUT,
        &queue_url(&fake, "quiet", API_VERSION),
        Some(json!({"properties": {"defaultMessageTimeToLive": "PT10M"}})),
    ));
    assert_eq!(status, 200, "{e}");
    let c = Client::new(&fake);
    support::block(async {
        assert_eq!(c.send("orders", "held", "a", &[]).await, 201);
        let m = c.peek_lock("orders").await.expect("locked");
        assert_eq!(m.broker["DeliveryCount"], 1);
        fake.advance(std::time::Duration::from_secs(31));
        assert_eq!(c.complete(&m).await, 404, "the lock ran out");
        let m = c.peek_lock("orders").await.expect("back after the lock");
        assert_eq!(m.broker["DeliveryCount"], 2);
        fake.advance(std::time::Duration::from_secs(31));
        assert_eq!(
            counts(&fake, "orders").await,
            (0, 1),
            "its last lock ran out: dead-lettered"
        );

        assert_eq!(c.send("orders", "late", "b", &[]).await, 201);
        assert_eq!(c.send("quiet", "late", "b", &[]).await, 201);
        fake.advance(std::time::Duration::from_secs(11 * 60));
        let dead = fake.dead_letters("orders");
        assert_eq!(dead.len(), 2);
        assert_eq!(
            dead[1].property("DeadLetterReason").as_deref(),
            Some("TTLExpiredException")
        );
        assert_eq!(
            counts(&fake, "quiet").await,
            (0, 0),
            "no dead-lettering on expiry: dropped"
        );
        // Time-to-live is not observed in the subqueue.
        fake.advance(std::time::Duration::from_secs(3600));
        assert_eq!(fake.dead_letters("orders").len(), 2);
    });
}

#[test]
fn dead_letters_are_forwarded_to_the_queue_forward_dead_lettered_messages_to_names() {
    let fake = fake_with("parked", json!({}));
    let (status, e) = support::block(call(
        reqwest::Method::PUT,
        &queue_url(&fake, "orders", API_VERSION),
        Some(
            json!({"properties": {"maxDeliveryCount": 1, "forwardDeadLetteredMessagesTo": "parked"}}),
        ),
    ));
    assert_eq!(status, 200, "{e}");
    let c = Client::new(&fake);
    support::block(async {
        assert_eq!(c.send("orders", "m-1", "a", &[]).await, 201);
        abandon(&c, "orders", 1).await;
        assert_eq!(counts(&fake, "orders").await, (0, 0));
        assert_eq!(counts(&fake, "parked").await, (1, 0));
        let m = c.peek_lock("parked").await.expect("forwarded");
        assert_eq!(m.broker["DeadLetterSource"], "orders");
        assert_eq!(
            m.broker["DeliveryCount"], 1,
            "counted afresh in its new queue"
        );
    });
}

// ---------------------------------------------------------------------------------------------
// status and redrive through the data plane
// ---------------------------------------------------------------------------------------------

/// Sends `n` messages (ids `m-0000`…) to the channel's queue and abandons each until Service
/// Bus dead-letters it (the example's maxDeliveryCount is 8).
fn dead_lettered(f: &support::azure::Fixture, n: usize, custom: &[(&str, &str)]) {
    let c = Client::new(&f.fake);
    let q = f.ws.channel.clone();
    support::block(async {
        for i in 0..n {
            assert_eq!(
                c.send(&q, &format!("m-{i:04}"), &format!("{{\"n\": {i}}}"), custom)
                    .await,
                201
            );
        }
        // Bounded: n messages, 8 deliveries each.
        for _ in 0..n * 8 {
            let Some(m) = c.peek_lock(&q).await else {
                break;
            };
            assert_eq!(c.unlock(&m).await, 200);
        }
    });
    assert_eq!(f.fake.dead_letters(&q).len(), n, "all dead-lettered");
}

#[test]
fn status_reads_dead_letters_by_peek_lock_then_unlock_and_shows_reason_and_description() {
    let f = support::azure::Fixture::new();
    f.ws.first_apply("azure first apply");
    dead_lettered(
        &f,
        2,
        &[("x-api-token", "s3cr3t-value"), ("tenant", "acme")],
    );
    let before: Vec<u64> = f
        .fake
        .dead_letters(&f.ws.channel)
        .iter()
        .map(|m| m.delivery_count)
        .collect();
    let s = f.ws.run(&["status", "channel.yaml", "--format", "json"]);
    s.ok_with("status");
    let v = s.json("status JSON");
    let ch = &v["channels"][0];
    assert_eq!(ch["deadLetter"]["depth"], 2, "{ch}");
    assert_eq!(ch["deadLetter"]["sampled"], 2, "{ch}");
    let text = ch.to_string();
    assert!(text.contains("MaxDeliveryCountExceeded"), "the class\n{ch}");
    assert!(
        text.contains("could not be consumed after 8 delivery attempts"),
        "the description as the message\n{ch}"
    );
    assert!(text.contains("acme"), "custom properties as headers\n{ch}");
    assert!(
        !s.stdout.contains("s3cr3t-value"),
        "a secret header is redacted\n{}",
        s.stdout
    );
    assert!(
        text.contains("peek-lock"),
        "the note says what the read did\n{ch}"
    );
    // What the read did: each message is still there, unlocked, one delivery more.
    let after = f.fake.dead_letters(&f.ws.channel);
    assert_eq!(after.len(), 2);
    assert!(
        after.iter().all(|m| m.lock.is_none()),
        "every lock handed back"
    );
    let counts: Vec<u64> = after.iter().map(|m| m.delivery_count).collect();
    assert_eq!(counts, before.iter().map(|c| c + 1).collect::<Vec<_>>());
    assert!(f.fake.messages(&f.ws.channel).is_empty(), "nothing moved");
    // --no-peek reads no message.
    let requests = f.fake.data_requests().len();
    f.ws.run(&["status", "channel.yaml", "--no-peek"])
        .ok_with("status --no-peek");
    assert_eq!(f.fake.data_requests().len(), requests);
}

#[test]
fn redrive_brings_a_dead_lettered_message_back_and_a_dry_run_moves_nothing() {
    let f = support::azure::Fixture::new();
    f.ws.first_apply("azure first apply");
    dead_lettered(&f, 3, &[("tenant", "acme")]);
    let q = f.ws.channel.clone();
    let dry = support::redrive::redrive_ok(&f.ws, &["--dry-run"]);
    assert_eq!(dry["moved"], 0, "{dry}");
    assert_eq!(f.fake.dead_letters(&q).len(), 3, "a dry run moves nothing");
    assert!(f.fake.messages(&q).is_empty());
    let one = support::redrive::redrive_ok(&f.ws, &["--yes", "--limit", "1"]);
    assert_eq!(one["moved"], 1, "{one}");
    assert_eq!(f.fake.dead_letters(&q).len(), 2);
    let doc = support::redrive::redrive_ok(&f.ws, &["--yes"]);
    assert_eq!(doc["moved"], 2, "{doc}");
    assert_eq!(doc["possiblyDuplicated"], 0, "{doc}");
    assert_eq!(doc["leftInDeadLetter"], 0, "{doc}");
    assert!(f.fake.dead_letters(&q).is_empty());
    let back = f.fake.messages(&q);
    let mut ids: Vec<&str> = back.iter().map(|m| m.message_id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["m-0000", "m-0001", "m-0002"], "the MessageId is kept");
    for m in &back {
        assert_eq!(m.property("dlq-redrive-count").as_deref(), Some("1"));
        assert_eq!(m.property("tenant").as_deref(), Some("acme"));
        assert_eq!(
            m.property("DeadLetterReason"),
            None,
            "the reason stays behind"
        );
        assert_eq!(m.delivery_count, 0, "a fresh message");
    }
}

#[test]
fn a_message_brought_back_max_redrives_times_already_stays_where_it_is() {
    let f = support::azure::Fixture::new();
    f.ws.first_apply("azure first apply");
    // It failed again after 99 redrives (the copy carried the count back).
    dead_lettered(&f, 1, &[("dlq-redrive-count", "99")]);
    let doc = support::redrive::redrive_ok(&f.ws, &["--yes"]);
    assert_eq!(doc["moved"], 0, "{doc}");
    assert_eq!(doc["skippedAtMaxRedrives"], 1, "{doc}");
    let dead = f.fake.dead_letters(&f.ws.channel);
    assert_eq!(dead.len(), 1, "left in the subqueue");
    assert!(dead[0].lock.is_none(), "and handed back");
    assert!(f.fake.messages(&f.ws.channel).is_empty());
}

#[test]
fn a_send_that_is_not_confirmed_leaves_the_message_in_the_dead_letter_queue() {
    let f = support::azure::Fixture::new();
    f.ws.first_apply("azure first apply");
    dead_lettered(&f, 2, &[]);
    f.fake.fail_sends(1);
    let (code, doc, err) = support::redrive::redrive(&f.ws, &["--yes"]);
    assert_ne!(code, 0, "{doc}\n{err}");
    assert_eq!(doc["moved"], 0, "{doc}");
    let dead = f.fake.dead_letters(&f.ws.channel);
    assert_eq!(dead.len(), 2, "nothing left the subqueue");
    assert!(dead.iter().all(|m| m.lock.is_none()), "handed back at once");
    assert!(f.fake.messages(&f.ws.channel).is_empty());
    // The next run moves both.
    let doc = support::redrive::redrive_ok(&f.ws, &["--yes"]);
    assert_eq!(doc["moved"], 2, "{doc}");
}

#[test]
fn azure_a_redrive_killed_part_way_loses_nothing() {
    const N: usize = 500;
    let f = support::azure::Fixture::new();
    f.ws.first_apply("azure first apply");
    dead_lettered(&f, N, &[]);
    let q = f.ws.channel.clone();
    let mut run = support::redrive::spawn_quiet(&f.ws, Some("250"));
    support::redrive::kill_part_way(
        &mut run,
        std::time::Duration::from_secs(60),
        std::time::Duration::from_millis(10),
        || f.fake.messages(&q).len() >= 100,
    );
    let moved_first = f.fake.messages(&q).len();
    assert!(
        moved_first > 0 && moved_first < N,
        "killed part-way: {moved_first}"
    );
    // A lock the killed run held runs out after the queue's lockDuration (2m).
    f.fake.advance(std::time::Duration::from_secs(121));
    let doc = support::redrive::redrive_ok(&f.ws, &["--yes"]);
    let back = f.fake.messages(&q);
    let left = f.fake.dead_letters(&q);
    let ids: std::collections::BTreeSet<&str> = back
        .iter()
        .chain(&left)
        .map(|m| m.message_id.as_str())
        .collect();
    let want: std::collections::BTreeSet<String> = (0..N).map(|i| format!("m-{i:04}")).collect();
    let want: std::collections::BTreeSet<&str> = want.iter().map(String::as_str).collect();
    assert_eq!(ids, want, "every message is in the queue or its subqueue");
    assert!(
        left.is_empty(),
        "the second run finished the job: {}",
        left.len()
    );
    let duplicates = back.len() - N;
    // At most the message in flight when the process died.
    assert!(duplicates <= 1, "{duplicates} duplicated");
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "Azure (fake): killed after {moved_first} moved; the second run moved {}; {duplicates} duplicated",
            doc["moved"]
        );
    }
}

#[test]
fn two_dead_letters_that_share_a_messageid_are_both_archived_and_both_replayed() {
    let f = support::azure::Fixture::new();
    f.ws.first_apply("azure first apply");
    let c = Client::new(&f.fake);
    let q = f.ws.channel.clone();
    support::block(async {
        // The application's MessageId is a business key: two attempts of order 42.
        for body in ["{\"order\": 42, \"try\": 1}", "{\"order\": 42, \"try\": 2}"] {
            assert_eq!(c.send(&q, "order-42", body, &[]).await, 201);
        }
        for _ in 0..2 * 8 {
            let Some(m) = c.peek_lock(&q).await else {
                break;
            };
            assert_eq!(c.unlock(&m).await, 200);
        }
    });
    assert_eq!(f.fake.dead_letters(&q).len(), 2);
    let arch = f.ws.path().join("arch");
    let arch = arch.to_str().expect("path");
    let doc = support::redrive::archive_ok(&f.ws, &["--to", arch, "--delete", "--yes"]);
    assert_eq!(
        (doc["archived"].as_u64(), doc["deleted"].as_u64()),
        (Some(2), Some(2)),
        "{doc}"
    );
    assert!(f.fake.dead_letters(&q).is_empty());
    let doc = support::redrive::redrive_ok(&f.ws, &["--from-archive", arch, "--yes"]);
    assert_eq!(doc["moved"], 2, "{doc}");
    assert_eq!(doc["archive"]["duplicates"], 0, "{doc}");
    let mut bodies: Vec<String> = f
        .fake
        .messages(&q)
        .iter()
        .map(|m| String::from_utf8_lossy(&m.body).into_owned())
        .collect();
    bodies.sort();
    assert_eq!(
        bodies,
        ["{\"order\": 42, \"try\": 1}", "{\"order\": 42, \"try\": 2}"],
        "both came back"
    );
}

#[test]
fn an_archive_whose_first_lock_runs_out_stops_there_and_is_not_complete() {
    const N: usize = 40;
    let f = support::azure::Fixture::new();
    f.ws.first_apply("azure first apply");
    dead_lettered(&f, N, &[]);
    let q = f.ws.channel.clone();
    let arch = f.ws.path().join("arch");
    let arch = arch.to_str().expect("path");
    let run =
        f.ws.command(&[
            "archive",
            q.as_str(),
            "channel.yaml",
            "--to",
            arch,
            "--rate",
            "20",
            "--format",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("archive starts");
    // Once a few are locked by the run, the clock passes the queue's lockDuration (2m): the
    // locks the run holds run out, and its next peek-lock hands back the first message.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while f
        .fake
        .dead_letters(&q)
        .iter()
        .filter(|m| m.lock.is_some())
        .count()
        < 5
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the run locked nothing"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    f.fake.advance(std::time::Duration::from_secs(121));
    let out = run.wait_with_output().expect("archive ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "not complete\n{stdout}\n{stderr}"
    );
    let all = format!("{stdout}{stderr}");
    assert!(all.contains("a lock this run held ran out"), "{all}");
    assert_eq!(
        f.fake.dead_letters(&q).len(),
        N,
        "without --delete all stay"
    );
}

// ---------------------------------------------------------------------------------------------
// Opt-in, against a real namespace: never in CI (docs/azure.md, "Running the tests against a
// real namespace")
// ---------------------------------------------------------------------------------------------

/// Reads only: `plan` (ARM GETs) and `status --no-peek` (depth from ARM) of the example
/// channel in a namespace of your own, named by `DLQCTL_AZURE_LIVE_SUBSCRIPTION`,
/// `DLQCTL_AZURE_LIVE_RESOURCE_GROUP` and `DLQCTL_AZURE_LIVE_NAMESPACE`, with an ARM token
/// in `AZURE_ACCESS_TOKEN`. Without them it says so and passes: CI never sets them.
#[test]
fn live_a_real_namespace_is_planned_and_its_depth_read_when_asked() {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let (Some(sub), Some(group), Some(ns), Some(token)) = (
        var("DLQCTL_AZURE_LIVE_SUBSCRIPTION"),
        var("DLQCTL_AZURE_LIVE_RESOURCE_GROUP"),
        var("DLQCTL_AZURE_LIVE_NAMESPACE"),
        var("AZURE_ACCESS_TOKEN"),
    ) else {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "SKIPPED (opt-in): no DLQCTL_AZURE_LIVE_* variables; this test reads a real Service Bus namespace only when asked (docs/azure.md)"
            );
        }
        return;
    };
    let mut ws = support::workspace::Workspace::new(
        "shipments-servicebus.yaml",
        "shipments-",
        &support::workspace::Endpoints::default(),
    );
    ws.edit_targets(|t| {
        t.replace(
            "subscriptionId: 00000000-0000-0000-0000-000000000000\n    resourceGroup: logistics\n    namespace: logistics-prod\n",
            &format!("subscriptionId: {sub}\n    resourceGroup: {group}\n    namespace: {ns}\n"),
        )
    });
    ws.set_env("AZURE_ACCESS_TOKEN", &token);
    ws.write_example(|t| t);
    let p = ws.plan();
    assert!(
        p.code == 0 || p.code == 2,
        "plan reads the namespace\n{}{}",
        p.stdout,
        p.stderr
    );
    let s = ws.run(&["status", "channel.yaml", "--no-peek"]);
    assert!(
        support::fake::error_lines(&s.stderr).is_empty(),
        "status --no-peek reads the namespace\n{}{}",
        s.stdout,
        s.stderr
    );
}
