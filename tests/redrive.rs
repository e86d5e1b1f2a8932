//! `dlqctl redrive`, live on every backend. Dead letters are put in by third-party clients
//! (lapin, the AWS SDK, rdkafka) and read back by them from both sides: a dry run moves
//! nothing; `--limit 5` moves exactly five, bodies and headers intact with
//! `dlq-redrive-count: 1`; `--class` moves only that class; the ping-pong guard skips a
//! message at `maxRedrives`; a destination that refuses stops the run with nothing lost; a
//! second redrive of the same DLQ is refused, naming the first; and a run killed with SIGKILL
//! part-way loses nothing: every message is in the DLQ or the destination afterwards.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use lapin::BasicProperties;
use lapin::types::{AMQPValue, ShortString};
use serde_json::{Value, json};
use support::redrive::{kill_part_way, redrive, redrive_ok, spawn_quiet};
use support::workspace::Workspace;
use support::{block, kafka, rabbit, sqs};

/// A message as a third party reads it back: body and headers (values as text).
type Read = (String, BTreeMap<String, String>);

/// Puts one dead letter: body, error class, times already redriven.
type Put<'a> = Box<dyn Fn(&str, &str, Option<u32>) + 'a>;

/// What each backend's test supplies: put one dead letter, count the DLQ and the main
/// queue, and take everything out of the main queue.
struct Backend<'a> {
    ws: &'a Workspace,
    put: Put<'a>,
    dlq_count: Box<dyn Fn() -> u64 + 'a>,
    take_main: Box<dyn Fn(usize) -> Vec<Read> + 'a>,
    /// Waits until the backend's own figures (what `status` reads) show `n` dead letters.
    settle: Box<dyn Fn(u64) + 'a>,
    /// Whether a redrive can move a message past one it leaves behind (and remember it).
    scattered_moves: bool,
}

fn class_of(i: usize) -> &'static str {
    if i.is_multiple_of(4) {
        "poison"
    } else {
        "transient_exhausted"
    }
}

/// A second `redrive --yes` while `first` (in the background) holds the DLQ, which must be
/// refused (exit 1); `first` is killed after. The report, stderr and the first run's pid.
fn refused_beside(ws: &Workspace, mut first: std::process::Child) -> (Value, String, u32) {
    let (code, doc, err) = redrive(ws, &["--yes"]);
    let _ = first.kill();
    let _ = first.wait();
    assert_eq!(code, 1, "{doc}");
    (doc, err, first.id())
}

/// The scenario every backend passes: 20 dead letters, 5 of class `poison`, the last one
/// already brought back 3 times.
fn scenario(b: &Backend<'_>) {
    for i in 0..20 {
        (b.put)(&format!("m{i:02}"), class_of(i), (i == 19).then_some(3));
    }
    assert_eq!((b.dlq_count)(), 20);
    (b.settle)(20);

    // A dry run reads and says, and moves nothing.
    let (code, dry, _) = redrive(b.ws, &["--dry-run", "--limit", "5"]);
    assert_eq!(code, 0, "{dry}");
    assert_eq!(dry["wouldMove"]["count"], 5, "{dry}");
    assert_eq!(dry["moved"], 0);
    assert_eq!((b.dlq_count)(), 20, "a dry run moves nothing");

    // Exactly five, intact, counted once.
    let doc = redrive_ok(b.ws, &["--limit", "5", "--yes"]);
    assert_eq!(doc["moved"], 5, "{doc}");
    assert_eq!((b.dlq_count)(), 15);
    let moved = (b.take_main)(5);
    assert_eq!(moved.len(), 5, "{moved:?}");
    let mut seen = BTreeSet::new();
    for (body, headers) in &moved {
        let i: usize = body[1..]
            .parse()
            .unwrap_or_else(|_| panic!("a body we sent: {body}"));
        assert!(seen.insert(i), "moved twice: {body}");
        assert_eq!(
            headers.get("dlq-error-class").map(String::as_str),
            Some(class_of(i))
        );
        assert_eq!(
            headers.get("dlq-redrive-count").map(String::as_str),
            Some("1"),
            "{headers:?}"
        );
    }

    // Only poison. Where the broker cannot keep a ledger of records moved past one left
    // behind (the tansu fallback: no commit metadata), fewer may move; never another class.
    let poison_left = (0..20)
        .filter(|i| class_of(*i) == "poison" && !seen.contains(i))
        .count();
    let (code, doc, err) = redrive(b.ws, &["--class", "poison", "--yes"]);
    let moved_poison = doc["moved"].as_u64().expect("moved") as usize;
    if b.scattered_moves {
        assert_eq!(code, 0, "{doc}\n{err}");
        assert_eq!(moved_poison, poison_left, "{doc}");
    } else if moved_poison < poison_left {
        // Stopped short: the run says so (incomplete, exit 1), never "complete".
        assert_eq!(code, 1, "{doc}\n{err}");
        assert!(
            doc["incomplete"].as_array().is_some_and(|a| !a.is_empty()),
            "{doc}"
        );
    } else {
        assert_eq!(code, 0, "{doc}\n{err}");
    }
    let moved = (b.take_main)(moved_poison);
    assert_eq!(moved.len(), moved_poison);
    for (body, headers) in &moved {
        assert_eq!(
            headers.get("dlq-error-class").map(String::as_str),
            Some("poison"),
            "{body}"
        );
        let i: usize = body[1..].parse().unwrap_or(99);
        assert!(seen.insert(i), "moved twice: {body}");
    }
    assert_eq!((b.dlq_count)(), 20 - seen.len() as u64);

    // Everything else but the message at maxRedrives, which is skipped and reported.
    let rest = 20 - seen.len() - 1;
    let doc = redrive_ok(b.ws, &["--yes"]);
    assert_eq!(
        (doc["moved"].clone(), doc["skippedAtMaxRedrives"].clone()),
        (json!(rest), json!(1)),
        "{doc}"
    );
    let moved = (b.take_main)(rest);
    for (body, _) in &moved {
        let i: usize = body[1..].parse().unwrap_or(99);
        assert!(seen.insert(i), "moved twice: {body}");
    }
    assert_eq!(seen.len(), 19);
    assert!(!seen.contains(&19), "the message at maxRedrives stayed");
    assert_eq!(
        (b.dlq_count)(),
        1,
        "only the message at maxRedrives is left"
    );
}

