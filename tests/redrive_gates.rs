//! Issue 35: a redrive that asks the downstream first, live on every backend. A local HTTP
//! health endpoint (this file's, on 127.0.0.1) answers 503: `redrive --health-check` moves
//! nothing and exits 75; it answers 200 for two checks, then 503: `--batch 10 --until-empty`
//! moves two batches and stops before the third, exit 75; it answers 200: the rest moves,
//! batch by batch, until a batch finds fewer than 10. Nothing is lost: every message is read
//! back from the main queue or topic by a third-party client, each once, and the DLQ is empty.
//! Azure Service Bus runs the same scenarios on its contract fake (no Service Bus can run
//! here), with a consumer that abandons each message until Service Bus dead-letters it.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use serde_json::Value;
use support::redrive::redrive;
use support::workspace::Workspace;
use support::{block, kafka, pubsub, rabbit, sqs};

/// A health endpoint: answers 200 while `healthy_left` is above 0 (counting each answer
/// down; `i64::MAX`: always), else 503. Stops when dropped.
struct Health {
    url: String,
    healthy_left: Arc<AtomicI64>,
    asked: Arc<AtomicI64>,
    stop: Arc<AtomicBool>,
}

impl Health {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}/health", listener.local_addr().expect("addr"));
        let healthy_left = Arc::new(AtomicI64::new(0));
        let asked = Arc::new(AtomicI64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (left, count, done) = (
            Arc::clone(&healthy_left),
            Arc::clone(&asked),
            Arc::clone(&stop),
        );
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                let Ok((mut s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 2048];
                let _ = s.read(&mut buf);
                count.fetch_add(1, Ordering::SeqCst);
                let healthy = left
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                        (n > 0).then(|| if n == i64::MAX { n } else { n - 1 })
                    })
                    .is_ok();
                let status = if healthy {
                    "200 OK"
                } else {
                    "503 Service Unavailable"
                };
                let _ = write!(
                    s,
                    "HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
            }
        });
        Health {
            url,
            healthy_left,
            asked,
            stop,
        }
    }

    fn answer_200(&self, times: i64) {
        self.healthy_left.store(times, Ordering::SeqCst);
    }
}

impl Drop for Health {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// What each backend supplies: put dead letter `i` (its body `m-<i>`), the bodies read back
/// from the main queue or topic (`want` expected), and what is left in the DLQ.
struct Backend<'a> {
    ws: &'a Workspace,
    put: Box<dyn Fn(usize) + 'a>,
    take_main: Box<dyn Fn(usize) -> Vec<String> + 'a>,
    dlq_left: Box<dyn Fn() -> u64 + 'a>,
}

const N: usize = 35;

fn scenario(b: &Backend<'_>) {
    for i in 0..N {
        (b.put)(i);
    }
    let health = Health::start();
    let gated = |extra: &[&str]| -> (i32, Value, String) {
        let mut args = vec![
            "--yes",
            "--health-check",
            health.url.as_str(),
            "--batch",
            "10",
            "--until-empty",
        ];
        args.extend_from_slice(extra);
        redrive(b.ws, &args)
    };

    // Unhealthy: nothing moves, exit 75, the gate's answer in the report.
    health.answer_200(0);
    let (code, doc, err) = gated(&[]);
    assert_eq!(code, 75, "{doc:#}\n{err}");
    assert_eq!(doc["moved"], 0, "{doc:#}");
    assert_eq!(doc["batches"]["stoppedBy"], "unhealthy", "{doc:#}");
    assert!(
        doc["unhealthy"].as_str().is_some_and(|w| w.contains("503")),
        "{doc:#}"
    );
    assert_eq!(health.asked.load(Ordering::SeqCst), 1);

    // Healthy for two checks: two batches, then the third check stops the run.
    health.answer_200(2);
    let (code, doc, err) = gated(&["--pause", "200ms"]);
    assert_eq!(code, 75, "{doc:#}\n{err}");
    assert_eq!(doc["moved"], 20, "{doc:#}");
    assert_eq!(doc["batches"]["count"], 2, "{doc:#}");
    assert_eq!(doc["batches"]["stoppedBy"], "unhealthy", "{doc:#}");
    assert_eq!(health.asked.load(Ordering::SeqCst), 4);
    // The report's own counts agree with what is there (where the backend counts what is left).
    assert_eq!(doc["possiblyDuplicated"], 0, "{doc:#}");
    assert!(
        doc["leftInDeadLetter"].as_u64().is_none_or(|n| n == 15),
        "{doc:#}"
    );

    // Healthy: the rest, batch by batch, until a batch finds fewer than 10.
    health.answer_200(i64::MAX);
    let (code, doc, err) = gated(&[]);
    assert_eq!(code, 0, "{doc:#}\n{err}");
    assert_eq!(doc["moved"], 15, "{doc:#}");
    assert_eq!(doc["batches"]["count"], 2, "{doc:#}");
    assert_eq!(doc["batches"]["stoppedBy"], "empty", "{doc:#}");
    assert_eq!(doc["possiblyDuplicated"], 0, "{doc:#}");
    assert!(
        doc["leftInDeadLetter"].as_u64().is_none_or(|n| n == 0),
        "{doc:#}"
    );

    let mut back = (b.take_main)(N);
    back.sort();
    let mut want: Vec<String> = (0..N).map(|i| format!("m-{i:02}")).collect();
    want.sort();
    assert_eq!(back, want, "every message back once");
    assert_eq!((b.dlq_left)(), 0, "nothing left behind");
}

