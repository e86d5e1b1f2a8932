//! Issue 37, "to the failed consumer only": `redrive --to failed-consumer`, live. Pub/Sub
//! cannot publish to one subscription: with the channel's consumer subscription alone on
//! the main topic the run needs nothing more, but once another subscription is there (an
//! audit subscription made by hand with the REST API) the run, `--to source` as much as
//! `--to failed-consumer`, is refused without `--allow-fanout`, naming both; with it, the
//! dry run lists them and the run publishes to the topic, which both receive. With the
//! channel's subscription deleted, not even `--allow-fanout` publishes. RabbitMQ: two queues bound to the
//! channel's exchange with the same key (the main queue and an audit queue made by hand with
//! the management API); the main queue's consumer rejects (lapin, `requeue=false`), so the
//! broker writes x-death; only the main queue receives the copies, by id, and a dead letter
//! without x-death stays, reported. Kafka is refused before anything is read, saying why (a
//! topic reaches every consumer group). SQS: two source queues dead-letter into one DLQ, and
//! each message goes back to the queue its `DeadLetterQueueSourceArn` names; a dead letter
//! sent to the DLQ directly (no source) stays, reported. That attribute is set by the broker
//! when a redrive policy moves a message: moto 5.2.5 never sets it (moto/sqs/models.py moves
//! the message with no such attribute), ElasticMQ 1.6.14 does, so the SQS tests run on an
//! ElasticMQ of their own ([`support::elasticmq`]; no CloudWatch there, so the queues are
//! made with the SDK, as dlqctl makes them). Dead letters are put in with third-party clients.

mod support;

use aws_sdk_sqs::types::{QueueAttributeName, SendMessageBatchRequestEntry};
use serde_json::{Value, json};
use std::collections::BTreeSet;

use support::elasticmq::ElasticMq;
use support::redrive::{redrive, redrive_ok};
use support::{block, kafka, pubsub, rabbit};

const N: usize = 3;

#[test]
fn pubsub_redrive_to_the_main_topic_is_refused_without_allow_fanout_naming_every_subscription() {
    let Some(f) = pubsub::Fixture::new() else {
        return;
    };
    f.write_example(|t| f.example(t));
    f.apply(&[]).ok();
    let dlt = format!("{}-dlt", f.channel);
    let dl_sub = format!("{}-dlt-sub", f.channel);
    let sub = f.subscription();
    let audit = format!("{}-audit-sub", f.channel);
    for i in 0..N {
        f.rest.publish(&dlt, &format!("order-{i}"));
    }
    let started = std::time::Instant::now();
    while f.rest.count(&dl_sub) < N as u64 && started.elapsed() < std::time::Duration::from_secs(30)
    {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }

    // The channel's subscription alone on the main topic: the copies reach only it.
    for to in ["source", "failed-consumer"] {
        let dry = redrive_ok(&f, &["--to", to, "--dry-run"]);
        assert_eq!(dry["destination"]["fanout"], json!(null), "{dry}");
    }

    f.rest.create_subscription(
        &audit,
        json!({"topic": pubsub::Rest::topic_path(&f.channel)}),
    );
    // `redrive --to TO EXTRA --yes`.
    let redrive_to = |to: &str, extra: &[&str]| {
        let mut args = vec!["redrive", f.channel.as_str(), "channel.yaml", "--to", to];
        args.extend_from_slice(extra);
        args.push("--yes");
        f.run(&args)
    };
    // The main topic by its name is `--to source` too.
    for to in ["source", "failed-consumer", f.channel.as_str()] {
        let out = redrive_to(to, &[]);
        assert_eq!(out.code, 1, "--to {to}: {}", out.stderr);
        for s in [&sub, &audit] {
            assert!(
                out.stderr.contains(&format!("`{s}`")),
                "--to {to}: the refusal names subscription {s}: {}",
                out.stderr
            );
        }
        assert!(out.stderr.contains("--allow-fanout"), "{}", out.stderr);
        assert!(
            out.stderr.contains("reaches every subscription"),
            "{}",
            out.stderr
        );
    }
    assert_eq!(f.rest.count(&dl_sub), N as u64, "nothing moved");
    assert!(f.rest.take(&sub, 0).is_empty(), "nothing published");

    let dry = redrive_ok(
        &f,
        &["--to", "failed-consumer", "--allow-fanout", "--dry-run"],
    );
    let mut want = vec![sub.clone(), audit.clone()];
    want.sort();
    assert_eq!(dry["destination"]["fanout"], json!(want), "{dry}");
    assert_eq!(dry["destination"]["failedConsumer"], json!(true), "{dry}");

    let moved = redrive_ok(&f, &["--to", "failed-consumer", "--allow-fanout", "--yes"]);
    assert_eq!(moved["moved"], json!(N), "{moved}");
    // The fan-out it warned of: both subscriptions receive every copy.
    assert_eq!(f.rest.take(&sub, N).len(), N);
    assert_eq!(f.rest.take(&audit, N).len(), N);

    // The channel's own subscription gone: the copies would reach only the audit one, so
    // not even --allow-fanout sends them.
    f.rest.publish(&dlt, "order-late");
    f.rest.delete(&format!("subscriptions/{sub}"));
    for to in ["source", "failed-consumer"] {
        let out = redrive_to(to, &["--allow-fanout"]);
        assert_eq!(out.code, 1, "--to {to}: {}", out.stderr);
        for want in [
            format!("`{sub}` is not a subscription of topic"),
            format!("`{audit}`"),
            "nothing was read or moved".to_owned(),
        ] {
            assert!(out.stderr.contains(&want), "{want}: {}", out.stderr);
        }
    }
    assert!(f.rest.take(&audit, 0).is_empty(), "nothing published");
}