// ------------------------------------------------------------------------------ RabbitMQ

/// The orders example without its exchange: the main queue is reached through the default
/// exchange.
fn without_exchange(spec: String) -> String {
    spec.replace(
        "    exchange: {name: \"{channel}.exchange\", type: direct, routingKeys: [process]}\n",
        "",
    )
}

fn rabbit_put(dlq: &str, body: &str, class: &str, redriven: Option<u32>) {
    // What a consumer by the contract of docs/rabbitmq.md sets when it gives up.
    let mut h = rabbit::table(&[
        ("dlq-error-class", rabbit::text(class)),
        ("dlq-attempts", AMQPValue::LongInt(4)),
    ]);
    if let Some(n) = redriven {
        h.insert(
            ShortString::from("dlq-redrive-count"),
            AMQPValue::LongInt(n as i32),
        );
    }
    block(rabbit::publish_with(
        "",
        dlq,
        body.as_bytes(),
        BasicProperties::default().with_headers(h),
    ));
}

/// Takes every message of a queue, as its consumer would: bodies as text, header values.
fn rabbit_take(queue: &str) -> Vec<Read> {
    block(rabbit::take_all(queue))
        .into_iter()
        .map(|(b, h)| (String::from_utf8_lossy(&b).into_owned(), h))
        .collect()
}

#[test]
fn rabbitmq_redrive_moves_exactly_what_is_selected_and_nothing_else() {
    // No exchange: the main queue is reached through the default exchange.
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    scenario(&Backend {
        ws: &f,
        put: Box::new(|body, class, n| rabbit_put(&dlq, body, class, n)),
        dlq_count: Box::new(|| rabbit::count(&dlq)),
        take_main: Box::new(|_| rabbit_take(&main)),
        settle: Box::new(|n| rabbit::wait_for_messages(&dlq, n)),
        scattered_moves: true,
    });
}

#[test]
fn rabbitmq_redrive_through_the_exchange_keeps_the_routing() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    rabbit_put(&dlq, "r1", "poison", None);
    redrive_ok(&f, &["--yes"]);
    let got = rabbit_take(&main);
    assert_eq!(
        got.len(),
        1,
        "routed by the exchange's binding key to the main queue"
    );
    assert_eq!(got[0].0, "r1");
    // The consumer counts its attempts from `dlq-attempts` first: the copy starts again.
    let headers = &got[0].1;
    assert_eq!(
        (
            headers.get("dlq-attempts"),
            headers.get("dlq-error-class").map(String::as_str)
        ),
        (None, Some("poison")),
        "{headers:?}"
    );
}