/// Dead letter `i` into a RabbitMQ DLQ, as a consumer publishes it (the default exchange).
fn rabbit_put(dlq: &str, i: usize) {
    block(rabbit::publish_with(
        "",
        dlq,
        format!("m-{i:02}").as_bytes(),
        lapin::BasicProperties::default(),
    ));
}

/// Dead letter `i` into an SQS DLQ, through the AWS SDK.
fn sqs_put(aws: &sqs::Aws, dlq: &str, i: usize) {
    block(
        aws.sqs
            .send_message()
            .queue_url(aws.url(dlq))
            .message_body(format!("m-{i:02}"))
            .send(),
    )
    .expect("SendMessage");
}

/// Dead letter `i` into a Kafka DLT (keyed by its body, over the DLT's partitions).
fn kafka_put(producer: &rdkafka::producer::FutureProducer, dlt: &str, i: usize) {
    let body = format!("m-{i:02}");
    block(
        producer.send(
            rdkafka::producer::FutureRecord::to(dlt)
                .key(&body)
                .payload(&body),
            Duration::from_secs(10),
        ),
    )
    .map_err(|(e, _)| e)
    .expect("produce");
}

/// A Pub/Sub channel's fixture, its example applied with the fixture's own subscription.
fn pubsub_fixture() -> Option<pubsub::Fixture> {
    let f = pubsub::Fixture::new()?;
    f.write_example(|t| f.example(t));
    f.apply(&[]).ok();
    Some(f)
}

#[test]
fn rabbitmq_a_gated_batched_redrive_stops_when_unhealthy_and_loses_nothing() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    scenario(&Backend {
        ws: &f,
        put: Box::new(|i| rabbit_put(&dlq, i)),
        take_main: Box::new(|_| {
            block(rabbit::take_all(&main))
                .into_iter()
                .map(|(b, _)| String::from_utf8_lossy(&b).into_owned())
                .collect()
        }),
        dlq_left: Box::new(|| rabbit::count(&dlq)),
    });
}

#[test]
fn sqs_a_gated_batched_redrive_stops_when_unhealthy_and_loses_nothing() {
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let [main, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    scenario(&Backend {
        ws: &f,
        put: Box::new(|i| sqs_put(&aws, &dlq, i)),
        take_main: Box::new(|n| aws.take(&main, n).into_iter().map(|(b, _)| b).collect()),
        dlq_left: Box::new(|| aws.count(&dlq)),
    });
}

#[test]
fn kafka_a_gated_batched_redrive_stops_when_unhealthy_and_loses_nothing() {
    use rdkafka::Message;
    use rdkafka::consumer::Consumer;
    use rdkafka::producer::FutureProducer;
    let Some(f) = kafka::Fixture::applied() else {
        return;
    };
    let dlt = format!("{}-dlt", f.channel);
    let main = f.channel.clone();
    let producer: FutureProducer = kafka::producer(&[]);
    scenario(&Backend {
        ws: &f,
        put: Box::new(|i| kafka_put(&producer, &dlt, i)),
        take_main: Box::new(|want| {
            let consumer = kafka::consumer(
                &format!("{}-reader", f.channel),
                &[("auto.offset.reset", "earliest")],
            );
            consumer.subscribe(&[main.as_str()]).expect("subscribe");
            let mut out = Vec::new();
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while out.len() < want && std::time::Instant::now() < deadline {
                if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
                    out.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
                }
            }
            if let Some(Ok(m)) = consumer.poll(Duration::from_secs(1)) {
                panic!("an unexpected record at {}/{}", m.partition(), m.offset());
            }
            out
        }),
        dlq_left: Box::new(|| kafka::waiting(&f)),
    });
}

