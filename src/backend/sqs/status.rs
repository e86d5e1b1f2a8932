//! SQS's status door: depth from GetQueueAttributes, the age of the oldest message from
//! CloudWatch's `ApproximateAgeOfOldestMessage` where the endpoint has it, and samples.
//!
//! What a read does to a message (docs/sqs.md, "status"): SQS has no read without a receive.
//! Samples come from ReceiveMessage with `VisibilityTimeout=0`: the messages stay visible to
//! every consumer, nothing is deleted, but each receive raises the message's
//! `ApproximateReceiveCount` by one. One ReceiveMessage, so at most 10 messages, and never
//! a second call that could hand out the same ones again. Samples are never read from a dead-letter queue that
//! has a redrive policy of its own (the count could move a message on), and, with `peek` off
//! (the exporter's default), not at all. On a FIFO queue a receive holds the message's group
//! for the length of the call. Without the CloudWatch metric (e.g. a local emulator), the
//! oldest age is the oldest `SentTimestamp` among the messages read, labelled as such.
//!
//! `status --hide-for SECS` asks for more: the whole `--scan`, for failure groups that count
//! every message. Then receives go on, 10 at a time, each hiding what it hands out for SECS
//! (so no receive hands a message out twice), until the scan is read, the queue answers
//! nothing, or three quarters of SECS have passed; then every message read is made visible
//! again (ChangeMessageVisibilityBatch 0). Each still counts one receive, and the same
//! redrive-policy refusal holds.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_cloudwatch::primitives::DateTime;
use aws_sdk_cloudwatch::types::{Dimension, Statistic};
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use futures_util::stream::{self, StreamExt};

use super::read::Reader;
use crate::backend::wire::aws::{AwsError, classify};
use crate::spec::resolve::{DeadLetterRole, Resolved};
use crate::status::envelope::TRANSIENT_EXHAUSTED;
use crate::status::{Depth, Measure, Message, Observed, QueueDepth, ReadOptions};

/// ReceiveMessage's largest batch.
const BATCH: usize = 10;

/// The CloudWatch period the flow is read in (SQS publishes its metrics per minute).
const FLOW_PERIOD: i64 = 60;
/// How far back the exporter reads periods each time: CloudWatch publishes SQS datapoints a
/// few minutes late and may revise them, so every reading reads the last 15 minutes again and
/// the exporter keeps the newest figures of each period (`status::Accumulator`).
const FLOW_LOOKBACK: i64 = 900;
/// GetMetricData takes at most 500 queries per call; four per channel.
const QUERIES_PER_CALL: usize = 500;
const QUERIES_PER_CHANNEL: usize = 4;

/// How the flow is counted, for the JSON document (docs/status.md, "Flow").
const FLOW_BASIS: &str = "sqs: CloudWatch per minute: DIFF(DLQ ApproximateNumberOfMessagesVisible + NotVisible, Maximum) + DLQ NumberOfMessagesDeleted, at least 0; source NumberOfMessagesSent";

/// One channel's CloudWatch series, by period start (seconds).
#[derive(Debug, Default)]
struct Series {
    visible: BTreeMap<i64, f64>,
    not_visible: BTreeMap<i64, f64>,
    deleted: BTreeMap<i64, f64>,
    sent: BTreeMap<i64, f64>,
}

/// Per period: what entered the DLQ (its growth, visible and in flight, plus what was
/// deleted from it: AWS's NumberOfMessagesSent does not count messages a redrive policy moves
/// in, so arrivals are derived) and what was sent to the source. The first period read only
/// gives the depth the next one grows from.
fn periods(s: &Series) -> Vec<crate::status::FlowPeriod> {
    let mut starts: BTreeSet<i64> = BTreeSet::new();
    for m in [&s.visible, &s.not_visible, &s.deleted, &s.sent] {
        starts.extend(m.keys());
    }
    let has_dlq = !s.visible.is_empty() || !s.deleted.is_empty();
    let has_source = !s.sent.is_empty();
    let depth = |t: &i64| {
        s.visible
            .get(t)
            .map(|v| v + s.not_visible.get(t).copied().unwrap_or(0.0))
    };
    let mut out = Vec::new();
    let mut before: Option<f64> = None;
    for (i, t) in starts.iter().enumerate() {
        let now = depth(t).or(before);
        if i > 0 {
            let grew = match (now, before) {
                (Some(n), Some(b)) => n - b,
                _ => 0.0,
            };
            let entered = (grew + s.deleted.get(t).copied().unwrap_or(0.0)).max(0.0);
            out.push(crate::status::FlowPeriod {
                start_s: *t,
                dead_lettered: has_dlq.then_some(entered.round() as u64),
                source: has_source
                    .then(|| s.sent.get(t).copied().unwrap_or(0.0).max(0.0).round() as u64),
            });
        }
        before = now;
    }
    out
}