/// Issue 18's named dead-letter exchange, in arguments mode with a retry queue: one message
/// rejected at once, one rejected after a trip through the retry queue (the consumer publishes
/// it there itself, as arguments mode needs). Both reach the DLQ through the named exchange;
/// redrive routes both back through the channel's exchange with the key they were first
/// published with, not the one the broker or the retry loop gave them since.
#[test]
fn rabbitmq_redrive_of_dead_letters_from_a_named_dlx_routes_back_through_the_exchange() {
    let Some(f) = rabbit::Fixture::applied_with(|spec| {
        spec.replace(
            "    maxAttempts: 4\n    backoff: {initial: 5s}\n",
            "    maxAttempts: 2\n    backoff: {initial: 500ms}\n",
        )
        .replace(
            "    dlx: policy\n",
            "    dlx: arguments\n    deadLetterExchange: {name: \"{channel}.dlx\", routingKey: \"{channel}.transactions.dead\"}\n",
        )
    }) else {
        return;
    };
    let [main, retry, dlq, exchange] = f.names();
    let (dlx, _) = rabbit::dead_letter_exchange(&f.channel);
    block(async {
        use lapin::options::{BasicAckOptions, BasicGetOptions, BasicRejectOptions};
        let conn = rabbit::amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        let next = || async {
            for _ in 0..200 {
                if let Some(m) = ch
                    .basic_get(main.as_str().into(), BasicGetOptions::default())
                    .await
                    .expect("get")
                {
                    return m;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!("nothing to consume from {main}");
        };
        for body in [&b"at-once"[..], b"after-a-retry"] {
            rabbit::publish_on(&ch, &exchange, "process", body, BasicProperties::default()).await;
        }
        let first = next().await;
        first
            .delivery
            .reject(BasicRejectOptions { requeue: false })
            .await
            .expect("reject");
        let second = next().await;
        rabbit::publish_on(
            &ch,
            "",
            &retry,
            &second.delivery.data,
            second.delivery.properties.clone(),
        )
        .await;
        second
            .delivery
            .ack(BasicAckOptions::default())
            .await
            .expect("ack");
        let again = next().await;
        assert_eq!(again.delivery.data, b"after-a-retry");
        again
            .delivery
            .reject(BasicRejectOptions { requeue: false })
            .await
            .expect("reject");
        let _ = conn.close(200, "done".into()).await;
    });
    rabbit::wait_for_messages(&dlq, 2);
    let doc = redrive_ok(&f, &["--yes"]);
    let mut got: Vec<String> = rabbit_take(&main).into_iter().map(|(b, _)| b).collect();
    got.sort();
    assert_eq!(
        got,
        ["after-a-retry", "at-once"],
        "both routed back by the exchange's binding key (through {dlx} they came)\n{doc}"
    );
    assert_eq!(rabbit::count(&dlq), 0);
}

#[test]
fn rabbitmq_a_refusing_destination_stops_the_run_and_loses_nothing() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    for i in 0..6 {
        rabbit_put(&dlq, &format!("m{i:02}"), "poison", None);
    }
    // Someone caps the main queue at 2 messages, refusing the rest (keeping its dead-letter
    // exchange: a policy without one would displace dlqctl's, and the redrive be refused
    // before the first message).
    block(rabbit::api(
        reqwest::Method::PUT,
        &format!("/api/policies/%2F/{}.cap", f.channel),
        Some(
            json!({"pattern": format!("^{}$", main.replace('.', "\\.")), "apply-to": "queues", "priority": 100,
                    "definition": {"max-length": 2, "overflow": "reject-publish",
                                   "dead-letter-exchange": "", "dead-letter-routing-key": dlq}}),
        ),
    ));
    std::thread::sleep(Duration::from_secs(1));
    let (code, doc, err) = redrive(&f, &["--yes"]);
    assert_eq!(code, 1, "{doc}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("refused"), "{}", lines[0]);
    // Two in the main queue, four in the DLQ: six, none lost.
    let moved = rabbit_take(&main);
    assert_eq!(moved.len(), 2);
    assert_eq!(doc["moved"], 2, "{doc}");
    assert_eq!(rabbit::count(&dlq), 4);
    block(rabbit::api(
        reqwest::Method::DELETE,
        &format!("/api/policies/%2F/{}.cap", f.channel),
        None,
    ));
}

#[test]
fn rabbitmq_a_second_redrive_of_the_same_dlq_is_refused_naming_the_first() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [_, _, dlq, _] = f.names();
    for i in 0..50 {
        rabbit_put(&dlq, &format!("m{i:02}"), "poison", None);
    }
    // The first run moves slowly (2 per second) and holds the DLQ meanwhile.
    let first = spawn_quiet(&f, Some("2"));
    std::thread::sleep(Duration::from_secs(3));
    let (doc, err, pid) = refused_beside(&f, first);
    assert!(
        err.contains("redrive") && err.contains(&format!("pid {pid}")),
        "{err}"
    );
    assert_eq!(doc["moved"], 0);
}

#[test]
fn rabbitmq_a_redrive_killed_part_way_loses_nothing() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    rabbit::fill(&dlq, 5000, |i| {
        (format!("k{i:04}").into_bytes(), BasicProperties::default())
    });
    assert_eq!(rabbit::count(&dlq), 5000);
    let mut run = spawn_quiet(&f, None);
    // Kill it once it has moved some, but not all.
    kill_part_way(
        &mut run,
        Duration::from_secs(30),
        Duration::from_millis(20),
        || rabbit::count(&main) >= 500,
    );
    let moved_first = rabbit::count(&main);
    assert!(
        moved_first > 0 && moved_first < 5000,
        "killed part-way: {moved_first}"
    );
    // A second run finishes the job.
    redrive_ok(&f, &["--yes"]);
    let bodies: Vec<String> = rabbit_take(&main).into_iter().map(|(b, _)| b).collect();
    let left: Vec<String> = rabbit_take(&dlq).into_iter().map(|(b, _)| b).collect();
    let all: BTreeSet<&String> = bodies.iter().chain(&left).collect();
    assert_eq!(
        all.len(),
        5000,
        "every message is in the DLQ or the main queue"
    );
    let duplicates = bodies.len() + left.len() - 5000;
    // At most the two batches in flight when the process died (one settling, the next being
    // published: 2 × 200) may be duplicated.
    assert!(duplicates <= 400, "{duplicates} duplicated");
    // The figures, for the record (`cargo test -- --nocapture`).
    #[allow(clippy::print_stderr)]
    {
        eprintln!("killed after {moved_first} moved; {duplicates} duplicated");
    }
}

