//! What `dlqctl status` and `dlqctl exporter` say about a channel's dead letters, whatever the
//! backend: depth, the age of the oldest, the breakdown by error class, and samples.
//!
//! Each backend's status door (`backend/*/status.rs`) reads what it can without losing or
//! disturbing a message and returns it raw, as an [`Observed`]; [`summarise`] (pure) turns that
//! into a [`DeadLetterReport`]: the error class of each message from its envelope
//! ([`envelope`]), the ages, the samples with their bodies made safe to show. `render` prints
//! the reports in every format. Payloads are untrusted: nothing here or in `render` writes a
//! byte of a message to the terminal without [`safe`] escaping it.

pub mod age;
pub mod envelope;
pub mod fingerprint;
pub mod first_seen;
pub mod jq_worker;
mod message;
pub mod render;
pub mod resolution;
pub mod selector;

pub use message::Message;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::secrets;
use crate::spec::model::{Backend, Redact};
use crate::spec::resolve::EnvelopeResolved;

/// Samples shown by default, and at most.
pub const DEFAULT_SAMPLES: usize = 3;
pub const MAX_SAMPLES: usize = 100;
/// Messages read for the error-class counts by default, and at most.
pub const DEFAULT_SCAN: usize = 100;
pub const MAX_SCAN: usize = 1000;
/// The most `--scan` may ask for (status, the exporter, a dry run): enough to group a DLQ of
/// thousands whole.
pub const MAX_ASKED_SCAN: usize = 10_000;
/// Bytes of a body shown by default.
pub const DEFAULT_MAX_BODY: usize = 1024;
/// Characters of a header value shown: a header is context, not a payload.
pub const MAX_HEADER_VALUE: usize = 256;
/// Bytes of a binary body shown, in hex.
pub const HEX_PREFIX: usize = 32;
/// Sample ids kept per failure group.
pub const GROUP_SAMPLE_IDS: usize = 3;

/// The source of a dead letter that names none, in [`DeadLetterReport::by_source`].
pub const UNKNOWN_SOURCE: &str = "(unknown)";

/// What the driver asks of every backend's status door.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// Samples to show (the first N read).
    pub samples: usize,
    /// Messages to read from the head of the DLQ for the class counts (≥ `samples`).
    pub scan: usize,
    /// Bytes of each body to keep (0: bodies are not shown, but still read for the class).
    pub max_body: usize,
    /// Whether reads that leave a trace on the message are allowed: SQS receive (raises the
    /// receive count), RabbitMQ get-and-requeue (marks it redelivered). Kafka reads never do.
    pub peek: bool,
    /// Read as `redrive` sees the queue: on Kafka, from the redrive group's position even when
    /// the spec names the dead-letter topic's own consumer group.
    pub redrive_view: bool,
    /// The window `status` measures the dead-letter rate over (`--rate-window`); `None`:
    /// the broker's totals only (the exporter: Prometheus' `rate()` makes the window).
    pub rate_window: Option<std::time::Duration>,
    /// Whether a depth may be counted by reads that leave no trace even with `peek` off
    /// (Pub/Sub: pull and nack a dead-letter subscription that has no dead-letter policy of
    /// its own): the exporter's depth there. The messages read that way are not kept.
    pub count_by_reading: bool,
    /// Whether the messages read are grouped by fingerprint ([`fingerprint`]; `status
    /// --group-by fingerprint`). Never for the exporter: a group is no metric label.
    pub groups: bool,
    /// SQS (`status --hide-for`): read the whole `scan` with as many receives as it takes,
    /// each message hidden for this many seconds so that no receive hands it out twice,
    /// and all made visible again when the read ends. `None`: one receive, visibility 0.
    pub hide_for: Option<u32>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            samples: DEFAULT_SAMPLES,
            scan: DEFAULT_SCAN,
            max_body: DEFAULT_MAX_BODY,
            peek: true,
            redrive_view: false,
            rate_window: None,
            count_by_reading: false,
            groups: false,
            hide_for: None,
        }
    }
}

/// How a depth counts: messages that wait to be dealt with, or messages a log retains
/// (a Kafka topic without a consumer group in the spec).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Measure {
    Waiting,
    Retained,
}

/// How many messages a queue or topic holds. `None`: the backend does not say.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Depth {
    /// All messages: ready + in flight + delayed (or the retained/waiting records of a topic).
    pub total: Option<u64>,
    pub ready: Option<u64>,
    pub in_flight: Option<u64>,
    pub delayed: Option<u64>,
    pub measure: Measure,
    /// `false`: the queue or topic does not exist (yet).
    pub exists: bool,
    /// `total` is a lower bound: counted by reading, and the read stopped at `--scan`
    /// (Pub/Sub on a server without Cloud Monitoring).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lower_bound: bool,
    /// Where `total` came from, where a backend has more than one way to count (Pub/Sub:
    /// `pull`, counted by pulling; `cloud-monitoring`, the metric, minutes late); `None`
    /// elsewhere (the broker's own count).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub basis: Option<&'static str>,
}

impl Depth {
    pub fn missing() -> Self {
        Depth {
            total: None,
            ready: None,
            in_flight: None,
            delayed: None,
            measure: Measure::Waiting,
            exists: false,
            lower_bound: false,
            basis: None,
        }
    }

    /// Just a total (a topic).
    pub fn total(n: u64, measure: Measure) -> Self {
        Depth {
            total: Some(n),
            ready: None,
            in_flight: None,
            delayed: None,
            measure,
            exists: true,
            lower_bound: false,
            basis: None,
        }
    }
}