/// The flow of one channel from its periods ([`crate::status::Flow::from_periods`]).
fn flow_from(
    r: &Resolved,
    s: &Series,
    window: Option<std::time::Duration>,
    now_s: i64,
) -> crate::status::Flow {
    crate::status::Flow::from_periods(&r.main, FLOW_BASIS, periods(s), window, now_s)
}

impl Reader {
    async fn channel_status(
        &self,
        r: &Resolved,
        read: ReadOptions,
        listed: &BTreeSet<String>,
    ) -> Result<Observed, AwsError> {
        let main = match self.queue_with_url(&r.main, listed).await? {
            Some((_, a)) => depth(&a),
            None => Depth::missing(),
        };
        let others = vec![QueueDepth {
            name: r.main.clone(),
            role: "main",
            depth: main,
        }];
        let Some((url, attrs)) = self.queue_with_url(&r.dead_letter, listed).await? else {
            return Ok(Observed::missing(others));
        };
        let mut observed = Observed {
            dead_letter: depth(&attrs),
            others,
            messages: Vec::new(),
            head_first: false,
            metric_age_seconds: None,
            notes: Vec::new(),
            flow: crate::status::Flow::default(),
        };
        if observed.dead_letter.total.is_none_or(|n| n == 0) {
            return Ok(observed);
        }
        // Redrive's reads need no CloudWatch age either (its dry run ages the messages it
        // read), so a redrive works where only SQS answers (ElasticMQ).
        if !read.redrive_view {
            // Like the flow: an endpoint without CloudWatch (ElasticMQ) or a role without
            // cloudwatch:GetMetricStatistics costs the metric, not the status.
            match self.oldest_age_metric(&r.dead_letter).await {
                Ok(age) => observed.metric_age_seconds = age,
                Err(e) => observed.notes.push(format!(
                    "oldest age not from CloudWatch ({e}): from the messages read, if any"
                )),
            }
        }
        let visible = observed.dead_letter.ready.is_some_and(|n| n > 0);
        if !visible || read.scan == 0 {
            return Ok(observed);
        }
        if !read.peek {
            observed.notes.push(
                "messages not read (reads with side effects are off): SQS counts every read as a receive"
                    .into(),
            );
        } else if attrs.contains_key("RedrivePolicy") {
            observed.notes.push(
                "samples not read: this dead-letter queue has a redrive policy of its own, and every read raises a message's receive count towards it".into(),
            );
        } else if let Some(hide) = read.hide_for {
            let fifo = attrs.get("FifoQueue").is_some_and(|v| v == "true");
            let (messages, note) = self.scan_hidden(&r.dead_letter, &url, read, hide).await?;
            observed.messages = messages;
            for m in &mut observed.messages {
                m.native_class = native_class(r.dead_letter_role);
            }
            let total = observed
                .dead_letter
                .total
                .map_or_else(|| "?".to_owned(), |n| n.to_string());
            observed.notes.push(format!(
                "read {} of the {total} message{} with {} ReceiveMessage call{}, each message hidden for {hide}s while the read went{}; {}; each message read counts one more receive (ApproximateReceiveCount){}",
                observed.messages.len(),
                if total == "1" { "" } else { "s" },
                note.receives,
                if note.receives == 1 { "" } else { "s" },
                if note.out_of_time {
                    format!(
                        " (it stopped after {}s, before the first message it read could reappear)",
                        hide * 3 / 4
                    )
                } else {
                    String::new()
                },
                if note.not_released == 0 {
                    "then every one was made visible again".to_owned()
                } else {
                    format!(
                        "{} could not be made visible again and reappear within {hide}s",
                        note.not_released
                    )
                },
                if fifo {
                    "; on this FIFO queue SQS hands out no more of a message group while some of it is hidden, so the read saw the first messages of each group only"
                } else {
                    ""
                }
            ));
        } else {
            observed.messages = self.peek(&r.dead_letter, &url, read).await?;
            for m in &mut observed.messages {
                m.native_class = native_class(r.dead_letter_role);
            }
            if !observed.messages.is_empty() {
                let total = observed
                    .dead_letter
                    .total
                    .map_or_else(|| "?".to_owned(), |n| n.to_string());
                observed.notes.push(format!(
                    "read {} of the {total} message{} with one ReceiveMessage (at most 10 per call; a second call may hand out the same ones again), which raised the ApproximateReceiveCount of each message read by one (SQS has no read without a receive; visibility timeout 0, nothing was hidden or deleted){}",
                    observed.messages.len(),
                    if total == "1" { "" } else { "s" },
                    if attrs.get("FifoQueue").is_some_and(|v| v == "true") {
                        "; on this FIFO queue each read held its message group for the length of the call"
                    } else {
                        ""
                    }
                ));
            }
        }
        Ok(observed)
    }