/// The DLQ deleted by hand while a slow redrive reads it: the run stops with an error that
/// names the queue, and what it reports moved (or possibly duplicated) is what the main queue
/// holds. (Here the broker closes the channel on the next acknowledgement; a run whose
/// consumer is cancelled with nothing left to acknowledge stops on the cancel itself, a path
/// this test does not reach.)
#[test]
fn rabbitmq_a_dlq_deleted_during_a_redrive_stops_the_run_saying_so() {
    let Some(f) = rabbit::Fixture::applied_with(without_exchange) else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    rabbit::fill(&dlq, 200, |i| {
        (format!("k{i:04}").into_bytes(), BasicProperties::default())
    });
    let run = support::redrive::spawn_json(&f, &["--rate", "20"]);
    let started = std::time::Instant::now();
    while rabbit::count(&main) < 10 && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(rabbit::count(&main) >= 10, "the run moved some first");
    rabbit::delete_queue(&dlq);
    let (code, doc, err) = support::redrive::finish(run, Duration::from_secs(30));
    assert_eq!(code, 1, "{doc}\n{err}");
    let said = doc["error"].as_str().unwrap_or_default();
    assert!(said.contains(&dlq), "the error names the queue: {doc}");
    let moved = doc["moved"].as_u64().expect("moved");
    let unsure = doc["possiblyDuplicated"].as_u64().unwrap_or(0);
    assert!((10..200).contains(&(moved + unsure)), "{doc}");
    let there = rabbit::count(&main);
    assert!(
        moved <= there && there <= moved + unsure,
        "every message reported moved is in the main queue ({there}), and no more than those possibly duplicated beside: {doc}"
    );
}

// ------------------------------------------------------------------------------ SQS

fn sqs_put(aws: &sqs::Aws, queue: &str, body: &str, class: &str, redriven: Option<u32>) {
    use aws_sdk_sqs::types::MessageAttributeValue;
    let attr = |t: &str, v: String| {
        MessageAttributeValue::builder()
            .data_type(t)
            .string_value(v)
            .build()
            .expect("attribute")
    };
    let mut req = aws
        .sqs
        .send_message()
        .queue_url(aws.url(queue))
        .message_body(body)
        .message_attributes("dlq-error-class", attr("String", class.to_owned()));
    if let Some(n) = redriven {
        req = req.message_attributes("dlq-redrive-count", attr("Number", n.to_string()));
    }
    block(req.send()).expect("SendMessage");
}

#[test]
fn sqs_redrive_moves_exactly_what_is_selected_and_nothing_else() {
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let [main, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    scenario(&Backend {
        ws: &f,
        put: Box::new(|body, class, n| sqs_put(&aws, &dlq, body, class, n)),
        dlq_count: Box::new(|| aws.count(&dlq)),
        take_main: Box::new(|n| aws.take(&main, n)),
        settle: Box::new(|_| ()),
        scattered_moves: true,
    });
}

#[test]
fn sqs_a_missing_destination_stops_before_anything_moves() {
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let [_, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    for i in 0..3 {
        sqs_put(&aws, &dlq, &format!("m{i}"), "poison", None);
    }
    let (code, doc, err) = redrive(&f, &["--yes", "--to", "no-such-queue-anywhere"]);
    assert_eq!(code, 1, "{doc}");
    assert!(
        err.contains("the destination queue `no-such-queue-anywhere` does not exist"),
        "{err}"
    );
    assert_eq!(aws.count(&dlq), 3, "nothing moved, nothing hidden");
}

#[test]
fn sqs_a_second_redrive_of_the_same_dlq_is_refused_naming_the_first() {
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let [_, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    for i in 0..30 {
        sqs_put(&aws, &dlq, &format!("m{i:02}"), "poison", None);
    }
    let first = spawn_quiet(&f, Some("2"));
    std::thread::sleep(Duration::from_secs(3));
    let (_, err, pid) = refused_beside(&f, first);
    assert!(
        err.contains("being redriven already, by") && err.contains(&format!("pid {pid}")),
        "{err}"
    );
}

#[test]
fn sqs_a_redrive_killed_part_way_loses_nothing() {
    // 500, not the 5,000 of the RabbitMQ and Kafka tests: moto's ReceiveMessage walks the
    // whole queue (4.3 s per call at 4,700 messages on moto 5.2.5, measured; 1,000 messages
    // took this test 121 s), so 5,000 would take about half an hour here. The guarantee does
    // not depend on the count.
    const N: usize = 500;
    let Some(mut f) = sqs::Fixture::applied() else {
        return;
    };
    // A killed run's held messages reappear after the hold: 5 s here instead of 300.
    f.set_env("DLQCTL_SQS_REDRIVE_HOLD", "5");
    let [main, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    let url = aws.url(&dlq);
    block(async {
        for batch in 0..N / 10 {
            let entries: Vec<_> = (0..10)
                .map(|j| {
                    aws_sdk_sqs::types::SendMessageBatchRequestEntry::builder()
                        .id(j.to_string())
                        .message_body(format!("k{:04}", batch * 10 + j))
                        .build()
                        .expect("entry")
                })
                .collect();
            aws.send_batch(&url, entries).await;
        }
    });
    assert_eq!(aws.count(&dlq), N as u64);
    let mut run = spawn_quiet(&f, None);
    // Kill it once it has moved some, but not all.
    kill_part_way(
        &mut run,
        Duration::from_secs(300),
        Duration::from_millis(100),
        || aws.count(&main) >= 100,
    );
    let moved_first = aws.count(&main);
    assert!(
        moved_first > 0 && moved_first < N as u64,
        "killed part-way: {moved_first}"
    );
    // What the killed run held comes back after the hold; a second run finishes the job (it
    // takes over the lock of a process that is gone).
    std::thread::sleep(Duration::from_secs(6));
    let doc = redrive_ok(&f, &["--yes"]);
    let bodies: Vec<String> = aws.take(&main, N).into_iter().map(|(b, _)| b).collect();
    let left: Vec<String> = aws.take(&dlq, 0).into_iter().map(|(b, _)| b).collect();
    let all: BTreeSet<&String> = bodies.iter().chain(&left).collect();
    assert_eq!(
        all.len(),
        N,
        "every message is in the DLQ or the main queue"
    );
    let duplicates = bodies.len() + left.len() - N;
    // At most the batch in flight when the process died may be duplicated.
    assert!(duplicates <= 10, "{duplicates} duplicated");
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "SQS: killed after {moved_first} moved; the second run moved {}; {duplicates} duplicated",
            doc["moved"]
        );
    }
}

// ------------------------------------------------------------------------------ Kafka

fn kafka_put(topic: &str, body: &str, class: &str, redriven: Option<u32>) {
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let producer: FutureProducer = kafka::producer(&[]);
    let n = redriven.map(|n| n.to_string());
    let mut h = OwnedHeaders::new().insert(Header {
        key: "dlq-error-class",
        value: Some(class.as_bytes()),
    });
    if let Some(n) = &n {
        h = h.insert(Header {
            key: "dlq-redrive-count",
            value: Some(n.as_bytes()),
        });
    }
    // Spread over the DLT's three partitions by key.
    block(producer.send(
        FutureRecord::to(topic).key(body).payload(body).headers(h),
        Duration::from_secs(10),
    ))
    .map_err(|(e, _)| e)
    .expect("produce");
}

/// Reads the main topic as its consumer would: each record once, from where its own group
/// left off.
fn kafka_take(topic: &str, group: &str, want: usize) -> Vec<Read> {
    use rdkafka::Message;
    use rdkafka::consumer::{CommitMode, Consumer};
    let consumer = kafka::consumer(group, &[("auto.offset.reset", "earliest")]);
    consumer.subscribe(&[topic]).expect("subscribe");
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while out.len() < want && std::time::Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            out.push((
                String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
                kafka::headers_text(&m),
            ));
            consumer
                .commit_message(&m, CommitMode::Sync)
                .expect("commit");
        }
    }
    // Nothing beyond what was expected.
    if let Some(Ok(m)) = consumer.poll(Duration::from_secs(1)) {
        panic!("an unexpected record at {}/{}", m.partition(), m.offset());
    }
    out
}