#[test]
fn pubsub_a_gated_batched_redrive_stops_when_unhealthy_and_loses_nothing() {
    let Some(f) = pubsub_fixture() else {
        return;
    };
    let sub = f.subscription();
    let dlt = format!("{}-dlt", f.channel);
    let dl_sub = format!("{}-dlt-sub", f.channel);
    // Pulls (and acks) until `want` came or `wait` passed.
    let pull_all = |s: &str, want: usize, wait: Duration| -> Vec<String> {
        use base64::Engine;
        let mut out = Vec::new();
        let deadline = std::time::Instant::now() + wait;
        while out.len() < want && std::time::Instant::now() < deadline {
            let got = f.rest.pull(s, 100);
            if got.is_empty() {
                std::thread::sleep(Duration::from_millis(100));
            }
            for m in got {
                let data = m["message"]["data"].as_str().unwrap_or_default();
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .expect("base64");
                out.push(String::from_utf8_lossy(&bytes).into_owned());
                f.rest.ack(s, m["ackId"].as_str().expect("ackId"));
            }
        }
        out
    };
    scenario(&Backend {
        ws: &f,
        put: Box::new(|i| {
            f.rest.publish(&dlt, &format!("m-{i:02}"));
        }),
        take_main: Box::new(|n| pull_all(&sub, n, Duration::from_secs(30))),
        // The emulator answers a pull at once: 3 s of empty pulls is an empty subscription.
        dlq_left: Box::new(|| pull_all(&dl_sub, 1, Duration::from_secs(3)).len() as u64),
    });
}

