//! SQS redrive at the edges issue 31's hostile run found, live on moto: batches whose
//! payload is over SendMessageBatch's 1 MiB (finding 7), messages still held by an earlier
//! run (finding 7), a FIFO message group locked by a message the run leaves behind
//! (finding 8), and status' receive count (finding 16). Every message is put in and read
//! back by the AWS SDK as a third party, by its body, and every report's counts are checked
//! against what the SDK counts afterwards.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_sqs::types::{MessageAttributeValue, MessageSystemAttributeName};
use serde_json::Value;
use support::redrive::{redrive, redrive_ok};
use support::{block, sqs};

fn attr(t: &str, v: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type(t)
        .string_value(v)
        .build()
        .expect("attribute")
}

/// Sends one dead letter with its error class (and, on a FIFO queue, its group).
fn put(aws: &sqs::Aws, url: &str, body: &str, class: &str, group: Option<&str>) {
    let mut req = aws
        .sqs
        .send_message()
        .queue_url(url)
        .message_body(body)
        .message_attributes("dlq-error-class", attr("String", class));
    if let Some(g) = group {
        req = req.message_group_id(g).message_deduplication_id(body);
    }
    block(req.send()).expect("SendMessage");
}

fn bodies(read: &[(String, BTreeMap<String, String>)]) -> Vec<String> {
    let mut b: Vec<String> = read.iter().map(|(b, _)| b.clone()).collect();
    b.sort();
    b
}

