//! Issue 37, header hygiene: `deadLetter.redrive: {dropHeaders, keepHeaders}` and the default
//! list of replication and tracing headers, live on every backend. Dead letters are put in
//! by each backend's third-party client (lapin, the AWS SDK, rdkafka, Pub/Sub's REST API)
//! with a declared header, a default-dropped replication header (`__mskmr`, MSK
//! Replicator's) and tracing header (`tracestate`), a header `keepHeaders` keeps over the
//! defaults (`traceparent`) and one it keeps over `dropHeaders`; they are archived (kept in
//! the DLQ), redriven, and replayed from the archive. Every copy of both runs, read back by
//! its body with the same client, lacks exactly the dropped headers and carries the kept
//! ones, with `dlq-redrive-count: 1`.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use lapin::BasicProperties;
use serde_json::{Value, json};
use support::redrive::{archive_ok, redrive_ok};
use support::workspace::Workspace;
use support::{block, kafka, pubsub, rabbit, sqs};

/// Dead letters per backend.
const N: usize = 4;

const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// What every dead letter carries besides its `order-id` (its index).
const HEADERS: [(&str, &str); 7] = [
    ("dlq-error-class", "poison"),
    // `dropHeaders: ["x-internal-*", x-tenant]`
    ("x-internal-route", "eu-1"),
    ("X-Tenant", "t-1"),
    // `keepHeaders` over `dropHeaders`.
    ("x-internal-keep", "yes"),
    // The default list: kept by `keepHeaders`, dropped, dropped.
    ("traceparent", TRACEPARENT),
    ("tracestate", "vendor=1"),
    ("__mskmr", "source-cluster/orders"),
];

/// Headers no copy may carry (compared without regard to case).
const DROPPED: [&str; 4] = ["x-internal-route", "x-tenant", "tracestate", "__mskmr"];

/// The spec's `deadLetter` block with the channel's header lists.
fn with_lists(spec: String) -> String {
    assert!(spec.contains("  deadLetter:\n"), "{spec}");
    spec.replacen(
        "  deadLetter:\n",
        "  deadLetter:\n    redrive:\n      dropHeaders: [\"x-internal-*\", x-tenant]\n      keepHeaders: [x-internal-keep, traceparent]\n",
        1,
    )
}

fn body(i: usize) -> String {
    format!("order-{i}")
}

/// The headers of dead letter `i`, as its producer sets them.
fn headers(i: usize) -> Vec<(String, String)> {
    HEADERS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .chain([("order-id".to_owned(), i.to_string())])
        .collect()
}

/// A message as a third party reads it back: body and headers (values as text).
type Read = (String, BTreeMap<String, String>);

/// What each backend supplies: put dead letter `i`, wait until `status` sees them all, and
/// take `n` messages off the main queue or topic (bodies as text, header values as text).
struct Backend<'a> {
    ws: &'a Workspace,
    put: Box<dyn Fn(usize) + 'a>,
    settle: Box<dyn Fn() + 'a>,
    take_main: Box<dyn Fn(usize) -> Vec<Read> + 'a>,
}

/// Every copy once, by body; none with a dropped header; each with the kept ones intact.
fn assert_copies(what: &str, copies: &[Read]) {
    let bodies: BTreeSet<&str> = copies.iter().map(|(b, _)| b.as_str()).collect();
    let want: BTreeSet<String> = (0..N).map(body).collect();
    assert_eq!(
        bodies,
        want.iter().map(String::as_str).collect(),
        "{what}: every dead letter once: {copies:?}"
    );
    assert_eq!(copies.len(), N, "{what}: {copies:?}");
    for (b, h) in copies {
        for d in DROPPED {
            assert!(
                !h.keys().any(|k| k.eq_ignore_ascii_case(d)),
                "{what}: `{d}` is dropped, but {b} carries it: {h:?}"
            );
        }
        let i = b.trim_start_matches("order-");
        for (k, v) in [
            ("dlq-error-class", "poison"),
            ("x-internal-keep", "yes"),
            ("traceparent", TRACEPARENT),
            ("order-id", i),
            ("dlq-redrive-count", "1"),
        ] {
            assert_eq!(h.get(k).map(String::as_str), Some(v), "{what}: {b}: {h:?}");
        }
    }
}

fn scenario(b: &Backend<'_>) {
    for i in 0..N {
        (b.put)(i);
    }
    (b.settle)();
    // Archived first, and kept in the dead-letter queue for the redrive.
    let dir = b.ws.path().join("archive");
    let to = dir.to_str().expect("utf-8 path").to_owned();
    let doc = archive_ok(b.ws, &["--to", &to]);
    assert_eq!(doc["archived"], json!(N), "{doc}");

    let doc = redrive_ok(b.ws, &["--yes"]);
    assert_eq!(doc["moved"], json!(N), "{doc}");
    assert_copies("redrive", &(b.take_main)(N));

    let doc = redrive_ok(b.ws, &["--from-archive", &to, "--yes"]);
    assert_eq!(doc["moved"], json!(N), "{doc}");
    assert_copies("replay from the archive", &(b.take_main)(N));
}

