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
