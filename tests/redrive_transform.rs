//! Issue 37, live on every backend: `redrive --transform`, repairing dead letters on their way
//! back. N dead letters whose producer wrote the amount as text (`"amount": "12.34"`, the bug
//! the consumer dead-lettered them for), every tenth with an amount no program can read
//! (`"n/a"`), each with a `tenant` and a `trace-id` header, are put in by third-party clients
//! (lapin, rdkafka, the AWS SDK, Pub/Sub's REST API). The program `.body.amount |= tonumber`
//! and a header change:
//! - a program that does not compile is one line, before anything is read;
//! - the dry run shows the diff of the first `--samples` copies (the amount, the headers) and
//!   counts the messages the program fails on, exactly;
//! - the run moves exactly the others, each once; the consumer reads every copy with a
//!   number for its amount, the header removed, the new one set, the others kept, and
//!   `dlq-redrive-count` 1;
//! - the audit record holds for each moved message the sha256 of it as put and of the copy as
//!   received (both computed here again, from what the test put and what the consumer read);
//! - the messages it failed on stay in the dead-letter queue, exactly those, reported by
//!   count (the run is not "complete": exit 1); a program that handles them moves them next;
//! - (issue 52) `env`, `$ENV`, `halt`, `halt_error` and `input` are refused before anything is
//!   read; on RabbitMQ, a program past its time, memory or stack budget fails each message,
//!   reported, with nothing published, and a copy keeps every byte its program did not change.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use lapin::BasicProperties;
use lapin::types::ShortString;
use serde_json::{Value, json};
use support::redrive::redrive;
use support::workspace::Workspace;
use support::{block, kafka, pubsub, rabbit, sqs};

/// The repair: the amount as a number, the trace header dropped, a marker set.
const PROGRAM: &str =
    r#".body.amount |= tonumber | .headers |= (del(."trace-id") | .repaired = "yes")"#;

/// The repair of what is left: an amount that is not a number becomes 0.
const LENIENT: &str = r#".body.amount |= (tonumber? // 0)"#;

/// One dead letter as the test put it: its order number, body and headers (all text).
struct Dead {
    order: usize,
    body: String,
    headers: Vec<(String, String)>,
}

impl Dead {
    /// Whether the program fails on it (its amount is not a number).
    fn unreadable(&self) -> bool {
        self.order.is_multiple_of(10)
    }
}

fn letters(n: usize) -> Vec<Dead> {
    (0..n)
        .map(|i| {
            let amount = if i.is_multiple_of(10) {
                "n/a".to_owned()
            } else {
                format!("{}.{:02}", i, i % 100)
            };
            Dead {
                order: i,
                body: json!({"order": i, "amount": amount}).to_string(),
                headers: vec![
                    ("dlq-error-class".into(), "com.acme.BadAmount".into()),
                    ("tenant".into(), "acme".into()),
                    ("trace-id".into(), format!("t-{i}")),
                ],
            }
        })
        .collect()
}

/// dlqctl's print of a message (docs/redrive.md, "Repairing messages"), computed here again: sha256 of its headers
/// sorted (`name: value` and a newline each), an empty line, then the body.
fn print(headers: &[(String, String)], body: &[u8]) -> String {
    use sha2::Digest;
    let mut sorted: Vec<&(String, String)> = headers.iter().collect();
    sorted.sort();
    let mut h = sha2::Sha256::new();
    for (k, v) in sorted {
        h.update(format!("{k}: {v}\n").as_bytes());
    }
    h.update(b"\n");
    h.update(body);
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// A copy as the consumer read it: body and headers.
type Copy = (Vec<u8>, BTreeMap<String, String>);

/// Puts every dead letter in the DLQ.
type Put<'a> = Box<dyn Fn(&[Dead]) + 'a>;

struct Backend<'a> {
    ws: &'a Workspace,
    n: usize,
    put: Put<'a>,
    /// Takes `want` copies from the main queue or topic, as its consumer would.
    take_main: Box<dyn Fn(usize) -> Vec<Copy> + 'a>,
    /// Takes what is left in the DLQ (`want` expected); `None` where a redrive leaves the
    /// records in place (Kafka: a dry run then counts what is left).
    take_dlq: Option<Box<dyn Fn(usize) -> Vec<Copy> + 'a>>,
    /// Waits until the backend's own figures show `n` dead letters and none held.
    settle: Box<dyn Fn(usize) + 'a>,
    /// Whether a dry run reads the whole DLQ (SQS's reads one receive of 10).
    reads_all: bool,
}

