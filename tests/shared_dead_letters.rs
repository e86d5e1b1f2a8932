//! Shared dead-letter destinations (issue 53), live: one dead-letter queue or exchange that
//! several sources dead-letter into, as teams run them (Terraform's SQS modules with a
//! `redrive_allow_policy` listing several sources, one RabbitMQ DLX for many queues).
//!
//! Each case is made by hand with a third-party client, then: `import` writes one channel per
//! source, the first owning the destination and the others sharing it (`deadLetter.of`);
//! `lint` has no error; `plan --detailed-exitcode` exits 0; a hand-made change shows in the
//! plan; `status` counts the dead letters per source; `redrive --to source` returns each
//! message to its own source, counted by id with the broker's own client, nothing lost.
//!
//! SQS runs on ElasticMQ (moto records no `DeadLetterQueueSourceArn` on a dead letter).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use serde_json::{Value, json};
use support::elasticmq::ElasticMq;
use support::{Output, block};

/// Messages each source dead-letters (both fit one ReceiveMessage of 10: status reads them all).
const PER_SOURCE: usize = 5;

fn dlqctl(dir: &Path, args: &[&str]) -> Output {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_dlqctl"));
    c.current_dir(dir)
        .args(args)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env_remove("AWS_PROFILE")
        .env("NO_COLOR", "1");
    support::output(&mut c)
}

fn create(sqs: &aws_sdk_sqs::Client, name: &str, attrs: &[(QueueAttributeName, String)]) -> String {
    let mut req = sqs.create_queue().queue_name(name);
    for (k, v) in attrs {
        req = req.attributes(k.clone(), v);
    }
    block(req.send())
        .expect("CreateQueue")
        .queue_url()
        .unwrap_or_default()
        .to_owned()
}

fn attribute(sqs: &aws_sdk_sqs::Client, url: &str, name: QueueAttributeName) -> String {
    block(
        sqs.get_queue_attributes()
            .queue_url(url)
            .attribute_names(name.clone())
            .send(),
    )
    .expect("GetQueueAttributes")
    .attributes()
    .and_then(|a| a.get(&name).cloned())
    .unwrap_or_default()
}

/// Receives (visibility 0: the consumer fails every message) until the queue at `url` is
/// empty, so that its redrive policy moves every message to the DLQ. Bounded.
fn fail_all(sqs: &aws_sdk_sqs::Client, url: &str) {
    for _ in 0..20 * PER_SOURCE {
        let n: u64 = attribute(sqs, url, QueueAttributeName::ApproximateNumberOfMessages)
            .parse()
            .unwrap_or(0);
        if n == 0 {
            return;
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
    panic!("{url} did not dead-letter everything");
}

/// Receives and deletes everything in the queue at `url` (bounded): each message's body and
/// the source SQS recorded on it.
fn take(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for _ in 0..8 * PER_SOURCE {
        let got = block(
            sqs.receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .visibility_timeout(60)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .send(),
        )
        .expect("ReceiveMessage");
        if got.messages().is_empty() {
            break;
        }
        for m in got.messages() {
            let source = m
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::DeadLetterQueueSourceArn))
                .cloned();
            out.push((m.body().unwrap_or_default().to_owned(), source));
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

fn bodies(prefix: &str) -> BTreeSet<String> {
    (0..PER_SOURCE)
        .map(|i| format!("{prefix}-{i:02}"))
        .collect()
}

/// A unique stem for the names a moto test makes (moto is shared by every checkout's tests).
fn stem() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("shr{}-{t}", std::process::id())
}

/// Deletes every queue under the stem when the test ends, passed or not.
struct Cleanup<'a>(&'a support::sqs::Aws, String);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        self.0.delete_prefixed(&self.1);
    }
}

