//! SQS and CloudWatch: the live fixture (the payments example under a random channel name,
//! its queues and alarms deleted on drop) and the AWS SDK clients the tests use as a third
//! party would (not through dlqctl).

use std::collections::BTreeMap;

use aws_sdk_sqs::operation::receive_message::builders::ReceiveMessageFluentBuilder;
use aws_sdk_sqs::types::QueueAttributeName;

use super::block;
use super::workspace::{Endpoints, Workspace};

/// A workspace with a channel on the `local-sqs` target; deletes what it names on drop.
pub struct Fixture {
    ws: Workspace,
    pub aws: Aws,
}

impl Fixture {
    pub fn new() -> Option<Self> {
        Self::with_endpoint(&super::aws_endpoint())
    }

    /// A fixture whose target talks to `endpoint` (a fault-injecting proxy, ...).
    pub fn with_endpoint(endpoint: &str) -> Option<Self> {
        up().then(|| Fixture {
            ws: workspace(endpoint),
            aws: Aws::new(),
        })
    }

    /// Main queue, DLQ, depth alarm, oldest-age alarm (standard-queue names).
    pub fn names(&self) -> [String; 4] {
        let c = &self.channel;
        [
            c.clone(),
            format!("{c}-dlq"),
            format!("{c}-dlq-depth"),
            format!("{c}-dlq-oldest-age"),
        ]
    }
}

/// A bare SQS workspace for `endpoint`, checked for nothing and cleaned up by nobody: for
/// endpoints where nothing can be created (a closed port).
pub fn workspace(endpoint: &str) -> Workspace {
    let endpoints = Endpoints {
        aws: endpoint.to_owned(),
        ..Endpoints::default()
    };
    Workspace::new("payments-sqs.yaml", "payments-t", &endpoints)
}

fixture_face!(Fixture);

impl Drop for Fixture {
    fn drop(&mut self) {
        self.aws.delete_prefixed(&self.channel);
    }
}

/// Whether moto answers (the live rule: skip loudly, or fail when required).
pub fn up() -> bool {
    let up = super::tcp_up(&super::host_port(&super::aws_endpoint()));
    super::require("moto (SQS + CloudWatch)", up)
}

/// An SDK client pair as a third party would use it (not through dlqctl).
pub struct Aws {
    pub sqs: aws_sdk_sqs::Client,
    pub cw: aws_sdk_cloudwatch::Client,
}

impl Aws {
    pub fn new() -> Self {
        let creds =
            aws_sdk_sqs::config::Credentials::new("testing", "testing", None, None, "tests");
        let sqs = aws_sdk_sqs::Config::builder()
            .behavior_version(aws_sdk_sqs::config::BehaviorVersion::latest())
            .region(aws_sdk_sqs::config::Region::new("us-east-1"))
            .endpoint_url(super::aws_endpoint())
            .credentials_provider(creds.clone())
            .build();
        let cw = aws_sdk_cloudwatch::Config::builder()
            .behavior_version(aws_sdk_cloudwatch::config::BehaviorVersion::latest())
            .region(aws_sdk_cloudwatch::config::Region::new("us-east-1"))
            .endpoint_url(super::aws_endpoint())
            .credentials_provider(creds)
            .build();
        Aws {
            sqs: aws_sdk_sqs::Client::from_conf(sqs),
            cw: aws_sdk_cloudwatch::Client::from_conf(cw),
        }
    }

    pub fn url(&self, queue: &str) -> String {
        block(self.sqs.get_queue_url().queue_name(queue).send())
            .unwrap_or_else(|e| panic!("queue {queue} exists: {e:?}"))
            .queue_url()
            .unwrap_or_default()
            .to_owned()
    }

    pub fn attributes(&self, queue: &str) -> BTreeMap<String, String> {
        let url = self.url(queue);
        block(
            self.sqs
                .get_queue_attributes()
                .queue_url(url)
                .attribute_names(QueueAttributeName::All)
                .send(),
        )
        .expect("GetQueueAttributes")
        .attributes()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
        .collect()
    }