/// A main or retry queue/topic's depth, for context.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueDepth {
    pub name: String,
    /// `main` or `retry`.
    pub role: &'static str,
    pub depth: Depth,
}

/// Where the oldest age came from, or why there is none while messages wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AgeBasis {
    /// The backend's own metric (CloudWatch ApproximateAgeOfOldestMessage).
    Metric,
    /// The head of the queue, or of every partition: the oldest by construction.
    Head,
    /// Every message was read.
    All,
    /// The oldest among the messages read, which were not all of them: a lower bound.
    Sample,
    /// No message carries a time: `dlqctl exporter` ages them from when it first saw each
    /// at the head of the queue ([`first_seen`]), a lower bound.
    #[serde(rename = "first-seen")]
    FirstSeen,
    /// Messages wait, but no age can be told: none read carries a time, or none was read
    /// (`--no-peek`, the exporter without `--peek`, a read refused). The age is null.
    Unknown,
}

impl AgeBasis {
    /// The name in the JSON document and the `basis` label of the age metric.
    pub fn as_str(self) -> &'static str {
        match self {
            AgeBasis::Metric => "metric",
            AgeBasis::Head => "head",
            AgeBasis::All => "all",
            AgeBasis::Sample => "sample",
            AgeBasis::FirstSeen => "first-seen",
            AgeBasis::Unknown => "unknown",
        }
    }

    /// Whether the age came from the broker or the envelope (`dlq_oldest_message_age_known`
    /// 1), not estimated or missing.
    pub fn known(self) -> bool {
        !matches!(self, AgeBasis::FirstSeen | AgeBasis::Unknown)
    }
}

/// A channel's flow, as its broker counts it: messages that entered this destination (the
/// DLQ, or an invalid/exception destination) and messages that entered the channel's source,
/// in all (monotonic broker totals: the exporter's `_total` counters) and over the last
/// window (`status --rate-window`). `None` wherever the backend cannot say: never a fake 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Flow {
    /// Messages that entered this destination since the broker began counting.
    pub dead_lettered_total: Option<u64>,
    /// Messages that entered the channel's source (its main queue or topic).
    pub source_total: Option<u64>,
    /// The source's name (the `queue` label of `dlq_source_messages_total`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The same counts over the last window, when `status` asked for one.
    pub window: Option<FlowWindow>,
    /// How the backend counted (for the JSON and the docs): e.g. RabbitMQ's
    /// `messages + ack + get_no_ack + deliver_no_ack`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub basis: Option<&'static str>,
    /// Per-period counts, where the backend has periods and no totals (SQS's CloudWatch
    /// metrics): the exporter adds them up into its counters ([`Accumulator`]). Oldest first.
    #[serde(skip)]
    pub periods: Vec<FlowPeriod>,
    /// The totals add figures the broker emits apart (RabbitMQ: the queue's `messages` and
    /// the channels' acknowledgements), so one reading can over- or undershoot for a moment:
    /// the exporter publishes a total once it has held for a while (`exporter::SETTLE_MS`).
    #[serde(skip)]
    pub settles: bool,
}

/// One metric period's flow (SQS: one CloudWatch period).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FlowPeriod {
    /// The period's start, seconds since the epoch.
    pub start_s: i64,
    pub dead_lettered: Option<u64>,
    pub source: Option<u64>,
}

impl Flow {
    /// The flow of a backend that counts per period and keeps no totals (SQS's CloudWatch,
    /// Pub/Sub's Cloud Monitoring): the periods (oldest first) for the exporter to add up
    /// ([`Accumulator`]), no totals, and the sums of the periods that start in `window`
    /// (ending at `now_s`) when `status` asked for one; no period in it: unknown, not 0.
    pub fn from_periods(
        source: &str,
        basis: &'static str,
        periods: Vec<FlowPeriod>,
        window: Option<std::time::Duration>,
        now_s: i64,
    ) -> Flow {
        let window = window.map(|w| {
            let from = now_s - i64::try_from(w.as_secs()).unwrap_or(i64::MAX / 2);
            let inside: Vec<&FlowPeriod> = periods.iter().filter(|p| p.start_s >= from).collect();
            let sum = |pick: fn(&FlowPeriod) -> Option<u64>| -> Option<u64> {
                if inside.is_empty() {
                    return None;
                }
                inside.iter().map(|p| pick(p)).sum::<Option<u64>>()
            };
            FlowWindow {
                seconds: w.as_secs(),
                dead_lettered: sum(|p| p.dead_lettered),
                source: sum(|p| p.source),
            }
        });
        Flow {
            dead_lettered_total: None,
            source_total: None,
            source: Some(source.to_owned()),
            window,
            basis: Some(basis),
            periods,
            settles: false,
        }
    }
}

/// Dead-lettered and source counts, each known or not.
pub type Counts = (Option<u64>, Option<u64>);

/// What the exporter adds up where a backend gives periods, not totals: the periods still
/// within the reading's lookback, by start (a later reading replaces a period's figures,
/// since CloudWatch revises late datapoints), and the sum of those that left it. A restarted
/// exporter starts again at 0, which Prometheus' `rate()` reads as a counter reset.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Accumulator {
    settled: (u64, u64),
    recent: BTreeMap<i64, Counts>,
    seen: (bool, bool),
}