    /// A listed queue's URL (from the listing) and attributes; `None`: it does not exist.
    async fn queue_with_url(
        &self,
        name: &str,
        listed: &BTreeSet<String>,
    ) -> Result<Option<(String, BTreeMap<String, String>)>, AwsError> {
        if !listed.contains(name) {
            return Ok(None);
        }
        let Some(url) = self.url(name).await? else {
            return Ok(None);
        };
        Ok(self
            .attributes(name, &url, QueueAttributeName::All)
            .await?
            .map(|a| (url, a)))
    }

    /// The newest `ApproximateAgeOfOldestMessage` datapoint of the last 15 minutes.
    async fn oldest_age_metric(&self, queue: &str) -> Result<Option<f64>, AwsError> {
        let what = format!("metric ApproximateAgeOfOldestMessage of queue {queue}");
        let now = std::time::SystemTime::now();
        let out = self
            .aws
            .read("cloudwatch:GetMetricStatistics", |c| {
                let (queue, what) = (queue.to_owned(), what.clone());
                async move {
                    c.cloudwatch
                        .get_metric_statistics()
                        .namespace("AWS/SQS")
                        .metric_name("ApproximateAgeOfOldestMessage")
                        .dimensions(Dimension::builder().name("QueueName").value(queue).build())
                        .start_time(DateTime::from(now - std::time::Duration::from_secs(900)))
                        .end_time(DateTime::from(now))
                        .period(60)
                        .statistics(Statistic::Maximum)
                        .send()
                        .await
                        .map_err(|e| classify("cloudwatch:GetMetricStatistics", &what, e))
                }
            })
            .await?;
        Ok(out
            .datapoints()
            .iter()
            .filter_map(|d| Some((d.timestamp()?.secs(), d.maximum()?)))
            .max_by_key(|(t, _)| *t)
            .map(|(_, v)| v))
    }

    /// Up to `scan` (at most 10) messages, received once with visibility timeout 0 (see
    /// the module's contract). One call, never more: with visibility 0 a second receive may
    /// hand out the same messages again (moto always does: it answers from the head of the
    /// queue), raising their receive count twice, which is not what status promises.
    async fn peek(
        &self,
        queue: &str,
        url: &str,
        read: ReadOptions,
    ) -> Result<Vec<Message>, AwsError> {
        let got = self.receive(queue, url, read.scan.min(BATCH), 0).await?;
        let mut seen = BTreeSet::new();
        Ok(got
            .iter()
            .filter(|m| seen.insert(m.message_id().unwrap_or_default().to_owned()))
            .map(|m| message(m, read.max_body))
            .collect())
    }