#[test]
fn kafka_redrive_moves_exactly_what_is_selected_and_nothing_else() {
    let Some(f) = kafka::Fixture::applied() else {
        return;
    };
    let dlt = format!("{}-dlt", f.channel);
    let main = f.channel.clone();
    let reader = format!("{}-consumer", f.channel);
    scenario(&Backend {
        ws: &f,
        put: Box::new(|body, class, n| kafka_put(&dlt, body, class, n)),
        dlq_count: Box::new(|| kafka::waiting(&f)),
        take_main: Box::new(|n| kafka_take(&main, &reader, n)),
        settle: Box::new(|_| ()),
        // The ledger of records moved past one left behind lives in the commit's metadata:
        // Apache Kafka keeps it, so every poison record moves; the tansu fallback drops it.
        scattered_moves: !kafka::on_tansu(),
    });
}

#[test]
fn kafka_a_missing_destination_stops_before_anything_moves() {
    let Some(f) = kafka::Fixture::applied() else {
        return;
    };
    let dlt = format!("{}-dlt", f.channel);
    for i in 0..3 {
        kafka_put(&dlt, &format!("m{i}"), "poison", None);
    }
    let (code, doc, err) = redrive(&f, &["--yes", "--to", &format!("{}-gone", f.channel)]);
    assert_eq!(code, 1, "{doc}");
    assert!(err.contains("does not exist; nothing was moved"), "{err}");
    assert_eq!(kafka::waiting(&f), 3);
}

#[test]
fn kafka_a_second_redrive_of_the_same_dlt_is_refused_naming_the_first() {
    let Some(f) = kafka::Fixture::applied() else {
        return;
    };
    let dlt = format!("{}-dlt", f.channel);
    for i in 0..40 {
        kafka_put(&dlt, &format!("m{i:02}"), "poison", None);
    }
    let first = spawn_quiet(&f, Some("1"));
    // The first holds the group once it has joined it and is moving records.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while kafka::waiting(&f) == 40 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    let (_, err, pid) = refused_beside(&f, first);
    assert!(
        err.contains("is being redriven already: the group"),
        "{err}"
    );
    // Kafka's DescribeGroups names the member by its client.id
    // (`dlqctl-redrive <user>@<host> pid N`) and host; the tansu fallback lists members
    // without either.
    if !kafka::on_tansu() {
        assert!(
            err.contains(&format!("pid {pid}")),
            "the first run, by its pid: {err}"
        );
    }
}