#[test]
fn rabbitmq_copies_drop_the_declared_and_default_headers_and_keep_the_kept_ones() {
    let Some(f) = rabbit::Fixture::applied_with(with_lists) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    scenario(&Backend {
        ws: &f,
        put: Box::new(|i| {
            let pairs: Vec<(String, String)> = headers(i);
            let values: Vec<(&str, lapin::types::AMQPValue)> = pairs
                .iter()
                .map(|(k, v)| (k.as_str(), rabbit::text(v)))
                .collect();
            block(rabbit::publish_with(
                "",
                &dlq,
                body(i).as_bytes(),
                BasicProperties::default().with_headers(rabbit::table(&values)),
            ));
        }),
        settle: Box::new(|| rabbit::wait_for_messages(&dlq, N as u64)),
        take_main: Box::new(|_| {
            block(rabbit::take_all(&main))
                .into_iter()
                .map(|(b, h)| (String::from_utf8_lossy(&b).into_owned(), h))
                .collect()
        }),
    });
}

#[test]
fn sqs_copies_drop_the_declared_and_default_attributes_and_keep_the_kept_ones() {
    let Some(f) = sqs::Fixture::applied_with(with_lists) else {
        return;
    };
    let [main, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    scenario(&Backend {
        ws: &f,
        put: Box::new(|i| {
            use aws_sdk_sqs::types::MessageAttributeValue;
            let mut req = aws
                .sqs
                .send_message()
                .queue_url(aws.url(&dlq))
                .message_body(body(i));
            for (k, v) in headers(i) {
                let a = MessageAttributeValue::builder()
                    .data_type("String")
                    .string_value(v)
                    .build()
                    .expect("attribute");
                req = req.message_attributes(k, a);
            }
            block(req.send()).expect("SendMessage");
        }),
        settle: Box::new(|| ()),
        take_main: Box::new(|n| aws.take(&main, n)),
    });
}

#[test]
fn kafka_copies_drop_the_declared_and_default_headers_and_keep_the_kept_ones() {
    let Some(f) = kafka::Fixture::applied_with(with_lists) else {
        return;
    };
    let dlt = format!("{}-dlt", f.channel);
    let main = kafka::Tail::new(&f.main(), &format!("{}-reader", f.channel));
    scenario(&Backend {
        ws: &f,
        put: Box::new(|i| {
            use rdkafka::message::{Header, OwnedHeaders};
            use rdkafka::producer::{FutureProducer, FutureRecord};
            let producer: FutureProducer = kafka::producer(&[]);
            let pairs = headers(i);
            let mut h = OwnedHeaders::new();
            for (k, v) in &pairs {
                h = h.insert(Header {
                    key: k,
                    value: Some(v.as_bytes()),
                });
            }
            let b = body(i);
            block(producer.send(
                FutureRecord::to(&dlt).key(&b).payload(&b).headers(h),
                std::time::Duration::from_secs(10),
            ))
            .map_err(|(e, _)| e)
            .expect("produce");
        }),
        settle: Box::new(|| ()),
        take_main: Box::new(|n| {
            main.take(n)
                .into_iter()
                .map(|(b, h)| (String::from_utf8_lossy(&b).into_owned(), h))
                .collect()
        }),
    });
}

#[test]
fn pubsub_copies_drop_the_declared_and_default_attributes_and_keep_the_kept_ones() {
    use base64::Engine;
    let Some(f) = pubsub::Fixture::new() else {
        return;
    };
    f.write_example(|t| with_lists(f.example(t)));
    f.apply(&[]).ok();
    let dlt = format!("{}-dlt", f.channel);
    let dl_sub = format!("{}-dlt-sub", f.channel);
    let sub = f.subscription();
    scenario(&Backend {
        ws: &f,
        put: Box::new(|i| {
            let attributes: serde_json::Map<String, Value> = headers(i)
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect();
            f.rest.ok(
                reqwest::Method::POST,
                &format!("topics/{dlt}:publish"),
                json!({"messages": [{
                    "data": base64::engine::general_purpose::STANDARD.encode(body(i)),
                    "attributes": attributes,
                }]}),
            );
        }),
        settle: Box::new(|| {
            let started = std::time::Instant::now();
            while f.rest.count(&dl_sub) < N as u64
                && started.elapsed() < std::time::Duration::from_secs(30)
            {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        }),
        take_main: Box::new(|n| {
            f.rest
                .take(&sub, n)
                .into_iter()
                .map(|(b, h)| (String::from_utf8_lossy(&b).into_owned(), h))
                .collect()
        }),
    });
}