fn order_of(body: &[u8]) -> usize {
    let v: Value = serde_json::from_slice(body).expect("a JSON body");
    v["order"].as_u64().expect("order") as usize
}

fn scenario(b: &Backend<'_>) {
    let n = b.n;
    let all = letters(n);
    (b.put)(&all);
    let scan = n.to_string();
    let failing: BTreeSet<usize> = all
        .iter()
        .filter(|d| d.unreadable())
        .map(|d| d.order)
        .collect();
    let fixable: BTreeSet<usize> = all
        .iter()
        .filter(|d| !d.unreadable())
        .map(|d| d.order)
        .collect();

    // A program that does not compile: one line, nothing read.
    let out = b.ws.run(&[
        "redrive",
        b.ws.channel.as_str(),
        "channel.yaml",
        "--yes",
        "--transform",
        ".body.amount |=",
    ]);
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("--transform"), "{}", out.stderr);
    assert!(out.stderr.contains("column 16 (the end)"), "{}", out.stderr);
    // Issue 52, M6 and H3: what reads the environment or ends the process is refused the
    // same way, before anything is read (the messages are all still there below).
    for (program, undefined) in [
        ("env.AWS_SECRET_ACCESS_KEY", "undefined filter `env/0`"),
        (
            ".body.note = $ENV.AWS_SECRET_ACCESS_KEY",
            "undefined variable `$ENV`",
        ),
        ("halt", "undefined filter `halt/0`"),
        ("halt_error(1)", "undefined filter `halt_error/1`"),
        (".body = input", "undefined filter `input/0`"),
    ] {
        let out = b.ws.run(&[
            "redrive",
            b.ws.channel.as_str(),
            "channel.yaml",
            "--yes",
            "--transform",
            program,
        ]);
        assert_ne!(out.code, 0, "{program}: {}", out.stderr);
        assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
        assert!(out.stderr.contains(undefined), "{program}: {}", out.stderr);
        assert!(!out.stdout.contains("moved"), "{program}: {}", out.stdout);
    }

    // The dry run: the diffs of two copies, and the failures counted exactly.
    (b.settle)(n);
    let (code, dry, err) = redrive(
        b.ws,
        &[
            "--dry-run",
            "--transform",
            PROGRAM,
            "--samples",
            "2",
            "--scan",
            &scan,
        ],
    );
    assert_eq!(code, 0, "{dry}\n{err}");
    let t = &dry["transform"];
    assert_eq!(t["program"], json!(PROGRAM), "{dry}");
    if b.reads_all {
        assert_eq!(
            dry["wouldMove"]["count"].as_u64(),
            Some(fixable.len() as u64),
            "{dry}"
        );
        assert_eq!(
            t["failed"]["count"].as_u64(),
            Some(failing.len() as u64),
            "{dry}"
        );
    }
    let diffs = t["diffs"].as_array().expect("diffs");
    assert_eq!(diffs.len(), 2, "{dry}");
    for d in diffs {
        let d = d["diff"].as_str().expect("a diff");
        for want in ["+  \"amount\": ", "-trace-id: t-", "+repaired: yes"] {
            assert!(d.contains(want), "{want}:\n{d}");
        }
        assert!(
            d.contains("-  \"amount\": \""),
            "the text amount goes:\n{d}"
        );
        assert!(!d.contains("-tenant"), "tenant is kept:\n{d}");
    }
    // People see the diff too.
    let human = b.ws.run(&[
        "redrive",
        b.ws.channel.as_str(),
        "channel.yaml",
        "--dry-run",
        "--transform",
        PROGRAM,
        "--samples",
        "1",
        "--scan",
        &scan,
    ]);
    assert_eq!(human.code, 0, "{}", human.stderr);
    assert!(human.stdout.contains("(--transform):"), "{}", human.stdout);
    assert!(human.stdout.contains("+repaired: yes"), "{}", human.stdout);
    if b.reads_all {
        assert!(
            human
                .stdout
                .contains(&format!("--transform failed on {} messages", failing.len())),
            "{}",
            human.stdout
        );
    }

    // The run: exactly the fixable ones move; the others stay, reported.
    (b.settle)(n);
    let (code, run, err) = redrive(b.ws, &["--yes", "--transform", PROGRAM]);
    assert_eq!(code, 1, "not complete: some stayed\n{run}\n{err}");
    assert!(run["error"].is_null(), "{run}");
    assert_eq!(run["moved"].as_u64(), Some(fixable.len() as u64), "{run}");
    let t = &run["transform"];
    assert_eq!(
        t["failed"]["count"].as_u64(),
        Some(failing.len() as u64),
        "{run}"
    );
    assert_eq!(t["moved"].as_u64(), Some(fixable.len() as u64), "{run}");
    let first = t["failed"]["firstError"].as_str().expect("firstError");
    assert!(
        !first.contains("n/a"),
        "no value of a message is shown: {first}"
    );
    let incomplete = run["incomplete"].to_string();
    assert!(incomplete.contains("--transform failed on"), "{run}");

    // The consumer reads every copy, fixed.
    let copies = (b.take_main)(fixable.len());
    let got: Vec<usize> = copies.iter().map(|(body, _)| order_of(body)).collect();
    let got_set: BTreeSet<usize> = got.iter().copied().collect();
    assert_eq!(got.len(), got_set.len(), "each once");
    assert_eq!(got_set, fixable, "exactly the fixable ones");
    let mut after_prints = BTreeSet::new();
    for (body, headers) in &copies {
        let v: Value = serde_json::from_slice(body).expect("JSON");
        let i = v["order"].as_u64().expect("order") as usize;
        let want = format!("{}.{:02}", i, i % 100).parse::<f64>().expect("f64");
        assert_eq!(v["amount"].as_f64(), Some(want), "a number now: {v}");
        assert!(!headers.contains_key("trace-id"), "{headers:?}");
        assert_eq!(headers.get("repaired").map(String::as_str), Some("yes"));
        assert_eq!(headers.get("tenant").map(String::as_str), Some("acme"));
        assert_eq!(
            headers.get("dlq-redrive-count").map(String::as_str),
            Some("1")
        );
        // The copy as the program made it: what was received, less the counter and the run's
        // stamp dlqctl adds (docs/envelope.md).
        let made: Vec<(String, String)> = headers
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "dlq-redrive-count" | "dlq-redrive-run"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        after_prints.insert(print(&made, body));
    }
    let record = t["messages"].as_array().expect("messages");
    assert_eq!(record.len(), fixable.len(), "{run}");
    let before: BTreeSet<String> = record
        .iter()
        .map(|m| m["before"].as_str().expect("before").to_owned())
        .collect();
    let after: BTreeSet<String> = record
        .iter()
        .map(|m| m["after"].as_str().expect("after").to_owned())
        .collect();
    let put: BTreeSet<String> = all
        .iter()
        .filter(|d| !d.unreadable())
        .map(|d| print(&d.headers, d.body.as_bytes()))
        .collect();
    assert_eq!(before, put, "the prints of the messages as put");
    assert_eq!(after, after_prints, "the prints of the copies as received");

    // What it failed on stayed, exactly; a program that handles it moves it next.
    match &b.take_dlq {
        Some(_) => {}
        None => {
            let (code, dry, err) = redrive(
                b.ws,
                &["--dry-run", "--transform", PROGRAM, "--scan", &scan],
            );
            assert_eq!(code, 0, "{dry}\n{err}");
            assert_eq!(dry["wouldMove"]["count"].as_u64(), Some(0), "{dry}");
            assert_eq!(
                dry["transform"]["failed"]["count"].as_u64(),
                Some(failing.len() as u64),
                "{dry}"
            );
        }
    }
    (b.settle)(failing.len());
    let (code, last, err) = redrive(b.ws, &["--yes", "--transform", LENIENT]);
    assert_eq!(code, 0, "{last}\n{err}");
    assert_eq!(last["moved"].as_u64(), Some(failing.len() as u64), "{last}");
    let rest = (b.take_main)(failing.len());
    let rest_set: BTreeSet<usize> = rest.iter().map(|(body, _)| order_of(body)).collect();
    assert_eq!(rest_set, failing, "the ones that stayed, moved now");
    for (body, _) in &rest {
        let v: Value = serde_json::from_slice(body).expect("JSON");
        assert_eq!(v["amount"], json!(0), "{v}");
    }
    if let Some(take) = &b.take_dlq {
        assert!(take(0).is_empty(), "the dead-letter queue is empty");
    }
}

