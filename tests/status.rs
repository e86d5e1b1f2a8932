//! `dlqctl status` and `dlqctl exporter`, live on every backend. Messages are put into each
//! dead-letter queue by a third-party client (AMQP through lapin, the AWS SDK, an rdkafka
//! producer), with each envelope and with none; status must report depth, classes and samples
//! exactly and the oldest age within a second of the truth, and leave every message in place:
//! the count before equals the count after, and a consumer reads every body back intact.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use serde_json::{Value, json};
use support::exporter::Exporter;
use support::rabbit::{self, api, publish_on, table, take_all, take_each, text, wait_for_messages};
use support::{block, kafka, sqs};

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
}

fn rfc3339(secs: f64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos((secs * 1e9) as i128).expect("time");
    t.format(&time::format_description::well_known::Rfc3339)
        .expect("format")
}

/// `status channel.yaml --format json` in the workspace; the document, and the wall clock
/// just before and just after the run (for age checks).
fn status_json(ws: &support::workspace::Workspace, extra: &[&str]) -> (Value, f64, f64) {
    let before = now_secs();
    let mut args = vec!["status", "channel.yaml", "--format", "json"];
    args.extend_from_slice(extra);
    let out = ws.run(&args);
    let after = now_secs();
    out.ok();
    let doc: Value = serde_json::from_str(&out.stdout).expect("status JSON");
    assert_eq!(doc["format_version"], 1);
    assert_eq!(doc["channels"].as_array().map(Vec::len), Some(1));
    (doc["channels"][0].clone(), before, after)
}

/// The age status reported is the truth (`now - since`) at some moment of the run, ±1 s.
#[track_caller]
fn assert_age(reported: &Value, since: f64, before: f64, after: f64) {
    let age = reported
        .as_f64()
        .unwrap_or_else(|| panic!("an age, not {reported}"));
    assert!(
        age >= before - since - 1.0 && age <= after - since + 1.0,
        "age {age} not within 1 s of the truth ({} .. {})",
        before - since,
        after - since
    );
}

fn classes(dl: &Value) -> Value {
    dl["byErrorClass"].clone()
}