    /// `status --hide-for`: up to `scan` messages, received 10 at a time, each hidden for
    /// `hide` seconds, then all made visible again (see the module's contract). Stops when
    /// the scan is read, after two receives in a row that hand out nothing new, or at three
    /// quarters of `hide` (before the first message read could reappear and be read twice).
    /// The messages are made visible again even when a receive fails.
    async fn scan_hidden(
        &self,
        queue: &str,
        url: &str,
        read: ReadOptions,
        hide: u32,
    ) -> Result<(Vec<Message>, HiddenScan), AwsError> {
        let started = std::time::Instant::now();
        let budget = std::time::Duration::from_secs(u64::from(hide)) * 3 / 4;
        let visibility = i32::try_from(hide).unwrap_or(i32::MAX);
        let mut out = Vec::new();
        let mut handles = Vec::new();
        let mut seen = BTreeSet::new();
        let mut note = HiddenScan::default();
        let mut empty = 0;
        // Bounded: a receive hands out at least one new message or counts as empty.
        let most = read.scan.div_ceil(BATCH) * 2 + 4;
        let mut failed = None;
        while out.len() < read.scan && empty < 2 && note.receives < most {
            if started.elapsed() >= budget {
                note.out_of_time = true;
                break;
            }
            let got = match self
                .receive(queue, url, (read.scan - out.len()).min(BATCH), visibility)
                .await
            {
                Ok(got) => got,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            };
            note.receives += 1;
            let before = out.len();
            for m in &got {
                if let Some(h) = m.receipt_handle() {
                    handles.push(h.to_owned());
                }
                if seen.insert(m.message_id().unwrap_or_default().to_owned()) {
                    out.push(message(m, read.max_body));
                }
            }
            empty = if out.len() == before { empty + 1 } else { 0 };
        }
        note.not_released = self.make_visible(queue, url, &handles).await;
        match failed {
            Some(e) => Err(e),
            None => Ok((out, note)),
        }
    }

    /// Makes the messages of `handles` visible again at once (ChangeMessageVisibilityBatch,
    /// visibility 0, 10 a call): the ones a read or a run held and does not take. Returns how
    /// many could not be (they reappear when their visibility timeout ends).
    pub(super) async fn make_visible(&self, queue: &str, url: &str, handles: &[String]) -> usize {
        use aws_sdk_sqs::types::ChangeMessageVisibilityBatchRequestEntry;
        let mut failed = 0;
        for chunk in handles.chunks(BATCH) {
            let entries: Vec<_> = chunk
                .iter()
                .enumerate()
                .filter_map(|(i, h)| {
                    ChangeMessageVisibilityBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(h)
                        .visibility_timeout(0)
                        .build()
                        .ok()
                })
                .collect();
            let what = format!("queue {queue}");
            let answer = self
                .aws
                .read("sqs:ChangeMessageVisibilityBatch", |c| {
                    let (url, entries, what) = (url.to_owned(), entries.clone(), what.clone());
                    async move {
                        c.sqs
                            .change_message_visibility_batch()
                            .queue_url(url)
                            .set_entries(Some(entries))
                            .send()
                            .await
                            .map_err(|e| classify("sqs:ChangeMessageVisibilityBatch", &what, e))
                    }
                })
                .await;
            failed += match answer {
                Ok(out) => out.failed().len(),
                Err(_) => chunk.len(),
            };
        }
        failed
    }

    /// One ReceiveMessage of at most `max` messages (10 at most) with every attribute, held
    /// out of sight for `visibility` seconds: the one receive both status (0 s) and the
    /// redrive mover (its hold) make.
    pub(super) async fn receive(
        &self,
        queue: &str,
        url: &str,
        max: usize,
        visibility: i32,
    ) -> Result<Vec<aws_sdk_sqs::types::Message>, AwsError> {
        let what = format!("queue {queue}");
        let out = self
            .aws
            .read("sqs:ReceiveMessage", |c| {
                let (url, what) = (url.to_owned(), what.clone());
                async move {
                    c.sqs
                        .receive_message()
                        .queue_url(url)
                        .max_number_of_messages(i32::try_from(max.min(BATCH)).unwrap_or(10))
                        .visibility_timeout(visibility)
                        .wait_time_seconds(0)
                        .message_attribute_names("All")
                        .message_system_attribute_names(MessageSystemAttributeName::All)
                        // Named too, though `All` includes it: where `--to failed-consumer`
                        // sends the message back (the mover), and `source` (status).
                        .message_system_attribute_names(
                            MessageSystemAttributeName::DeadLetterQueueSourceArn,
                        )
                        .send()
                        .await
                        .map_err(|e| classify("sqs:ReceiveMessage", &what, e))
                }
            })
            .await?;
        Ok(out.messages.unwrap_or_default())
    }
}

