//! `dlqctl redrive --native` against a real SQS move-task implementation (issue 33):
//! ElasticMQ 1.6.14 (tests/elasticmq/pom.xml, its jars from Maven Central checked against
//! tests/elasticmq/jars.sha256), which implements StartMessageMoveTask,
//! ListMessageMoveTasks and CancelMessageMoveTask where moto 5.2.5 answers HTTP 500
//! (tests/redrive_sqs_task.rs covers the rest against recorded responses).
//!
//! ElasticMQ has no CloudWatch, so dlqctl cannot `apply` there (it reads the channel's alarms):
//! the queues are created as an operator would, with the SDK, in the shape dlqctl makes them.
//! Each test starts its own ElasticMQ on a free loopback port and stops it at the end
//! ([`support::elasticmq`]).

mod support;

use std::collections::BTreeSet;

use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::Value;
use support::block;
use support::elasticmq::ElasticMq;

/// The channel `movetask` as dlqctl makes it ([`support::elasticmq::movetask_queues`]), with
/// `n` messages `m00`… waiting in the DLQ. Returns (main URL, DLQ URL).
fn queues(sqs: &aws_sdk_sqs::Client, n: usize) -> (String, String) {
    let (main, dlq) = support::elasticmq::movetask_queues(sqs);
    for i in 0..n {
        block(
            sqs.send_message()
                .queue_url(&dlq)
                .message_body(format!("m{i:02}"))
                .send(),
        )
        .expect("SendMessage");
    }
    (main, dlq)
}

/// Receives and deletes everything in `url` (at most 20 receives): the bodies.
fn drain(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<String> {
    support::elasticmq::drain(sqs, url, 20)
}

fn workspace(url: &str) -> tempfile::TempDir {
    support::sqs::movetask_workspace("elasticmq", url)
}

fn redrive(dir: &std::path::Path, extra: &[&str]) -> support::Output {
    support::output(&mut support::sqs::movetask_redrive(dir, extra))
}

#[test]
fn a_whole_dlq_goes_back_through_elasticmqs_move_task_and_every_message_arrives_once() {
    let Some(e) = ElasticMq::start() else { return };
    let sqs = e.sqs();
    let (main, dlq) = queues(&sqs, 25);
    let ws = workspace(&e.url);
    let out = redrive(ws.path(), &["--native", "--rate", "50"]);
    out.ok();
    let report: Value = serde_json::from_str(&out.stdout).expect("JSON report");
    assert_eq!(report["movedBy"], "sqs:StartMessageMoveTask", "{report}");
    assert_eq!(report["moved"], 25, "{report}");
    assert_eq!(report["leftInDeadLetter"], 0, "{report}");
    // Every one, once, by body; nothing left behind.
    let bodies = drain(&sqs, &main);
    let unique: BTreeSet<&String> = bodies.iter().collect();
    assert_eq!(bodies.len(), 25, "{bodies:?}");
    assert_eq!(
        unique,
        (0..25)
            .map(|i| format!("m{i:02}"))
            .collect::<Vec<_>>()
            .iter()
            .collect(),
    );
    assert!(drain(&sqs, &dlq).is_empty());
    // The lock tag was given back.
    let tags = block(sqs.list_queue_tags().queue_url(&dlq).send()).expect("ListQueueTags");
    assert!(
        tags.tags().is_none_or(|t| t.is_empty()),
        "{:?}",
        tags.tags()
    );
}

#[test]
fn a_move_task_started_elsewhere_refuses_the_redrive_naming_it() {
    let Some(e) = ElasticMq::start() else { return };
    let sqs = e.sqs();
    let (main, dlq) = queues(&sqs, 30);
    let arn = |url: &str| {
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
    };
    // Someone else's task, at one message a second: still running while dlqctl asks.
    let task = block(
        sqs.start_message_move_task()
            .source_arn(arn(&dlq))
            .destination_arn(arn(&main))
            .max_number_of_messages_per_second(1)
            .send(),
    )
    .expect("StartMessageMoveTask");
    let handle = task.task_handle().unwrap_or_default().to_owned();
    let ws = workspace(&e.url);
    for extra in [&["--native"][..], &[][..]] {
        let out = redrive(ws.path(), extra);
        assert_eq!(out.code, 1, "{extra:?}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stderr.contains("SQS move task") && out.stderr.contains(&handle),
            "{extra:?}: {}",
            out.stderr
        );
    }
    let _ = block(sqs.cancel_message_move_task().task_handle(&handle).send());
}
