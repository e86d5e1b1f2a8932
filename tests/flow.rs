//! The measured flow (issue 36), live: a third-party producer sends 1,000 messages with ids,
//! a consumer dead-letters exactly 1 in 100 the way applications do (RabbitMQ: `basic.reject`
//! with `requeue=false` into the main queue's dead-letter exchange; Kafka: the consumer
//! produces the failed record to the DLT, as Spring Kafka's DeadLetterPublishingRecoverer
//! does), every id is accounted for (990 processed, 10 in the DLQ), and then `status` shows a
//! 1% rate and a running `dlqctl exporter` publishes `dlq_dead_lettered_messages_total` and
//! `dlq_source_messages_total` in a 1% ratio, which a restarted exporter publishes again
//! (the broker's totals, not the exporter's memory).

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use support::exporter::Exporter;
use support::{block, kafka, rabbit};

const SENT: usize = 1000;

/// Every 100th id fails: 10 of 1,000.
fn fails(i: usize) -> bool {
    i % 100 == 7
}

/// The value of the one sample of `metric` whose labels contain every one of `labels`.
fn sample(scrape: &str, metric: &str, labels: &[&str]) -> Option<f64> {
    scrape
        .lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")))
        .find(|l| labels.iter().all(|x| l.contains(x)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The two counters of the channel's DLQ in a scrape: (dead-lettered, source).
fn counters(scrape: &str, channel: &str) -> (Option<f64>, Option<f64>) {
    let ch = format!("channel=\"{channel}\"");
    (
        sample(
            scrape,
            "dlq_dead_lettered_messages_total",
            &[&ch, "role=\"dead-letter\""],
        ),
        sample(scrape, "dlq_source_messages_total", &[&ch]),
    )
}

/// `status --format json` until its window counts `dead` of `sent` (the broker's statistics
/// lag; 40 s at most): the DLQ's entry.
fn status_until(ws: &support::workspace::Workspace, dead: u64, sent: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let out = ws.run(&[
            "status",
            "channel.yaml",
            "--format",
            "json",
            "--rate-window",
            "5m",
        ]);
        let doc = out.json("status");
        let entry = doc["channels"][0].clone();
        let w = &entry["deadLetter"]["flow"]["window"];
        if (w["deadLettered"].as_u64() == Some(dead) && w["source"].as_u64() == Some(sent))
            || Instant::now() > deadline
        {
            return entry;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The rate asserted everywhere: 1% within 0.2 points.
fn assert_one_percent(rate: f64, context: &str) {
    assert!(
        (rate - 0.01).abs() <= 0.002,
        "{context}: rate {rate}, not 1% ± 0.2%"
    );
}

/// Scrapes until both counters are there and say `dead` and `sent` (statistics lag; 40 s at
/// most), then checks their ratio.
fn assert_counters(e: &Exporter, channel: &str, dead: f64, sent: f64) -> String {
    let body = e.until(Duration::from_secs(40), |b| {
        counters(b, channel) == (Some(dead), Some(sent))
    });
    let (d, s) = counters(&body, channel);
    let (Some(d), Some(s)) = (d, s) else {
        panic!("no flow counters for {channel}:\n{body}");
    };
    assert_eq!((d, s), (dead, sent), "{body}");
    assert_one_percent(d / s, "exporter");
    assert!(
        body.contains("# TYPE dlq_dead_lettered_messages_total counter\n")
            && body.contains("# TYPE dlq_source_messages_total counter\n"),
        "{body}"
    );
    body
}

// ------------------------------------------------------------------------------ RabbitMQ

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
fn rabbitmq_one_rejected_in_a_hundred_is_a_1_percent_rate_in_status_and_the_exporter() {
    let Some(f) = rabbit::Fixture::new() else {
        return;
    };
    f.write_example(reject_into_dlq);
    f.apply(&[]).ok_with("apply the channel");
    let [main, _, dlq, _] = f.names();

    // A third-party producer: 1,000 messages with ids, confirmed.
    rabbit::fill(&main, SENT, |i| {
        (
            format!("{{\"order\":{i}}}").into_bytes(),
            lapin::BasicProperties::default().with_message_id(format!("m-{i}").into()),
        )
    });
    // A consumer: acknowledges what it processed, rejects (requeue=false) what fails.
    let processed: BTreeSet<String> = block(async {
        let conn = rabbit::amqp().await;
        let ch = conn.create_channel().await.expect("channel");
        let mut done = BTreeSet::new();
        let mut seen = 0;
        for _ in 0..20_000 {
            if seen == SENT {
                break;
            }
            let failing = |id: &str| fails(id.trim_start_matches("m-").parse().expect("numbered"));
            let Some((id, failed)) = rabbit::settle_next(&ch, &main, failing).await else {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            };
            seen += 1;
            if !failed {
                done.insert(id);
            }
        }
        let _ = conn.close(200, "done".into()).await;
        done
    });
    assert_eq!(processed.len(), 990);
    rabbit::wait_for_messages(&dlq, 10);

    let entry = status_until(&f, 10, SENT as u64);
    let flow = &entry["deadLetter"]["flow"];
    assert_eq!(flow["window"]["deadLettered"], 10, "{entry:#}");
    assert_eq!(flow["window"]["source"], SENT, "{entry:#}");
    assert_one_percent(flow["window"]["rate"].as_f64().expect("a rate"), "status");
    assert_eq!(flow["deadLetteredTotal"], 10, "{entry:#}");
    assert_eq!(flow["sourceTotal"], SENT, "{entry:#}");
    let human = f.run(&["status", "channel.yaml"]);
    human
        .ok()
        .assert_stdout_contains("rate      1.00% (10 of 1,000 in the last 5m)");

    let e = Exporter::start(&f, &["--interval", "1s"]);
    assert_counters(&e, &f.channel, 10.0, SENT as f64);
    drop(e);
    // Restarted: the same totals, read from the broker again.
    let e = Exporter::start(&f, &["--interval", "1s"]);
    assert_counters(&e, &f.channel, 10.0, SENT as f64);

    // Every id accounted for: the 10 that failed are in the DLQ (taken now, after the
    // readings). What entered the DLQ stays 10 once they have left it.
    let dead: BTreeSet<String> = block(rabbit::take_each(&dlq, |d| {
        d.properties
            .message_id()
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default()
    }))
    .into_iter()
    .collect();
    let want: BTreeSet<String> = (0..SENT)
        .filter(|i| fails(*i))
        .map(|i| format!("m-{i}"))
        .collect();
    assert_eq!(dead, want);
    assert_eq!(processed.len() + dead.len(), SENT);
    assert!(processed.is_disjoint(&dead));
    let ch = format!("channel=\"{}\"", f.channel);
    let body = e.until(Duration::from_secs(40), |b| {
        sample(b, "dlq_depth", &[&ch, "role=\"dead-letter\""]) == Some(0.0)
            && counters(b, &f.channel).0 == Some(10.0)
    });
    assert_eq!(
        sample(&body, "dlq_depth", &[&ch, "role=\"dead-letter\""]),
        Some(0.0),
        "{body}"
    );
    let (_, stats) = block(rabbit::api(
        reqwest::Method::GET,
        &format!("/api/queues/%2F/{dlq}?columns=messages,message_stats"),
        None,
    ));
    assert_eq!(counters(&body, &f.channel).0, Some(10.0), "{stats}\n{body}");
}

// ------------------------------------------------------------------------------ Kafka

#[test]
fn kafka_one_record_in_a_hundred_sent_to_the_dlt_is_a_1_percent_rate_in_status_and_the_exporter() {
    use rdkafka::consumer::Consumer;
    use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
    use rdkafka::producer::{FutureProducer, FutureRecord};
    if !kafka::apache_kafka("end offsets and ListOffsets by timestamp after batched produces") {
        return;
    }
    let Some(f) = kafka::Fixture::applied() else {
        return;
    };
    let main = f.main();
    let dlt = format!("{main}-dlt");
    let producer: FutureProducer = kafka::producer(&[("linger.ms", "5")]);
    // A third-party producer: 1,000 records keyed by their ids, batched.
    block(futures_util::future::join_all((0..SENT).map(|i| {
        let id = format!("m-{i}");
        let body = format!("{{\"item\":{i}}}");
        let (producer, main) = (&producer, &main);
        async move {
            producer
                .send(
                    FutureRecord::to(main).key(&id).payload(&body),
                    Duration::from_secs(10),
                )
                .await
        }
    })))
    .into_iter()
    .for_each(|r| {
        r.map_err(|(e, _)| e).expect("produce");
    });
    // The application: a group consumer that processes each record, and produces the ones
    // that fail to the DLT with Spring's headers (DeadLetterPublishingRecoverer).
    let app = kafka::consumer(
        &format!("{}-app", f.channel),
        &[("auto.offset.reset", "earliest")],
    );
    app.subscribe(&[main.as_str()]).expect("subscribe");
    let mut processed = BTreeSet::new();
    let mut failed = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while processed.len() + failed.len() < SENT && Instant::now() < deadline {
        let Some(m) = app.poll(Duration::from_millis(200)) else {
            continue;
        };
        let m = m.expect("consume");
        let id = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
        let i: usize = id.trim_start_matches("m-").parse().expect("numbered");
        if fails(i) {
            failed.push((
                id,
                m.payload().unwrap_or_default().to_vec(),
                m.partition(),
                m.offset(),
            ));
        } else {
            processed.insert(id);
        }
    }
    block(futures_util::future::join_all(failed.iter().map(
        |(id, body, partition, offset)| {
            let producer = &producer;
            let dlt = &dlt;
            let (p, o) = (partition.to_be_bytes(), offset.to_be_bytes());
            async move {
                let h = OwnedHeaders::new()
                    .insert(Header {
                        key: "kafka_dlt-exception-fqcn",
                        value: Some(
                            b"org.springframework.kafka.listener.ListenerExecutionFailedException"
                                .as_slice(),
                        ),
                    })
                    .insert(Header {
                        key: "kafka_dlt-original-topic",
                        value: Some(main_name(dlt).as_bytes()),
                    })
                    .insert(Header {
                        key: "kafka_dlt-original-partition",
                        value: Some(p.as_slice()),
                    })
                    .insert(Header {
                        key: "kafka_dlt-original-offset",
                        value: Some(o.as_slice()),
                    });
                producer
                    .send(
                        FutureRecord::to(dlt).key(id).payload(body).headers(h),
                        Duration::from_secs(10),
                    )
                    .await
            }
        },
    )))
    .into_iter()
    .for_each(|r| {
        r.map_err(|(e, _)| e).expect("produce to the DLT");
    });
    assert_eq!((processed.len(), failed.len()), (990, 10));

    let entry = status_until(&f, 10, SENT as u64);
    assert_eq!(entry["deadLetter"]["name"], dlt.as_str());
    let flow = &entry["deadLetter"]["flow"];
    assert_eq!(flow["window"]["deadLettered"], 10, "{entry:#}");
    assert_eq!(flow["window"]["source"], SENT, "{entry:#}");
    assert_one_percent(flow["window"]["rate"].as_f64().expect("a rate"), "status");
    assert_eq!(
        (
            flow["deadLetteredTotal"].clone(),
            flow["sourceTotal"].clone()
        ),
        (10.into(), SENT.into())
    );
    // A window that ends before the traffic began counts none of it (ListOffsets by time).
    std::thread::sleep(Duration::from_secs(2));
    let short = f.run(&[
        "status",
        "channel.yaml",
        "--format",
        "json",
        "--rate-window",
        "1s",
    ]);
    let w = short.json("status")["channels"][0]["deadLetter"]["flow"]["window"].clone();
    assert_eq!(
        (w["deadLettered"].clone(), w["source"].clone()),
        (0.into(), 0.into()),
        "{w}"
    );

    let e = Exporter::start(&f, &["--interval", "1s"]);
    assert_counters(&e, &f.channel, 10.0, SENT as f64);
    drop(e);
    let e = Exporter::start(&f, &["--interval", "1s"]);
    assert_counters(&e, &f.channel, 10.0, SENT as f64);

    // Every id accounted for: the DLT, read by assignment from the start, holds the 10.
    let reader = kafka::consumer(&format!("{}-check", f.channel), &[]);
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..3 {
        tpl.add_partition_offset(&dlt, p, rdkafka::Offset::Beginning)
            .expect("tpl");
    }
    reader.assign(&tpl).expect("assign");
    let mut dead = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while dead.len() < 10 && Instant::now() < deadline {
        if let Some(m) = reader.poll(Duration::from_millis(200)) {
            let m = m.expect("read the DLT");
            assert!(m.headers().is_some_and(|h| h.count() == 4));
            dead.insert(String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned());
        }
    }
    let want: BTreeSet<String> = (0..SENT)
        .filter(|i| fails(*i))
        .map(|i| format!("m-{i}"))
        .collect();
    assert_eq!(dead, want);
    assert!(processed.is_disjoint(&dead));
    assert_eq!(processed.len() + dead.len(), SENT);
}

/// The main topic a Spring-named DLT belongs to.
fn main_name(dlt: &str) -> String {
    dlt.trim_end_matches("-dlt").to_owned()
}

// ------------------------------------------------------------------------------ SQS

/// moto 5.2.5 publishes no AWS/SQS metrics. This puts the datapoints AWS would have published
/// for what the test really did, per minute: the source's NumberOfMessagesSent (what was
/// sent), the DLQ's ApproximateNumberOfMessagesVisible / NotVisible (0, then what moto's
/// redrive moved in) and NumberOfMessagesDeleted (none). Timestamps are whole minutes.
fn put_sqs_metrics(aws: &support::sqs::Aws, main: &str, dlq: &str, sent: f64, moved: f64) {
    use aws_sdk_cloudwatch::primitives::DateTime;
    use aws_sdk_cloudwatch::types::{Dimension, MetricDatum};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let minute = now / 60 * 60;
    let datum = |queue: &str, metric: &str, at: i64, v: f64| {
        MetricDatum::builder()
            .metric_name(metric)
            .dimensions(Dimension::builder().name("QueueName").value(queue).build())
            .timestamp(DateTime::from_secs(at))
            .value(v)
            .build()
    };
    let before = minute - 120;
    let data = vec![
        datum(main, "NumberOfMessagesSent", before, 0.0),
        datum(main, "NumberOfMessagesSent", minute - 60, sent),
        datum(dlq, "ApproximateNumberOfMessagesVisible", before, 0.0),
        datum(
            dlq,
            "ApproximateNumberOfMessagesVisible",
            minute - 60,
            moved,
        ),
        datum(dlq, "ApproximateNumberOfMessagesNotVisible", before, 0.0),
        datum(
            dlq,
            "ApproximateNumberOfMessagesNotVisible",
            minute - 60,
            0.0,
        ),
        datum(dlq, "NumberOfMessagesDeleted", minute - 60, 0.0),
    ];
    block(
        aws.cw
            .put_metric_data()
            .namespace("AWS/SQS")
            .set_metric_data(Some(data))
            .send(),
    )
    .expect("PutMetricData");
}

#[test]
fn sqs_one_message_in_a_hundred_never_deleted_is_a_1_percent_rate_in_status_and_the_exporter() {
    use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
    let Some(f) = support::sqs::Fixture::new() else {
        return;
    };
    // Two receives, then moto's redrive moves the message; a short visibility timeout so the
    // test does not wait 30 s per receive.
    f.write_example(|t| {
        t.replace("    maxAttempts: 5\n", "    maxAttempts: 2\n")
            .replace("visibilityTimeout: 30s", "visibilityTimeout: 1s")
    });
    f.apply(&[]).ok_with("apply the channel");
    let [main, dlq, _, _] = f.names();
    let url = f.aws.url(&main);
    // A third-party producer (aws-sdk-sqs): 1,000 messages whose bodies are their ids, in
    // waves of 50 that the consumer keeps up with (moto scans the whole queue on every
    // receive: 2.7 s each with 1,000 waiting, measured).
    let send_wave = |wave: usize| {
        block(async {
            for batch in 0..5 {
                let entries = (0..10)
                    .map(|k| {
                        let i = wave * 50 + batch * 10 + k;
                        SendMessageBatchRequestEntry::builder()
                            .id(format!("e{k}"))
                            .message_body(format!("m-{i}"))
                            .build()
                            .expect("entry")
                    })
                    .collect();
                f.aws.send_batch(&url, entries).await;
            }
        })
    };
    // A consumer that deletes what it processed and never deletes what fails: after two
    // receives moto's redrive moves those to the DLQ.
    let mut processed = BTreeSet::new();
    let mut waves = 0;
    let deadline = Instant::now() + Duration::from_secs(240);
    while (processed.len() < 990 || f.aws.count(&dlq) < 10) && Instant::now() < deadline {
        if waves < SENT / 50 && processed.len() + 10 >= waves * 50 - waves * 50 / 100 {
            send_wave(waves);
            waves += 1;
        }
        let got = block(
            f.aws
                .sqs
                .receive_message()
                .queue_url(&url)
                .max_number_of_messages(10)
                .send(),
        )
        .expect("ReceiveMessage");
        let mut done = Vec::new();
        for (k, m) in got.messages().iter().enumerate() {
            let id = m.body().unwrap_or_default().to_owned();
            let i: usize = id.trim_start_matches("m-").parse().expect("numbered");
            if fails(i) {
                continue;
            }
            done.push(
                aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                    .id(format!("d{k}"))
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .build()
                    .expect("entry"),
            );
            processed.insert(id);
        }
        if done.is_empty() {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        block(
            f.aws
                .sqs
                .delete_message_batch()
                .queue_url(&url)
                .set_entries(Some(done))
                .send(),
        )
        .expect("DeleteMessageBatch");
    }
    assert_eq!(waves * 50, SENT);
    assert_eq!(processed.len(), 990);
    assert_eq!(f.aws.count(&dlq), 10);
    put_sqs_metrics(&f.aws, &main, &dlq, SENT as f64, 10.0);

    let out = f.run(&[
        "status",
        "channel.yaml",
        "--format",
        "json",
        "--no-peek",
        "--rate-window",
        "5m",
    ]);
    let entry = out.json("status")["channels"][0].clone();
    let flow = &entry["deadLetter"]["flow"];
    assert_eq!(flow["window"]["deadLettered"], 10, "{entry:#}");
    assert_eq!(flow["window"]["source"], SENT, "{entry:#}");
    assert_one_percent(flow["window"]["rate"].as_f64().expect("a rate"), "status");
    // CloudWatch has no totals: status says so (the exporter adds the periods up).
    assert!(flow["deadLetteredTotal"].is_null(), "{entry:#}");

    let e = Exporter::start(&f, &["--interval", "1s"]);
    assert_counters(&e, &f.channel, 10.0, SENT as f64);

    // Every id accounted for: the 10 that failed are in the DLQ.
    let dead: BTreeSet<String> = f.aws.take(&dlq, 10).into_iter().map(|(b, _)| b).collect();
    let want: BTreeSet<String> = (0..SENT)
        .filter(|i| fails(*i))
        .map(|i| format!("m-{i}"))
        .collect();
    assert_eq!(dead, want);
    assert!(processed.is_disjoint(&dead));
}

// ------------------------------------------------------------------------------ Pub/Sub

/// The exporter runs without `--peek`, and still has the emulator-backed depth: it counts the
/// dead-letter subscription by pull and nack (it has no dead-letter policy of its own, so the
/// nack spends nothing), exact, or a lower bound at `--scan`, labelled; what a third-party
/// client reads afterwards is the same count, each message once: nothing was consumed.
#[test]
fn pubsub_the_exporter_counts_the_dead_letter_subscription_without_consuming_it() {
    let Some(f) = support::pubsub::Fixture::new() else {
        return;
    };
    f.write_example(|t| f.example(t));
    f.apply(&[]).ok();
    let dlt = format!("{}-dlt", f.channel);
    let dl_sub = format!("{}-dlt-sub", f.channel);
    let mut published = BTreeSet::new();
    for i in 0..7 {
        published.insert(f.rest.publish(&dlt, &format!("dead {i}")));
    }
    let ch = format!("channel=\"{}\"", f.channel);
    let scrape_depth = |extra: &[&str]| {
        let e = Exporter::start(&f, &[&["--interval", "1s"], extra].concat());
        let body = e.first_reading();
        (
            sample(&body, "dlq_depth", &[&ch, "role=\"dead-letter\""]),
            sample(
                &body,
                "dlq_depth_lower_bound",
                &[&ch, "role=\"dead-letter\""],
            ),
            body,
        )
    };
    for _ in 0..2 {
        let (depth, lower, body) = scrape_depth(&[]);
        assert_eq!((depth, lower), (Some(7.0), Some(0.0)), "{body}");
    }
    let (depth, lower, body) = scrape_depth(&["--scan", "5"]);
    assert_eq!((depth, lower), (Some(5.0), Some(1.0)), "{body}");
    // status says the same.
    let out = f.run(&["status", "channel.yaml", "--format", "json"]);
    assert_eq!(out.json("status")["channels"][0]["deadLetter"]["depth"], 7);
    // What a third-party client reads afterwards: all 7, each once.
    let seen = f.rest.take_ids(&dl_sub, 7);
    assert_eq!(seen, published, "nothing consumed by the counts");
}