    pub fn exists(&self, queue: &str) -> bool {
        block(self.sqs.get_queue_url().queue_name(queue).send()).is_ok()
    }

    /// CreateQueue with attributes and tags; returns the queue's URL.
    pub fn create(
        &self,
        queue: &str,
        attrs: &[(QueueAttributeName, String)],
        tags: &[(&str, &str)],
    ) -> String {
        let mut req = self.sqs.create_queue().queue_name(queue);
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
    }

    pub fn set(&self, queue: &str, attrs: &[(QueueAttributeName, String)]) {
        let url = self.url(queue);
        let mut req = self.sqs.set_queue_attributes().queue_url(url);
        for (k, v) in attrs {
            req = req.attributes(k.clone(), v);
        }
        block(req.send()).expect("SetQueueAttributes");
    }

    /// A RedrivePolicy attribute towards `dlq` (by its ARN), as someone would write it by hand.
    pub fn redrive_policy(
        &self,
        dlq: &str,
        max_receive_count: serde_json::Value,
    ) -> (QueueAttributeName, String) {
        let arn = self.attributes(dlq)["QueueArn"].clone();
        let policy =
            serde_json::json!({"deadLetterTargetArn": arn, "maxReceiveCount": max_receive_count});
        (QueueAttributeName::RedrivePolicy, policy.to_string())
    }