/// How a `--hide-for` read went, for its note.
#[derive(Debug, Default)]
struct HiddenScan {
    receives: usize,
    /// It stopped at three quarters of the hide, with the scan not read.
    out_of_time: bool,
    /// Messages that could not be made visible again.
    not_released: usize,
}

fn number(attrs: &BTreeMap<String, String>, k: &str) -> Option<u64> {
    attrs.get(k).and_then(|v| v.trim().parse().ok())
}

fn depth(attrs: &BTreeMap<String, String>) -> Depth {
    let ready = number(attrs, "ApproximateNumberOfMessages");
    let in_flight = number(attrs, "ApproximateNumberOfMessagesNotVisible");
    let delayed = number(attrs, "ApproximateNumberOfMessagesDelayed");
    let total = [ready, in_flight, delayed]
        .iter()
        .try_fold(0u64, |acc, n| n.map(|n| acc.saturating_add(n)));
    Depth {
        total,
        ready,
        in_flight,
        delayed,
        measure: Measure::Waiting,
        exists: true,
        lower_bound: false,
        basis: None,
    }
}

/// What a message with no envelope in the queue says of itself: in the DLQ, that it used up
/// its receives (a redrive policy moved it there); in the invalid-message queue (the consumer
/// sent it there at once) nothing.
fn native_class(role: DeadLetterRole) -> Option<String> {
    (role == DeadLetterRole::DeadLetter).then(|| TRANSIENT_EXHAUSTED.to_owned())
}

/// [`message`], as read from the channel's destination `role`.
pub(super) fn message_in(
    m: &aws_sdk_sqs::types::Message,
    max_body: usize,
    role: DeadLetterRole,
) -> Message {
    Message {
        native_class: native_class(role),
        ..message(m, max_body)
    }
}

pub(super) fn message(m: &aws_sdk_sqs::types::Message, max_body: usize) -> Message {
    let body = m.body().unwrap_or_default().as_bytes();
    let system = m.attributes();
    let sys = |k: MessageSystemAttributeName| system.and_then(|a| a.get(&k)).cloned();
    let mut headers: Vec<(String, String)> = m
        .message_attributes()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let text = v.string_value().map(str::to_owned).unwrap_or_else(|| {
                v.binary_value()
                    .map(|b| {
                        let hex: String = b
                            .as_ref()
                            .iter()
                            .take(64)
                            .map(|x| format!("{x:02x}"))
                            .collect();
                        format!("(binary) {hex}")
                    })
                    .unwrap_or_default()
            });
            (k.clone(), text)
        })
        .collect();
    headers.sort();
    let mut properties: Vec<(String, String)> = system
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
        .collect();
    properties.sort();
    Message {
        id: m.message_id().unwrap_or_default().to_owned(),
        headers,
        properties,
        body: body[..body.len().min(max_body.max(1))].to_vec(),
        body_len: body.len() as u64,
        published_ms: sys(MessageSystemAttributeName::SentTimestamp).and_then(|v| v.parse().ok()),
        dead_lettered_ms: None,
        // A standard DLQ keeps the original enqueue timestamp, which its retention counts
        // from; a FIFO one restarts the count on the move, later than this: never too late.
        retained_since_ms: sys(MessageSystemAttributeName::SentTimestamp)
            .and_then(|v| v.parse().ok()),
        attempts: None,
        source: sys(MessageSystemAttributeName::DeadLetterQueueSourceArn),
        // Moved by a redrive policy, a message carries no error: it used up its receives.
        native_class: Some(TRANSIENT_EXHAUSTED.to_owned()),
    }
}

