//! The benchmarks' CI smoke tests (see bench/ and BENCHMARKS.md). Apply: the same small mix on
//! all three backends applied one change at a time and at the default parallelism converges
//! (plan empty) with the same writes. Plan: a small mix of channels on all three backends is
//! applied, then planned with `--stats`. The plan must be empty, must
//! make no write call, and must stay within 2% of the fewest reads possible for the mix:
//! SQS ⌈Q/1000⌉ ListQueues + one GetQueueAttributes per queue, CloudWatch ⌈A/100⌉
//! DescribeAlarms, RabbitMQ ⌈Q/500⌉ queue pages + one call each for policies, exchanges and
//! bindings + the broker's version (its channels have retry queues), Kafka one Metadata + one DescribeConfigs. Counts, not times: speed is measured
//! in bench/, never in a test.

mod support;

use std::collections::BTreeMap;

const SQS: u64 = 20;
const RABBIT: u64 = 20;
const KAFKA: u64 = 10;

/// A folder of the mix's channels (SQS, then RabbitMQ, then Kafka) under a fresh prefix; the
/// prefix.
fn generated() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let prefix = format!("{}.", support::unique("smoke"));
    let mix = format!("{SQS}:{RABBIT}:{KAFKA}");
    support::generate_channels(dir.path(), SQS + RABBIT + KAFKA, &prefix, &["--mix", &mix]);
    (dir, prefix)
}

/// `dlqctl ARGS --color never` in `dir`, with the local stack's credentials.
fn run_in(dir: &tempfile::TempDir, args: &[&str]) -> support::Output {
    support::output(
        support::dlqctl_local(dir.path())
            .args(args)
            .args(["--color", "never"]),
    )
}

fn stats(stderr: &str) -> BTreeMap<String, u64> {
    stderr
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let (n, api) = l.split_once(char::is_whitespace)?;
            Some((api.trim().to_owned(), n.parse().ok()?))
        })
        .collect()
}

fn is_write(api: &str) -> bool {
    ["PUT ", "POST ", "DELETE "]
        .iter()
        .any(|m| api.starts_with(m))
        || [
            "Create", "Set", "Tag", "Put", "Delete", "Alter", "Untag", "Purge", "Send",
        ]
        .iter()
        .any(|w| api.split(':').nth(1).is_some_and(|op| op.starts_with(w)))
}

#[test]
fn a_no_change_plan_makes_no_writes_and_stays_at_the_read_lower_bound() {
    if !support::whole_stack_up() {
        return;
    }
    let (dir, prefix) = generated();
    let run = |args: &[&str]| run_in(&dir, args);
    let applied = run(&["apply", ".", "--auto-approve"]);
    applied.ok();
    let plan = run(&["plan", ".", "--detailed-exitcode", "--stats"]);
    plan.ok_with("the plan after apply is empty");

    let calls = stats(&plan.stderr);
    let writes: Vec<_> = calls.keys().filter(|api| is_write(api)).collect();
    assert!(writes.is_empty(), "plan made write calls: {writes:?}");
    let total: u64 = calls.values().sum();
    let (sqs_queues, alarms, rabbit_queues) = (2 * SQS, 2 * SQS, 3 * RABBIT);
    let lower_bound = sqs_queues.div_ceil(1000)
        + sqs_queues
        + alarms.div_ceil(100)
        + rabbit_queues.div_ceil(500)
        + 3
        // The broker's version (`/api/overview`), for the consumer-contract note of channels
        // with a TTL retry loop.
        + 1
        + 2
        // Users and permissions (`/api/users`, `/api/permissions`), and the topics' ACLs
        // (`kafka:DescribeAcls`), for the notes on who may read the dead letters.
        + 2
        + 1;
    // + 1: the one-off probe for whether the endpoint can return RedriveAllowPolicy (moto cannot).
    let allowed = lower_bound + lower_bound.div_ceil(50) + 1;
    assert!(
        total <= allowed,
        "{total} calls for a lower bound of {lower_bound} (allowed {allowed}): {calls:?}"
    );

    // RabbitMQ keeps its state across stack restarts: remove what this test made.
    support::rabbit::delete_prefixed(&prefix);
}

#[test]
fn a_concurrent_apply_converges_with_the_same_writes_as_one_at_a_time() {
    if !support::whole_stack_up() {
        return;
    }
    let mut writes: Vec<BTreeMap<String, u64>> = Vec::new();
    for parallelism in ["1", "8"] {
        let (dir, prefix) = generated();
        let run = |args: &[&str]| run_in(&dir, args);
        let applied = run(&[
            "apply",
            ".",
            "--auto-approve",
            "--stats",
            "--parallelism",
            parallelism,
        ]);
        applied.ok_with(format!("parallelism {parallelism}"));
        let plan = run(&["plan", ".", "--detailed-exitcode"]);
        plan.ok_with(format!(
            "the plan after apply at parallelism {parallelism} is empty"
        ));
        writes.push(
            stats(&applied.stderr)
                .into_iter()
                .filter(|(api, _)| is_write(api))
                .collect(),
        );
        support::rabbit::delete_prefixed(&prefix);
    }
    let (one, many) = (&writes[0], &writes[1]);
    // Kafka's writes go up to 100 topics to a request at parallelism > 1: fewer calls, the same
    // topics (the empty plan above). Every other API writes once per object either way.
    let topics = 3 * KAFKA;
    assert_eq!(one.get("kafka:CreateTopics"), Some(&topics), "{one:?}");
    let batched = many.get("kafka:CreateTopics").copied().unwrap_or(0);
    assert!(
        (1..topics).contains(&batched),
        "{batched} CreateTopics requests for {topics} topics: {many:?}"
    );
    let others = |w: &BTreeMap<String, u64>| -> BTreeMap<String, u64> {
        w.iter()
            .filter(|(api, _)| !api.starts_with("kafka:"))
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    assert!(!others(one).is_empty(), "the mix wrote nothing: {one:?}");
    assert_eq!(
        others(one),
        others(many),
        "the same writes at parallelism 1 and 8"
    );
}
