//! `redrive --to` moves messages only into what the target owns (issue 31, finding 18: a
//! hostile run moved dead letters into an untagged SQS queue). RabbitMQ's and Kafka's
//! ownership is by name prefix (tests/redrive_rabbitmq_hostile.rs covers RabbitMQ); SQS's by
//! dlqctl's tags and Pub/Sub's by its labels, live here on moto and the emulator. Without
//! `--allow-unowned-destination` nothing moves; with it, every message arrives.

mod support;

use base64::Engine as _;
use serde_json::json;
use support::redrive::redrive;
use support::workspace::Workspace;
use support::{block, pubsub, sqs};

/// `redrive --to VICTIM` is refused: the destination is not `mark` (tagged, labelled) by
/// dlqctl, and the error names the flag that allows it.
fn refused(f: &Workspace, victim: &str, mark: &str) {
    let (code, doc, _) = redrive(f, &["--to", victim, "--yes"]);
    assert_eq!(code, 1, "{doc}");
    let error = doc["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(mark) && error.contains("--allow-unowned-destination"),
        "{doc}"
    );
}

/// With `--allow-unowned-destination`, the three dead letters move to VICTIM.
fn allowed(f: &Workspace, victim: &str) {
    let (code, doc, err) = redrive(f, &["--to", victim, "--yes", "--allow-unowned-destination"]);
    assert_eq!((code, doc["moved"].clone()), (0, json!(3)), "{doc}\n{err}");
}

#[test]
fn sqs_a_destination_dlqctl_did_not_tag_is_refused_unless_allowed() {
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let [_, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    let victim = format!("{}-victim", f.channel);
    aws.create(&victim, &[], &[]);
    for i in 0..3 {
        block(
            aws.sqs
                .send_message()
                .queue_url(aws.url(&dlq))
                .message_body(format!("v{i}"))
                .send(),
        )
        .expect("SendMessage");
    }
    refused(&f, &victim, "not tagged");
    assert_eq!(
        (aws.count(&dlq), aws.count(&victim)),
        (3, 0),
        "nothing moved"
    );
    allowed(&f, &victim);
    let mut bodies: Vec<String> = aws.take(&victim, 3).into_iter().map(|(b, _)| b).collect();
    bodies.sort();
    assert_eq!(bodies, ["v0", "v1", "v2"]);
}

#[test]
fn pubsub_a_destination_topic_dlqctl_did_not_label_is_refused_unless_allowed() {
    let Some(f) = pubsub::Fixture::applied_with(|t| {
        t.replace("payment-processor-sub", "\"{channel}-processor-sub\"")
    }) else {
        return;
    };
    let dlt = format!("{}-dlt", f.channel);
    let victim = format!("{}-victim", f.channel);
    let victim_sub = format!("{}-victim-sub", f.channel);
    f.rest.create_topic(&victim);
    f.rest.create_subscription(
        &victim_sub,
        json!({"topic": pubsub::Rest::topic_path(&victim)}),
    );
    for i in 0..3 {
        f.rest.ok(
            reqwest::Method::POST,
            &format!("topics/{dlt}:publish"),
            json!({"messages": [{"data": base64::engine::general_purpose::STANDARD.encode(format!("p{i}"))}]}),
        );
    }
    refused(&f, &victim, "not labelled");
    assert!(f.rest.pull(&victim_sub, 10).is_empty(), "nothing moved");
    allowed(&f, &victim);
    let mut got = Vec::new();
    let started = std::time::Instant::now();
    while got.len() < 3 && started.elapsed() < std::time::Duration::from_secs(30) {
        for m in f.rest.pull(&victim_sub, 10) {
            let data = m["message"]["data"].as_str().unwrap_or_default();
            got.push(
                String::from_utf8(
                    base64::engine::general_purpose::STANDARD
                        .decode(data)
                        .expect("b64"),
                )
                .expect("utf-8"),
            );
            f.rest.ack(&victim_sub, m["ackId"].as_str().expect("ackId"));
        }
    }
    got.sort();
    assert_eq!(got, ["p0", "p1", "p2"]);
}