#[test]
fn rabbitmq_a_quorum_dlq_that_drops_at_its_delivery_limit_is_not_redriven() {
    let Some(f) = rabbit::Fixture::new() else {
        return;
    };
    f.write_example(|t| t);
    let dlq = format!("{}.dlq", f.channel);
    let main = format!("{}.process", f.channel);
    block(async {
        for (q, args) in [
            (
                &dlq,
                json!({"x-queue-type": "quorum", "x-delivery-limit": 1}),
            ),
            (&main, json!({})),
        ] {
            rabbit::declare_queue(q, args).await;
        }
    });
    for i in 0..3 {
        rabbit_put(
            &dlq,
            &format!("q{i}"),
            if i == 0 { "poison" } else { "other" },
            None,
        );
    }
    // Selecting one would hand the other two back, a delivery each: at a limit of 1, dropped.
    let (code, doc, err) = redrive(&f, &["--class", "poison", "--yes"]);
    assert_eq!(code, 1, "{doc}");
    assert!(
        err.contains("delivery limit of 1") && err.contains("not redriving"),
        "{err}"
    );
    assert_eq!(rabbit::count(&dlq), 3, "all three still there");
}

#[test]
fn rabbitmq_a_destination_that_would_drop_its_oldest_is_refused() {
    let Some(f) = rabbit::Fixture::new() else {
        return;
    };
    f.write_example(without_exchange);
    let (main, dlq) = (
        format!("{}.process", f.channel),
        format!("{}.dlq", f.channel),
    );
    block(async {
        for (q, args) in [(&dlq, json!({})), (&main, json!({"x-max-length": 2}))] {
            rabbit::declare_queue(q, args).await;
        }
    });
    for i in 0..5 {
        rabbit_put(&dlq, &format!("o{i}"), "poison", None);
    }
    let (code, doc, err) = redrive(&f, &["--yes"]);
    assert_eq!(code, 1, "{doc}");
    assert!(
        err.contains("max-length 2 (argument) with overflow `drop-head`"),
        "{err}"
    );
    assert_eq!(rabbit::count(&dlq), 5, "nothing moved");
    assert_eq!(rabbit::count(&main), 0);
}

/// Every one of `k0000`..`k4999`, read back by body from the channel's main topic (none
/// lost); how many are there twice.
fn kafka_all_5000_back(f: &kafka::Fixture) -> usize {
    let all = kafka::read_from_start(&f.channel, 3, 5000, Duration::from_secs(3));
    let bodies: BTreeSet<&str> = all.iter().map(|(_, _, b)| b.as_str()).collect();
    let lost: Vec<String> = (0..5000)
        .map(|i| format!("k{i:04}"))
        .filter(|b| !bodies.contains(b.as_str()))
        .collect();
    assert!(lost.is_empty(), "lost: {lost:?}");
    all.len() - bodies.len()
}

#[test]
fn kafka_a_redrive_killed_part_way_loses_nothing() {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    // tansu 0.6.0 misreports the watermarks of a produce request carrying several records
    // (status counts too few) and never drops a killed consumer's membership.
    if !kafka::apache_kafka("batched produce requests and a killed consumer's session timing out") {
        return;
    }
    let Some(f) = kafka::Fixture::applied() else {
        return;
    };
    let dlt = format!("{}-dlt", f.channel);
    // Batched, as an application's producer sends them.
    let producer: FutureProducer = kafka::producer(&[]);
    block(async {
        let sends: Vec<_> = (0..5000)
            .map(|i| {
                let body = format!("k{i:04}");
                let (producer, dlt) = (&producer, &dlt);
                async move {
                    producer
                        .send(
                            FutureRecord::to(dlt).key(&body).payload(&body),
                            Duration::from_secs(30),
                        )
                        .await
                        .map_err(|(e, _)| e)
                        .expect("produce")
                }
            })
            .collect();
        futures_util::future::join_all(sends).await
    });
    assert_eq!(kafka::waiting(&f), 5000);
    let mut run = spawn_quiet(&f, Some("500"));
    // Killed once some of it is committed as moved, before the end (at 500/s it takes 10 s).
    let killed_at = kill_part_way(
        &mut run,
        Duration::from_secs(90),
        Duration::from_millis(200),
        || kafka::waiting(&f) < 4500,
    );
    let waiting = kafka::waiting(&f);
    assert!(
        waiting > 0 && waiting < 5000,
        "killed part-way: {waiting} waiting"
    );
    // The killed run is still a member of the redrive group until its session times out.
    // The session runs from its last heartbeat, which a loaded machine can delay by seconds
    // (CI saw 8.8 s): when Kafka had already dropped the member, this run is accepted and
    // moves the rest, and only "nothing lost" is left to check.
    let (code, doc, err) = redrive(&f, &["--yes"]);
    // (That a live run's group refuses a second is `kafka_a_second_redrive_of_the_same_dlt_is_refused_naming_the_first`.)
    if code == 0 {
        let since = killed_at.elapsed();
        assert_eq!(kafka::waiting(&f), 0, "{doc}");
        let duplicated = kafka_all_5000_back(&f);
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "killed with {waiting} waiting; the killed member's session had already timed out when the next run started {since:?} later (its last heartbeat was late); {duplicated} twice"
            );
        }
        return;
    }
    assert_eq!(code, 1, "{doc}\n{err}");
    assert!(err.contains("is being redriven already"), "{err}");
    let moved_first = 5000 - waiting as usize;

    // Nothing lost so far: every record is in the main topic or still waiting behind the
    // redrive group's committed offset.
    let moved: BTreeSet<String> =
        kafka::read_from_start(&f.channel, 3, moved_first, Duration::from_secs(3))
            .into_iter()
            .map(|(_, _, b)| b)
            .collect();
    let committed = kafka::committed_offsets(&dlt, &format!("dlqctl-redrive.{}", f.channel), 3);
    let mut missing = Vec::new();
    let mut still_waiting = 0;
    for (p, offset, body) in kafka::read_from_start(&dlt, 3, 5000, Duration::ZERO) {
        if offset >= committed[p as usize] {
            still_waiting += 1;
        } else if !moved.contains(&body) {
            missing.push(body);
        }
    }
    assert!(
        missing.is_empty(),
        "committed as moved but not in the main topic: {missing:?}"
    );
    assert_eq!(
        still_waiting, waiting,
        "status counts what is behind the commit"
    );

    // Once the killed member's session (10 s) has timed out, Kafka drops it and a second run
    // moves the rest.
    let session = Duration::from_secs(10);
    let second = loop {
        let elapsed = killed_at.elapsed();
        let (code, doc, err) = redrive(&f, &["--yes"]);
        if code == 0 {
            break (elapsed, doc);
        }
        assert!(err.contains("is being redriven already"), "{err}");
        assert!(
            elapsed < session + Duration::from_secs(20),
            "still refused {elapsed:?} after the kill: {err}"
        );
        std::thread::sleep(Duration::from_secs(1));
    };
    // The session runs from the killed member's last heartbeat, not from the kill: up to one
    // heartbeat interval (1 s) earlier, more when a loaded 2-core machine delayed that
    // heartbeat (CI saw 8.8 s). Accepted at once would be the bug; accepted late is Kafka.
    assert!(
        second.0 + Duration::from_secs(4) >= session,
        "the second run started {:?} after the kill, before the session could time out",
        second.0
    );
    assert_eq!(kafka::waiting(&f), 0, "{}", second.1);
    // Every one of the 5,000, read back by body from the main topic; at most what the killed
    // run had sent beyond its last commit is there twice.
    let duplicated = kafka_all_5000_back(&f);
    assert!(
        duplicated <= moved.len() - moved_first,
        "{duplicated} twice, {} were beyond the commit",
        moved.len() - moved_first
    );
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "killed with {waiting} waiting; {} moved ({} beyond the commit); the second run started {:?} after the kill and moved {}; {duplicated} twice",
            moved.len(),
            moved.len() - moved_first,
            second.0,
            second.1["moved"]
        );
    }
}