    /// Receives and deletes messages as a consumer would, each with its attributes (string
    /// values): at least `want`, then until a receive comes back empty (so an unexpected
    /// extra message shows); bounded at `want / 10 + 5` receives.
    pub fn take(&self, queue: &str, want: usize) -> Vec<(String, BTreeMap<String, String>)> {
        self.take_with(
            queue,
            want,
            want / 10 + 5,
            |r| r.message_attribute_names("All"),
            |m| {
                m.message_attributes()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.string_value().unwrap_or_default().to_owned()))
                    .collect()
            },
        )
    }

    /// Receives (10 at a time, `ask` adding what to receive with each) and deletes messages:
    /// each one's body and what `keep` takes from it; at least `want`, then until a receive
    /// comes back empty; bounded at `receives` receives.
    pub fn take_with<T>(
        &self,
        queue: &str,
        want: usize,
        receives: usize,
        ask: impl Fn(ReceiveMessageFluentBuilder) -> ReceiveMessageFluentBuilder,
        keep: impl Fn(&aws_sdk_sqs::types::Message) -> T,
    ) -> Vec<(String, T)> {
        let url = self.url(queue);
        let mut out = Vec::new();
        for _ in 0..receives {
            let req = self
                .sqs
                .receive_message()
                .queue_url(&url)
                .max_number_of_messages(10)
                .visibility_timeout(60);
            let got = block(ask(req).send()).expect("ReceiveMessage");
            if got.messages().is_empty() && out.len() >= want {
                break;
            }
            for m in got.messages() {
                out.push((m.body().unwrap_or_default().to_owned(), keep(m)));
                block(
                    self.sqs
                        .delete_message()
                        .queue_url(&url)
                        .receipt_handle(m.receipt_handle().unwrap_or_default())
                        .send(),
                )
                .expect("DeleteMessage");
            }
        }
        out
    }

    /// Visible + in flight, as GetQueueAttributes counts them.
    pub fn count(&self, queue: &str) -> u64 {
        let a = self.attributes(queue);
        [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
        ]
        .iter()
        .map(|k| a[*k].parse::<u64>().expect("count"))
        .sum()
    }

    /// SendMessageBatch by hand (at most 10 entries); every entry must be sent.
    pub async fn send_batch(
        &self,
        url: &str,
        entries: Vec<aws_sdk_sqs::types::SendMessageBatchRequestEntry>,
    ) {
        let sent = self
            .sqs
            .send_message_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
            .expect("SendMessageBatch");
        assert!(sent.failed().is_empty(), "{:?}", sent.failed());
    }

    pub fn send(&self, queue: &str, body: &str) {
        let url = self.url(queue);
        block(
            self.sqs
                .send_message()
                .queue_url(url)
                .message_body(body)
                .send(),
        )
        .expect("SendMessage");
    }

    pub fn tags(&self, queue: &str) -> std::collections::HashMap<String, String> {
        block(self.sqs.list_queue_tags().queue_url(self.url(queue)).send())
            .expect("tags")
            .tags()
            .cloned()
            .unwrap_or_default()
    }

    /// A PutMetricAlarm on a queue's `ApproximateNumberOfMessagesVisible` above `threshold`,
    /// as the console writes one; the caller adds description, actions, ... and sends it.
    pub fn put_alarm(
        &self,
        name: &str,
        queue: &str,
        statistic: aws_sdk_cloudwatch::types::Statistic,
        (period, evaluation_periods): (i32, i32),
        threshold: f64,
    ) -> aws_sdk_cloudwatch::operation::put_metric_alarm::builders::PutMetricAlarmFluentBuilder
    {
        self.cw
            .put_metric_alarm()
            .alarm_name(name)
            .namespace("AWS/SQS")
            .metric_name("ApproximateNumberOfMessagesVisible")
            .dimensions(
                aws_sdk_cloudwatch::types::Dimension::builder()
                    .name("QueueName")
                    .value(queue)
                    .build(),
            )
            .statistic(statistic)
            .period(period)
            .evaluation_periods(evaluation_periods)
            .threshold(threshold)
            .comparison_operator(
                aws_sdk_cloudwatch::types::ComparisonOperator::GreaterThanThreshold,
            )
    }

    pub fn alarm(&self, name: &str) -> Option<aws_sdk_cloudwatch::types::MetricAlarm> {
        block(self.cw.describe_alarms().alarm_names(name).send())
            .expect("DescribeAlarms")
            .metric_alarms()
            .first()
            .cloned()
    }

    /// Deletes every queue and alarm whose name starts with `prefix`.
    pub fn delete_prefixed(&self, prefix: &str) {
        let (sqs, cw) = (&self.sqs, &self.cw);
        block(async move {
            if let Ok(out) = sqs.list_queues().queue_name_prefix(prefix).send().await {
                for url in out.queue_urls() {
                    let _ = sqs.delete_queue().queue_url(url).send().await;
                }
            }
            if let Ok(out) = cw.describe_alarms().alarm_name_prefix(prefix).send().await {
                let names: Vec<String> = out
                    .metric_alarms()
                    .iter()
                    .filter_map(|a| a.alarm_name().map(str::to_owned))
                    .collect();
                if !names.is_empty() {
                    let _ = cw.delete_alarms().set_alarm_names(Some(names)).send().await;
                }
            }
        });
    }
}

/// A folder for the move-task tests (against a fake SQS, or ElasticMQ): a targets file whose
/// one SQS target `target` talks to `endpoint`, and `c.yaml`, one channel `movetask` on it.
pub fn movetask_workspace(target: &str, endpoint: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("dlqctl.yaml"),
        format!(
            "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  {target}:\n    backend: sqs\n    region: us-east-1\n    endpoint: {endpoint}\n"
        ),
    )
    .expect("write targets");
    std::fs::write(
        dir.path().join("c.yaml"),
        format!(
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: movetask}}\nspec:\n  target: {target}\n  retry: {{maxAttempts: 3}}\n  lint: {{allow: [alarms/missing]}}\n"
        ),
    )
    .expect("write spec");
    dir
}

/// `redrive movetask . --yes --format json EXTRA` in a [`movetask_workspace`], with moto's
/// test keys, no AWS profile and no colour.
pub fn movetask_redrive(dir: &std::path::Path, extra: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_dlqctl"));
    c.current_dir(dir)
        .args(["redrive", "movetask", ".", "--yes", "--format", "json"])
        .args(extra)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env_remove("AWS_PROFILE")
        .env("NO_COLOR", "1");
    c
}

impl Default for Aws {
    fn default() -> Self {
        Self::new()
    }
}