/// One DLQ, two sources whose RedrivePolicies name it and which its RedriveAllowPolicy lists
/// (`byQueue`), as the terraform-aws-modules/sqs module makes a DLQ with several sources
/// (`redrive_allow_policy = {redrivePermission = "byQueue", sourceQueueArns = [...]}`),
/// made with the AWS SDK on moto. Before issue 53 import refused the second source ("a
/// dead-letter queue serves one channel (its RedriveAllowPolicy names one source)").
#[test]
fn sqs_one_dlq_with_two_sources_imports_as_an_owner_and_a_sharer_and_plans_empty() {
    if !support::require(
        "sqs",
        support::tcp_up(&support::host_port(&support::aws_endpoint())),
    ) {
        return;
    }
    let aws = support::sqs::Aws::new();
    let s = stem();
    let _cleanup = Cleanup(&aws, s.clone());
    let (dlq, orders, refunds) = (
        format!("{s}-dlq"),
        format!("{s}-orders"),
        format!("{s}-refunds"),
    );
    aws.create(
        &dlq,
        &[(QueueAttributeName::MessageRetentionPeriod, "1209600".into())],
        &[],
    );
    let policy = aws.redrive_policy(&dlq, json!(3));
    for q in [&orders, &refunds] {
        aws.create(q, std::slice::from_ref(&policy), &[]);
    }
    let arns: Vec<String> = [&orders, &refunds]
        .iter()
        .map(|q| aws.attributes(q)["QueueArn"].clone())
        .collect();
    aws.set(
        &dlq,
        &[(
            QueueAttributeName::RedriveAllowPolicy,
            json!({"redrivePermission": "byQueue", "sourceQueueArns": arns}).to_string(),
        )],
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path();
    std::fs::write(
        ws.join("dlqctl.yaml"),
        format!(
            "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  local-sqs:\n    backend: sqs\n    region: us-east-1\n    endpoint: {}\n    ownership: {{prefixes: [\"{s}-\"]}}\n",
            support::aws_endpoint()
        ),
    )
    .expect("targets");
    let o = dlqctl(
        ws,
        &[
            "import",
            "--target",
            "local-sqs",
            "--out",
            "imported",
            "--prefix",
            &s,
        ],
    );
    o.ok_with("import");
    assert!(!o.stderr.contains("fits no channel"), "{}", o.stderr);
    let text = |name: &str| {
        std::fs::read_to_string(ws.join("imported").join(format!("{name}.yaml")))
            .unwrap_or_else(|e| panic!("imported/{name}.yaml: {e}\n{}", o.stderr))
    };
    let (owner, sharer) = (text(&orders), text(&refunds));
    assert!(
        owner.contains("name: '{channel}'") || owner.contains(&dlq),
        "{owner}"
    );
    assert!(sharer.contains(&format!("of: {orders}")), "{sharer}");
    assert!(!sharer.contains(&dlq), "declared once\n{sharer}");
    let lint = dlqctl(ws, &["lint", "imported", "--format", "json"]);
    lint.ok_with("lint");
    let doc: Value = serde_json::from_str(&lint.stdout).expect("lint JSON");
    assert!(
        doc["diagnostics"]
            .as_array()
            .is_some_and(|d| d.iter().all(|d| d["severity"] != "error")),
        "{}",
        lint.stdout
    );
    let plan = dlqctl(ws, &["plan", "imported", "--detailed-exitcode"]);
    assert_eq!(
        plan.code, 0,
        "empty plan\n{}{}\n{owner}\n{sharer}",
        plan.stdout, plan.stderr
    );
    // Adopting changes nothing but the ownership tags; the plan stays empty.
    dlqctl(ws, &["apply", "imported", "--adopt", "--auto-approve"]).ok_with("adopt");
    let plan = dlqctl(ws, &["plan", "imported", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "{}{}", plan.stdout, plan.stderr);
    // A hand-made change to the sharer's redrive policy shows in the plan.
    aws.set(&refunds, &[aws.redrive_policy(&dlq, json!(7))]);
    let plan = dlqctl(ws, &["plan", "imported", "--detailed-exitcode"]);
    assert_eq!(plan.code, 2, "{}{}", plan.stdout, plan.stderr);
    assert!(
        plan.stdout.contains(&refunds) && plan.stdout.contains("maxReceiveCount"),
        "{}",
        plan.stdout
    );
}

/// The same shape on ElasticMQ, which records the source of each dead letter
/// (`DeadLetterQueueSourceArn`): the owner and the sharer written as import writes them;
/// `status` counts the dead letters per source without taking one, and `redrive --to source`
/// returns each to its own source, counted by body with the AWS SDK, nothing lost.
#[test]
fn sqs_a_shared_dlq_counts_per_source_and_redrives_each_message_to_its_own_source() {
    let Some(e) = ElasticMq::start() else { return };
    let sqs = e.sqs();
    let dlq = create(
        &sqs,
        "shared-dlq",
        &[(QueueAttributeName::MessageRetentionPeriod, "1209600".into())],
    );
    let dlq_arn = attribute(&sqs, &dlq, QueueAttributeName::QueueArn);
    let policy = json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}).to_string();
    let mut urls = BTreeMap::new();
    for source in ["orders", "refunds"] {
        let url = create(
            &sqs,
            source,
            &[
                (QueueAttributeName::RedrivePolicy, policy.clone()),
                (QueueAttributeName::VisibilityTimeout, "0".into()),
            ],
        );
        urls.insert(source, url);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path();
    std::fs::write(
        ws.join("dlqctl.yaml"),
        format!(
            "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  emq:\n    backend: sqs\n    region: us-east-1\n    endpoint: {}\n",
            e.url
        ),
    )
    .expect("targets");
    std::fs::write(
        ws.join("specs.yaml"),
        "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: orders}\nspec:\n  target: emq\n  retry: {maxAttempts: 1}\n  deadLetter: {name: shared-dlq}\n---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: refunds}\nspec:\n  target: emq\n  retry: {maxAttempts: 1}\n  deadLetter: {of: orders}\n",
    )
    .expect("specs");
    // Dead letters from both sources.
    for (source, url) in &urls {
        for i in 0..PER_SOURCE {
            block(
                sqs.send_message()
                    .queue_url(url)
                    .message_body(format!("{source}-{i:02}"))
                    .send(),
            )
            .expect("SendMessage");
        }
        fail_all(&sqs, url);
    }

    // Status counts them per source, and disturbs none.
    let status = dlqctl(ws, &["status", "specs.yaml", "--format", "json"]);
    let doc: Value = serde_json::from_str(&status.stdout)
        .unwrap_or_else(|e| panic!("status JSON ({e}): {}{}", status.stdout, status.stderr));
    let channels = doc["channels"].as_array().cloned().unwrap_or_default();
    assert_eq!(channels.len(), 2, "{doc}");
    for c in &channels {
        assert_eq!(
            c["deadLetter"]["bySource"],
            json!({"orders": PER_SOURCE, "refunds": PER_SOURCE}),
            "{doc}"
        );
    }
    let depth: u64 = attribute(&sqs, &dlq, QueueAttributeName::ApproximateNumberOfMessages)
        .parse()
        .unwrap_or(0);
    assert_eq!(depth, 2 * PER_SOURCE as u64, "status took nothing");
    let human = dlqctl(ws, &["status", "specs.yaml"]);
    assert!(
        human.stdout.contains(&format!(
            "sources   orders {PER_SOURCE}, refunds {PER_SOURCE}"
        )),
        "{}",
        human.stdout
    );

    // `redrive --to source` of either channel: each message back to its own source.
    let r = dlqctl(
        ws,
        &[
            "redrive",
            "refunds",
            "specs.yaml",
            "--to",
            "source",
            "--yes",
            "--format",
            "json",
        ],
    );
    r.ok_with("redrive --to source");
    for (source, url) in &urls {
        let back: BTreeSet<String> = take(&sqs, url).into_iter().map(|(b, _)| b).collect();
        assert_eq!(
            back,
            bodies(source),
            "{source}: each back in its own source\n{}",
            r.stdout
        );
    }
    assert_eq!(take(&sqs, &dlq), Vec::new(), "nothing left, nothing lost");
}
