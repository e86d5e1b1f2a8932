//! `dlqctl archive CHANNEL --due`, live on every backend (issue 35): `deadLetter.archive`
//! declares where and how long before expiry; `--due` archives the dead letters older than
//! the DLQ's retention minus `before`, aged from where the backend's retention counts.
//!
//! Dead letters are made due quickly: with `before` one second short of the retention, every
//! message older than a second is due. First, with `before: 1m`, nothing is (the run archives
//! none and the DLQ keeps all); then, past a second, `--due --delete --yes` takes every one:
//! they are in the archive (read from its files, checksums checked against the manifest) and
//! the DLQ is empty (read by the backend's own client, or `status` for Kafka). The archive's
//! `to` is relative (`arch`): it lands beside the spec file. Also: `--due` on a RabbitMQ DLQ
//! without a TTL says nothing is due and exits 0; a dead letter whose age RabbitMQ cannot tell
//! (no `timestamp`, no `x-death`) is never due and stays.

mod support;

use std::time::Duration;

use lapin::BasicProperties;
use serde_json::Value;
use sha2::Digest;
use support::redrive::archive_ok;
use support::workspace::Workspace;
use support::{block, kafka, rabbit, sqs};

/// `archive CHANNEL channel.yaml --due --format json EXTRA`, which must exit 0: its report.
#[track_caller]
fn due_ok(ws: &Workspace, extra: &[&str]) -> Value {
    let args: Vec<&str> = std::iter::once("--due")
        .chain(extra.iter().copied())
        .collect();
    archive_ok(ws, &args)
}

/// Every body archived under `root`, each object checked against its manifest's sha256.
fn archived_bodies(root: &std::path::Path) -> Vec<Vec<u8>> {
    use base64::Engine;
    let mut out = Vec::new();
    if !root.exists() {
        return out;
    }
    for e in walkdir::WalkDir::new(root).sort_by_file_name() {
        let e = e.expect("walk");
        if e.file_name() != "manifest.json" {
            continue;
        }
        let m: Value = serde_json::from_slice(&std::fs::read(e.path()).expect("manifest"))
            .expect("manifest json");
        let dir = e.path().parent().expect("run folder");
        for o in m["objects"].as_array().expect("objects") {
            let bytes = std::fs::read(dir.join(o["name"].as_str().expect("name"))).expect("object");
            let sum: String = sha2::Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(o["sha256"].as_str(), Some(sum.as_str()), "{o}");
            for line in std::str::from_utf8(&bytes).expect("utf-8").lines() {
                let r: Value = serde_json::from_str(line).expect("record");
                out.push(match r["bodyEncoding"].as_str() {
                    Some("base64") => base64::engine::general_purpose::STANDARD
                        .decode(r["body"].as_str().expect("body"))
                        .expect("base64"),
                    _ => r["body"].as_str().expect("body").as_bytes().to_vec(),
                });
            }
        }
    }
    out.sort();
    out
}

fn bodies(n: usize) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = (0..n)
        .map(|i| format!("{{\"due\":{i}}}").into_bytes())
        .collect();
    v.sort();
    v
}

/// The spec's DLQ block with `archive: {to: arch, before: BEFORE}` after `after` (a line of
/// the example's `deadLetter` block, or the block's key itself).
fn with_archive(text: String, after: &str, before: &str) -> String {
    assert!(text.contains(after), "{after:?} not in the example");
    text.replacen(
        after,
        &format!("{after}    archive: {{to: arch, before: {before}}}\n"),
        1,
    )
}

/// The scenario every backend passes. `write(before)` writes the spec with that `before`;
/// `short` is one second less than the DLQ's retention; `put` puts `want`; `count` reads the
/// DLQ's depth as a third party does; `left` is how many are never due (RabbitMQ's untimed).
fn scenario(
    ws: &Workspace,
    want: &[Vec<u8>],
    write: &dyn Fn(&str),
    short: &str,
    put: &dyn Fn(),
    count: &dyn Fn() -> u64,
    left: u64,
) {
    put();
    let n = want.len() as u64 + left;
    assert_eq!(count(), n);
    let root = ws.path().join("arch");

    // `before: 1m`: nothing expires within a minute, nothing is due.
    write("1m");
    let doc = due_ok(ws, &["--delete", "--yes"]);
    assert_eq!(doc["archived"].as_u64(), Some(0), "{doc}");
    assert_eq!(doc["due"]["beforeSeconds"].as_f64(), Some(60.0), "{doc}");
    assert_eq!(count(), n, "nothing due, nothing left the DLQ: {doc}");
    assert!(archived_bodies(&root).is_empty());

    // `before` a second short of the retention: everything older than a second is due.
    write(short);
    std::thread::sleep(Duration::from_millis(2_100));
    let dry = due_ok(ws, &["--dry-run"]);
    assert_eq!(
        dry["selection"]["olderThanSeconds"].as_f64(),
        Some(1.0),
        "{dry}"
    );
    let doc = due_ok(ws, &["--delete", "--yes"]);
    assert_eq!(
        (doc["archived"].as_u64(), doc["deleted"].as_u64()),
        (Some(want.len() as u64), Some(want.len() as u64)),
        "{doc}"
    );
    assert_eq!(doc["due"]["ageFrom"], "retention", "{doc}");
    assert_eq!(count(), left, "the due ones left the DLQ: {doc}");
    assert_eq!(
        archived_bodies(&root),
        want,
        "archived beside the spec, in `arch`"
    );
}