impl Accumulator {
    /// Takes one reading's periods (oldest first) and gives the totals so far, `None` for a
    /// count no period ever had.
    pub fn add(&mut self, periods: &[FlowPeriod]) -> (Option<u64>, Option<u64>) {
        if let Some(first) = periods.first() {
            let older: Vec<i64> = self
                .recent
                .range(..first.start_s)
                .map(|(t, _)| *t)
                .collect();
            for t in older {
                if let Some((d, s)) = self.recent.remove(&t) {
                    self.settled.0 += d.unwrap_or(0);
                    self.settled.1 += s.unwrap_or(0);
                }
            }
            for p in periods {
                self.seen.0 |= p.dead_lettered.is_some();
                self.seen.1 |= p.source.is_some();
                self.recent.insert(p.start_s, (p.dead_lettered, p.source));
            }
        }
        let sum = |pick: fn(&Counts) -> Option<u64>| -> u64 {
            self.recent.values().filter_map(pick).sum()
        };
        (
            self.seen.0.then(|| self.settled.0 + sum(|x| x.0)),
            self.seen.1.then(|| self.settled.1 + sum(|x| x.1)),
        )
    }
}

/// The flow over one window: what entered the destination and the source in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlowWindow {
    /// The window's length, in seconds (the last `seconds` before the read).
    pub seconds: u64,
    pub dead_lettered: Option<u64>,
    pub source: Option<u64>,
}

impl FlowWindow {
    /// The dead-letter rate over the window (a fraction), when both counts are known, the
    /// source had traffic and no more was dead-lettered than entered it: more dead letters
    /// than arrivals are messages that entered earlier (a backlog, a retry loop, a redrive),
    /// and a "rate" above 100% from them would be a stale figure, not a rate (issue 52, L8).
    pub fn rate(&self) -> Option<f64> {
        match (self.dead_lettered, self.source) {
            (Some(d), Some(s)) if s > 0 && d <= s => Some(d as f64 / s as f64),
            _ => None,
        }
    }
}

/// What a status door read of one channel.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub dead_letter: Depth,
    /// Main and retry queues/topics, for context.
    pub others: Vec<QueueDepth>,
    /// Messages read from the DLQ, at most `scan`.
    pub messages: Vec<Message>,
    /// Whether `messages` starts at the head (RabbitMQ, Kafka partitions): then the oldest
    /// of them is the oldest of the queue.
    pub head_first: bool,
    /// The oldest message's age from a metric, when the backend has one.
    pub metric_age_seconds: Option<f64>,
    /// What the read did or did not do, for the operator: refused samples and why.
    pub notes: Vec<String>,
    /// The flow into the destination and the source, where the broker counts it.
    pub flow: Flow,
}

impl Observed {
    /// A DLQ that is not there: nothing to read.
    pub fn missing(others: Vec<QueueDepth>) -> Self {
        Observed {
            dead_letter: Depth::missing(),
            others,
            messages: Vec::new(),
            head_first: false,
            metric_age_seconds: None,
            notes: Vec::new(),
            flow: Flow::default(),
        }
    }
}

/// A message's body, as it may be shown.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Body {
    /// `--max-body 0`.
    Hidden { length: u64 },
    /// UTF-8 text, escaped ([`safe`]), cut at `max_body` bytes.
    Text {
        length: u64,
        truncated: bool,
        text: String,
    },
    /// Not shown: the target's `redact.bodyPointers` are set and the body is not whole JSON
    /// (not JSON at all, or cut by `--max-body`), so it cannot be checked.
    Redacted { length: u64 },
    /// Not UTF-8: its length and the first bytes in hex.
    Binary {
        length: u64,
        #[serde(rename = "hexPrefix")]
        hex_prefix: String,
    },
}

/// One sample, safe to print.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    pub id: String,
    pub error_class: String,
    /// What the message says its class is, when the channel's rules named it otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_error_class: Option<String>,
    pub error_message: Option<String>,
    pub age_seconds: Option<f64>,
    /// `dead-lettered`, `first-failure` or `published`: what the age counts from.
    pub age_since: Option<&'static str>,
    pub attempts: Option<u64>,
    pub source: Option<String>,
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

/// A channel's dead-letter queue, summarised.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterReport {
    pub name: String,
    pub depth: Depth,
    pub oldest_age_seconds: Option<f64>,
    pub oldest_age_since: Option<&'static str>,
    pub oldest_age_basis: Option<AgeBasis>,
    pub by_error_class: BTreeMap<String, u64>,
    /// The same counts by metric label: the channel's declared class names (without rules,
    /// the built-in ones) and `other`, so the exporter's series stay bounded.
    #[serde(skip)]
    pub by_class_label: BTreeMap<String, u64>,
    /// Messages read for the class counts.
    pub sampled: u64,
    /// Whether every message the DLQ holds was read (the counts are exact).
    pub exact: bool,
    pub samples: Vec<Sample>,
    pub notes: Vec<String>,
    /// A fingerprint of each message read, in the order read ([`Message::fingerprint`]):
    /// what the exporter remembers to age messages that carry no time. Never shown.
    #[serde(skip)]
    pub fingerprints: Vec<u64>,
    /// What entered the destination and the source ([`Flow`]).
    pub flow: Flow,
    /// Per declared class (and `other`), the dead letters of the window: the class shares
    /// among the messages read × the window's dead-lettered count. An estimate (the shares
    /// are of what the DLQ holds, read at its head), only when the channel declares classes.
    pub by_class_in_window: BTreeMap<String, f64>,
    /// The messages read, grouped by fingerprint, most first, when asked
    /// ([`ReadOptions::groups`]); `None` otherwise.
    pub groups: Option<Vec<FailureGroup>>,
    /// `--where`/`--group`: how many of the messages read were chosen (the class counts,
    /// groups and samples are of those); `None` without a selection.
    pub selected: Option<Selected>,
    /// A shared dead-letter destination (`deadLetter.of`): the messages read per source
    /// queue or subscription, as the broker recorded it (SQS `DeadLetterQueueSourceArn`,
    /// RabbitMQ `x-death`, Pub/Sub `CloudPubSubDeadLetterSourceSubscription`), `(unknown)`
    /// for one that names none. Empty for a destination one channel has to itself.
    pub by_source: BTreeMap<String, u64>,
}