// ------------------------------------------------------------------------------ RabbitMQ

#[test]
fn rabbitmq_transform_repairs_the_copies_and_leaves_what_it_fails_on() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    scenario(&Backend {
        ws: &f,
        n: 200,
        put: Box::new(|all| {
            rabbit::fill(&dlq, all.len(), |i| {
                let d = &all[i];
                let pairs: Vec<(&str, lapin::types::AMQPValue)> = d
                    .headers
                    .iter()
                    .map(|(k, v)| (k.as_str(), rabbit::text(v)))
                    .collect();
                let props = BasicProperties::default()
                    .with_message_id(ShortString::from(format!("o-{}", d.order)))
                    .with_headers(rabbit::table(&pairs));
                (d.body.clone().into_bytes(), props)
            });
            rabbit::wait_for_messages(&dlq, all.len() as u64);
        }),
        take_main: Box::new(|_| block(rabbit::take_all(&main))),
        take_dlq: Some(Box::new(|_| block(rabbit::take_all(&dlq)))),
        settle: Box::new(|n| {
            rabbit::wait_for(
                &dlq,
                "messages_ready,messages_unacknowledged",
                &format!("settled at {n}"),
                |q| {
                    q["messages_ready"].as_u64() == Some(n as u64)
                        && q["messages_unacknowledged"].as_u64() == Some(0)
                },
            )
        }),
        reads_all: true,
    });
}