#[test]
fn kafka_failed_consumer_is_refused_saying_a_topic_reaches_every_group() {
    let Some(f) = kafka::Fixture::new() else {
        return;
    };
    f.write_example(|t| t);
    let out = f.run(&[
        "redrive",
        f.channel.as_str(),
        "channel.yaml",
        "--to",
        "failed-consumer",
        "--dry-run",
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    for want in [
        "--to failed-consumer",
        "every consumer group",
        "kafka_dlt-original-consumer-group",
        "nothing was read or moved",
    ] {
        assert!(out.stderr.contains(want), "{want}: {}", out.stderr);
    }
}

/// The orders example with no retry loop and a dead-letter exchange of its own: a
/// `basic.reject` with `requeue=false` on the main queue goes straight into the DLQ.
fn reject_into_dlq(spec: String) -> String {
    spec.replace(
        "    maxAttempts: 4\n    backoff: {initial: 5s}\n    name: \"{channel}.retry\"\n",
        "    maxAttempts: 1\n",
    )
    .replace(
        "    dlx: policy\n",
        "    dlx: policy\n    deadLetterExchange: {name: \"{channel}.dlx\", routingKey: \"{channel}.dead\"}\n",
    )
}

#[test]
fn rabbitmq_failed_consumer_sends_copies_only_to_the_queue_that_rejected_them() {
    let Some(f) = rabbit::Fixture::new() else {
        return;
    };
    f.write_example(reject_into_dlq);
    f.apply(&[]).ok_with("apply the channel");
    let [main, _, dlq, exchange] = f.names();
    let audit = format!("{}.audit", f.channel);
    block(async {
        rabbit::declare_queue(&audit, json!({})).await;
        rabbit::bind(&exchange, &audit, "process").await;
    });
    let ids: BTreeSet<String> = (0..N).map(|i| format!("m-{i}")).collect();
    block(async {
        for id in &ids {
            rabbit::publish_with(
                &exchange,
                "process",
                id.as_bytes(),
                lapin::BasicProperties::default().with_message_id(id.as_str().into()),
            )
            .await;
        }
    });
    rabbit::wait_for_messages(&audit, N as u64);
    // The audit queue's consumer takes its copies; the main queue's rejects every one.
    assert_eq!(block(rabbit::take_all(&audit)).len(), N);
    block(async {
        let conn = rabbit::amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        let mut rejected = 0;
        for _ in 0..2_000 {
            if rejected == N {
                break;
            }
            match rabbit::settle_next(&ch, &main, |_| true).await {
                Some(_) => rejected += 1,
                None => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        }
        let _ = conn.close(200, "done".into()).await;
    });
    // One dead letter without x-death, put in by hand: it must stay.
    block(rabbit::publish_with(
        "",
        &dlq,
        b"no-history",
        lapin::BasicProperties::default().with_message_id("stray".into()),
    ));
    rabbit::wait_for_messages(&dlq, N as u64 + 1);

    let (code, report, err) = redrive(&f, &["--to", "failed-consumer", "--yes"]);
    assert_eq!(report["moved"], json!(N), "{report}\n{err}");
    assert_eq!(code, 1, "a message stayed: incomplete; {report}\n{err}");
    let reasons = report["incomplete"].to_string();
    assert!(
        reasons.contains("stray") && reasons.contains("x-death"),
        "{report}"
    );
    let back: BTreeSet<String> = block(rabbit::take_each(&main, |d| {
        d.properties
            .message_id()
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default()
    }))
    .into_iter()
    .collect();
    assert_eq!(back, ids, "every copy back in the queue that rejected it");
    assert!(
        block(rabbit::take_all(&audit)).is_empty(),
        "the other queue bound to the exchange received nothing"
    );
    assert_eq!(rabbit::count(&dlq), 1, "only the stray is left");
}

/// SQS: dead letters from each source, ids `<prefix>-00`… in the body.
const PER_SOURCE: usize = 20;

/// On ElasticMQ `e`: the channel `movetask` of [`support::sqs::movetask_workspace`] with a
/// second source. `movetask` (its main queue, A) and `movetask-b` (B) both dead-letter into
/// `movetask-dlq` after one receive; B is tagged as dlqctl tags what it makes when `b_owned`.
/// [`PER_SOURCE`] messages are sent to each of `sources` (`a`, `b`) and received without
/// being deleted until SQS has moved every one to the DLQ, as a failing consumer would leave
/// them. Returns the queues' URLs (A, B, DLQ) and the DLQ's ARN.
fn two_sources(
    sqs: &aws_sdk_sqs::Client,
    b_owned: bool,
    sources: &[&str],
) -> ([String; 3], String) {
    let create = |name: &str, attrs: &[(QueueAttributeName, String)], tags: &[(&str, &str)]| {
        let mut req = sqs.create_queue().queue_name(name);
        for (k, v) in attrs {
            req = req.attributes(k.clone(), v);
        }
        for (k, v) in tags {
            req = req.tags(*k, *v);
        }
        block(req.send())
            .expect("CreateQueue")
            .queue_url()
            .unwrap_or_default()
            .to_owned()
    };
    let owned = |channel| [("managed-by", "dlqctl"), ("dlqctl-channel", channel)];
    let dlq = create("movetask-dlq", &[], &owned("movetask"));
    let arn = queue_arn(sqs, &dlq);
    let policy = json!({"deadLetterTargetArn": arn, "maxReceiveCount": "1"}).to_string();
    let attrs = [
        (QueueAttributeName::RedrivePolicy, policy),
        (QueueAttributeName::VisibilityTimeout, "0".to_owned()),
    ];
    let a = create("movetask", &attrs, &owned("movetask"));
    let b_tags = owned("movetask-b");
    let b = create(
        "movetask-b",
        &attrs,
        if b_owned { &b_tags[..] } else { &[] },
    );
    for (prefix, url) in [("a", &a), ("b", &b)] {
        if !sources.contains(&prefix) {
            continue;
        }
        for chunk in (0..PER_SOURCE).collect::<Vec<_>>().chunks(10) {
            let entries = chunk
                .iter()
                .map(|i| {
                    SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(format!("{prefix}-{i:02}"))
                        .build()
                        .expect("entry")
                })
                .collect();
            let sent = block(
                sqs.send_message_batch()
                    .queue_url(url)
                    .set_entries(Some(entries))
                    .send(),
            )
            .expect("SendMessageBatch");
            assert!(sent.failed().is_empty(), "{:?}", sent.failed());
        }
        // The consumer fails every message: received, never deleted (visible again at once);
        // the receive after the first moves it to the DLQ.
        for _ in 0..20 * PER_SOURCE {
            if count(sqs, url) == 0 {
                break;
            }
            block(
                sqs.receive_message()
                    .queue_url(url)
                    .max_number_of_messages(10)
                    .visibility_timeout(0)
                    .send(),
            )
            .expect("ReceiveMessage");
        }
        assert_eq!(
            count(sqs, url),
            0,
            "every message of {prefix} dead-lettered"
        );
    }
    assert_eq!(
        count(sqs, &dlq),
        (PER_SOURCE * sources.len()) as u64,
        "the DLQ holds what both sources dead-lettered"
    );
    ([a, b, dlq], arn)
}

fn queue_arn(sqs: &aws_sdk_sqs::Client, url: &str) -> String {
    block(
        sqs.get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send(),
    )
    .expect("GetQueueAttributes")
    .attributes()
    .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
    .expect("QueueArn")
}

/// Visible, in flight and delayed messages of the queue at `url`.
fn count(sqs: &aws_sdk_sqs::Client, url: &str) -> u64 {
    let out = block(
        sqs.get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::All)
            .send(),
    )
    .expect("GetQueueAttributes");
    let attrs = out.attributes().cloned().unwrap_or_default();
    [
        QueueAttributeName::ApproximateNumberOfMessages,
        QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        QueueAttributeName::ApproximateNumberOfMessagesDelayed,
    ]
    .iter()
    .filter_map(|k| attrs.get(k).and_then(|v| v.parse::<u64>().ok()))
    .sum()
}

/// Receives and deletes everything in the queue at `url`, as a consumer would (bounded):
/// each message's body and its `dlq-redrive-count` attribute.
fn take(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for _ in 0..4 * PER_SOURCE {
        let got = block(
            sqs.receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .visibility_timeout(60)
                .message_attribute_names("All")
                .send(),
        )
        .expect("ReceiveMessage");
        if got.messages().is_empty() {
            break;
        }
        for m in got.messages() {
            let count = m
                .message_attributes()
                .and_then(|a| a.get("dlq-redrive-count"))
                .and_then(|v| v.string_value())
                .map(str::to_owned);
            out.push((m.body().unwrap_or_default().to_owned(), count));
            block(
                sqs.delete_message()
                    .queue_url(url)
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .send(),
            )
            .expect("DeleteMessage");
        }
    }
    out
}

fn ids(prefix: &str) -> BTreeSet<String> {
    (0..PER_SOURCE)
        .map(|i| format!("{prefix}-{i:02}"))
        .collect()
}

fn sqs_redrive(ws: &std::path::Path, extra: &[&str]) -> (i32, Value, String) {
    let out = support::output(&mut support::sqs::movetask_redrive(ws, extra));
    let report = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("JSON report ({e}):\n{}\n{}", out.stdout, out.stderr));
    (out.code, report, out.stderr)
}

#[test]
fn sqs_failed_consumer_sends_each_message_back_to_its_own_source() {
    let Some(e) = ElasticMq::start() else { return };
    let sqs = e.sqs();
    let ([a, b, dlq], _) = two_sources(&sqs, true, &["a", "b"]);
    let (arn_a, arn_b) = (queue_arn(&sqs, &a), queue_arn(&sqs, &b));
    // A dead letter sent to the DLQ directly: SQS records no source on it.
    let stray = block(
        sqs.send_message()
            .queue_url(&dlq)
            .message_body("stray")
            .send(),
    )
    .expect("SendMessage")
    .message_id()
    .unwrap_or_default()
    .to_owned();
    let ws = support::sqs::movetask_workspace("elasticmq", &e.url);

    // The dry run names the sources it read, with their counts, and the stray.
    let (code, dry, err) = sqs_redrive(ws.path(), &["--to", "failed-consumer", "--dry-run"]);
    assert_eq!(code, 0, "{dry}\n{err}");
    assert_eq!(dry["destination"]["failedConsumer"], json!(true), "{dry}");
    let listed = dry["destination"]["sources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!listed.is_empty(), "{dry}");
    let mut would = 0;
    for s in &listed {
        let (arn, queue) = (s["source"].as_str(), s["queue"].as_str());
        assert!(
            (arn == Some(arn_a.as_str()) && queue == Some("movetask"))
                || (arn == Some(arn_b.as_str()) && queue == Some("movetask-b")),
            "{s}"
        );
        would += s["count"].as_u64().expect("count");
    }
    assert_eq!(json!(would), dry["wouldMove"]["count"], "{dry}");
    assert_eq!(
        count(&sqs, &dlq),
        2 * PER_SOURCE as u64 + 1,
        "nothing moved"
    );

    let (code, report, err) = sqs_redrive(ws.path(), &["--to", "failed-consumer"]);
    assert_eq!(code, 1, "the stray stayed: incomplete; {report}\n{err}");
    assert_eq!(report["moved"], json!(2 * PER_SOURCE), "{report}\n{err}");
    assert_eq!(report["examined"], json!(2 * PER_SOURCE + 1), "{report}");
    assert_eq!(report["possiblyDuplicated"], json!(0), "{report}");
    assert_eq!(report["error"], Value::Null, "{report}");
    assert_eq!(
        report["destination"]["sources"],
        json!([
            {"source": arn_a, "queue": "movetask", "count": PER_SOURCE},
            {"source": arn_b, "queue": "movetask-b", "count": PER_SOURCE},
        ]),
        "{report}"
    );
    assert_eq!(report["destination"]["withoutSource"], json!(1), "{report}");
    let reasons = report["incomplete"].to_string();
    assert!(
        reasons.contains(&stray) && reasons.contains("DeadLetterQueueSourceArn"),
        "{report}"
    );

    // Every message of A is back in A and every one of B in B, once, counted as redriven.
    for (url, prefix) in [(&a, "a"), (&b, "b")] {
        let back = take(&sqs, url);
        let bodies: BTreeSet<String> = back.iter().map(|(b, _)| b.clone()).collect();
        assert_eq!(back.len(), PER_SOURCE, "{prefix}: {back:?}");
        assert_eq!(bodies, ids(prefix), "{prefix}: each back in its own source");
        assert!(
            back.iter().all(|(_, c)| c.as_deref() == Some("1")),
            "{prefix}: {back:?}"
        );
    }
    assert_eq!(
        take(&sqs, &dlq),
        vec![("stray".to_owned(), None)],
        "only the stray is left"
    );
}

#[test]
fn sqs_failed_consumer_refuses_a_source_the_target_does_not_own_and_moves_nothing_of_it() {
    let Some(e) = ElasticMq::start() else { return };
    let sqs = e.sqs();
    // B is not tagged as dlqctl's: another team's queue dead-lettering into this DLQ.
    let ([_, b, dlq], _) = two_sources(&sqs, false, &["b"]);
    let ws = support::sqs::movetask_workspace("elasticmq", &e.url);
    let (code, report, err) = sqs_redrive(ws.path(), &["--to", "failed-consumer"]);
    assert_eq!(code, 1, "{report}\n{err}");
    assert_eq!(report["moved"], json!(0), "{report}");
    let said = format!("{report}{err}");
    for want in [
        "not redriving into `movetask-b`",
        "--allow-unowned-destination",
    ] {
        assert!(said.contains(want), "{want}: {said}");
    }
    assert_eq!(count(&sqs, &b), 0, "nothing sent to B");
    // Handed back at once, not after the run's hold.
    assert_eq!(
        take(&sqs, &dlq).len(),
        PER_SOURCE,
        "every message still in the DLQ"
    );
}

/// A dead letter put in by hand whose x-death names `queue` as the one it was rejected from.
fn rejected_from(dlq: &str, id: &str, queue: &str) {
    use lapin::types::{AMQPValue, FieldArray, LongString, ShortString};
    let death = rabbit::table(&[
        ("queue", rabbit::text(queue)),
        ("reason", rabbit::text("rejected")),
        ("count", AMQPValue::LongLongInt(1)),
        ("exchange", rabbit::text("")),
        (
            "routing-keys",
            AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::LongString(
                LongString::from(queue),
            )])),
        ),
    ]);
    let mut h = lapin::types::FieldTable::default();
    h.insert(
        ShortString::from("x-death"),
        AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::FieldTable(death)])),
    );
    block(rabbit::publish_with(
        "",
        dlq,
        id.as_bytes(),
        lapin::BasicProperties::default()
            .with_message_id(id.into())
            .with_headers(h),
    ));
}