// ------------------------------------------- every destination of a channel (issue 34)

/// One of a channel's destinations other than its DLQ, as a backend's test supplies it.
struct Other<'a> {
    /// The queue or topic, and its role in `status` and the exporter.
    name: String,
    role: &'static str,
    /// What `redrive --from` is given for it.
    from: String,
    put: Box<dyn Fn(&str) + 'a>,
    count: Box<dyn Fn() -> u64 + 'a>,
    /// Waits until the backend's own figures (what `status` reads) show `n` messages.
    settle: Box<dyn Fn(u64) + 'a>,
}

/// The exporter's first reading of the workspace's channel (`--peek`): its metrics text.
fn exporter_once(ws: &Workspace) -> String {
    support::exporter::Exporter::start(ws, &["--interval", "1h", "--peek"]).first_reading()
}

/// Issue 34, on one backend: three messages with ids put into each of the channel's other
/// destinations by a third-party client appear in `status --format json` (an entry of their
/// own, with the role, after the DLQ's) and in the exporter (the `role` label); a dry run
/// `--from` each moves nothing; `--from` each moves all three to the main queue or topic, where
/// every one is read back by its id; the report names the source and its role.
fn every_destination(ws: &Workspace, others: &[Other<'_>], take_main: &dyn Fn(usize) -> Vec<Read>) {
    for o in others {
        for i in 0..3 {
            (o.put)(&format!("{}-{i}", o.role));
        }
        assert_eq!((o.count)(), 3, "{}", o.name);
        (o.settle)(3);
    }
    let out = ws.run(&["status", "channel.yaml", "--format", "json"]);
    out.ok();
    let doc = out.json("status");
    let entries = doc["channels"].as_array().expect("channels");
    assert_eq!(entries.len(), 1 + others.len(), "{doc}");
    assert_eq!(entries[0]["role"], "dead-letter", "the DLQ first: {doc}");
    assert!(!entries[0]["queues"].as_array().expect("queues").is_empty());
    for (o, e) in others.iter().zip(&entries[1..]) {
        assert_eq!(e["channel"], ws.channel.as_str());
        assert_eq!(
            (e["role"].as_str(), e["deadLetter"]["name"].as_str()),
            (Some(o.role), Some(o.name.as_str())),
            "{e}"
        );
        assert_eq!(e["deadLetter"]["depth"], 3, "{e}");
        assert_eq!(e["deadLetter"]["byErrorClass"], json!({"poison": 3}), "{e}");
        assert_eq!(
            e["queues"],
            json!([]),
            "the main depths are the DLQ's to show: {e}"
        );
    }
    let metrics = exporter_once(ws);
    for o in others {
        let series = format!("queue=\"{}\",role=\"{}\"}} 3\n", o.name, o.role);
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("dlq_depth{") && format!("{l}\n").ends_with(&series)),
            "no dlq_depth …{series} in\n{metrics}"
        );
    }
    for o in others {
        let (code, dry, err) = redrive(ws, &["--from", &o.from, "--dry-run"]);
        assert_eq!(code, 0, "{dry}\n{err}");
        assert_eq!(
            (dry["deadLetter"].as_str(), dry["role"].as_str()),
            (Some(o.name.as_str()), Some(o.role)),
            "{dry}"
        );
        assert_eq!(dry["wouldMove"]["count"], 3, "{dry}");
        assert_eq!((o.count)(), 3, "a dry run moves nothing");

        let doc = redrive_ok(ws, &["--from", &o.from, "--yes"]);
        assert_eq!(doc["moved"], 3, "{doc}");
        assert_eq!(
            (doc["deadLetter"].as_str(), doc["role"].as_str()),
            (Some(o.name.as_str()), Some(o.role)),
            "{doc}"
        );
        assert_eq!(doc["destination"]["source"], true);
        let mut got: Vec<String> = take_main(3)
            .into_iter()
            .map(|(body, headers)| {
                assert_eq!(
                    headers.get("dlq-redrive-count").map(String::as_str),
                    Some("1"),
                    "{body}: {headers:?}"
                );
                body
            })
            .collect();
        got.sort();
        assert_eq!(
            got,
            (0..3)
                .map(|i| format!("{}-{i}", o.role))
                .collect::<Vec<_>>(),
            "{}",
            o.name
        );
        assert_eq!((o.count)(), 0, "{} emptied", o.name);
    }
}