/// What `status --where`/`--group` kept of the messages it read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Selected {
    /// Messages read that the selection chose (what the counts, groups and samples cover).
    pub matched: u64,
    /// Messages read.
    pub read: u64,
    pub failures: Option<WhereFailures>,
}

/// Where the expression failed to evaluate on some messages (they were not selected).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WhereFailures {
    pub count: u64,
    /// The first message it failed on, and the error with its values normalised away.
    pub first_id: String,
    pub first_error: String,
}

/// Dead letters read that failed the same way: the same error class, and the same error
/// message once its variable parts are normalised ([`fingerprint::normalise`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailureGroup {
    /// [`fingerprint::fingerprint`] of the class and the normalised message: stable across runs.
    pub id: String,
    /// The error class, as the class counts name it.
    pub class: String,
    /// The normalised message, masked and made safe as samples' messages are, cut at
    /// [`MAX_HEADER_VALUE`] characters; `""` for messages that carry none.
    pub message: String,
    pub count: u64,
    /// The earliest and latest time among the group's messages: when they were
    /// dead-lettered where the message or broker says, else first failed, else were published
    /// (the time ages count from); `None` when none carries a time.
    pub first_seen_ms: Option<i64>,
    pub last_seen_ms: Option<i64>,
    /// The ids of the first [`GROUP_SAMPLE_IDS`] messages of the group, in the order read.
    pub sample_ids: Vec<String>,
}

/// One destination of a channel's dead letters in `dlqctl status`: the DLQ (then with the
/// depths around it), the invalid-message queue or an exception-based DLT, each summarised
/// the same way, or why it could not be read. A channel has one per destination, its DLQ
/// first ([`crate::spec::resolve::Resolved::dead_letter_views`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelStatus {
    pub channel: String,
    pub target: String,
    pub backend: Backend,
    /// Which destination this is: `dead-letter`, `invalid` or `exception`.
    pub role: crate::spec::resolve::DeadLetterRole,
    /// The destination queue or topic's name (known even when it could not be read).
    pub dead_letter_name: String,
    /// The spec's decision to discard dead letters after a while (`deadLetter.discard`).
    pub discard: Option<crate::spec::resolve::DiscardResolved>,
    pub dead_letter: Option<DeadLetterReport>,
    pub queues: Vec<QueueDepth>,
    pub error: Option<String>,
    /// The time to resolution from the journal (`status --audit-log`), when it has runs.
    pub resolution: Option<resolution::Resolution>,
}

/// Every channel asked for, in spec order, and when it was read.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub channels: Vec<ChannelStatus>,
    pub generated_at_ms: i64,
}

impl Report {
    /// Whether any channel could not be read.
    pub fn has_errors(&self) -> bool {
        self.channels.iter().any(|c| c.error.is_some())
    }

    /// Whether any dead-letter queue holds a message.
    pub fn has_dead_letters(&self) -> bool {
        self.channels.iter().any(|c| {
            c.dead_letter.as_ref().is_some_and(|d| {
                d.depth.total.is_some_and(|n| n > 0)
                        // No count (Pub/Sub over REST), but a message was read.
                        || (d.depth.exists && d.depth.total.is_none() && !d.samples.is_empty())
            })
        })
    }
}