/// Issue 52, L5: one message whose x-death names a queue the target does not own, or one
/// that no longer exists, stopped every `--to failed-consumer` run, and those behind it
/// never moved. Now each stays in the DLQ, named with why in `incomplete` (exit 1), and the
/// rest move: counted by id with lapin on both sides.
#[test]
fn rabbitmq_failed_consumer_leaves_a_message_of_an_unowned_or_deleted_queue_and_moves_the_rest() {
    let Some(f) = rabbit::Fixture::new() else {
        return;
    };
    f.write_example(reject_into_dlq);
    f.apply(&[]).ok_with("apply the channel");
    let [main, _, dlq, _] = f.names();
    let unowned = format!("elsewhere-{}", f.channel);
    let gone = format!("{}.gone", f.channel);
    // The strays first, so that the rest are behind them.
    rejected_from(&dlq, "stray-unowned", &unowned);
    rejected_from(&dlq, "stray-gone", &gone);
    let ids: BTreeSet<String> = (0..5).map(|i| format!("m-{i}")).collect();
    for id in &ids {
        rejected_from(&dlq, id, &main);
    }
    rejected_from(&dlq, "stray-gone-2", &gone);
    rabbit::wait_for_messages(&dlq, 8);

    let (code, report, err) = redrive(&f, &["--to", "failed-consumer", "--yes"]);
    assert_eq!(report["moved"], json!(5), "{report}\n{err}");
    assert_eq!(code, 1, "messages stayed: incomplete; {report}\n{err}");
    let reasons = report["incomplete"].to_string();
    for want in [
        "stray-unowned",
        "stray-gone",
        "stray-gone-2",
        unowned.as_str(),
        gone.as_str(),
        "no longer exists",
        "--allow-unowned-destination",
    ] {
        assert!(reasons.contains(want), "{want}: {report}");
    }
    let back: BTreeSet<String> = block(rabbit::take_each(&main, |d| {
        d.properties
            .message_id()
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default()
    }))
    .into_iter()
    .collect();
    assert_eq!(
        back, ids,
        "every other message back in the queue that rejected it"
    );
    let left: BTreeSet<String> = block(rabbit::take_each(&dlq, |d| {
        d.properties
            .message_id()
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default()
    }))
    .into_iter()
    .collect();
    let strays: BTreeSet<String> = ["stray-unowned", "stray-gone", "stray-gone-2"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    assert_eq!(left, strays, "the strays stay in the DLQ, and nothing else");
    assert_eq!(report["leftInDeadLetter"], json!(3), "{report}");
}

/// A dead letter put in by hand with `x-death` set to `death` (`None`: no `x-death` at all).
fn dead_letter_with(dlq: &str, id: &str, death: Option<lapin::types::AMQPValue>) {
    use lapin::types::ShortString;
    let mut h = lapin::types::FieldTable::default();
    if let Some(death) = death {
        h.insert(ShortString::from("x-death"), death);
    }
    block(rabbit::publish_with(
        "",
        dlq,
        id.as_bytes(),
        lapin::BasicProperties::default()
            .with_message_id(id.into())
            .with_headers(h),
    ));
}

/// An `x-death` list of one entry naming `queue`, with `reason`.
fn one_death(queue: &str, reason: &str) -> lapin::types::AMQPValue {
    use lapin::types::{AMQPValue, FieldArray};
    let death = rabbit::table(&[
        ("queue", rabbit::text(queue)),
        ("reason", rabbit::text(reason)),
        ("count", AMQPValue::LongLongInt(1)),
        ("exchange", rabbit::text("")),
    ]);
    AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::FieldTable(death)]))
}