impl Reader {
    /// Every channel's CloudWatch series for the flow, in as few GetMetricData calls as
    /// the 500-query limit allows (125 channels a call). `None` per channel when the call
    /// failed: the flow is then unknown, which does not fail the channel.
    async fn flow_series(
        &self,
        channels: &[&Resolved],
        window: Option<std::time::Duration>,
        now_s: i64,
    ) -> Vec<Option<Series>> {
        use aws_sdk_cloudwatch::types::{Metric, MetricDataQuery, MetricStat, ScanBy};
        let back = window.map_or(FLOW_LOOKBACK, |w| {
            i64::try_from(w.as_secs()).unwrap_or(FLOW_LOOKBACK)
        });
        // One period more than the window: the depth the first one grows from.
        let end = (now_s / FLOW_PERIOD + 1) * FLOW_PERIOD;
        let start = end - back - 2 * FLOW_PERIOD;
        let per_call = QUERIES_PER_CALL / QUERIES_PER_CHANNEL;
        let mut out = Vec::with_capacity(channels.len());
        for chunk in channels.chunks(per_call) {
            let mut queries = Vec::with_capacity(chunk.len() * QUERIES_PER_CHANNEL);
            for (i, r) in chunk.iter().enumerate() {
                for (id, queue, metric, stat) in [
                    (
                        "v",
                        &r.dead_letter,
                        "ApproximateNumberOfMessagesVisible",
                        "Maximum",
                    ),
                    (
                        "n",
                        &r.dead_letter,
                        "ApproximateNumberOfMessagesNotVisible",
                        "Maximum",
                    ),
                    ("d", &r.dead_letter, "NumberOfMessagesDeleted", "Sum"),
                    ("s", &r.main, "NumberOfMessagesSent", "Sum"),
                ] {
                    queries.push(
                        MetricDataQuery::builder()
                            .id(format!("{id}{i}"))
                            .metric_stat(
                                MetricStat::builder()
                                    .metric(
                                        Metric::builder()
                                            .namespace("AWS/SQS")
                                            .metric_name(metric)
                                            .dimensions(
                                                Dimension::builder()
                                                    .name("QueueName")
                                                    .value(queue.as_str())
                                                    .build(),
                                            )
                                            .build(),
                                    )
                                    .period(FLOW_PERIOD as i32)
                                    .stat(stat)
                                    .build(),
                            )
                            .return_data(true)
                            .build(),
                    );
                }
            }
            let mut series: Vec<Series> = chunk.iter().map(|_| Series::default()).collect();
            let mut token: Option<String> = None;
            let mut ok = true;
            // Bounded: a page per call, 20 pages at most (500 queries × 17 periods fit one).
            for _ in 0..20 {
                let what = format!("GetMetricData of {} queues", chunk.len());
                let answer = self
                    .aws
                    .read("cloudwatch:GetMetricData", |c| {
                        let (queries, token, what) = (queries.clone(), token.clone(), what.clone());
                        async move {
                            c.cloudwatch
                                .get_metric_data()
                                .set_metric_data_queries(Some(queries))
                                .start_time(DateTime::from_secs(start))
                                .end_time(DateTime::from_secs(end))
                                .scan_by(ScanBy::TimestampAscending)
                                .set_next_token(token)
                                .send()
                                .await
                                .map_err(|e| classify("cloudwatch:GetMetricData", &what, e))
                        }
                    })
                    .await;
                let Ok(answer) = answer else {
                    ok = false;
                    break;
                };
                for result in answer.metric_data_results() {
                    let Some(id) = result.id() else { continue };
                    let (kind, index) = id.split_at(1);
                    let Some(s) = index.parse::<usize>().ok().and_then(|i| series.get_mut(i))
                    else {
                        continue;
                    };
                    let into = match kind {
                        "v" => &mut s.visible,
                        "n" => &mut s.not_visible,
                        "d" => &mut s.deleted,
                        _ => &mut s.sent,
                    };
                    for (t, v) in result.timestamps().iter().zip(result.values()) {
                        into.insert(t.secs() / FLOW_PERIOD * FLOW_PERIOD, *v);
                    }
                }
                token = answer.next_token().map(str::to_owned);
                if token.is_none() {
                    break;
                }
            }
            if ok {
                out.extend(series.into_iter().map(Some));
            } else {
                out.extend(chunk.iter().map(|_| None));
            }
        }
        out
    }
}