/// Turns what a door read into the report (pure; `now_ms` is the wall clock).
///
/// Everything a message says goes through [`crate::secrets`] here, the one place where
/// messages become samples (for `status` in every format and `redrive --dry-run` alike):
/// secret headers redacted, card numbers masked, `redact` (the target's) applied.
pub fn summarise(
    name: &str,
    envelope: &EnvelopeResolved,
    redact: &Redact,
    read: ReadOptions,
    observed: Observed,
    now_ms: i64,
) -> (DeadLetterReport, Vec<QueueDepth>) {
    let mut by_class: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_label: BTreeMap<String, u64> = BTreeMap::new();
    let mut oldest: Option<(f64, &'static str)> = None;
    let mut samples = Vec::new();
    let mut groups: BTreeMap<String, FailureGroup> = BTreeMap::new();
    let mut by_source: BTreeMap<String, u64> = BTreeMap::new();
    for (i, m) in observed.messages.iter().enumerate() {
        let e = envelope::read(envelope, m);
        let from = m
            .source
            .as_deref()
            .map_or_else(|| UNKNOWN_SOURCE.to_owned(), |t| safe(&secrets::text(t)));
        *by_source.entry(from).or_default() += 1;
        let class = safe(&secrets::text(&e.class));
        *by_class.entry(class.clone()).or_default() += 1;
        *by_label
            .entry(envelope.classes.label(&e.class).to_owned())
            .or_default() += 1;
        let (since_ms, since) = match (e.dead_lettered_ms, e.first_failure_ms, m.published_ms) {
            (Some(t), _, _) => (Some(t), Some("dead-lettered")),
            (None, Some(t), _) => (Some(t), Some("first-failure")),
            (None, None, Some(t)) => (Some(t), Some("published")),
            (None, None, None) => (None, None),
        };
        let age = since_ms.map(|t| ((now_ms - t).max(0)) as f64 / 1000.0);
        if let (Some(a), Some(s)) = (age, since)
            && oldest.is_none_or(|(o, _)| a > o)
        {
            oldest = Some((a, s));
        }
        if read.groups {
            // Hashed as the message says it, masked only where shown: the id does not
            // change with `--show-secrets`.
            let message = e.message.as_deref().unwrap_or("");
            let normalised = fingerprint::normalise(message);
            let id = fingerprint::fingerprint(&e.class, &normalised);
            // Shown: its secrets hidden before it is normalised (a token's pieces would
            // outlive the normalising), its card numbers after.
            let shown = fingerprint::normalise(&secrets::hide_secrets(message));
            let g = groups.entry(id.clone()).or_insert_with(|| FailureGroup {
                id,
                class: class.clone(),
                message: safe(&cut(&secrets::text(&shown), MAX_HEADER_VALUE)),
                count: 0,
                first_seen_ms: None,
                last_seen_ms: None,
                sample_ids: Vec::new(),
            });
            g.count += 1;
            if let Some(t) = since_ms {
                g.first_seen_ms = Some(g.first_seen_ms.map_or(t, |f| f.min(t)));
                g.last_seen_ms = Some(g.last_seen_ms.map_or(t, |l| l.max(t)));
            }
            if g.sample_ids.len() < GROUP_SAMPLE_IDS {
                g.sample_ids.push(safe(&secrets::text(&m.id)));
            }
        }
        if i < read.samples {
            samples.push(Sample {
                id: safe(&secrets::text(&m.id)),
                error_class: class,
                raw_error_class: e
                    .raw_class
                    .as_deref()
                    .map(|t| safe(&cut(&secrets::text(t), MAX_HEADER_VALUE))),
                error_message: e
                    .message
                    .as_deref()
                    .map(|t| safe(&cut(&secrets::text(t), MAX_HEADER_VALUE))),
                age_seconds: age,
                age_since: since,
                attempts: e.attempts,
                source: e.source.as_deref().map(|t| safe(&secrets::text(t))),
                headers: m
                    .headers
                    .iter()
                    .map(|(k, v)| {
                        (
                            safe(&cut(k, MAX_HEADER_VALUE)),
                            safe(&cut(
                                &secrets::header_value(k, v, &redact.headers),
                                MAX_HEADER_VALUE,
                            )),
                        )
                    })
                    .collect(),
                body: shown_body(&m.body, m.body_len, read.max_body, &redact.body_pointers),
            });
        }
    }
    let sampled = observed.messages.len() as u64;
    let exact = observed.dead_letter.total == Some(sampled);
    let (oldest_age, since, basis) = match (observed.metric_age_seconds, oldest) {
        (Some(a), _) => (Some(a), None, Some(AgeBasis::Metric)),
        (None, Some((a, s))) => {
            let basis = if exact {
                AgeBasis::All
            } else if observed.head_first {
                AgeBasis::Head
            } else {
                AgeBasis::Sample
            };
            (Some(a), Some(s), Some(basis))
        }
        (None, None) => (None, None, None),
    };
    let mut notes = observed.notes;
    let waiting = observed.dead_letter.total.is_some_and(|n| n > 0) || sampled > 0;
    let basis = match basis {
        None if waiting => {
            let note = unknown_age_note(sampled, read.peek, !notes.is_empty());
            notes.push(note);
            Some(AgeBasis::Unknown)
        }
        b => b,
    };
    let by_class_in_window = match observed.flow.window.as_ref().and_then(|w| w.dead_lettered) {
        Some(n) if envelope.classes.declared() && sampled > 0 => by_label
            .iter()
            .map(|(class, k)| {
                let share = *k as f64 / sampled as f64;
                (class.clone(), (share * n as f64 * 100.0).round() / 100.0)
            })
            .collect(),
        _ => BTreeMap::new(),
    };
    (
        DeadLetterReport {
            name: name.to_owned(),
            depth: observed.dead_letter,
            oldest_age_seconds: oldest_age,
            oldest_age_since: since,
            oldest_age_basis: basis,
            by_error_class: by_class,
            by_class_label: by_label,
            sampled,
            exact,
            samples,
            notes,
            fingerprints: observed.messages.iter().map(Message::fingerprint).collect(),
            flow: observed.flow,
            by_class_in_window,
            groups: read.groups.then(|| {
                let mut v: Vec<FailureGroup> = groups.into_values().collect();
                // Most first; ties: the longest-standing, then the id (a stable order).
                v.sort_by(|a, b| {
                    b.count
                        .cmp(&a.count)
                        .then(a.first_seen_ms.cmp(&b.first_seen_ms))
                        .then(a.id.cmp(&b.id))
                });
                v
            }),
            selected: None,
            by_source,
        },
        observed.others,
    )
}

/// Why messages wait with no age, and how to give them one.
fn unknown_age_note(sampled: u64, peek: bool, has_notes: bool) -> String {
    if sampled > 0 {
        format!(
            "age unknown: none of the {sampled} message{} read carries a time; send a `timestamp` property, declare a time field in `deadLetter.envelope`, or set RabbitMQ 3.12+'s `message_interceptors.incoming.set_header_timestamp`; `dlqctl exporter --peek` publishes a lower bound from when it first saw each message",
            if sampled == 1 { "" } else { "s" }
        )
    } else if !peek {
        "age unknown: messages not read (`--no-peek`; the exporter reads them with `--peek`)"
            .to_owned()
    } else if has_notes {
        "age unknown: no message could be read (see the note above)".to_owned()
    } else {
        "age unknown: no message was ready to be read (those waiting are in flight)".to_owned()
    }
}

/// [`body`], with secrets and card numbers hidden ([`crate::secrets::body_text`], applied to
/// the text as the message has it, before it is made safe); a body that cannot be checked
/// against `pointers` is [`Body::Redacted`].
pub fn shown_body(bytes: &[u8], length: u64, max_body: usize, pointers: &[String]) -> Body {
    body_with(bytes, length, max_body, |text, truncated| {
        secrets::body_text(text, truncated, pointers)
    })
}

/// A body as it may be shown: hidden, text cut at `max_body` bytes (on a character
/// boundary), or binary as length and hex prefix.
pub fn body(bytes: &[u8], length: u64, max_body: usize) -> Body {
    body_with(bytes, length, max_body, |text, _| Some(text.to_owned()))
}

/// [`body`], the text passed through `shown` (text, whether it was cut) first: `None` hides it.
fn body_with(
    bytes: &[u8],
    length: u64,
    max_body: usize,
    shown: impl Fn(&str, bool) -> Option<String>,
) -> Body {
    if max_body == 0 {
        return Body::Hidden { length };
    }
    let kept = &bytes[..bytes.len().min(max_body)];
    let truncated = length > kept.len() as u64;
    let text = match std::str::from_utf8(kept) {
        Ok(t) => Some(t),
        // Cut inside a character by the truncation (the backend's or ours): keep what is whole.
        Err(e) if e.error_len().is_none() && truncated => {
            std::str::from_utf8(&kept[..e.valid_up_to()]).ok()
        }
        Err(_) => None,
    };
    match text {
        Some(t) => match shown(t, truncated) {
            Some(t) => Body::Text {
                length,
                truncated,
                text: safe(&t),
            },
            None => Body::Redacted { length },
        },
        None => Body::Binary {
            length,
            hex_prefix: kept
                .iter()
                .take(HEX_PREFIX)
                .map(|b| format!("{b:02x}"))
                .collect(),
        },
    }
}

/// At most `n` characters of `s`, with `…` when cut.
pub fn cut(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// Text from a message, made harmless for a terminal, a Markdown page or a metrics file:
/// every control character (C0, DEL, C1: the bytes of terminal escape sequences), and the
/// Unicode controls that reorder or hide text (bidirectional overrides and isolates,
/// zero-width characters), become visible `\u{..}` escapes; backslash becomes `\\`, so an
/// escape in the output always means one was made. Printable text is left as it is.
pub fn safe(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || hides_or_reorders(c) => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

/// Format characters that change how the text around them is shown.
fn hides_or_reorders(c: char) -> bool {
    matches!(c,
        '\u{ad}' // soft hyphen
        | '\u{61c}' // Arabic letter mark (a bidi control)
        | '\u{180e}' // Mongolian vowel separator
        | '\u{200b}'..='\u{200f}' // zero-width space/joiners, LRM, RLM
        | '\u{2028}' | '\u{2029}' // line and paragraph separators
        | '\u{202a}'..='\u{202e}' // bidi embeddings and overrides
        | '\u{2060}'..='\u{2064}' // word joiner, invisible operators
        | '\u{2066}'..='\u{206f}' // bidi isolates, deprecated format characters
        | '\u{feff}' // zero-width no-break space
        | '\u{fff9}'..='\u{fffb}' // interlinear annotations
        | '\u{e0000}'..='\u{e007f}' // tag characters (invisible text)
    )
}

/// [`safe`] for text of several lines (an error whose message spans lines): each line made
/// safe, the line breaks kept.
pub fn safe_lines(s: &str) -> String {
    s.split('\n').map(safe).collect::<Vec<_>>().join("\n")
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 36: SQS periods add up into counters; a period read again (CloudWatch revised
    /// it) replaces what it said, and one that left the lookback stays counted.
    #[test]
    fn periods_add_up_and_a_period_read_again_is_counted_once() {
        let p = |t, d, s| FlowPeriod {
            start_s: t,
            dead_lettered: Some(d),
            source: Some(s),
        };
        let mut a = Accumulator::default();
        assert_eq!(a.add(&[]), (None, None));
        assert_eq!(a.add(&[p(0, 1, 100), p(60, 2, 100)]), (Some(3), Some(200)));
        // The next reading: period 0 left the lookback, 60 revised, 120 new.
        assert_eq!(a.add(&[p(60, 3, 100), p(120, 0, 50)]), (Some(4), Some(250)));
        // Nothing new read: the totals stay.
        assert_eq!(a.add(&[]), (Some(4), Some(250)));
        let only_source = FlowPeriod {
            start_s: 0,
            dead_lettered: None,
            source: Some(7),
        };
        assert_eq!(Accumulator::default().add(&[only_source]), (None, Some(7)));
    }

    #[test]
    fn terminal_escapes_and_bidi_controls_become_visible() {
        for hidden in ['\u{61c}', '\u{2028}', '\u{e0041}', '\u{ad}', '\u{180e}'] {
            assert_eq!(
                safe(&hidden.to_string()),
                format!("\\u{{{:x}}}", hidden as u32)
            );
        }
        assert_eq!(safe_lines("a\u{1b}\nb"), "a\\u{1b}\nb");
        let hostile = "ok\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\u{202e}gnp.exe\r\n\\";
        let shown = safe(hostile);
        assert_eq!(
            shown,
            "ok\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\u{9b}31m\\u{202e}gnp.exe\\r\\n\\\\"
        );
        assert!(
            !shown
                .chars()
                .any(|c| c.is_control() || hides_or_reorders(c))
        );
    }

    #[test]
    fn bodies_are_text_cut_on_a_character_boundary_or_binary() {
        // "é" is two bytes: a cut after 3 bytes of "aéé" keeps "aé".
        assert_eq!(
            body("aéé".as_bytes(), 5, 4),
            Body::Text {
                length: 5,
                truncated: true,
                text: "aé".into()
            }
        );
        assert_eq!(
            body(&[0xff, 0xfe, 0x00, 0x41], 4, 1024),
            Body::Binary {
                length: 4,
                hex_prefix: "fffe0041".into()
            }
        );
        assert_eq!(body(b"secret", 6, 0), Body::Hidden { length: 6 });
        // A body the backend already cut (1 MiB, 1 KiB kept) says it was cut.
        assert_eq!(
            body(&[b'x'; 1024], 1 << 20, 1024),
            Body::Text {
                length: 1 << 20,
                truncated: true,
                text: "x".repeat(1024)
            }
        );
    }

    fn message(id: &str, class: Option<&str>, published_ms: i64) -> Message {
        Message {
            id: id.into(),
            headers: class
                .map(|c| vec![("dlq-error-class".to_owned(), c.to_owned())])
                .unwrap_or_default(),
            body: b"{}".to_vec(),
            body_len: 2,
            published_ms: Some(published_ms),
            ..Message::default()
        }
    }

    fn observed(total: u64, messages: Vec<Message>, head_first: bool) -> Observed {
        Observed {
            dead_letter: Depth {
                total: Some(total),
                ready: Some(total),
                in_flight: Some(0),
                delayed: None,
                measure: Measure::Waiting,
                exists: true,
                lower_bound: false,
                basis: None,
            },
            others: Vec::new(),
            messages,
            head_first,
            metric_age_seconds: None,
            notes: Vec::new(),
            flow: Flow::default(),
        }
    }

    #[test]
    fn classes_are_counted_over_every_message_read_and_samples_are_the_first_n() {
        let now = 10_000_000;
        let msgs = vec![
            message("a", Some("poison"), now - 60_000),
            message("b", None, now - 30_000),
            message("c", Some("poison"), now - 90_000),
        ];
        let read = ReadOptions {
            samples: 2,
            ..ReadOptions::default()
        };
        let (r, _) = summarise(
            "q",
            &EnvelopeResolved::default(),
            &Redact::default(),
            read,
            observed(3, msgs, false),
            now,
        );
        assert_eq!(
            r.by_error_class,
            BTreeMap::from([("poison".into(), 2), ("unknown".into(), 1)])
        );
        assert_eq!((r.sampled, r.exact), (3, true));
        assert_eq!(r.samples.len(), 2);
        assert_eq!(r.samples[1].id, "b");
        // All read: the oldest is exact, and it is the oldest of all, not the first.
        assert_eq!(r.oldest_age_seconds, Some(90.0));
        assert_eq!(r.oldest_age_basis, Some(AgeBasis::All));
        assert_eq!(r.oldest_age_since, Some("published"));
    }

    /// Issue 37: with `groups`, every message read falls in its failure group: messages that
    /// differ only in ids and amounts together, counted, with the span of their dead-lettered
    /// times and their first 3 ids; no message: the class alone; a card number's digits are
    /// normalised away before anything is shown. Without: no groups.
    #[test]
    fn messages_read_fall_into_failure_groups_when_asked() {
        let now = 10_000_000;
        let failed = |id: &str, class: &str, text: Option<&str>, t: i64| {
            let mut m = message(id, Some(class), now - 1_000_000);
            if let Some(text) = text {
                m.headers.push(("dlq-error-message".into(), text.into()));
            }
            m.headers
                .push(("dlq-dead-lettered-at".into(), t.to_string()));
            m
        };
        let msgs = vec![
            failed(
                "a",
                "poison",
                Some("order 1 failed: amount 4.5"),
                now - 50_000,
            ),
            failed(
                "b",
                "poison",
                Some("order 22 failed: amount 10"),
                now - 90_000,
            ),
            failed(
                "c",
                "poison",
                Some("card 4111 1111 1111 1111 refused"),
                now - 10_000,
            ),
            failed(
                "d",
                "poison",
                Some("order 333 failed: amount 0.01"),
                now - 20_000,
            ),
            failed(
                "e",
                "poison",
                Some("order 4 failed: amount 7"),
                now - 30_000,
            ),
            failed("f", "transient", None, now - 40_000),
        ];
        let grouped = ReadOptions {
            groups: true,
            ..ReadOptions::default()
        };
        let (r, _) = summarise(
            "q",
            &EnvelopeResolved::default(),
            &Redact::default(),
            grouped,
            observed(6, msgs.clone(), true),
            now,
        );
        let groups = r.groups.expect("groups asked for");
        let summary: Vec<(&str, &str, u64)> = groups
            .iter()
            .map(|g| (g.class.as_str(), g.message.as_str(), g.count))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("poison", "order <n> failed: amount <n>", 4),
                ("transient", "", 1),
                ("poison", "card <n> <n> <n> <n> refused", 1),
            ]
        );
        let orders = &groups[0];
        assert_eq!(
            orders.id,
            fingerprint::fingerprint("poison", "order <n> failed: amount <n>")
        );
        assert_eq!(
            (orders.first_seen_ms, orders.last_seen_ms),
            (Some(now - 90_000), Some(now - 20_000))
        );
        assert_eq!(orders.sample_ids, vec!["a", "b", "d"]);
        assert_eq!(groups[1].id, fingerprint::fingerprint("transient", ""));
        // Not asked for: none computed.
        let (r, _) = summarise(
            "q",
            &EnvelopeResolved::default(),
            &Redact::default(),
            ReadOptions::default(),
            observed(6, msgs, true),
            now,
        );
        assert_eq!(r.groups, None);
    }

    /// Issue 31 (10): where messages become samples, secrets are hidden once for every
    /// format and command: secret headers, the target's own headers and body pointers, cards.
    #[test]
    fn samples_hide_secret_headers_card_numbers_and_the_targets_own_rules() {
        let now = 10_000_000;
        let mut m = message("a", Some("poison"), now - 5_000);
        m.headers
            .push(("Authorization".into(), "Bearer xyz".into()));
        m.headers.push(("X-Email".into(), "a@b.c".into()));
        m.headers
            .push(("note".into(), "card 4111 1111 1111 1111".into()));
        m.body = br#"{"pan":"4111111111111111","who":{"email":"a@b.c"}}"#.to_vec();
        m.body_len = m.body.len() as u64;
        let redact = Redact {
            headers: vec!["x-email".into()],
            body_pointers: vec!["/who/email".into()],
        };
        let (r, _) = summarise(
            "q",
            &EnvelopeResolved::default(),
            &redact,
            ReadOptions::default(),
            observed(1, vec![m], true),
            now,
        );
        let s = &r.samples[0];
        let h: BTreeMap<&str, &str> = s
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(h["Authorization"], "«redacted, 10 bytes»");
        assert_eq!(h["X-Email"], "«redacted, 5 bytes»");
        assert_eq!(h["note"], "card •••• •••• •••• 1111");
        assert_eq!(
            s.body,
            Body::Text {
                length: 50,
                truncated: false,
                text: r#"{"pan":"••••••••••••1111","who":{"email":"«redacted, 5 bytes»"}}"#.into()
            }
        );
        // Cut by --max-body: it cannot be checked against the pointers, so it is not shown.
        assert_eq!(
            shown_body(
                br#"{"who":{"email":"a@b.c"}}"#,
                100,
                10,
                &redact.body_pointers
            ),
            Body::Redacted { length: 100 }
        );
    }

    #[test]
    fn a_partial_read_says_what_its_oldest_age_is_worth() {
        let now = 10_000_000;
        let msgs = vec![message("a", None, now - 5_000)];
        let (r, _) = summarise(
            "q",
            &EnvelopeResolved::default(),
            &Redact::default(),
            ReadOptions::default(),
            observed(7, msgs.clone(), false),
            now,
        );
        assert_eq!(
            (r.exact, r.oldest_age_basis),
            (false, Some(AgeBasis::Sample))
        );
        let (r, _) = summarise(
            "q",
            &EnvelopeResolved::default(),
            &Redact::default(),
            ReadOptions::default(),
            observed(7, msgs, true),
            now,
        );
        assert_eq!(r.oldest_age_basis, Some(AgeBasis::Head));
    }

    /// Issue 34: messages wait and no age can be told: said so (`unknown`, age null, a note
    /// naming the fixes), never silently absent; an empty queue has no age and no note.
    #[test]
    fn an_age_that_cannot_be_told_is_unknown_and_says_why() {
        let now = 10_000_000;
        let untimed = Message {
            published_ms: None,
            ..message("a", None, 0)
        };
        let (r, _) = summarise(
            "q",
            &EnvelopeResolved::default(),
            &Redact::default(),
            ReadOptions::default(),
            observed(1, vec![untimed.clone()], true),
            now,
        );
        assert_eq!(
            (r.oldest_age_basis, r.oldest_age_seconds),
            (Some(AgeBasis::Unknown), None)
        );
        assert_eq!(r.fingerprints, vec![untimed.fingerprint()]);
        let note = r.notes.last().expect("a note");
        assert!(
            note.starts_with("age unknown: none of the 1 message read carries a time")
                && note.contains("`timestamp` property")
                && note.contains("`deadLetter.envelope`")
                && note.contains("message_interceptors.incoming.set_header_timestamp"),
            "{note}"
        );
        assert_eq!(
            serde_json::to_value(r.oldest_age_basis).ok(),
            Some(serde_json::json!("unknown"))
        );
        // Depth only (`--no-peek`): not read.
        let no_peek = ReadOptions {
            peek: false,
            ..ReadOptions::default()
        };
        let (r, _) = summarise(
            "q",
            &EnvelopeResolved::default(),
            &Redact::default(),
            no_peek,
            observed(4, Vec::new(), true),
            now,
        );
        assert_eq!(r.oldest_age_basis, Some(AgeBasis::Unknown));
        assert_eq!(
            r.notes,
            vec![
                "age unknown: messages not read (`--no-peek`; the exporter reads them with `--peek`)"
            ]
        );
        // Empty: no age, nothing unknown.
        let (r, _) = summarise(
            "q",
            &EnvelopeResolved::default(),
            &Redact::default(),
            no_peek,
            observed(0, Vec::new(), true),
            now,
        );
        assert_eq!((r.oldest_age_basis, r.notes.len()), (None, 0));
        assert_eq!(
            serde_json::to_value(AgeBasis::FirstSeen).ok(),
            Some(serde_json::json!("first-seen"))
        );
    }
}