/// The message ids in `queue`, taken with lapin.
fn ids_in(queue: &str) -> BTreeSet<String> {
    block(rabbit::take_each(queue, |d| {
        d.properties
            .message_id()
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default()
    }))
    .into_iter()
    .collect()
}

/// Issue 52, F1: a dry run of `--to failed-consumer` said every chosen message would move
/// (`wouldMove.count` 21, exact, no `incomplete`) where the run moved 6: it did not resolve
/// each message's queue nor check it. Now it resolves and checks each as the run does
/// (publishing nothing): `wouldMove.count` is what the run then moves, and `incomplete`
/// names, with their ids, those that would stay. Counted by id with lapin.
#[test]
fn rabbitmq_failed_consumer_dry_run_counts_only_what_the_run_moves_and_names_what_stays() {
    use lapin::types::{AMQPValue, LongString};
    let Some(f) = rabbit::Fixture::new() else {
        return;
    };
    f.write_example(reject_into_dlq);
    f.apply(&[]).ok_with("apply the channel");
    let [main, _, dlq, _] = f.names();
    // An owned side queue with a dead-letter exchange: a fine destination.
    let side = format!("{}.side", f.channel);
    block(rabbit::declare_queue(
        &side,
        json!({"x-dead-letter-exchange": format!("{}.dlx", f.channel)}),
    ));
    // ... and one without: a copy failing again there would be dropped (F2).
    let bare = format!("{}.bare", f.channel);
    block(rabbit::declare_queue(&bare, json!({})));
    let gone = format!("{}.gone", f.channel);
    let unowned = format!("elsewhere-{}", f.channel);
    let long = format!("{}.{}", f.channel, "x".repeat(200));
    let stays: BTreeSet<String> = [
        "s-gone",
        "s-unowned",
        "s-dlq",
        "s-empty",
        "s-long",
        "s-not-list",
        "s-none",
        "s-bare",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    dead_letter_with(&dlq, "s-gone", Some(one_death(&gone, "rejected")));
    dead_letter_with(&dlq, "s-unowned", Some(one_death(&unowned, "rejected")));
    dead_letter_with(&dlq, "s-dlq", Some(one_death(&dlq, "rejected")));
    dead_letter_with(&dlq, "s-empty", Some(one_death("", "rejected")));
    dead_letter_with(&dlq, "s-long", Some(one_death(&long, "rejected")));
    dead_letter_with(
        &dlq,
        "s-not-list",
        Some(AMQPValue::LongString(LongString::from(main.as_str()))),
    );
    dead_letter_with(&dlq, "s-none", None);
    dead_letter_with(&dlq, "s-bare", Some(one_death(&bare, "rejected")));
    let to_side: BTreeSet<String> = ["m-side-0", "m-side-1"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    for id in &to_side {
        dead_letter_with(&dlq, id, Some(one_death(&side, "rejected")));
    }
    let to_main: BTreeSet<String> = ["m-main-0", "m-main-1", "m-expired-0"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    dead_letter_with(&dlq, "m-main-0", Some(one_death(&main, "rejected")));
    dead_letter_with(&dlq, "m-main-1", Some(one_death(&main, "rejected")));
    dead_letter_with(&dlq, "m-expired-0", Some(one_death(&main, "expired")));
    let total = stays.len() + to_side.len() + to_main.len();
    rabbit::wait_for_messages(&dlq, total as u64);

    let (code, dry, err) = redrive(&f, &["--to", "failed-consumer", "--dry-run"]);
    assert_eq!(code, 0, "{dry}\n{err}");
    let moving = to_side.len() + to_main.len();
    assert_eq!(dry["wouldMove"]["count"], json!(moving), "{dry}\n{err}");
    let said = dry["incomplete"].to_string();
    for id in &stays {
        assert!(
            said.contains(id.as_str()),
            "dry run names {id} as staying: {dry}"
        );
    }
    for id in to_side.iter().chain(&to_main) {
        assert!(!said.contains(id.as_str()), "{id} would move: {dry}");
    }
    for want in [
        gone.as_str(),
        unowned.as_str(),
        "no longer exists",
        "x-death",
    ] {
        assert!(said.contains(want), "{want}: {dry}");
    }
    assert_eq!(rabbit::count(&dlq), total as u64, "a dry run moves nothing");

    let (code, report, err) = redrive(&f, &["--to", "failed-consumer", "--yes"]);
    assert_eq!(code, 1, "{report}\n{err}");
    assert_eq!(
        report["moved"], dry["wouldMove"]["count"],
        "{report}\n{dry}"
    );
    assert_eq!(ids_in(&main), to_main, "{report}");
    assert_eq!(ids_in(&side), to_side, "{report}");
    assert_eq!(ids_in(&dlq), stays, "{report}");
    assert!(ids_in(&bare).is_empty(), "{report}");
}

/// Issue 52, F2: `--to failed-consumer` checked the dead-letter exchange of the main queue
/// only, and delivered into an owned queue without one, where a copy that fails again is
/// dropped. Now every such queue must have one: its messages stay, reported, and the rest
/// move. Counted by id with lapin.
#[test]
fn rabbitmq_failed_consumer_leaves_the_messages_of_a_queue_without_a_dead_letter_exchange() {
    failed_consumer_leaves_the_messages_of_a_side_queue(
        ".side",
        "s-side",
        |_| json!({}),
        &["dead-letter exchange"],
    );
}

/// hx4 E: a queue whose `x-dead-letter-exchange` names an exchange that does not exist drops
/// what fails again there as surely as a queue with none: its messages stay in the DLQ, named,
/// and the rest move.
#[test]
fn rabbitmq_failed_consumer_leaves_the_messages_of_a_queue_whose_dead_letter_exchange_is_missing() {
    failed_consumer_leaves_the_messages_of_a_side_queue(
        ".side-nox",
        "x-side",
        |channel| json!({"x-dead-letter-exchange": format!("{channel}.no-such-exchange")}),
        &[".no-such-exchange", "does not exist"],
    );
}

/// Two dead letters rejected from the queue `<channel><suffix>` (declared with
/// `arguments(channel)`), three from the main queue: `--to failed-consumer` moves the three,
/// leaves the two in the DLQ (exit 1), and its incomplete reasons name them, the queue and each
/// of `also` (a leading `.` stands for the channel's name before it).
fn failed_consumer_leaves_the_messages_of_a_side_queue(
    suffix: &str,
    prefix: &str,
    arguments: impl Fn(&str) -> serde_json::Value,
    also: &[&str],
) {
    let Some(f) = rabbit::Fixture::new() else {
        return;
    };
    f.write_example(reject_into_dlq);
    f.apply(&[]).ok_with("apply the channel");
    let [main, _, dlq, _] = f.names();
    let side = format!("{}{suffix}", f.channel);
    block(rabbit::declare_queue(&side, arguments(&f.channel)));
    let stays: BTreeSet<String> = (0..2).map(|i| format!("{prefix}-{i}")).collect();
    for id in &stays {
        rejected_from(&dlq, id, &side);
    }
    let ids: BTreeSet<String> = (0..3).map(|i| format!("m-{i}")).collect();
    for id in &ids {
        rejected_from(&dlq, id, &main);
    }
    rabbit::wait_for_messages(&dlq, 5);

    let (code, report, err) = redrive(&f, &["--to", "failed-consumer", "--yes"]);
    assert_eq!(report["moved"], json!(3), "{report}\n{err}");
    assert_eq!(code, 1, "messages stayed: incomplete; {report}\n{err}");
    let reasons = report["incomplete"].to_string();
    let named: Vec<String> = also
        .iter()
        .map(|w| match w.strip_prefix('.') {
            Some(rest) => format!("{}.{rest}", f.channel),
            None => (*w).to_owned(),
        })
        .collect();
    for want in stays.iter().chain([&side]).chain(named.iter()) {
        assert!(reasons.contains(want.as_str()), "{want}: {report}");
    }
    assert!(
        ids_in(&side).is_empty(),
        "nothing sent where it could be dropped: {report}"
    );
    assert_eq!(ids_in(&main), ids, "{report}");
    assert_eq!(ids_in(&dlq), stays, "{report}");
}
