//! Azure Service Bus (issue 40): the contract fake in tests/support/azure.rs, held to the
//! documented ARM contract it claims, so the backend's later tests stand on something
//! checked. Each test names the documented behaviour it pins. No Service Bus namespace is
//! contacted: nothing here leaves 127.0.0.1 (docs/azure.md).

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
fn status_reads_the_dead_letter_depth_from_count_details_and_says_it_read_no_message() {
    let f = support::azure::Fixture::new();
    f.ws.first_apply("azure first apply");
    f.fake.set_dead_letters(&f.ws.channel, 3, 2);
    let s = f.ws.run(&["status", "channel.yaml", "--format", "json"]);
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
        ch.to_string().contains("data plane"),
        "the note says why no message was read\n{ch}"
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
    f.ws.first_apply("azure first apply");
    let writes_before = f.fake.api.writes().len();
    let r =
        f.ws.run(&["redrive", &f.ws.channel, "channel.yaml", "--yes"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    r.assert_stderr_contains("not built for Azure Service Bus");
    // A topic channel: the reader refuses it, naming the resource.
    f.ws.write_example(|t| {
        t.replace(
            "  azure-servicebus:\n",
            "  azure-servicebus:\n    subscription: \"{channel}-labels\"\n",
        )
    });
    let p = f.ws.plan();
    assert_eq!(p.code, 1, "{}{}", p.stdout, p.stderr);
    p.assert_stderr_contains("topics and subscriptions are not read in this version");
    p.assert_stderr_contains(&format!("topic {}", f.ws.channel));
    assert_eq!(
        f.fake.api.writes().len(),
        writes_before,
        "nothing was written"
    );
}