#[test]
fn sqs_the_invalid_queue_is_shown_and_redriven_by_its_role() {
    let Some(f) = sqs::Fixture::applied_with(|t| t.replace("  sqs:\n", "  invalid: {}\n  sqs:\n"))
    else {
        return;
    };
    let [main, ..] = f.names();
    let invalid = format!("{}-invalid", f.channel);
    let aws = sqs::Aws::new();
    // SQS's move task moves only out of a dead-letter queue: refused before anything is read.
    let refused = f.run(&[
        "redrive",
        f.channel.as_str(),
        "channel.yaml",
        "--from",
        "invalid",
        "--native",
        "--yes",
    ]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    for said in [
        "StartMessageMoveTask",
        "denyAll",
        "Leave out --native",
        "nothing was moved",
    ] {
        refused.assert_stderr_contains(said);
    }
    every_destination(
        &f,
        &[Other {
            name: invalid.clone(),
            role: "invalid",
            from: "invalid".into(),
            put: Box::new(|body| sqs_put(&aws, &invalid, body, "poison", None)),
            count: Box::new(|| aws.count(&invalid)),
            settle: Box::new(|_| ()),
        }],
        &|n| aws.take(&main, n),
    );
}

#[test]
fn rabbitmq_the_invalid_queue_is_shown_and_redriven_by_its_role() {
    let Some(f) = rabbit::Fixture::applied_with(|t| {
        t.replace("  rabbitmq:\n", "  invalid: {}\n  rabbitmq:\n")
    }) else {
        return;
    };
    let [main, ..] = f.names();
    let invalid = format!("{}.invalid", f.channel);
    every_destination(
        &f,
        &[Other {
            name: invalid.clone(),
            role: "invalid",
            from: "invalid".into(),
            put: Box::new(|body| rabbit_put(&invalid, body, "poison", None)),
            count: Box::new(|| rabbit::count(&invalid)),
            settle: Box::new(|n| rabbit::wait_for_messages(&invalid, n)),
        }],
        // Through the channel's exchange, by its binding key, to the main queue.
        &|_| rabbit_take(&main),
    );
}

#[test]
fn kafka_the_invalid_topic_and_an_exception_dlt_are_shown_and_redriven_by_their_role() {
    let Some(f) = kafka::Fixture::applied_with(|t| {
        t.replace(
            "  kafka:\n",
            "  invalid:\n    discard: {after: 14d, reason: the producing team replays corrected events within a week}\n  kafka:\n    exceptionBasedDlts: [-poison]\n",
        )
    }) else {
        return;
    };
    let main = f.main();
    let invalid = format!("{main}-invalid-dlt");
    let exception = format!("{main}-poison-dlt");
    let reader = format!("{}-consumer", f.channel);
    let waiting = |topic: String| {
        let f = &f;
        move || {
            let out = f.run(&["status", "channel.yaml", "--format", "json", "--scan", "0"]);
            let doc = out.json("status");
            doc["channels"]
                .as_array()
                .and_then(|a| a.iter().find(|c| c["deadLetter"]["name"] == topic.as_str()))
                .and_then(|c| c["deadLetter"]["depth"].as_u64())
                .unwrap_or_else(|| panic!("no {topic} in {doc}"))
        }
    };
    every_destination(
        &f,
        &[
            Other {
                name: invalid.clone(),
                role: "invalid",
                from: "invalid".into(),
                put: Box::new(|body| kafka_put(&invalid, body, "poison", None)),
                count: Box::new(waiting(invalid.clone())),
                settle: Box::new(|_| ()),
            },
            Other {
                name: exception.clone(),
                role: "exception",
                from: exception.clone(),
                put: Box::new(|body| kafka_put(&exception, body, "poison", None)),
                count: Box::new(waiting(exception.clone())),
                settle: Box::new(|_| ()),
            },
        ],
        &|n| kafka_take(&main, &reader, n),
    );
    // The DLT itself was never touched: its redrive group's position is per topic.
    assert_eq!(kafka::waiting(&f), 0);
}