// ------------------------------------------------------------------------------ Kafka

#[test]
fn kafka_transform_repairs_the_copies_and_leaves_what_it_fails_on() {
    use rdkafka::Message;
    use rdkafka::consumer::{CommitMode, Consumer};
    use rdkafka::message::Headers;
    let Some(f) = kafka::Fixture::applied() else {
        return;
    };
    let dlt = format!("{}-dlt", f.channel);
    let main = f.channel.clone();
    let group = format!("{}-consumer", f.channel);
    scenario(&Backend {
        ws: &f,
        n: 200,
        put: Box::new(|all| {
            use rdkafka::message::{Header, OwnedHeaders};
            use rdkafka::producer::{FutureProducer, FutureRecord};
            let producer: FutureProducer = kafka::producer(&[]);
            block(async {
                for d in all {
                    let mut h = OwnedHeaders::new();
                    for (k, v) in &d.headers {
                        h = h.insert(Header {
                            key: k.as_str(),
                            value: Some(v.as_bytes()),
                        });
                    }
                    producer
                        .send(
                            FutureRecord::<(), _>::to(&dlt).payload(&d.body).headers(h),
                            Duration::from_secs(10),
                        )
                        .await
                        .map_err(|(e, _)| e)
                        .expect("produce");
                }
            });
        }),
        take_main: Box::new(|want| {
            let consumer = kafka::consumer(&group, &[("auto.offset.reset", "earliest")]);
            consumer.subscribe(&[main.as_str()]).expect("subscribe");
            let mut out = Vec::new();
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while out.len() < want && std::time::Instant::now() < deadline {
                if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
                    let headers: BTreeMap<String, String> = m
                        .headers()
                        .map(|h| {
                            h.iter()
                                .map(|x| {
                                    (
                                        x.key.to_owned(),
                                        String::from_utf8_lossy(x.value.unwrap_or_default())
                                            .into_owned(),
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    out.push((m.payload().unwrap_or_default().to_vec(), headers));
                    consumer
                        .commit_message(&m, CommitMode::Sync)
                        .expect("commit");
                }
            }
            if let Some(Ok(m)) = consumer.poll(Duration::from_secs(1)) {
                panic!("an unexpected record at {}/{}", m.partition(), m.offset());
            }
            out
        }),
        take_dlq: None,
        settle: Box::new(|_| ()),
        reads_all: true,
    });
}

// ------------------------------------------------------------------------------ SQS

#[test]
fn sqs_transform_repairs_the_copies_and_leaves_what_it_fails_on() {
    use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let [main, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    let attr = |v: &str| {
        MessageAttributeValue::builder()
            .data_type("String")
            .string_value(v)
            .build()
            .expect("attribute")
    };
    let copies = |got: Vec<(String, BTreeMap<String, String>)>| -> Vec<Copy> {
        got.into_iter().map(|(b, h)| (b.into_bytes(), h)).collect()
    };
    scenario(&Backend {
        ws: &f,
        // moto serves receives from one thread: 60 keep the run short.
        n: 60,
        put: Box::new(|all| {
            let url = aws.url(&dlq);
            block(async {
                for chunk in all.chunks(10) {
                    let entries = chunk
                        .iter()
                        .map(|d| {
                            let mut e = SendMessageBatchRequestEntry::builder()
                                .id(format!("o{}", d.order))
                                .message_body(&d.body);
                            for (k, v) in &d.headers {
                                e = e.message_attributes(k, attr(v));
                            }
                            e.build().expect("entry")
                        })
                        .collect();
                    aws.send_batch(&url, entries).await;
                }
            });
        }),
        take_main: Box::new(|want| copies(aws.take(&main, want))),
        take_dlq: Some(Box::new(|want| copies(aws.take(&dlq, want)))),
        settle: Box::new(|_| ()),
        reads_all: false,
    });
}

// ------------------------------------------------------------------------------ Pub/Sub

#[test]
fn pubsub_transform_repairs_the_copies_and_leaves_what_it_fails_on() {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let Some(f) = pubsub::Fixture::new() else {
        return;
    };
    f.write_example(|t| f.example(t));
    f.apply(&[]).ok();
    let dlt = format!("{}-dlt", f.channel);
    let dl_sub = format!("{}-dlt-sub", f.channel);
    let sub = f.subscription();
    scenario(&Backend {
        ws: &f,
        n: 200,
        put: Box::new(|all| {
            let messages: Vec<Value> = all
                .iter()
                .map(|d| {
                    let attributes: serde_json::Map<String, Value> = d
                        .headers
                        .iter()
                        .map(|(k, v)| (k.clone(), json!(v)))
                        .collect();
                    json!({"data": b64(&d.body), "attributes": attributes})
                })
                .collect();
            f.rest.ok(
                reqwest::Method::POST,
                &format!("topics/{dlt}:publish"),
                json!({ "messages": messages }),
            );
        }),
        take_main: Box::new(|want| f.rest.take(&sub, want)),
        take_dlq: Some(Box::new(|want| f.rest.take(&dl_sub, want))),
        settle: Box::new(|_| ()),
        reads_all: true,
    });
}

// ------------------------------------------------------------------------------ Issue 52

/// Every message of `queue`, each by its `message_id` with its body, taken (acknowledged).
fn by_id(queue: &str) -> BTreeMap<String, Vec<u8>> {
    block(rabbit::take_each(queue, |d| {
        (
            d.properties
                .message_id()
                .as_ref()
                .map(|s| s.to_string())
                .unwrap_or_default(),
            d.data.clone(),
        )
    }))
    .into_iter()
    .collect()
}

/// Waits until `queue` holds `n` messages, none held by a consumer.
fn settled(queue: &str, n: u64) {
    rabbit::wait_for(
        queue,
        "messages_ready,messages_unacknowledged",
        &format!("settled at {n}"),
        |q| {
            q["messages_ready"].as_u64() == Some(n)
                && q["messages_unacknowledged"].as_u64() == Some(0)
        },
    )
}

/// Issue 52, H3: a program that never ends, allocates without bound or recurses without end
/// fails on each message on its budget, named in the report; the run ends (exit 1, not
/// complete), in bounded time, with nothing published and every message still in the DLQ,
/// counted by id.
#[test]
fn rabbitmq_a_program_past_its_budget_fails_each_message_and_the_run_reports_it() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    let n = 3;
    rabbit::fill(&dlq, n, |i| {
        (
            json!({"order": i}).to_string().into_bytes(),
            BasicProperties::default().with_message_id(ShortString::from(format!("b-{i}"))),
        )
    });
    rabbit::wait_for_messages(&dlq, n as u64);
    for (flag, program) in [
        ("--where", "last(repeat(1))"),
        ("--where", "[range(1e9)] | length > 0"),
        ("--where", "def f: f + 1; f"),
        ("--transform", "last(repeat(.))"),
        ("--transform", "[range(1e9)] as $x | ."),
    ] {
        settled(&dlq, n as u64);
        let started = std::time::Instant::now();
        let (code, run, err) = redrive(&f, &["--yes", flag, program]);
        let said = format!("{flag} {program}:\n{run}\n{err}");
        assert_eq!(code, 1, "not complete: {said}");
        assert!(run["error"].is_null(), "{said}");
        assert_eq!(run["moved"].as_u64(), Some(0), "{said}");
        let failed = if flag == "--where" {
            &run["whereFailures"]
        } else {
            &run["transform"]["failed"]
        };
        assert_eq!(failed["count"].as_u64(), Some(n as u64), "{said}");
        let first = failed["firstError"].as_str().expect("firstError");
        assert!(first.contains(flag) && first.contains("budget"), "{said}");
        let incomplete = run["incomplete"].to_string();
        assert!(incomplete.contains(flag), "{said}");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "bounded: {:?} {said}",
            started.elapsed()
        );
    }
    // Nothing published, nothing lost: the three, each once, by id.
    settled(&dlq, n as u64);
    assert!(
        block(rabbit::take_all(&main)).is_empty(),
        "nothing published"
    );
    let left = by_id(&dlq);
    let want: BTreeSet<String> = (0..n).map(|i| format!("b-{i}")).collect();
    assert_eq!(left.keys().cloned().collect::<BTreeSet<_>>(), want);
}

/// Issue 52, H2 and M7: a transform changes only what its program changed. Read back with
/// lapin, byte for byte: the copy keeps every number as written; a body whose changed object
/// gives a key twice, and a body that is not UTF-8, fail the transform and stay as they were.
#[test]
fn rabbitmq_transform_keeps_every_byte_it_did_not_change() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    let numbers = r#"{"amount": 12345678901234567890123, "cents": 0.1000000000000000055511151231257827, "u64": 18446744073709551616, "exp": 1e2, "neg0": -0"#;
    let bodies: Vec<(&str, Vec<u8>)> = vec![
        (
            "exact",
            format!("{numbers}, \"zeta\": [1.0, 2e-3]}}").into_bytes(),
        ),
        (
            "nested",
            format!(r#"{{"order": {numbers}, "dupkey": 1, "dupkey": 2}}, "note": "x"}}"#)
                .into_bytes(),
        ),
        (
            "dupkey",
            format!(r#"{numbers}, "dupkey": 1, "dupkey": 2}}"#).into_bytes(),
        ),
        ("latin1", b"caf\xe9 ORDER".to_vec()),
    ];
    rabbit::fill(&dlq, bodies.len(), |i| {
        (
            bodies[i].1.clone(),
            BasicProperties::default().with_message_id(ShortString::from(bodies[i].0)),
        )
    });
    rabbit::wait_for_messages(&dlq, bodies.len() as u64);
    settled(&dlq, bodies.len() as u64);
    let program = r#"if (.body | type) == "string" then .body |= ascii_downcase else .body.note = "fixed" end"#;
    let (code, run, err) = redrive(&f, &["--yes", "--transform", program]);
    assert_eq!(code, 1, "two stay: {run}\n{err}");
    assert_eq!(run["moved"].as_u64(), Some(2), "{run}");
    assert_eq!(
        run["transform"]["failed"]["count"].as_u64(),
        Some(2),
        "{run}"
    );
    let copies = by_id(&main);
    let text = |id: &str| String::from_utf8_lossy(&copies[id]).into_owned();
    assert_eq!(
        text("exact"),
        r#"{"amount":12345678901234567890123,"cents":0.1000000000000000055511151231257827,"u64":18446744073709551616,"exp":1e2,"neg0":-0,"zeta":[1.0, 2e-3],"note":"fixed"}"#
    );
    assert_eq!(
        text("nested"),
        format!(r#"{{"order":{numbers}, "dupkey": 1, "dupkey": 2}},"note":"fixed"}}"#)
    );
    settled(&dlq, 2);
    let stayed = by_id(&dlq);
    assert_eq!(stayed.len(), 2, "{stayed:?}");
    assert_eq!(stayed["dupkey"], bodies[2].1, "as it was");
    assert_eq!(stayed["latin1"], bodies[3].1, "as it was");
}