/// `--verify-for`: the downstream is not fixed — a consumer dead-letters every message that
/// comes back. The run moves its first batch of 5, watches the DLQ, sees them back, stops
/// (exit 1, `batches.stoppedBy: redead`) and reports them; it does not go round again.
/// Nothing is lost: the 12 are all in the DLQ or the main queue afterwards.
fn verify_scenario(
    b: &Backend<'_>,
    bouncer: impl FnOnce(Arc<AtomicBool>) -> std::thread::JoinHandle<()>,
    count_main: impl Fn() -> u64,
) {
    const M: usize = 12;
    for i in 0..M {
        (b.put)(i);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let bouncing = bouncer(Arc::clone(&stop));
    let (code, doc, err) = redrive(
        b.ws,
        &[
            "--yes",
            "--batch",
            "5",
            "--until-empty",
            "--verify-for",
            "20s",
            "--max-redead",
            "20%",
        ],
    );
    stop.store(true, Ordering::SeqCst);
    bouncing.join().expect("the bouncing consumer");
    assert_eq!(code, 1, "{doc:#}\n{err}");
    assert_eq!(doc["moved"], 5, "one batch, then it stopped: {doc:#}");
    assert_eq!(doc["batches"]["stoppedBy"], "redead", "{doc:#}");
    let redead = &doc["redead"];
    assert!(
        redead["count"].as_u64().is_some_and(|n| n >= 2) && redead["of"] == 5,
        "{doc:#}"
    );
    assert_eq!(
        redead["ids"].as_array().map(Vec::len),
        redead["count"].as_u64().map(|n| n as usize),
        "{doc:#}"
    );
    // Nothing lost: every message in one place or the other.
    let (dlq, main) = ((b.dlq_left)(), count_main());
    assert_eq!(dlq + main, M as u64, "DLQ {dlq} + main {main}");
}

#[test]
fn rabbitmq_verify_for_stops_when_the_moved_messages_come_back() {
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    let [main, _, dlq, _] = f.names();
    let (from, to) = (main.clone(), dlq.clone());
    verify_scenario(
        &Backend {
            ws: &f,
            put: Box::new(|i| rabbit_put(&dlq, i)),
            take_main: Box::new(|_| Vec::new()),
            dlq_left: Box::new(|| rabbit::count(&dlq)),
        },
        move |stop| {
            // The broken consumer: whatever reaches the main queue goes back to the DLQ.
            std::thread::spawn(move || {
                let deadline = std::time::Instant::now() + Duration::from_secs(60);
                while !stop.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                    for (body, _) in block(rabbit::take_all(&from)) {
                        block(rabbit::publish_with(
                            "",
                            &to,
                            &body,
                            lapin::BasicProperties::default(),
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        },
        || rabbit::count(&main),
    );
}

#[test]
fn sqs_verify_for_stops_when_the_moved_messages_come_back() {
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let [main, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    let (from, to) = (main.clone(), dlq.clone());
    verify_scenario(
        &Backend {
            ws: &f,
            put: Box::new(|i| sqs_put(&aws, &dlq, i)),
            take_main: Box::new(|_| Vec::new()),
            dlq_left: Box::new(|| aws.count(&dlq)),
        },
        move |stop| {
            std::thread::spawn(move || {
                let aws = sqs::Aws::new();
                let deadline = std::time::Instant::now() + Duration::from_secs(60);
                while !stop.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                    for (body, _) in aws.take(&from, 0) {
                        block(
                            aws.sqs
                                .send_message()
                                .queue_url(aws.url(&to))
                                .message_body(body)
                                .send(),
                        )
                        .expect("SendMessage");
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        },
        || aws.count(&main),
    );
}

#[test]
fn kafka_verify_for_stops_when_the_moved_messages_come_back() {
    use rdkafka::Message;
    use rdkafka::consumer::Consumer;
    use rdkafka::producer::{FutureProducer, FutureRecord};
    let Some(f) = kafka::Fixture::applied() else {
        return;
    };
    let dlt = format!("{}-dlt", f.channel);
    let main = f.channel.clone();
    let producer: FutureProducer = kafka::producer(&[]);
    let (from, to, group) = (main.clone(), dlt.clone(), format!("{}-broken", f.channel));
    let bounced = Arc::new(AtomicI64::new(0));
    let counted = Arc::clone(&bounced);
    verify_scenario(
        &Backend {
            ws: &f,
            put: Box::new(|i| kafka_put(&producer, &dlt, i)),
            take_main: Box::new(|_| Vec::new()),
            dlq_left: Box::new(|| kafka::waiting(&f)),
        },
        move |stop| {
            std::thread::spawn(move || {
                let consumer = kafka::consumer(&group, &[("auto.offset.reset", "earliest")]);
                consumer.subscribe(&[from.as_str()]).expect("subscribe");
                let producer: FutureProducer = kafka::producer(&[]);
                let deadline = std::time::Instant::now() + Duration::from_secs(60);
                while !stop.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                    if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
                        let body = m.payload().unwrap_or_default().to_vec();
                        block(producer.send(
                            FutureRecord::<[u8], [u8]>::to(&to).payload(&body),
                            Duration::from_secs(10),
                        ))
                        .map_err(|(e, _)| e)
                        .expect("produce");
                        bounced.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        },
        // On a log nothing leaves the main topic: what is not back in the DLT is what the
        // broken consumer has not bounced.
        || 5 - counted.load(Ordering::SeqCst).min(5) as u64,
    );
}

#[test]
fn pubsub_verify_for_stops_when_the_moved_messages_come_back() {
    use base64::Engine;
    let Some(f) = pubsub_fixture() else {
        return;
    };
    let sub = f.subscription();
    let dlt = format!("{}-dlt", f.channel);
    let dl_sub = format!("{}-dlt-sub", f.channel);
    // Pulls and acks everything there is on `s` (3 s of empty pulls: nothing more).
    let drain = |s: &str| -> u64 {
        let rest = pubsub::Rest::new();
        let mut n = 0;
        let mut quiet = std::time::Instant::now();
        while quiet.elapsed() < Duration::from_secs(3) {
            let got = rest.pull(s, 100);
            if !got.is_empty() {
                quiet = std::time::Instant::now();
            }
            for m in got {
                rest.ack(s, m["ackId"].as_str().expect("ackId"));
                n += 1;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        n
    };
    let (from, to) = (sub.clone(), dlt.clone());
    verify_scenario(
        &Backend {
            ws: &f,
            put: Box::new(|i| {
                f.rest.publish(&dlt, &format!("m-{i:02}"));
            }),
            take_main: Box::new(|_| Vec::new()),
            dlq_left: Box::new(|| drain(&dl_sub)),
        },
        move |stop| {
            std::thread::spawn(move || {
                let rest = pubsub::Rest::new();
                let deadline = std::time::Instant::now() + Duration::from_secs(60);
                while !stop.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                    for m in rest.pull(&from, 100) {
                        let data = m["message"]["data"].as_str().unwrap_or_default();
                        let body = base64::engine::general_purpose::STANDARD
                            .decode(data)
                            .expect("base64");
                        rest.publish(&to, &String::from_utf8_lossy(&body));
                        rest.ack(&from, m["ackId"].as_str().expect("ackId"));
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        },
        || drain(&sub),
    );
}

// ---------------------------------------------------------------------------------------------
// Azure Service Bus, on the contract fake (no Service Bus runs here: docs/azure.md)
// ---------------------------------------------------------------------------------------------

/// Dead letter `i` on the fake as a failing consumer makes one: sent to the queue (body
/// `m-<i>`), then abandoned until Service Bus dead-letters it (the example's maxDeliveryCount
/// is 8; bounded).
fn azure_put(fake: &support::azure::AzureFake, queue: &str, i: usize) {
    let c = support::azure::data::Client::new(fake);
    block(async {
        let id = format!("m-{i:02}");
        assert_eq!(c.send(queue, &id, &id, &[]).await, 201);
        for _ in 0..8 {
            let Some(m) = c.peek_lock(queue).await else {
                break;
            };
            assert_eq!(c.unlock(&m).await, 200);
        }
    });
}

/// Every message of the queue, received and completed: the bodies.
fn azure_take(fake: &support::azure::AzureFake, queue: &str, want: usize) -> Vec<String> {
    let c = support::azure::data::Client::new(fake);
    block(async {
        let mut out = Vec::new();
        // Bounded: what is there, and a few more reads than wanted.
        for _ in 0..want + 10 {
            let Some(m) = c.peek_lock(queue).await else {
                break;
            };
            out.push(String::from_utf8_lossy(&m.body).into_owned());
            assert_eq!(c.complete(&m).await, 200);
        }
        out
    })
}

#[test]
fn azure_a_gated_batched_redrive_stops_when_unhealthy_and_loses_nothing() {
    let f = support::azure::Fixture::new();
    f.ws.first_apply("azure first apply");
    let q = f.ws.channel.clone();
    scenario(&Backend {
        ws: &f.ws,
        put: Box::new(|i| azure_put(&f.fake, &q, i)),
        take_main: Box::new(|n| azure_take(&f.fake, &q, n)),
        dlq_left: Box::new(|| f.fake.dead_letters(&q).len() as u64),
    });
}

#[test]
fn azure_verify_for_stops_when_the_moved_messages_come_back() {
    let f = support::azure::Fixture::new();
    f.ws.first_apply("azure first apply");
    let q = f.ws.channel.clone();
    let fake = &f.fake;
    verify_scenario(
        &Backend {
            ws: &f.ws,
            put: Box::new(|i| azure_put(fake, &q, i)),
            take_main: Box::new(|_| Vec::new()),
            dlq_left: Box::new(|| fake.dead_letters(&q).len() as u64),
        },
        |stop| {
            // The broken consumer: it abandons whatever reaches the queue, until Service Bus
            // dead-letters it again (60 s at most).
            let q = q.clone();
            let c = support::azure::data::Client::new(fake);
            std::thread::spawn(move || {
                let deadline = std::time::Instant::now() + Duration::from_secs(60);
                while !stop.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                    while let Some(m) = block(c.peek_lock(&q)) {
                        assert_eq!(block(c.unlock(&m)), 200);
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        },
        || fake.messages(&q).len() as u64,
    );
}