/// Finding 7: ten messages of 250 KiB are 2.5 MB together, over SendMessageBatch's 1 MiB
/// (moto enforces it on the bodies: BatchRequestTooLong). Before the fix every run sent the
/// ten as one batch and failed, and a run within the 300 s hold said "complete: 0 moved".
#[test]
fn sqs_messages_of_250_kib_move_in_batches_under_one_mebibyte() {
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let [main, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    let url = aws.url(&dlq);
    let big = |i: usize| format!("b{i:02}-{}", "x".repeat(250 * 1024 - 4));
    for i in 0..10 {
        put(&aws, &url, &big(i), "poison", None);
    }
    assert_eq!(aws.count(&dlq), 10);
    let doc = redrive_ok(&f, &["--yes"]);
    assert_eq!(doc["moved"], 10, "{doc}");
    assert_eq!(doc["possiblyDuplicated"], 0, "{doc}");
    let moved = aws.take(&main, 10);
    assert_eq!(
        bodies(&moved),
        (0..10).map(big).collect::<Vec<_>>(),
        "each of the ten, once, intact"
    );
    assert_eq!(aws.count(&dlq), 0);
    assert_eq!(doc["leftInDeadLetter"], 0, "{doc}");
}

/// Finding 7, on an account whose batch quota is smaller than the 1 MiB the mover packs for
/// (SQS's older 256 KiB): SendMessageBatch answers BatchRequestTooLong (a proxy in front of
/// moto plays that quota), the mover splits the request and sends again, and every message
/// moves once; a single message longer than the quota stops the run and stays in the DLQ.
#[test]
fn sqs_a_batch_refused_as_too_long_is_split_and_sent_again() {
    use support::proxy::{Faults, Protocol, Proxy};
    let proxy = Proxy::start(
        &support::aws_endpoint(),
        Faults {
            protocol: Protocol::Aws,
            batch_limit: Some(256 * 1024),
            ..Faults::default()
        },
    );
    let Some(f) = sqs::Fixture::with_endpoint(&proxy.addr) else {
        return;
    };
    f.write_example(|t| t);
    let a = f.apply(&[]);
    a.ok();
    let [main, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    let url = aws.url(&dlq);
    let body = |i: usize| format!("c{i:02}-{}", "y".repeat(100 * 1024 - 4));
    for i in 0..10 {
        put(&aws, &url, &body(i), "poison", None);
    }
    let doc = redrive_ok(&f, &["--yes"]);
    assert_eq!(doc["moved"], 10, "{doc}");
    assert!(
        proxy
            .counters
            .faulted
            .load(std::sync::atomic::Ordering::SeqCst)
            > 0,
        "a batch was refused and split"
    );
    assert_eq!(
        bodies(&aws.take(&main, 10)),
        (0..10).map(body).collect::<Vec<_>>()
    );
    assert_eq!(aws.count(&dlq), 0);

    // One message longer than the quota: not sent, still in the DLQ, the run says why.
    let huge = format!("h-{}", "z".repeat(300 * 1024));
    put(&aws, &url, &huge, "poison", None);
    let mut ws = f;
    ws.set_env("DLQCTL_SQS_REDRIVE_HOLD", "2");
    let (code, doc, err) = redrive(&ws, &["--yes"]);
    assert_eq!(code, 1, "{doc}\n{err}");
    assert_eq!(doc["moved"], 0, "{doc}");
    assert!(err.contains("longer than a batch may be"), "{err}");
    std::thread::sleep(std::time::Duration::from_secs(3));
    let left = aws.take(&dlq, 1);
    assert_eq!(bodies(&left), vec![huge], "still in the DLQ, once");
    assert!(aws.take(&main, 0).is_empty(), "nothing sent");
}

/// Finding 7, second half: messages received and held (in flight) by an earlier run, or by
/// anyone, cannot be examined until they are visible again: the run says so and exits 1,
/// instead of "complete".
#[test]
fn sqs_messages_held_by_an_earlier_run_make_the_run_incomplete() {
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let [main, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    let url = aws.url(&dlq);
    for i in 0..5 {
        put(&aws, &url, &format!("h{i}"), "poison", None);
    }
    // An earlier run's hold, as SQS sees it: three received with a 300 s visibility timeout.
    let held = block(
        aws.sqs
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(3)
            .visibility_timeout(300)
            .send(),
    )
    .expect("ReceiveMessage");
    let held: Vec<(String, String)> = held
        .messages()
        .iter()
        .map(|m| {
            (
                m.body().unwrap_or_default().to_owned(),
                m.receipt_handle().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(held.len(), 3);

    let (code, doc, err) = redrive(&f, &["--yes"]);
    assert_eq!(code, 1, "{doc}\n{err}");
    assert_eq!(doc["moved"], 2, "{doc}");
    let why = doc["incomplete"].to_string();
    assert!(why.contains("3 message(s) in flight"), "{doc}");
    let moved = aws.take(&main, 2);
    let expected: BTreeSet<String> = (0..5)
        .map(|i| format!("h{i}"))
        .filter(|b| !held.iter().any(|(h, _)| h == b))
        .collect();
    assert_eq!(
        bodies(&moved).into_iter().collect::<BTreeSet<_>>(),
        expected
    );
    // The held three are still in the DLQ, as the report says; once visible, a run moves them.
    assert_eq!(aws.count(&dlq), 3);
    assert_eq!(doc["leftInDeadLetter"], 3, "{doc}");
    assert_eq!(doc["possiblyDuplicated"], 0, "{doc}");
    for (_, receipt) in &held {
        block(
            aws.sqs
                .change_message_visibility()
                .queue_url(&url)
                .receipt_handle(receipt)
                .visibility_timeout(0)
                .send(),
        )
        .expect("ChangeMessageVisibility");
    }
    let doc = redrive_ok(&f, &["--yes"]);
    assert_eq!(doc["moved"], 3, "{doc}");
    assert_eq!(
        bodies(&aws.take(&main, 3)),
        held.iter()
            .map(|(b, _)| b.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
    );
    assert_eq!(aws.count(&dlq), 0);
}

/// Finding 8: on a FIFO DLQ, a message the run leaves behind (not selected by `--class`)
/// locks its message group while the run holds it, so nothing behind it in that group can
/// be read. Before the fix each run said "complete" and the group's selected messages never
/// moved. moto models the group lock (a group with a message in flight delivers nothing).
#[test]
fn sqs_fifo_groups_locked_by_a_message_left_behind_are_named_and_the_run_is_incomplete() {
    let Some(f) = sqs::Fixture::new() else { return };
    f.write_from("refunds-sqs-fifo.yaml", |t| t);
    let a = f.apply(&[]);
    a.ok();
    let main = format!("{}.fifo", f.channel);
    let dlq = format!("{}-dlq.fifo", f.channel);
    let aws = sqs::Aws::new();
    let url = aws.url(&dlq);
    // Three groups of ten, sent interleaved; group `g0`'s second message is not poison.
    let class = |g: usize, i: usize| {
        if g == 0 && i == 1 {
            "transient_exhausted"
        } else {
            "poison"
        }
    };
    for i in 0..10 {
        for g in 0..3 {
            put(
                &aws,
                &url,
                &format!("g{g}-{i}"),
                class(g, i),
                Some(&format!("g{g}")),
            );
        }
    }
    assert_eq!(aws.count(&dlq), 30);
    let (code, doc, err) = redrive(&f, &["--class", "poison", "--yes"]);
    let moved_n = doc["moved"].as_u64().expect("moved");
    let moved = aws.take(&main, moved_n as usize);
    assert_eq!(moved.len() as u64, moved_n, "the report counts what moved");
    let left = aws.count(&dlq);
    assert_eq!(left + moved_n, 30, "nothing lost: {doc}");
    assert_eq!(doc["leftInDeadLetter"], left, "{doc}");
    assert_eq!(doc["possiblyDuplicated"], 0, "{doc}");
    // Every message of g1 and g2 moved; g0 stopped at its held message.
    let moved_bodies: BTreeSet<String> = bodies(&moved).into_iter().collect();
    for g in 1..3 {
        for i in 0..10 {
            assert!(moved_bodies.contains(&format!("g{g}-{i}")), "{doc}");
        }
    }
    // g0 moved up to its message left behind, never past it (g0-0 only), whatever the
    // receive batches were; the eight behind g0-1 are not read, and the run says which group.
    assert!(moved_bodies.contains("g0-0"), "{doc}");
    assert_eq!(moved_n, 21, "{doc}");
    assert_eq!(code, 1, "{doc}\n{err}");
    let why = doc["incomplete"].to_string();
    assert!(
        why.contains("`g0`") && !why.contains("`g1`") && !why.contains("`g2`"),
        "{doc}"
    );
    // The eight behind g0-1 (which itself was examined: not selected).
    assert!(why.contains("8 message(s) of FIFO queue"), "{doc}");
    // The consumer sees each group in order (its copies keep their group).
    let per_group = |g: usize| -> Vec<String> {
        moved
            .iter()
            .map(|(b, _)| b.clone())
            .filter(|b| b.starts_with(&format!("g{g}-")))
            .collect()
    };
    for g in 1..3 {
        assert_eq!(
            per_group(g),
            (0..10).map(|i| format!("g{g}-{i}")).collect::<Vec<_>>(),
            "group g{g} in order"
        );
    }
    // The messages of `g0` are all still there, in order, the held one first.
    let rest = take_fifo(&aws, &dlq, left as usize);
    let g0: Vec<String> = rest
        .iter()
        .filter(|(_, g)| g == "g0")
        .map(|(b, _)| b.clone())
        .collect();
    assert_eq!(
        g0,
        (1..10).map(|i| format!("g0-{i}")).collect::<Vec<_>>(),
        "{rest:?}"
    );
    assert_eq!(rest.len() as u64, left);
}

/// Receives and deletes every message of a FIFO queue: (body, group).
fn take_fifo(aws: &sqs::Aws, queue: &str, want: usize) -> Vec<(String, String)> {
    aws.take_with(
        queue,
        want,
        want + 5,
        |r| r.message_system_attribute_names(MessageSystemAttributeName::MessageGroupId),
        |m| {
            m.attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
                .cloned()
                .unwrap_or_default()
        },
    )
}

/// Finding 16: status reads each sampled message once (its receive count + 1, as the
/// output and docs say), not twice, and says what it read.
#[test]
fn sqs_status_raises_the_receive_count_of_what_it_read_by_one() {
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let [_, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    let url = aws.url(&dlq);
    for i in 0..25 {
        put(&aws, &url, &format!("s{i:02}"), "poison", None);
    }
    let out = f.run(&["status", "channel.yaml", "--format", "json"]);
    out.ok();
    let doc: Value = serde_json::from_str(&out.stdout).expect("status json");
    let notes = doc["channels"][0]["deadLetter"]["notes"].to_string();
    // Every message's receive count, read back by a third party that hides them meanwhile.
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for _ in 0..10 {
        let got = block(
            aws.sqs
                .receive_message()
                .queue_url(&url)
                .max_number_of_messages(10)
                .visibility_timeout(60)
                .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
                .send(),
        )
        .expect("ReceiveMessage");
        for m in got.messages() {
            let n: u64 = m
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                .and_then(|v| v.parse().ok())
                .expect("ApproximateReceiveCount");
            // This receive counted too.
            counts.insert(m.body().unwrap_or_default().to_owned(), n - 1);
        }
    }
    assert_eq!(counts.len(), 25);
    let read: Vec<&String> = counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(b, _)| b)
        .collect();
    assert!(
        counts.values().all(|n| *n <= 1),
        "each message read at most once: {counts:?}\n{notes}"
    );
    assert!(!read.is_empty(), "{counts:?}");
    assert!(
        notes.contains(&format!("read {} of the 25", read.len())),
        "{notes}"
    );
}