#[test]
fn rabbitmq_status_reads_every_envelope_exactly_and_leaves_every_message() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    let side = format!("{}.side", f.channel);
    let now = now_secs();
    let dead_lettered = now - 3600.0;
    block(async {
        // A queue that dead-letters into the DLQ through the broker itself (x-death).
        api(
            reqwest::Method::PUT,
            &format!("/api/queues/%2F/{side}"),
            Some(json!({"durable": true, "arguments": {
                "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}})),
        )
        .await;
        let conn = rabbit::amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        let props = |h: FieldTable, ts: f64| {
            BasicProperties::default()
                .with_headers(h)
                .with_timestamp(ts as u64)
        };
        // dlqctl's envelope, dead-lettered an hour ago, published two hours ago.
        let dlqctl = table(&[
            ("dlq-error-class", text("poison")),
            ("dlq-attempts", AMQPValue::LongInt(4)),
            ("dlq-source", text(&main)),
            ("dlq-dead-lettered-at", text(&rfc3339(dead_lettered))),
        ]);
        publish_on(&ch, "", &dlq, b"order-1", props(dlqctl, now - 7200.0)).await;
        // No envelope at all.
        publish_on(
            &ch,
            "",
            &dlq,
            b"order-2",
            props(FieldTable::default(), now - 60.0),
        )
        .await;
        // Spring's envelope: the cause class wins over the wrapper.
        let spring = table(&[
            (
                "kafka_dlt-exception-fqcn",
                text("org.springframework.kafka.listener.ListenerExecutionFailedException"),
            ),
            ("kafka_dlt-exception-cause-fqcn", text("com.acme.BadOrder")),
        ]);
        publish_on(&ch, "", &dlq, b"order-3", props(spring, now - 30.0)).await;
        // Connect's.
        let connect = table(&[(
            "__connect.errors.exception.class.name",
            text("org.apache.kafka.connect.errors.DataException"),
        )]);
        publish_on(&ch, "", &dlq, b"order-4", props(connect, now - 20.0)).await;
        // The broker's own: rejected from the side queue, dead-lettered with x-death.
        publish_on(
            &ch,
            "",
            &side,
            b"order-5",
            props(FieldTable::default(), now - 10.0),
        )
        .await;
        let got = ch
            .basic_get(
                side.as_str().into(),
                lapin::options::BasicGetOptions::default(),
            )
            .await
            .expect("get")
            .expect("the side queue holds it");
        got.delivery
            .reject(lapin::options::BasicRejectOptions { requeue: false })
            .await
            .expect("reject");
        let _ = conn.close(200, "done".into()).await;
    });
    wait_for_messages(&dlq, 5);

    let (c, before, after) = status_json(&f, &["--samples", "5"]);
    let dl = &c["deadLetter"];
    assert_eq!(c["error"], Value::Null);
    assert_eq!(dl["name"], dlq.as_str());
    assert_eq!(dl["depth"], 5);
    assert_eq!(dl["depthDetail"]["ready"], 5);
    assert_eq!(
        classes(dl),
        json!({"poison": 1, "unknown": 1, "com.acme.BadOrder": 1,
               "org.apache.kafka.connect.errors.DataException": 1, "rejected": 1})
    );
    assert_eq!(
        (dl["sampled"].clone(), dl["exact"].clone()),
        (json!(5), json!(true))
    );
    // The oldest counts from when it was dead-lettered, not from when it was published.
    assert_age(&dl["oldestAgeSeconds"], dead_lettered, before, after);
    assert_eq!(dl["oldestAgeSince"], "dead-lettered");
    let samples = dl["samples"].as_array().expect("samples");
    assert_eq!(samples.len(), 5);
    assert_eq!(samples[0]["errorClass"], "poison");
    assert_eq!(samples[0]["attempts"], 4);
    assert_eq!(samples[0]["source"], main.as_str());
    assert_eq!(
        samples[0]["body"],
        json!({"kind": "text", "length": 7, "truncated": false, "text": "order-1"})
    );
    assert_eq!(samples[4]["errorClass"], "rejected");
    assert_eq!(samples[4]["source"], side.as_str(), "x-first-death-queue");
    let around: Vec<&str> = c["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .filter_map(|q| q["role"].as_str())
        .collect();
    assert_eq!(around, ["main", "retry"]);

    // Nothing lost, nothing reordered: the count stands, and a consumer reads every body.
    wait_for_messages(&dlq, 5);
    let bodies: Vec<Vec<u8>> = block(take_all(&dlq)).into_iter().map(|(b, _)| b).collect();
    assert_eq!(
        bodies,
        ["order-1", "order-2", "order-3", "order-4", "order-5"].map(|b| b.as_bytes().to_vec())
    );
}

#[test]
fn rabbitmq_status_shows_hostile_payloads_safely_and_keeps_them() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    let escape = "pay\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\u{202e}fdp.exe";
    let big = vec![b'x'; 1 << 20];
    let binary = vec![0xff, 0xfe, 0x00, 0x1b, 0x9b];
    block(async {
        let conn = rabbit::amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        let hostile_headers = table(&[
            ("dlq-error-class", text("evil\u{1b}[31m")),
            ("dlq-error-message", text("line1\nline2\u{1b}[2J")),
        ]);
        publish_on(
            &ch,
            "",
            &dlq,
            escape.as_bytes(),
            BasicProperties::default().with_headers(hostile_headers),
        )
        .await;
        publish_on(&ch, "", &dlq, &binary, BasicProperties::default()).await;
        publish_on(&ch, "", &dlq, &big, BasicProperties::default()).await;
        let many: Vec<(String, AMQPValue)> = (0..200)
            .map(|i| (format!("h{i:03}"), text(&format!("v{i}"))))
            .collect();
        let mut t = FieldTable::default();
        for (k, v) in &many {
            t.insert(ShortString::from(k.as_str()), v.clone());
        }
        publish_on(
            &ch,
            "",
            &dlq,
            b"many-headers",
            BasicProperties::default().with_headers(t),
        )
        .await;
        let _ = conn.close(200, "done".into()).await;
    });
    wait_for_messages(&dlq, 4);
    for format in ["human", "json", "markdown", "openmetrics"] {
        let out = f.run(&[
            "status",
            "channel.yaml",
            "--samples",
            "4",
            "--format",
            format,
        ]);
        out.ok_with(format);
        let raw = out.stdout.as_bytes();
        for bad in [0x1b_u8, 0x07] {
            assert!(
                !raw.contains(&bad),
                "{format}: byte {bad:#x} reached the terminal"
            );
        }
        assert!(
            !out.stdout.contains('\u{9b}') && !out.stdout.contains('\u{202e}'),
            "{format}: a C1 or bidi control reached the terminal"
        );
        if format == "human" {
            out.assert_stdout_contains(
                "pay\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\u{9b}31m\\u{202e}fdp.exe",
            );
            out.assert_stdout_contains("evil\\u{1b}[31m");
            out.assert_stdout_contains("line1\\nline2\\u{1b}[2J");
            out.assert_stdout_contains("(binary, 5 bytes) hex fffe001b9b");
            out.assert_stdout_contains("(1048576 bytes, cut at --max-body) xxxx");
            out.assert_stdout_contains("h000: v0; h001: v1");
            out.assert_stdout_contains("h199: v199");
        }
        if format == "json" {
            let doc: Value = serde_json::from_str(&out.stdout).expect("JSON");
            let s = &doc["channels"][0]["deadLetter"]["samples"];
            assert_eq!(
                s[1]["body"],
                json!({"kind": "binary", "length": 5, "hexPrefix": "fffe001b9b"})
            );
            assert_eq!(s[2]["body"]["length"], 1 << 20);
            assert_eq!(s[2]["body"]["text"].as_str().map(str::len), Some(1024));
            assert_eq!(s[3]["headers"].as_array().map(Vec::len), Some(200));
        }
    }
    // Four reads later, all four are there, byte for byte.
    let got = block(take_all(&dlq));
    assert_eq!(got.len(), 4);
    assert_eq!(got[0].0, escape.as_bytes());
    assert_eq!(got[1].0, binary);
    assert_eq!(got[2].0, big, "the 1 MiB body is intact");
    assert_eq!(got[3].1.len(), 200, "all 200 headers kept");
}

#[test]
fn rabbitmq_quorum_dlq_with_a_delivery_limit_is_never_peeked() {
    let Some(f) = rabbit::Fixture::new() else {
        return;
    };
    // The DLQ exists before any apply: a quorum queue made by hand, with a delivery limit, and
    // a dead-letter exchange that would move a message out of it at the limit (into
    // `parking`): each peek would spend a delivery, so the third would move them all.
    let dlq = format!("{}.dlq", f.channel);
    let parking = format!("{}.parking", f.channel);
    f.write_example(|t| t);
    block(async {
        api(
            reqwest::Method::PUT,
            &format!("/api/queues/%2F/{parking}"),
            Some(json!({"durable": true})),
        )
        .await;
        api(
            reqwest::Method::PUT,
            &format!("/api/queues/%2F/{dlq}"),
            Some(json!({"durable": true, "arguments": {"x-queue-type": "quorum", "x-delivery-limit": 2,
                "x-dead-letter-exchange": "", "x-dead-letter-routing-key": parking}})),
        )
        .await;
        for i in 0..3 {
            rabbit::publish("", &dlq, format!("q{i}").as_bytes()).await;
        }
    });
    wait_for_messages(&dlq, 3);
    for _ in 0..3 {
        let (c, _, _) = status_json(&f, &[]);
        let dl = &c["deadLetter"];
        assert_eq!(dl["depth"], 3);
        assert_eq!(dl["sampled"], 0);
        let note = dl["notes"][0].as_str().unwrap_or_default();
        assert!(
            note.contains("delivery limit of 2") && note.contains("dead-letters it out"),
            "{note}"
        );
    }
    assert_eq!(block(take_all(&parking)).len(), 0, "nothing was moved out");
    let got = block(take_all(&dlq));
    assert_eq!(got.len(), 3, "every message is still there");
}

#[test]
fn an_unreachable_target_fails_its_channels_one_line_each_and_the_others_still_print() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    // A second channel, on an SQS target that nothing answers.
    f.edit_targets(|t| t.replace("http://127.0.0.1:5000", "http://127.0.0.1:9"));
    let sqs_spec = std::fs::read_to_string(support::root().join("examples/payments-sqs.yaml"))
        .expect("example")
        .replace(
            "payments-transactions-pending",
            &format!("{}-pay", f.channel.replace('.', "-")),
        );
    std::fs::write(f.path().join("pay.yaml"), sqs_spec).expect("write");
    // A queue just created reports no count until its first statistics (seconds).
    wait_for_messages(&format!("{}.dlq", f.channel), 0);
    let out = f.run(&["status", "channel.yaml", "pay.yaml", "--read-timeout", "2"]);
    out.exits(1);
    // The RabbitMQ channel printed in full; the SQS one is one line saying why.
    out.assert_stdout_contains(&format!("DLQ {}.dlq\n  depth     0 waiting", f.channel));
    let failed: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.contains("not read:"))
        .collect();
    assert_eq!(failed.len(), 1, "{}", out.stdout);
    assert!(
        failed[0].contains("target `local-sqs`") && failed[0].contains("cannot reach the endpoint"),
        "{}",
        failed[0]
    );
    out.assert_stderr_contains("1 of 2 channels could not be read");
}

/// The SQS example's DLQ, with messages sent by the AWS SDK.
#[test]
fn sqs_status_reads_every_envelope_exactly_and_leaves_every_message() {
    use aws_sdk_sqs::types::MessageAttributeValue;
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let [_, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    let url = aws.url(&dlq);
    let dead_lettered = now_secs() - 3600.0;
    let attr = |v: &str| {
        MessageAttributeValue::builder()
            .data_type("String")
            .string_value(v)
            .build()
            .expect("attribute")
    };
    let sent = [
        (
            "pay-1",
            vec![
                ("dlq-error-class", "poison".to_owned()),
                ("dlq-dead-lettered-at", rfc3339(dead_lettered)),
            ],
        ),
        ("pay-2", vec![]),
        (
            "pay-3",
            vec![(
                "kafka_dlt-exception-cause-fqcn",
                "com.acme.Declined".to_owned(),
            )],
        ),
    ];
    for (body, attrs) in &sent {
        let mut req = aws.sqs.send_message().queue_url(&url).message_body(*body);
        for (k, v) in attrs {
            req = req.message_attributes(*k, attr(v));
        }
        block(req.send()).expect("SendMessage");
    }
    let count = |a: &sqs::Aws| a.attributes(&dlq)["ApproximateNumberOfMessages"].clone();
    assert_eq!(count(&aws), "3");

    let (c, before, after) = status_json(&f, &[]);
    let dl = &c["deadLetter"];
    assert_eq!(dl["depth"], 3);
    // A message with no envelope in an SQS DLQ used up its receives.
    assert_eq!(
        classes(dl),
        json!({"poison": 1, "transient_exhausted": 1, "com.acme.Declined": 1})
    );
    assert_eq!(
        (dl["sampled"].clone(), dl["exact"].clone()),
        (json!(3), json!(true))
    );
    assert_age(&dl["oldestAgeSeconds"], dead_lettered, before, after);
    assert_eq!(dl["oldestAgeBasis"], "all");
    let note = dl["notes"][0].as_str().unwrap_or_default();
    assert!(
        note.contains("read 3 of the 3 messages with one ReceiveMessage")
            && note.contains("ApproximateReceiveCount of each message read by one"),
        "{note}"
    );

    // Still visible, all three, and a consumer receives every body.
    assert_eq!(count(&aws), "3");
    let mut bodies: Vec<String> = aws.take(&dlq, 3).into_iter().map(|(b, _)| b).collect();
    bodies.sort();
    assert_eq!(bodies, ["pay-1", "pay-2", "pay-3"]);
}

#[test]
fn sqs_dlq_with_a_redrive_policy_of_its_own_is_never_peeked() {
    use aws_sdk_sqs::types::QueueAttributeName;
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let [main, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    // The DLQ itself dead-letters (into the main queue, for the test): a receive counts.
    let policy = aws.redrive_policy(&main, json!(1));
    aws.set(&dlq, &[(QueueAttributeName::RedrivePolicy, policy.1)]);
    aws.send(&dlq, "keep-me");
    for _ in 0..3 {
        let (c, _, _) = status_json(&f, &[]);
        let dl = &c["deadLetter"];
        assert_eq!(
            (dl["depth"].clone(), dl["sampled"].clone()),
            (json!(1), json!(0))
        );
        let note = dl["notes"][0].as_str().unwrap_or_default();
        assert!(note.contains("redrive policy of its own"), "{note}");
    }
    let a = aws.attributes(&dlq);
    assert_eq!(a["ApproximateNumberOfMessages"], "1", "still in the DLQ");
    assert_eq!(
        aws.attributes(&main)["ApproximateNumberOfMessages"],
        "0",
        "and not moved on"
    );
}

/// A record to produce: partition, body, timestamp (ms), headers.
type Record<'a> = (i32, &'a str, i64, Vec<(&'a str, Vec<u8>)>);

/// Produces records to the DLT with rdkafka, to the partitions given, with explicit timestamps.
fn produce(topic: &str, records: &[Record<'_>]) {
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let producer: FutureProducer = kafka::producer(&[("allow.auto.create.topics", "false")]);
    block(async {
        for (partition, body, ts, headers) in records {
            let mut h = OwnedHeaders::new();
            for (k, v) in headers {
                h = h.insert(Header {
                    key: k,
                    value: Some(v.as_slice()),
                });
            }
            producer
                .send(
                    FutureRecord::<(), _>::to(topic)
                        .partition(*partition)
                        .payload(*body)
                        .timestamp(*ts)
                        .headers(h),
                    Duration::from_secs(10),
                )
                .await
                .map_err(|(e, _)| e)
                .expect("produce");
        }
    });
}

#[test]
fn kafka_status_reads_every_envelope_exactly_and_moves_no_offset() {
    let Some(f) = kafka::Fixture::applied() else {
        return;
    };
    let dlt = format!("{}-dlt", f.channel);
    let now_ms = (now_secs() * 1000.0) as i64;
    let oldest_ms = now_ms - 3_600_000;
    produce(
        &dlt,
        &[
            (
                0,
                "inv-1",
                oldest_ms,
                vec![
                    ("dlq-error-class", b"poison".to_vec()),
                    ("dlq-attempts", b"4".to_vec()),
                ],
            ),
            (
                1,
                "inv-2",
                now_ms - 60_000,
                vec![
                    (
                        "kafka_dlt-exception-fqcn",
                        b"org.springframework.kafka.listener.ListenerExecutionFailedException"
                            .to_vec(),
                    ),
                    (
                        "kafka_dlt-exception-cause-fqcn",
                        b"com.acme.OutOfStock".to_vec(),
                    ),
                    ("kafka_dlt-original-topic", f.channel.as_bytes().to_vec()),
                    ("kafka_dlt-original-partition", 1i32.to_be_bytes().to_vec()),
                ],
            ),
            (
                2,
                "inv-3",
                now_ms - 30_000,
                vec![(
                    "__connect.errors.exception.class.name",
                    b"org.apache.kafka.connect.errors.DataException".to_vec(),
                )],
            ),
            (2, "inv-4", now_ms - 10_000, vec![]),
        ],
    );
    // Status twice: a read by assignment moves nothing, so both see the same.
    let (first, before, after) = status_json(&f, &["--samples", "4"]);
    let (second, _, _) = status_json(&f, &["--samples", "4"]);
    for c in [&first, &second] {
        let dl = &c["deadLetter"];
        assert_eq!(dl["depth"], 4);
        assert_eq!(dl["depthDetail"]["measure"], "retained");
        assert_eq!(
            classes(dl),
            json!({"poison": 1, "com.acme.OutOfStock": 1,
                   "org.apache.kafka.connect.errors.DataException": 1, "unknown": 1})
        );
        assert_eq!(
            (dl["sampled"].clone(), dl["exact"].clone()),
            (json!(4), json!(true))
        );
    }
    let dl = &first["deadLetter"];
    assert_age(
        &dl["oldestAgeSeconds"],
        oldest_ms as f64 / 1000.0,
        before,
        after,
    );
    let samples = dl["samples"].as_array().expect("samples");
    // Oldest first across partitions; Spring's numeric headers shown as numbers.
    assert_eq!(samples[0]["id"], "0/0");
    assert_eq!(samples[0]["attempts"], 4);
    assert_eq!(samples[1]["source"], f.channel.as_str());
    assert!(
        samples[1]["headers"]
            .as_array()
            .expect("headers")
            .contains(&json!(["kafka_dlt-original-partition", "1"])),
        "{}",
        samples[1]["headers"]
    );

    // With the DLT's consumer group in the spec, depth is what the group has not read: it
    // committed past the first record of partition 0, so three wait, and the samples start at
    // the group's position.
    let group = format!("{}-worker", f.channel);
    kafka::commit(&dlt, &group, 0, 1);
    f.write_example(|t| {
        t.replace(
            "  deadLetter:\n",
            &format!("  deadLetter:\n    consumerGroup: {group}\n"),
        )
    });
    let (c, _, _) = status_json(&f, &["--samples", "4"]);
    // The example's written decision travels with the report.
    assert_eq!(c["discard"]["after"], "30d");
    assert_eq!(c["discard"]["owner"], "team-inventory");
    let dl = &c["deadLetter"];
    assert_eq!(dl["depth"], 3);
    assert_eq!(dl["depthDetail"]["measure"], "waiting");
    assert_eq!(
        dl["byErrorClass"].get("poison"),
        None,
        "{}",
        dl["byErrorClass"]
    );
    assert_eq!(
        (dl["sampled"].clone(), dl["exact"].clone()),
        (json!(3), json!(true))
    );

    // Every record is still there for a consumer.
    assert_eq!(
        {
            // Exactly these four: status wrote nothing.
            let mut got: Vec<(i32, String)> =
                kafka::read_from_start(&dlt, 3, 4, Duration::from_secs(1))
                    .into_iter()
                    .map(|(p, _, b)| (p, b))
                    .collect();
            got.sort();
            got
        },
        [(0, "inv-1"), (1, "inv-2"), (2, "inv-3"), (2, "inv-4")].map(|(p, b)| (p, b.to_owned()))
    );
}

/// The exporter on the RabbitMQ channel, scraped twice within one interval: the same reading
/// both times (scrapes never reach the broker), figures equal to `status --format json`, and
/// `promtool check metrics` accepts them.
#[test]
fn the_exporter_serves_what_status_reads_and_promtool_accepts_it() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let promtool = std::env::var("DLQCTL_PROMTOOL").unwrap_or_else(|_| "promtool".into());
    let has_promtool = std::process::Command::new(&promtool)
        .arg("--version")
        .output()
        .is_ok();
    if !support::require("promtool (scripts/stack up installs it)", has_promtool) {
        return;
    }
    let [_, _, dlq, _] = f.names();
    block(async {
        let conn = rabbit::amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        for (i, class) in ["poison", "poison", "transient_exhausted"]
            .iter()
            .enumerate()
        {
            let h = table(&[("dlq-error-class", text(class))]);
            let props = BasicProperties::default()
                .with_headers(h)
                .with_timestamp((now_secs() - 600.0) as u64);
            publish_on(&ch, "", &dlq, format!("e{i}").as_bytes(), props).await;
        }
        let _ = conn.close(200, "done".into()).await;
    });
    wait_for_messages(&dlq, 3);
    let (c, _, _) = status_json(&f, &[]);

    let exporter = Exporter::start(&f, &["--interval", "1h", "--peek"]);
    // Served at once; the figures once the first reading is done (bounded: 60 s).
    let first = exporter.first_reading();
    let second = exporter.scrape();
    drop(exporter);
    assert_eq!(
        first, second,
        "one reading per interval, whatever the scrapes"
    );
    assert!(first.contains("dlq_exporter_reads_total 1\n"), "{first}");

    let labels = format!(
        "channel=\"{}\",target=\"local-rabbitmq\",backend=\"rabbitmq\",queue=\"{dlq}\",role=\"dead-letter\"",
        f.channel
    );
    let value = |metric: &str, extra: &str| -> f64 {
        let key = format!("{metric}{{{labels}{extra}}} ");
        first
            .lines()
            .find_map(|l| l.strip_prefix(&key))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in\n{first}"))
    };
    let dl = &c["deadLetter"];
    assert_eq!(value("dlq_depth", ""), dl["depth"].as_f64().expect("depth"));
    assert_eq!(
        value("dlq_messages_by_error_class", ",class=\"poison\""),
        2.0
    );
    assert_eq!(
        value(
            "dlq_messages_by_error_class",
            ",class=\"transient_exhausted\""
        ),
        1.0
    );
    // Every message read, each with its `timestamp`: an age known from them.
    let age = value("dlq_oldest_message_age_seconds", ",basis=\"all\"");
    assert_eq!(value("dlq_oldest_message_age_known", ""), 1.0);
    let status_age = dl["oldestAgeSeconds"].as_f64().expect("age");
    assert!(
        (age - status_age).abs() < 30.0,
        "exporter {age} vs status {status_age}"
    );
    assert!(first.contains("dlq_up{target=\"local-rabbitmq\",backend=\"rabbitmq\"} 1\n"));

    let mut check = std::process::Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool");
    std::io::Write::write_all(&mut check.stdin.take().expect("stdin"), first.as_bytes())
        .expect("feed promtool");
    let checked = check.wait_with_output().expect("promtool runs");
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    // Nothing was consumed by the exporter's peek either.
    assert_eq!(block(take_all(&dlq)).len(), 3);
}

/// A message to send: body, `err-type`, `tries`, `origin`, other attributes.
type Sent<'a> = (String, &'a str, &'a str, &'a str, &'a [(&'a str, &'a str)]);

/// An SQS channel whose envelope is declared on the producer's own message attributes
/// (`err-type`, `err-msg`, `tries`, `origin`) and a JSON pointer into the body for the time
/// (issue 34): status gives the class its rules map the raw class to (the raw one beside it),
/// the attempts, the source and the age since the pointer's time; `redrive --class` moves only
/// that mapped class, and a class the channel does not declare is refused.
#[test]
fn sqs_an_envelope_declared_on_attributes_and_a_body_pointer_is_read_and_redriven_by_class() {
    use aws_sdk_sqs::types::MessageAttributeValue;
    let Some(f) = sqs::Fixture::applied_with(|t| {
        t.replace(
            "    retention: 14d\n",
            "    retention: 14d
    envelope:
      from: none
      errorClass: {header: err-type}
      errorMessage: {header: err-msg}
      attempts: {header: tries}
      source: {header: origin}
      deadLetteredAt: {pointer: /failure/at}
    classes:
      - {name: poison, errorClass: \"com.acme.*Invalid*\"}
      - {name: transient_exhausted, errorClass: [\"*.SocketTimeoutException\", \"com.acme.*Unavailable\"]}
",
        )
    }) else {
        return;
    };
    let [main, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    let url = aws.url(&dlq);
    let now = now_secs();
    let attr = |v: &str| {
        MessageAttributeValue::builder()
            .data_type("String")
            .string_value(v)
            .build()
            .expect("attribute")
    };
    let failed = |secs_ago: f64| format!(r#"{{"failure":{{"at":"{}"}}}}"#, rfc3339(now - secs_ago));
    let sent: [Sent<'_>; 4] = [
        (
            failed(3600.0),
            "com.acme.PaymentInvalid",
            "1",
            "payments-api",
            &[],
        ),
        (
            failed(7200.0),
            "java.net.SocketTimeoutException",
            "5",
            "payments-api",
            &[],
        ),
        (
            failed(1800.0),
            "com.acme.GatewayUnavailable",
            "6",
            "ledger",
            &[],
        ),
        // No rule matches; dlqctl's own header is not read (`from: none`); no time in the body.
        (
            "not json".to_owned(),
            "com.acme.Weird",
            "2",
            "ledger",
            &[("dlq-error-class", "poison")],
        ),
    ];
    for (body, class, tries, origin, extra) in &sent {
        let mut req = aws
            .sqs
            .send_message()
            .queue_url(&url)
            .message_body(body)
            .message_attributes("err-type", attr(class))
            .message_attributes("err-msg", attr(&format!("{class} on {body}")))
            .message_attributes("tries", attr(tries))
            .message_attributes("origin", attr(origin));
        for (k, v) in *extra {
            req = req.message_attributes(*k, attr(v));
        }
        block(req.send()).expect("SendMessage");
    }

    let (c, before, after) = status_json(&f, &["--samples", "5"]);
    let dl = &c["deadLetter"];
    assert_eq!(dl["depth"], 4, "{dl}");
    assert_eq!(
        classes(dl),
        json!({"poison": 1, "transient_exhausted": 2, "unknown": 1}),
        "{dl}"
    );
    assert_age(&dl["oldestAgeSeconds"], now - 7200.0, before, after);
    let samples = dl["samples"].as_array().expect("samples");
    assert_eq!(samples.len(), 4, "{dl}");
    for (body, class, tries, origin, _) in &sent {
        let s = samples
            .iter()
            .find(|s| s["body"]["text"] == json!(body))
            .unwrap_or_else(|| panic!("no sample of {body} in {dl}"));
        let (mapped, raw) = match *class {
            "com.acme.PaymentInvalid" => ("poison", json!(class)),
            "com.acme.Weird" => ("unknown", json!(class)),
            _ => ("transient_exhausted", json!(class)),
        };
        assert_eq!(s["errorClass"], mapped, "{s}");
        assert_eq!(s["rawErrorClass"], raw, "{s}");
        assert_eq!(
            s["errorMessage"],
            json!(format!("{class} on {body}")),
            "{s}"
        );
        assert_eq!(
            s["attempts"],
            json!(tries.parse::<u64>().expect("tries")),
            "{s}"
        );
        assert_eq!(s["source"], json!(origin), "{s}");
        if body.starts_with('{') {
            let secs_ago = match *tries {
                "1" => 3600.0,
                "5" => 7200.0,
                _ => 1800.0,
            };
            assert_eq!(s["ageSince"], "dead-lettered", "{s}");
            assert_age(&s["ageSeconds"], now - secs_ago, before, after);
        } else {
            assert_ne!(s["ageSince"], "dead-lettered", "no time in the body: {s}");
        }
    }

    // A class the channel does not declare is refused, nothing moved.
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
    assert_eq!(aws.count(&dlq), 4, "nothing moved");
    // The mapped class selects: the timeout and the unavailable gateway go back.
    let doc = support::redrive::redrive_ok(&f, &["--class", "transient_exhausted", "--yes"]);
    assert_eq!(doc["moved"], 2, "{doc}");
    let mut back: Vec<String> = aws.take(&main, 2).into_iter().map(|(b, _)| b).collect();
    back.sort();
    let mut want = vec![sent[1].0.clone(), sent[2].0.clone()];
    want.sort();
    assert_eq!(back, want);
    let mut left: Vec<String> = aws.take(&dlq, 2).into_iter().map(|(b, _)| b).collect();
    left.sort();
    let mut kept = vec![sent[0].0.clone(), sent[3].0.clone()];
    kept.sort();
    assert_eq!(left, kept, "the poison and the unknown stay");
}

/// `dlqctl exporter --peek --scan 1000` on the RabbitMQ channel until its first reading is
/// served; the scrape.
fn exporter_reading(ws: &support::workspace::Workspace) -> String {
    Exporter::start(ws, &["--interval", "1h", "--peek", "--scan", "1000"]).first_reading()
}

/// The `class` label values of `dlq_messages_by_error_class` in a scrape, with their values.
fn class_series(scrape: &str) -> std::collections::BTreeMap<String, f64> {
    scrape
        .lines()
        .filter(|l| l.starts_with("dlq_messages_by_error_class{"))
        .map(|l| {
            let class = l
                .split("class=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .unwrap_or_else(|| panic!("no class label in {l}"));
            let value = l
                .rsplit(' ')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no value in {l}"));
            (class.to_owned(), value)
        })
        .collect()
}

/// Issue 34: 1,000 dead letters, each with a distinct `dlq-error-class`. Without rules the
/// exporter's `class` labels are only the built-in names and `other` (none of the built-in
/// names occurs: one series); with two class rules, only the declared names that occur and
/// `other`. What a message says never becomes a label.
#[test]
fn the_exporters_class_labels_are_only_declared_names_and_other_whatever_the_messages_say() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    block(async {
        let conn = rabbit::amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        for i in 0..1000 {
            let class = match i % 10 {
                0 => format!("com.acme.Poison{i}"),
                1 => format!("com.acme.Transient{i}"),
                _ => format!("com.acme.Raw{i}"),
            };
            let h = table(&[("dlq-error-class", text(&class))]);
            let props = BasicProperties::default()
                .with_headers(h)
                .with_timestamp((now_secs() - 60.0) as u64);
            publish_on(&ch, "", &dlq, format!("m{i}").as_bytes(), props).await;
        }
        let _ = conn.close(200, "done".into()).await;
    });
    wait_for_messages(&dlq, 1000);
    let (c, _, _) = status_json(&f, &["--scan", "1000"]);
    let by = c["deadLetter"]["byErrorClass"]
        .as_object()
        .expect("byErrorClass");
    assert_eq!(by.len(), 1000, "status shows every raw class");

    let series = class_series(&exporter_reading(&f));
    assert_eq!(
        series,
        [("other".to_owned(), 1000.0)].into_iter().collect(),
        "without rules: built-in names and `other` only"
    );

    f.write_example(|t| {
        t.replace(
            "  deadLetter:\n    name: \"{channel}.dlq\"\n",
            "  deadLetter:
    name: \"{channel}.dlq\"
    classes:
      - {name: poison, errorClass: \"com.acme.Poison*\"}
      - {name: transient_exhausted, errorClass: \"com.acme.Transient*\"}
",
        )
    });
    let scrape = exporter_reading(&f);
    let series = class_series(&scrape);
    assert_eq!(
        series,
        [
            ("other".to_owned(), 800.0),
            ("poison".to_owned(), 100.0),
            ("transient_exhausted".to_owned(), 100.0),
        ]
        .into_iter()
        .collect(),
        "the declared names and `other`"
    );
    assert_eq!(
        scrape
            .lines()
            .filter(|l| l.starts_with("dlq_messages_by_error_class{"))
            .count(),
        3,
        "{scrape}"
    );
    // The exporter's peek left every message.
    assert_eq!(rabbit::count(&dlq), 1000);
}

/// Issue 34: a dead letter that carries no time at all (no `timestamp` property, no headers:
/// as a consumer that republishes it writes it) is never silently without an age. `status`
/// says `unknown` (age null, a note naming the fixes); the exporter with `--peek` publishes
/// the age since it first saw the message, `basis="first-seen"`, growing from one reading to
/// the next, and `dlq_oldest_message_age_known` 0; without `--peek` (depth only) no age and
/// known 0 too. Nothing is consumed.
#[test]
fn a_dead_letter_with_no_time_gets_a_first_seen_age_from_the_exporter() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    block(async {
        let conn = rabbit::amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        publish_on(&ch, "", &dlq, b"{\"order\":1}", BasicProperties::default()).await;
        let _ = conn.close(200, "done".into()).await;
    });
    wait_for_messages(&dlq, 1);

    let (c, _, _) = status_json(&f, &[]);
    let dl = &c["deadLetter"];
    assert_eq!(dl["oldestAgeBasis"], "unknown", "{dl:#}");
    assert!(dl["oldestAgeSeconds"].is_null(), "{dl:#}");
    let notes = dl["notes"].to_string();
    assert!(
        notes.contains("age unknown: none of the 1 message read carries a time")
            && notes.contains("set_header_timestamp"),
        "{notes}"
    );
    let (c, _, _) = status_json(&f, &["--no-peek"]);
    assert_eq!(c["deadLetter"]["oldestAgeBasis"], "unknown");

    let labels = format!(
        "channel=\"{}\",target=\"local-rabbitmq\",backend=\"rabbitmq\",queue=\"{dlq}\",role=\"dead-letter\"",
        f.channel
    );
    let value = |body: &str, key: &str| -> Option<f64> {
        body.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
    };
    let age_key = format!("dlq_oldest_message_age_seconds{{{labels},basis=\"first-seen\"}} ");
    let known_key = format!("dlq_oldest_message_age_known{{{labels}}} ");
    // Bounded: the first reading within 30 s, then a scrape at least 2 s later.
    let exporter = Exporter::start(&f, &["--interval", "1s", "--peek"]);
    let first = exporter.until(Duration::from_secs(30), |b| value(b, &age_key).is_some());
    std::thread::sleep(Duration::from_secs(3));
    let later = exporter.until(Duration::from_secs(30), |b| {
        value(b, &age_key).is_some_and(|a| a >= 2.0)
    });
    drop(exporter);
    let (a1, a2) = (value(&first, &age_key), value(&later, &age_key));
    assert!(
        a1.is_some_and(|a1| a2.is_some_and(|a2| a2 >= a1 + 2.0)),
        "a first-seen age that grows: {a1:?} then {a2:?}\n{later}"
    );
    assert_eq!(value(&later, &known_key), Some(0.0), "{later}");

    // Depth only: no age at all, and said so.
    let exporter = Exporter::start(&f, &["--interval", "1s"]);
    let blind = exporter.until(Duration::from_secs(30), |b| value(b, &known_key).is_some());
    drop(exporter);
    assert_eq!(value(&blind, &known_key), Some(0.0), "{blind}");
    assert!(
        !blind.contains("dlq_oldest_message_age_seconds{"),
        "no age without a read\n{blind}"
    );
    assert_eq!(block(take_all(&dlq)).len(), 1, "nothing consumed");
}

/// Issue 37: the three failure messages of the live group tests, message `i` of group `i % 3`:
/// the class, and an error message whose ids, amounts and names differ from message to message.
fn failure(i: usize) -> (&'static str, String) {
    match i % 3 {
        0 => (
            "com.acme.OrderRefused",
            format!(
                "order {} failed: amount {}.{:02} exceeds limit",
                1000 + i,
                40 + i,
                i % 100
            ),
        ),
        1 => (
            "com.acme.Timeout",
            format!(
                "timeout after {} ms calling inventory-7f3a{:04x}c2e",
                3000 + i,
                i * 7 + 0xa1
            ),
        ),
        _ => (
            "com.acme.InvalidField",
            format!("invalid field \"{}\"", ["sku", "price", "qty"][i % 7 % 3]),
        ),
    }
}

/// The groups of a status document's dead letters: (class, message, count, sample ids).
fn groups_of(dl: &Value) -> Vec<(String, String, u64, Vec<String>)> {
    dl["groups"]
        .as_array()
        .unwrap_or_else(|| panic!("groups in {dl}"))
        .iter()
        .map(|g| {
            (
                g["class"].as_str().unwrap_or_default().to_owned(),
                g["message"].as_str().unwrap_or_default().to_owned(),
                g["count"].as_u64().unwrap_or_default(),
                g["sampleIds"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// The three groups `failure` makes, normalised, each of 100 messages.
fn expected_groups() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "com.acme.OrderRefused",
            "order <n> failed: amount <n> exceeds limit",
        ),
        (
            "com.acme.Timeout",
            "timeout after <n> ms calling inventory-<hex>",
        ),
        ("com.acme.InvalidField", "invalid field <str>"),
    ]
}

/// Issue 37: 300 dead letters of 3 failures, interleaved, differing only in ids, amounts
/// and names: `status --group-by fingerprint --scan 1000` shows exactly 3 groups of 100, and
/// the read took nothing: the depth stands and every message is still there, by id, in order.
#[test]
fn rabbitmq_status_groups_dead_letters_by_fingerprint_and_leaves_every_message() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    rabbit::fill(&dlq, 300, |i| {
        let (class, message) = failure(i);
        let props = BasicProperties::default()
            .with_message_id(ShortString::from(format!("g-{i}")))
            .with_headers(table(&[
                ("dlq-error-class", text(class)),
                ("dlq-error-message", text(&message)),
            ]));
        (format!("body-{i}").into_bytes(), props)
    });
    wait_for_messages(&dlq, 300);
    let (c, _, _) = status_json(
        &f,
        &[
            "--group-by",
            "fingerprint",
            "--scan",
            "1000",
            "--samples",
            "0",
        ],
    );
    let dl = &c["deadLetter"];
    assert_eq!(
        (dl["depth"].clone(), dl["sampled"].clone()),
        (json!(300), json!(300))
    );
    let mut groups = groups_of(dl);
    groups.sort_by_key(|g| g.3.first().cloned());
    let want: Vec<(String, String, u64, Vec<String>)> = expected_groups()
        .into_iter()
        .enumerate()
        .map(|(k, (class, message))| {
            (
                class.to_owned(),
                message.to_owned(),
                100,
                (0..3).map(|j| format!("g-{}", k + 3 * j)).collect(),
            )
        })
        .collect();
    assert_eq!(groups, want, "{}", dl["groups"]);
    for g in dl["groups"].as_array().expect("groups") {
        assert_eq!(g["id"].as_str().map(str::len), Some(12), "{g}");
    }
    // The default output has no groups.
    let (c, _, _) = status_json(&f, &["--scan", "1000", "--samples", "0"]);
    assert!(c["deadLetter"].get("groups").is_none());

    // Nothing consumed: the depth stands, and every message is there by id, in order.
    wait_for_messages(&dlq, 300);
    let ids: Vec<String> = block(take_each(&dlq, |d| {
        d.properties
            .message_id()
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default()
    }));
    assert_eq!(ids, (0..300).map(|i| format!("g-{i}")).collect::<Vec<_>>());
}

/// Issue 37, on Kafka with Spring's headers: 300 records of 3 failures interleaved over 3
/// partitions group as 3 × 100; no offset moves, and every record is read back where it was.
#[test]
fn kafka_status_groups_dead_letters_by_fingerprint_and_moves_no_offset() {
    let Some(f) = kafka::Fixture::applied() else {
        return;
    };
    let dlt = format!("{}-dlt", f.channel);
    let now_ms = (now_secs() * 1000.0) as i64;
    let made: Vec<(i32, String, Vec<u8>, Vec<u8>)> = (0..300)
        .map(|i| {
            let (class, message) = failure(i);
            (
                ((i / 3) % 3) as i32,
                format!("rec-{i}"),
                class.as_bytes().to_vec(),
                message.into_bytes(),
            )
        })
        .collect();
    let records: Vec<Record<'_>> = made
        .iter()
        .enumerate()
        .map(|(i, (p, body, class, message))| {
            (
                *p,
                body.as_str(),
                now_ms - 300_000 + i as i64,
                vec![
                    ("kafka_dlt-exception-fqcn", class.clone()),
                    ("kafka_dlt-exception-message", message.clone()),
                ],
            )
        })
        .collect();
    produce(&dlt, &records);
    let args = [
        "--group-by",
        "fingerprint",
        "--scan",
        "1000",
        "--samples",
        "0",
    ];
    let (first, _, _) = status_json(&f, &args);
    let (second, _, _) = status_json(&f, &args);
    let dl = &first["deadLetter"];
    assert_eq!(
        (dl["depth"].clone(), dl["sampled"].clone()),
        (json!(300), json!(300))
    );
    let summary = |dl: &Value| {
        let mut v: Vec<(String, String, u64)> = groups_of(dl)
            .into_iter()
            .map(|(c, m, n, _)| (c, m, n))
            .collect();
        v.sort();
        v
    };
    let mut want: Vec<(String, String, u64)> = expected_groups()
        .into_iter()
        .map(|(c, m)| (c.to_owned(), m.to_owned(), 100))
        .collect();
    want.sort();
    assert_eq!(summary(dl), want, "{}", dl["groups"]);
    // A second read sees the same groups, ids included: nothing moved.
    assert_eq!(
        first["deadLetter"]["groups"],
        second["deadLetter"]["groups"]
    );
    // Every record is still there, where it was; the sample ids name records of their group.
    let back = kafka::read_from_start(&dlt, 3, 300, Duration::from_secs(1));
    assert_eq!(back.len(), 300);
    let by_id: std::collections::BTreeMap<String, String> = back
        .iter()
        .map(|(p, o, b)| (format!("{p}/{o}"), b.clone()))
        .collect();
    let mut bodies: Vec<&String> = by_id.values().collect();
    bodies.sort();
    let mut made_bodies: Vec<&String> = made.iter().map(|r| &r.1).collect();
    made_bodies.sort();
    assert_eq!(bodies, made_bodies);
    for (class, _, _, ids) in groups_of(dl) {
        assert_eq!(ids.len(), 3);
        for id in ids {
            let body = by_id.get(&id).unwrap_or_else(|| panic!("{id} read back"));
            let i: usize = body.trim_start_matches("rec-").parse().expect("rec-N");
            assert_eq!(failure(i).0, class, "{id}: {body}");
        }
    }
}
