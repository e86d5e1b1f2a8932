//! Issue 37, "to the failed consumer only": `redrive --to failed-consumer`, live. Pub/Sub
//! cannot publish to one subscription, so the run is refused without `--allow-fanout`,
//! naming every subscription of the main topic (two here: the channel's consumer and an
//! audit subscription made by hand with the REST API); with it, the dry run lists them and
//! the run publishes to the topic, which both receive. RabbitMQ: two queues bound to the
//! channel's exchange with the same key (the main queue and an audit queue made by hand with
//! the management API); the main queue's consumer rejects (lapin, `requeue=false`), so the
//! broker writes x-death; only the main queue receives the copies, by id, and a dead letter
//! without x-death stays, reported. Kafka is refused before anything is read, saying why (a
//! topic reaches every consumer group). Dead letters are put in with third-party clients.

mod support;

use serde_json::json;
use std::collections::BTreeSet;

use support::redrive::{redrive, redrive_ok};
use support::{block, kafka, pubsub, rabbit};

const N: usize = 3;

#[test]
fn pubsub_failed_consumer_is_refused_without_allow_fanout_naming_every_subscription() {
    let Some(f) = pubsub::Fixture::new() else {
        return;
    };
    f.write_example(|t| f.example(t));
    f.apply(&[]).ok();
    let dlt = format!("{}-dlt", f.channel);
    let dl_sub = format!("{}-dlt-sub", f.channel);
    let sub = f.subscription();
    let audit = format!("{}-audit-sub", f.channel);
    f.rest.create_subscription(
        &audit,
        json!({"topic": pubsub::Rest::topic_path(&f.channel)}),
    );
    for i in 0..N {
        f.rest.publish(&dlt, &format!("order-{i}"));
    }
    let started = std::time::Instant::now();
    while f.rest.count(&dl_sub) < N as u64 && started.elapsed() < std::time::Duration::from_secs(30)
    {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }

    let out = f.run(&[
        "redrive",
        f.channel.as_str(),
        "channel.yaml",
        "--to",
        "failed-consumer",
        "--yes",
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    for s in [&sub, &audit] {
        assert!(
            out.stderr.contains(&format!("`{s}`")),
            "the refusal names subscription {s}: {}",
            out.stderr
        );
    }
    assert!(out.stderr.contains("--allow-fanout"), "{}", out.stderr);
    assert!(
        out.stderr.contains("reaches every subscription"),
        "{}",
        out.stderr
    );
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