impl crate::backend::kit::doors::Status for Reader {
    /// Depth and samples of each channel's dead-letter queue, depth of its main queue. Each
    /// channel succeeds or fails on its own; this never fails as a whole.
    async fn status(
        &self,
        channels: &[&Resolved],
        read: ReadOptions,
    ) -> Result<Vec<Result<Observed, AwsError>>, AwsError> {
        // One paged listing finds every queue (and its URL) as plan's does; a queue it does
        // not list does not exist, and costs no further call.
        let names: Vec<&str> = channels
            .iter()
            .flat_map(|r| [r.main.as_str(), r.dead_letter.as_str()])
            .collect();
        let listed: BTreeSet<String> = self
            .list_queues(super::live::common_prefix(&names))
            .await?
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        let now_s = crate::status::now_ms() / 1000;
        // Redrive's own reads need no flow: no CloudWatch call for them.
        let series = if read.redrive_view {
            Vec::new()
        } else {
            self.flow_series(channels, read.rate_window, now_s).await
        };
        let mut out: Vec<Result<Observed, AwsError>> = stream::iter(channels)
            .map(|r| self.channel_status(r, read, &listed))
            .buffered(super::CONCURRENCY)
            .collect()
            .await;
        for ((o, r), s) in out.iter_mut().zip(channels).zip(series) {
            if let Ok(o) = o {
                match s {
                    Some(s) if o.dead_letter.exists => {
                        o.flow = flow_from(r, &s, read.rate_window, now_s);
                    }
                    Some(_) => {}
                    None => o.notes.push(
                        "flow unknown: CloudWatch GetMetricData did not answer (the dead-letter rate needs cloudwatch:GetMetricData)".into(),
                    ),
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 36: arrivals into a DLQ are its growth plus what was deleted from it; a consumer
    /// that receives and deletes its messages adds nothing (the drop and the deletes cancel),
    /// where `max(0, DIFF(visible)) + deleted` would count them a second time.
    #[test]
    fn what_entered_the_dlq_is_its_growth_plus_what_was_deleted_from_it() {
        let at = |pairs: &[(i64, f64)]| pairs.iter().copied().collect::<BTreeMap<i64, f64>>();
        let s = Series {
            // 0 → 10 (10 redriven in) → 0 (received and deleted) → 3.
            visible: at(&[(0, 0.0), (60, 10.0), (120, 0.0), (180, 3.0)]),
            not_visible: at(&[(0, 0.0), (60, 0.0), (120, 0.0), (180, 0.0)]),
            deleted: at(&[(120, 10.0), (180, 1.0)]),
            sent: at(&[(60, 1000.0), (120, 0.0), (180, 200.0)]),
        };
        let p = periods(&s);
        let dead: Vec<Option<u64>> = p.iter().map(|x| x.dead_lettered).collect();
        let src: Vec<Option<u64>> = p.iter().map(|x| x.source).collect();
        assert_eq!(
            p.iter().map(|x| x.start_s).collect::<Vec<_>>(),
            vec![60, 120, 180]
        );
        assert_eq!(dead, vec![Some(10), Some(0), Some(4)]);
        assert_eq!(src, vec![Some(1000), Some(0), Some(200)]);
        // No metric at all for the source: unknown, not 0.
        let quiet = Series {
            sent: BTreeMap::new(),
            ..s
        };
        assert!(periods(&quiet).iter().all(|x| x.source.is_none()));
    }

    /// Issue 34: a message without an envelope in the DLQ used up its receives; one in the
    /// invalid-message queue was sent there by the consumer, and says nothing of itself.
    #[test]
    fn only_the_dlq_implies_a_class_for_a_message_without_an_envelope() {
        let m = aws_sdk_sqs::types::Message::builder()
            .message_id("m-1")
            .body("{}")
            .build();
        let class = |role| message_in(&m, 16, role).native_class;
        assert_eq!(
            class(DeadLetterRole::DeadLetter).as_deref(),
            Some(TRANSIENT_EXHAUSTED)
        );
        assert_eq!(class(DeadLetterRole::Invalid), None);
    }
}