// ------------------------------------------------------------------------------ SQS

#[test]
fn sqs_due_archives_what_would_expire_and_nothing_else() {
    // The payments example keeps dead letters 14d: `before` 13d23h59m59s leaves 1 s.
    let edit = |before: &str| {
        let b = before.to_owned();
        move |t: String| with_archive(t, "    retention: 14d\n", &b)
    };
    let Some(f) = sqs::Fixture::applied_with(edit("1m")) else {
        return;
    };
    let [_, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    let want = bodies(8);
    scenario(
        &f,
        &want,
        &|b| {
            f.write_example(edit(b));
        },
        "13d23h59m59s",
        &|| {
            for b in &want {
                aws.send(&dlq, std::str::from_utf8(b).expect("text"));
            }
        },
        &|| aws.count(&dlq),
        0,
    );
    // For people: the horizon and where it came from.
    let out = f.run(&[
        "archive",
        f.channel.as_str(),
        "channel.yaml",
        "--due",
        "--dry-run",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(
            "  due       older than 1s (retention 14d − before 13d23h59m59s, aged from the retention's start)\n"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn sqs_due_without_a_declared_archive_or_to_is_refused_naming_the_spec() {
    let Some(f) = sqs::Fixture::applied() else {
        return;
    };
    let out = f.run(&["archive", f.channel.as_str(), "channel.yaml", "--due"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "--due: channel `{}` (channel.yaml) declares no `deadLetter.archive`",
            f.channel
        )) && out.stderr.contains("add `deadLetter: {archive: {to:"),
        "{}",
        out.stderr
    );
    // `--due` and `--older-than` are one question asked twice.
    let out = f.run(&[
        "archive",
        f.channel.as_str(),
        "channel.yaml",
        "--due",
        "--older-than",
        "1d",
        "--to",
        "x",
    ]);
    assert_eq!(out.code, 64, "a usage error: {}", out.stderr);
    assert!(out.stderr.contains("cannot be used with"), "{}", out.stderr);
}

// ------------------------------------------------------------------------------ RabbitMQ

#[test]
fn rabbitmq_due_archives_what_would_expire_and_keeps_what_it_cannot_age() {
    // The orders example's DLQ has no TTL: nothing is ever due.
    let Some(f) = rabbit::Fixture::applied() else {
        return;
    };
    f.write_example(|t| with_archive(t, "  deadLetter:\n", "1d"));
    let out = f.run(&["archive", f.channel.as_str(), "channel.yaml", "--due"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(
        out.stdout.trim(),
        format!(
            "Nothing is due: `{}.dlq` (channel `{}`) keeps its dead letters until they are consumed (no retention), so none ever expires.",
            f.channel, f.channel
        )
    );
    // Folded to one line per rule on the way to the archive (issue 39): the rule is named.
    assert!(
        out.stderr
            .contains("deadletter/archive-never-due on channel"),
        "{}",
        out.stderr
    );
    assert!(!f.path().join("arch").exists(), "nothing written");

    // With a TTL of a day (the DLQ's message-ttl, by policy).
    let edit = |before: &str| {
        let b = before.to_owned();
        move |t: String| {
            with_archive(
                t.replacen(
                    "  deadLetter:\n",
                    "  deadLetter:\n    discard: {after: 1d, reason: test}\n",
                    1,
                ),
                "    discard: {after: 1d, reason: test}\n",
                &b,
            )
        }
    };
    f.write_example(edit("1m"));
    assert_eq!(f.apply(&[]).code, 0, "the TTL applies");
    let [_, _, dlq, _] = f.names();
    let want = bodies(8);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    scenario(
        &f,
        &want,
        &|b| {
            f.write_example(edit(b));
        },
        "23h59m59s",
        &|| {
            for b in &want {
                block(rabbit::publish_with(
                    "",
                    &dlq,
                    b,
                    BasicProperties::default().with_timestamp(now),
                ));
            }
            // No timestamp, no x-death, no envelope time: its age is unknown.
            block(rabbit::publish_with(
                "",
                &dlq,
                b"untimed",
                BasicProperties::default(),
            ));
            rabbit::wait_for_messages(&dlq, want.len() as u64 + 1);
        },
        &|| rabbit::count(&dlq),
        1,
    );
    let left = block(rabbit::take_all(&dlq));
    assert_eq!(
        left.iter().map(|(b, _)| b.clone()).collect::<Vec<_>>(),
        [b"untimed".to_vec()]
    );
}

// ------------------------------------------------------------------------------ Kafka

#[test]
fn kafka_due_archives_what_would_expire_and_nothing_else() {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    // The inventory example discards dead letters after 30d.
    let after = "      owner: team-inventory\n";
    let edit = |before: &str| {
        let b = before.to_owned();
        move |t: String| with_archive(t, after, &b)
    };
    let Some(f) = kafka::Fixture::applied_with(edit("1m")) else {
        return;
    };
    let dlt = format!("{}-dlt", f.channel);
    let want = bodies(8);
    scenario(
        &f,
        &want,
        &|b| {
            f.write_example(edit(b));
        },
        "29d23h59m59s",
        &|| {
            let producer: FutureProducer = kafka::producer(&[]);
            for b in &want {
                block(producer.send(
                    FutureRecord::to(&dlt).key(b).payload(b),
                    Duration::from_secs(10),
                ))
                .map_err(|(e, _)| e)
                .expect("produce");
            }
        },
        &|| kafka::waiting(&f),
        0,
    );
}

// ------------------------------------------------------------------------------ Pub/Sub

#[test]
fn pubsub_due_archives_what_would_expire_and_nothing_else() {
    use base64::Engine;
    let Some(f) = support::pubsub::Fixture::new() else {
        return;
    };
    let edit = |before: &str| {
        let b = before.to_owned();
        move |t: String| with_archive(t, "    retention: 7d\n", &b)
    };
    f.write_example(|t| f.example(edit("1m")(t)));
    assert_eq!(f.apply(&[]).code, 0, "apply");
    let dlt = format!("{}-dlt", f.channel);
    let dl_sub = format!("{}-dlt-sub", f.channel);
    let want = bodies(8);
    // Counts the dead-letter subscription without taking anything: pulls until no new
    // message comes for 2 s, then hands every one back.
    let count = || -> u64 {
        let mut seen = std::collections::BTreeSet::new();
        let mut acks = Vec::new();
        let mut quiet = std::time::Instant::now();
        while quiet.elapsed() < Duration::from_secs(2) {
            for m in f.rest.pull(&dl_sub, 100) {
                if seen.insert(
                    m["message"]["messageId"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                ) {
                    quiet = std::time::Instant::now();
                }
                acks.push(m["ackId"].as_str().unwrap_or_default().to_owned());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for a in &acks {
            f.rest.nack(&dl_sub, a);
        }
        seen.len() as u64
    };
    scenario(
        &f,
        &want,
        &|b| {
            f.write_example(|t| f.example(edit(b)(t)));
        },
        "6d23h59m59s",
        &|| {
            for b in &want {
                f.rest.ok(
                    reqwest::Method::POST,
                    &format!("topics/{dlt}:publish"),
                    serde_json::json!({"messages": [{
                        "data": base64::engine::general_purpose::STANDARD.encode(b),
                    }]}),
                );
            }
        },
        &count,
        0,
    );
}

#[test]
fn sqs_due_refuses_when_the_live_retention_is_not_the_specs() {
    use aws_sdk_sqs::types::QueueAttributeName;
    let Some(f) = sqs::Fixture::applied_with(|t| with_archive(t, "    retention: 14d\n", "2d"))
    else {
        return;
    };
    let [_, dlq, ..] = f.names();
    let aws = sqs::Aws::new();
    // A hand edit: the DLQ now drops dead letters after 4 days, not the spec's 14.
    block(
        aws.sqs
            .set_queue_attributes()
            .queue_url(aws.url(&dlq))
            .attributes(QueueAttributeName::MessageRetentionPeriod, "345600")
            .send(),
    )
    .expect("SetQueueAttributes");
    for b in bodies(3) {
        aws.send(&dlq, std::str::from_utf8(&b).expect("text"));
    }
    let out = f.run(&[
        "archive",
        f.channel.as_str(),
        "channel.yaml",
        "--due",
        "--delete",
        "--yes",
    ]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "the live queue `{dlq}` has MessageRetentionPeriod"
        )) && out.stderr.contains("dlqctl apply"),
        "{}",
        out.stderr
    );
    assert_eq!(aws.count(&dlq), 3, "nothing read or moved");
    // Applied again, the spec's clock is the queue's: --due runs (nothing is due yet).
    assert_eq!(f.apply(&[]).code, 0, "apply");
    let doc = due_ok(&f, &["--delete", "--yes"]);
    assert_eq!(doc["archived"].as_u64(), Some(0), "{doc}");
    assert_eq!(aws.count(&dlq), 3);
}
