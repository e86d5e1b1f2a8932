//! The generic part of resolving a channel: what every backend shares (the main and
//! dead-letter names, retries and their delays, retentions, the discard decision, the
//! invalid-message queue, alarms), and the entry, [`resolve`], which hands each backend's
//! block to its own file (`sqs`, `rabbitmq`, `kafka`, `pubsub`).

use super::azure::AzureResolved;
use super::common::{DeadLetterRole, ResolveError, RetryStage, expand, template_error};
use super::defaults::{
    DEFAULT_ALARM_EVALUATION_PERIODS, DEFAULT_ALARM_PERIOD, DEFAULT_ARCHIVE_BEFORE,
    DEFAULT_MAX_REDRIVES, DEFAULT_RATE_FOR, DEFAULT_RATE_PERIOD, KAFKA_DEFAULT_DELAY,
    KAFKA_INVALID_SUFFIX, PUBSUB_DEFAULT_RETENTION, SQS_DEFAULT_DLQ_RETENTION,
    SQS_DEFAULT_RETENTION,
};
use super::envelope::{self, EnvelopeResolved};
use super::headers::HeaderRules;
use super::kafka::KafkaResolved;
use super::pubsub::PubsubResolved;
use super::rabbitmq::RabbitResolved;
use super::spring::{SPRING_DLT_SUFFIX, SPRING_RETRY_SUFFIX, spring_suffix};
use super::sqs::SqsResolved;
use super::{azure, kafka, pubsub, rabbitmq, sqs};
use crate::spec::duration::Duration;
use crate::spec::model::{
    AlarmActions, Alarms, Archive, Backend, Channel, ChannelSpec, Discard, KafkaNaming, RetryModel,
    Target, Tier,
};
use crate::spec::ratio::Ratio;

#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub channel: String,
    /// `metadata.labels` (team, tier, ...): labels of the channel's Prometheus alerts.
    pub labels: std::collections::BTreeMap<String, String>,
    pub target: String,
    pub backend: Backend,
    /// Main queue or topic.
    pub main: String,
    pub dead_letter: String,
    /// What `dead_letter` is: the channel's DLQ as resolved; the invalid-message queue or an
    /// exception-based DLT in the views of [`Resolved::dead_letter_views`].
    pub dead_letter_role: DeadLetterRole,
    /// Retry queues/topics, in the order a message meets them.
    pub retry_stages: Vec<RetryStage>,
    /// The delay before each retry (`max_attempts - 1` entries).
    pub delays: Vec<Duration>,
    pub max_attempts: u32,
    pub retention: Option<Duration>,
    /// How long the dead-letter queue keeps a message: `deadLetter.retention`, or
    /// `deadLetter.discard.after` (then `discard` says why); on SQS its default when unset.
    pub dead_letter_retention: Option<Duration>,
    /// `deadLetter.discard`: the dead letters are dropped on purpose after
    /// `dead_letter_retention`, for a written reason.
    pub discard: Option<DiscardResolved>,
    /// `deadLetter.archive`: dead letters archived before the retention drops them.
    pub archive: Option<ArchiveResolved>,
    /// `spec.invalid`: the invalid-message queue or topic, where poison messages go at once.
    pub invalid: Option<InvalidResolved>,
    /// Where a dead letter says why it died (`deadLetter.envelope`, default dlqctl's), and
    /// the channel's class rules (`deadLetter.classes`).
    pub envelope: EnvelopeResolved,
    /// Kafka: the dead-letter topic's consumer group (`deadLetter.consumerGroup`).
    pub dead_letter_group: Option<String>,
    /// How many times `redrive` may bring one message back (`deadLetter.maxRedrives`).
    pub max_redrives: u32,
    /// What a redriven copy leaves behind of a dead letter's headers (`deadLetter.redrive`
    /// and the default list of replication and tracing headers).
    pub headers: HeaderRules,
    pub sqs: Option<SqsResolved>,
    pub rabbitmq: Option<RabbitResolved>,
    pub kafka: Option<KafkaResolved>,
    pub pubsub: Option<PubsubResolved>,
    pub azure: Option<AzureResolved>,
    /// The alarms the spec asks for, defaults filled in: CloudWatch alarms on SQS targets,
    /// Prometheus rules (`dlqctl alerts`) on RabbitMQ and Kafka targets.
    pub alarms: AlarmsResolved,
    /// What `status` and `redrive --dry-run` also hide of its messages (the target's `redact`).
    pub redact: crate::spec::model::Redact,
    /// `deadLetter.of`: the channel that owns the dead-letter destination this one shares.
    /// Once linked ([`super::shared::link`]), `dead_letter` and its settings are the owner's,
    /// and this channel provisions none of them.
    pub dead_letter_of: Option<String>,
    /// A shared destination: the main queues of the other channels that dead-letter into it
    /// (its owner's and those of the channels whose `deadLetter.of` names the owner), sorted.
    pub dead_letter_sources: Vec<String>,
}

/// `spec.alarms` with defaults filled in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlarmsResolved {
    /// Messages waiting in the DLQ: fires above each tier's `threshold` messages.
    pub depth: Option<AlarmResolved>,
    /// Age of the oldest dead letter: fires above each tier's `threshold` seconds.
    pub oldest_message_age: Option<AlarmResolved>,
    /// The dead-letter rate (`alarms.deadLetterRate`): dead-lettered over source messages per
    /// `period`. Only a channel's own alarms have it (never `invalid.alarms`).
    pub dead_letter_rate: Option<RateAlarmResolved>,
    /// The channel's runbook URL, if any.
    pub runbook: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AlarmResolved {
    /// One entry per alarm to raise, lowest tier first: a single `above` threshold is one
    /// entry with `tier: None`; the tiered form has a `warning` and/or a `critical` entry.
    pub tiers: Vec<TierResolved>,
    pub period: Duration,
    pub evaluation_periods: u32,
    /// `None`: dlqctl's own description; `Some("")`: none.
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TierResolved {
    /// `None`: the single-threshold form (`above`), which keeps the untiered alarm name and
    /// counts as `critical` for actions and severity.
    pub tier: Option<Tier>,
    /// Messages (depth) or whole seconds (oldest message age).
    pub threshold: u64,
    /// Where the alarm notifies (CloudWatch AlarmActions), sorted, without duplicates.
    pub actions: Vec<String>,
}

impl TierResolved {
    /// The severity: `warning` or `critical` (the single-threshold form is `critical`).
    pub fn severity(&self) -> Tier {
        self.tier.unwrap_or(Tier::Critical)
    }
}

impl AlarmResolved {
    /// Whether the alarm uses the tiered form (`warning`/`critical`).
    pub fn is_tiered(&self) -> bool {
        self.tiers.iter().any(|t| t.tier.is_some())
    }
}

/// `alarms.deadLetterRate` with defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct RateAlarmResolved {
    /// One entry per alarm, lowest tier first (as [`AlarmResolved::tiers`]).
    pub tiers: Vec<RateTierResolved>,
    /// The window the rate is measured over (default 5m).
    pub period: Duration,
    /// How long above the threshold before it fires (default 10m).
    pub for_: Duration,
    /// `None`: dlqctl's own description; `Some("")`: none.
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RateTierResolved {
    /// `None`: the single-threshold form (`above`), which counts as `critical`.
    pub tier: Option<Tier>,
    /// The threshold as written (`0.1%`); `threshold.fraction()` is what rules compare.
    pub threshold: Ratio,
    /// Where the alarm notifies (CloudWatch AlarmActions), sorted, without duplicates.
    pub actions: Vec<String>,
}

impl RateTierResolved {
    /// The severity: `warning` or `critical` (the single-threshold form is `critical`).
    pub fn severity(&self) -> Tier {
        self.tier.unwrap_or(Tier::Critical)
    }

    /// The threshold as a fraction (`0.1%` → 0.001).
    pub fn fraction(&self) -> f64 {
        self.threshold.fraction()
    }
}

impl RateAlarmResolved {
    /// Whether the alarm uses the tiered form (`warning`/`critical`).
    pub fn is_tiered(&self) -> bool {
        self.tiers.iter().any(|t| t.tier.is_some())
    }

    /// CloudWatch's EvaluationPeriods: `for` / `period`, at least 1 (lint makes `for` a whole
    /// multiple of `period` on SQS).
    pub fn evaluation_periods(&self) -> u32 {
        let p = self.period.as_millis().max(1);
        u32::try_from((self.for_.as_millis() / p).max(1)).unwrap_or(u32::MAX)
    }
}

/// A written decision to discard dead letters (`deadLetter.discard`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct DiscardResolved {
    /// How long a dead letter is kept before it is discarded (e.g. `3d`).
    pub after: Duration,
    /// Why (absent: nobody wrote it down, which `dlqctl lint` reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl std::fmt::Display for DiscardResolved {
    /// `discarded on purpose after 3d: quotes expire (owner: pricing)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "discarded on purpose after {}", self.after)?;
        match &self.reason {
            Some(r) => write!(f, ": {r}")?,
            None => f.write_str(" (no reason written)")?,
        }
        if let Some(o) = &self.owner {
            write!(f, " (owner: {o})")?;
        }
        Ok(())
    }
}

/// `deadLetter.archive`, checked (`to` is there) and `before` filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchiveResolved {
    /// A directory (relative ones already anchored at the folder of the file that wrote
    /// it) or `s3://bucket/prefix`, as `--to` takes it.
    pub to: String,
    pub before: Duration,
}

/// Which dead letters `archive --due` takes: what the dead-letter queue's retention and
/// `before` make of the question "what would expire within `before`?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Every dead letter older than this: the retention minus `before` (zero when `before`
    /// is the retention or more: every dead letter is due), its age counted from where the
    /// backend's retention counts.
    OlderThan(Duration),
    /// The queue never drops a message by age (RabbitMQ without `message-ttl`): nothing is
    /// ever due.
    Never,
    /// The broker's own default decides (a Kafka dead-letter topic without a retention gets
    /// `log.retention.ms`), which dlqctl does not read: it cannot tell what is due.
    Unknown,
}

impl Due {
    /// `retention − before`, saturating at zero. Without a retention: [`Due::Unknown`] on
    /// Kafka (the broker's default applies), [`Due::Never`] elsewhere (only RabbitMQ gets
    /// here: SQS and Pub/Sub always resolve one).
    pub fn of(backend: Backend, retention: Option<Duration>, before: Duration) -> Due {
        match (retention, backend) {
            (Some(r), _) => Due::OlderThan(Duration::from_millis(
                r.as_millis().saturating_sub(before.as_millis()),
            )),
            (None, Backend::Kafka) => Due::Unknown,
            (None, _) => Due::Never,
        }
    }
}

impl Resolved {
    /// What `archive --due` takes from the dead-letter queue, with `before` from
    /// `deadLetter.archive` (else `default_before`, for `--due --to` without one).
    pub fn due(&self, default_before: Duration) -> Due {
        let before = self.archive.as_ref().map_or(default_before, |a| a.before);
        Due::of(self.backend, self.dead_letter_retention, before)
    }
}

/// `spec.invalid` with defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct InvalidResolved {
    /// The queue or topic's name.
    pub name: String,
    /// How long it keeps a message: `invalid.retention`, or `invalid.discard.after`; on SQS
    /// the dead-letter default (14 days) when unset.
    pub retention: Option<Duration>,
    /// `invalid.discard`: invalid messages are dropped on purpose after `retention`.
    pub discard: Option<DiscardResolved>,
    /// `invalid.alarms` with defaults filled in (SQS: CloudWatch alarms on the queue).
    pub alarms: AlarmsResolved,
}

/// The delay before each retry, from the backoff settings: each delay is the previous one
/// times `multiplier`, truncated to whole milliseconds and capped at `max` — exactly as Spring's
/// `ExponentialBackOff` (and spring-retry's `ExponentialBackOffPolicy`) computes it, so that
/// delay-suffixed Kafka topic names match the ones a Spring consumer derives.
pub fn delays(channel: &Channel, default: Option<Duration>) -> Vec<Duration> {
    let retry = channel.spec.retry.as_ref();
    let retries = retry
        .and_then(|r| r.max_attempts)
        .unwrap_or(1)
        .saturating_sub(1) as usize;
    let Some(backoff) = retry.and_then(|r| r.backoff.as_ref()) else {
        return default.map(|d| vec![d; retries]).unwrap_or_default();
    };
    let multiplier = backoff.multiplier.unwrap_or(1.0);
    let cap = backoff.max.map_or(u64::MAX, |m| m.as_millis());
    let mut current = backoff.initial.as_millis().min(cap);
    let mut out = Vec::with_capacity(retries);
    for i in 0..retries {
        if i > 0 && current < cap {
            // `as` truncates toward zero and saturates, like Java's `(long)` cast.
            current = ((current as f64 * multiplier) as u64).min(cap);
        }
        out.push(Duration::from_millis(current));
    }
    out
}

/// Resolves a channel against its target. The channel must have `spec.target` and
/// `spec.retry.maxAttempts` (the rules report their absence first).
pub fn resolve(
    channel: &Channel,
    target_name: &str,
    target: &Target,
) -> Result<Resolved, ResolveError> {
    let spec = &channel.spec;
    let name = channel.metadata.name.as_str();
    let backend = target.backend;
    let max_attempts = spec
        .retry
        .as_ref()
        .and_then(|r| r.max_attempts)
        .unwrap_or(1);
    let fifo = spec.sqs.as_ref().and_then(|s| s.fifo).unwrap_or(false);
    let kafka_options = spec.kafka.as_ref();
    let retry_suffix = spring_suffix(
        kafka_options.and_then(|k| k.retry_topic_suffix.as_deref()),
        SPRING_RETRY_SUFFIX,
    );
    let dlt_suffix = spring_suffix(
        kafka_options.and_then(|k| k.dlt_suffix.as_deref()),
        SPRING_DLT_SUFFIX,
    );
    let (main, dead_letter) = main_and_dead_letter(spec, name, backend, fifo, dlt_suffix)?;
    // Service Bus: the dead letters wait in the entity's own subqueue unless `deadLetter.name`
    // names a queue to forward them to.
    let (azure, dead_letter) = if backend == Backend::AzureServicebus {
        let (a, dl) = azure::resolve(spec, name, &main)?;
        (Some(a), dl)
    } else {
        (None, dead_letter)
    };
    let rabbit_model = spec
        .rabbitmq
        .as_ref()
        .and_then(|r| r.retry_model)
        .unwrap_or(RetryModel::Ttl);
    let delays = match backend {
        Backend::Sqs => Vec::new(),
        Backend::Rabbitmq if rabbit_model == RetryModel::DeliveryLimit => Vec::new(),
        Backend::Rabbitmq => delays(channel, None),
        Backend::Kafka => delays(channel, Some(KAFKA_DEFAULT_DELAY)),
        // Pub/Sub backs off by itself (retryPolicy): no retry stages, no delays of dlqctl's.
        Backend::Pubsub => Vec::new(),
        // Service Bus redelivers at once after an abandon or a lock expiry: no retry stages.
        Backend::AzureServicebus => Vec::new(),
    };
    let kafka_naming = kafka_options
        .and_then(|k| k.naming)
        .unwrap_or(KafkaNaming::Spring);
    let kafka_retry = kafka::KafkaRetryNaming {
        naming: kafka_naming,
        retry_suffix,
    };
    let retry_stages = retry_stages(spec, name, backend, &main, &delays, &kafka_retry)?;
    let dl = spec.dead_letter.as_ref();
    let discard = discard(
        dl.and_then(|d| d.retention),
        dl.and_then(|d| d.discard.as_ref()),
        "deadLetter",
    )?;
    let invalid = invalid(spec, name, backend, fifo, &main)?;
    let archive = archive(dl.and_then(|d| d.archive.as_ref()))?;
    let (retention, dead_letter_retention) = match &discard {
        Some(d) => (retentions(spec, backend).0, Some(d.after)),
        None => retentions(spec, backend),
    };
    let sqs = (backend == Backend::Sqs).then(|| sqs::resolve(spec, fifo));
    let rabbitmq = if backend == Backend::Rabbitmq {
        Some(rabbitmq::resolve(
            spec,
            name,
            target,
            [&main, &dead_letter],
            rabbit_model,
        )?)
    } else {
        None
    };
    let kafka = (backend == Backend::Kafka).then(|| {
        let mut k = kafka::resolve(spec, &main, &kafka_retry, dlt_suffix);
        k.connectors = super::connect::resolve(spec, &dead_letter, &delays, k.replication_factor);
        k
    });
    let pubsub = if backend == Backend::Pubsub {
        Some(pubsub::resolve(spec, name, target)?)
    } else {
        None
    };
    Ok(Resolved {
        channel: name.to_owned(),
        labels: channel.metadata.labels.clone(),
        target: target_name.to_owned(),
        backend,
        main,
        dead_letter,
        dead_letter_role: DeadLetterRole::DeadLetter,
        retry_stages,
        delays,
        max_attempts,
        retention,
        dead_letter_retention,
        discard,
        archive,
        invalid,
        envelope: envelope::resolve(
            backend,
            &spec
                .dead_letter
                .as_ref()
                .and_then(|d| d.envelope.clone())
                .unwrap_or_default(),
            spec.dead_letter
                .as_ref()
                .and_then(|d| d.classes.as_deref())
                .unwrap_or_default(),
        ),
        dead_letter_group: spec
            .dead_letter
            .as_ref()
            .and_then(|d| d.consumer_group.clone()),
        max_redrives: spec
            .dead_letter
            .as_ref()
            .and_then(|d| d.max_redrives)
            .unwrap_or(DEFAULT_MAX_REDRIVES),
        headers: HeaderRules::resolve(dl.and_then(|d| d.redrive.as_ref())),
        sqs,
        rabbitmq,
        kafka,
        pubsub,
        azure,
        alarms: spec.alarms.as_ref().map(alarms).unwrap_or_default(),
        redact: target.redact.clone().unwrap_or_default(),
        dead_letter_of: dl.and_then(|d| d.of.clone()),
        dead_letter_sources: Vec::new(),
    })
}

/// The main queue or topic's name and the dead-letter one's, defaults per backend
/// (`dlt_suffix`: Spring's DLT suffix, for Kafka).
fn main_and_dead_letter(
    spec: &ChannelSpec,
    name: &str,
    backend: Backend,
    fifo: bool,
    dlt_suffix: &str,
) -> Result<(String, String), ResolveError> {
    let err = template_error;
    let (main_default, dlq_default) = match backend {
        Backend::Sqs if fifo => ("{channel}.fifo", "{channel}-dlq.fifo"),
        Backend::Sqs => ("{channel}", "{channel}-dlq"),
        Backend::Rabbitmq => ("{channel}", "{channel}.dlq"),
        Backend::Kafka => ("{channel}", "{channel}-dlt"),
        Backend::Pubsub => ("{channel}", "{channel}-dlq"),
        // Replaced by the subqueue's path unless `deadLetter.name` is set (`azure::resolve`).
        Backend::AzureServicebus => ("{channel}", "{channel}"),
    };
    let main = expand(
        spec.name.as_deref().unwrap_or(main_default),
        name,
        None,
        None,
    )
    .map_err(|m| err("/spec/name", m))?;
    let dlq_template = spec.dead_letter.as_ref().and_then(|d| d.name.as_deref());
    let dead_letter = match (backend, dlq_template) {
        // Spring Kafka suffixes the main topic (not the channel id) with `-dlt`, or its
        // `dltSuffix` (`DestinationTopicPropertiesFactory.createDltProperties`).
        (Backend::Kafka, None) => format!("{main}{dlt_suffix}"),
        _ => expand(dlq_template.unwrap_or(dlq_default), name, None, None)
            .map_err(|m| err("/spec/deadLetter/name", m))?,
    };
    Ok((main, dead_letter))
}

/// The retry queues or topics, in the order a message meets them (none on SQS).
fn retry_stages(
    spec: &ChannelSpec,
    name: &str,
    backend: Backend,
    main: &str,
    delays: &[Duration],
    naming: &kafka::KafkaRetryNaming<'_>,
) -> Result<Vec<RetryStage>, ResolveError> {
    match backend {
        Backend::Sqs | Backend::Pubsub | Backend::AzureServicebus => Ok(Vec::new()),
        Backend::Kafka => kafka::retry_stages(spec, name, main, delays, naming),
        Backend::Rabbitmq => rabbitmq::retry_stages(spec, name, delays),
    }
}

/// A `discard` decision (`deadLetter.discard` or `invalid.discard`, by `block`), checked: it
/// needs `after`, and replaces the block's `retention` rather than joining it (two answers to
/// one question).
fn discard(
    retention: Option<Duration>,
    discard: Option<&Discard>,
    block: &'static str,
) -> Result<Option<DiscardResolved>, ResolveError> {
    let Some(d) = discard else {
        return Ok(None);
    };
    let (retention_pointer, discard_pointer) = match block {
        "invalid" => ("/spec/invalid/retention", "/spec/invalid/discard"),
        _ => ("/spec/deadLetter/retention", "/spec/deadLetter/discard"),
    };
    // One rule for both blocks: the same question, answered twice.
    let rule = "deadletter/discard-and-retention";
    let what = match block {
        "invalid" => "invalid messages",
        _ => "dead letters",
    };
    if let Some(r) = retention {
        return Err(ResolveError {
            pointer: retention_pointer,
            rule,
            message: format!(
                "`{block}.retention` ({r}) and `{block}.discard` both say how long {what} are kept"
            ),
            hint: Some(
                "keep one: `discard: {after, reason}` when dropping them is a decision, `retention` otherwise".into(),
            ),
        });
    }
    let Some(after) = d.after else {
        return Err(ResolveError {
            pointer: discard_pointer,
            rule: "spec/required",
            message: format!("`{block}.discard` has no `after`: when are {what} discarded?"),
            hint: Some("e.g. `discard: {after: 3d, reason: \"...\"}`".into()),
        });
    };
    Ok(Some(DiscardResolved {
        after,
        reason: d.reason.clone(),
        owner: d.owner.clone(),
    }))
}

/// `deadLetter.archive`, checked: `to` is required (it may come from Defaults, hence no
/// schema `required`), `before` defaults to [`DEFAULT_ARCHIVE_BEFORE`].
fn archive(a: Option<&Archive>) -> Result<Option<ArchiveResolved>, ResolveError> {
    let Some(a) = a else {
        return Ok(None);
    };
    let Some(to) = a.to.as_deref().map(str::trim).filter(|t| !t.is_empty()) else {
        return Err(ResolveError {
            pointer: "/spec/deadLetter/archive",
            rule: "spec/required",
            message: "`deadLetter.archive` has no `to`: where are dead letters archived?".into(),
            hint: Some(
                "e.g. `archive: {to: s3://bucket/dead-letters, before: 2d}`, or a directory".into(),
            ),
        });
    };
    if let Some(rest) = to.strip_prefix("s3://") {
        if rest.split('/').next().is_none_or(str::is_empty) {
            return Err(ResolveError {
                pointer: "/spec/deadLetter/archive/to",
                rule: "deadletter/archive-location",
                message: format!("`deadLetter.archive.to` is `{to}`: no bucket after s3://"),
                hint: Some("s3://bucket/prefix".into()),
            });
        }
    } else if to.contains("://") {
        return Err(ResolveError {
            pointer: "/spec/deadLetter/archive/to",
            rule: "deadletter/archive-location",
            message: format!(
                "`deadLetter.archive.to` is `{to}`: an archive is a directory or s3://bucket/prefix; no other scheme is known"
            ),
            hint: None,
        });
    }
    Ok(Some(ArchiveResolved {
        to: to.to_owned(),
        before: a.before.unwrap_or(DEFAULT_ARCHIVE_BEFORE),
    }))
}

/// `spec.invalid`, resolved: its name (defaults per backend, Kafka after the main topic like
/// Spring's DLT), its retention or discard decision (SQS: 14 days when unset, as a DLQ), its
/// alarms.
fn invalid(
    spec: &ChannelSpec,
    name: &str,
    backend: Backend,
    fifo: bool,
    main: &str,
) -> Result<Option<InvalidResolved>, ResolveError> {
    let Some(inv) = &spec.invalid else {
        return Ok(None);
    };
    let default = match backend {
        Backend::Sqs if fifo => "{channel}-invalid.fifo",
        Backend::Sqs => "{channel}-invalid",
        Backend::Rabbitmq => "{channel}.invalid",
        Backend::Kafka => "",
        Backend::Pubsub | Backend::AzureServicebus => {
            return Err(ResolveError {
                pointer: "/spec/invalid",
                rule: "invalid/backend",
                message: format!(
                    "`spec.invalid` is not provisioned on {} in this version",
                    backend.display_name()
                ),
                hint: Some(
                    "create the invalid-message topic and its subscription by hand, or remove `invalid`"
                        .into(),
                ),
            });
        }
    };
    let queue = match (backend, inv.name.as_deref()) {
        (Backend::Kafka, None) => format!("{main}{KAFKA_INVALID_SUFFIX}"),
        (_, t) => expand(t.unwrap_or(default), name, None, None)
            .map_err(|m| template_error("/spec/invalid/name", m))?,
    };
    let discard = discard(inv.retention, inv.discard.as_ref(), "invalid")?;
    let retention = match (&discard, inv.retention, backend) {
        (Some(d), _, _) => Some(d.after),
        (None, Some(r), _) => Some(r),
        (None, None, Backend::Sqs) => Some(SQS_DEFAULT_DLQ_RETENTION),
        (None, None, _) => None,
    };
    Ok(Some(InvalidResolved {
        name: queue,
        retention,
        discard,
        // The rate is the channel's, over all its destinations (`alarms/rate-scope` refuses
        // it here).
        alarms: inv
            .alarms
            .as_ref()
            .map(|a| AlarmsResolved {
                dead_letter_rate: None,
                ..alarms(a)
            })
            .unwrap_or_default(),
    }))
}

/// The main and dead-letter retentions; on SQS, its defaults when unset.
fn retentions(spec: &ChannelSpec, backend: Backend) -> (Option<Duration>, Option<Duration>) {
    let r = spec.retention;
    let d = spec.dead_letter.as_ref().and_then(|d| d.retention);
    match backend {
        Backend::Sqs => (
            Some(r.unwrap_or(SQS_DEFAULT_RETENTION)),
            Some(d.unwrap_or(SQS_DEFAULT_DLQ_RETENTION)),
        ),
        // A subscription's retention is at most 7 d, Pub/Sub's default: dead letters get it.
        Backend::Pubsub => (
            Some(r.unwrap_or(PUBSUB_DEFAULT_RETENTION)),
            Some(d.unwrap_or(PUBSUB_DEFAULT_RETENTION)),
        ),
        _ => (r, d),
    }
}

/// `spec.alarms` (or `spec.invalid.alarms`) with defaults filled in.
fn alarms(a: &Alarms) -> AlarmsResolved {
    let actions = a.actions.as_ref();
    let tier_actions = |tier: Option<Tier>| {
        let mut list = actions.map_or_else(Vec::new, |x: &AlarmActions| x.for_tier(tier).to_vec());
        list.sort();
        list.dedup();
        list
    };
    let tiers = |above: Option<u64>, warning: Option<u64>, critical: Option<u64>| {
        [
            (None, above),
            (Some(Tier::Warning), warning),
            (Some(Tier::Critical), critical),
        ]
        .into_iter()
        .filter_map(|(tier, threshold)| {
            Some(TierResolved {
                tier,
                threshold: threshold?,
                actions: tier_actions(tier),
            })
        })
        .collect::<Vec<_>>()
    };
    let secs = |d: Option<Duration>| d.map(|d| d.as_millis() / 1000);
    AlarmsResolved {
        depth: a.depth.as_ref().map(|d| AlarmResolved {
            tiers: tiers(d.above, d.warning, d.critical),
            period: d.period.unwrap_or(DEFAULT_ALARM_PERIOD),
            evaluation_periods: d
                .evaluation_periods
                .unwrap_or(DEFAULT_ALARM_EVALUATION_PERIODS),
            description: d.description.clone(),
        }),
        oldest_message_age: a.oldest_message_age.as_ref().map(|o| AlarmResolved {
            tiers: tiers(secs(o.above), secs(o.warning), secs(o.critical)),
            period: o.period.unwrap_or(DEFAULT_ALARM_PERIOD),
            evaluation_periods: o
                .evaluation_periods
                .unwrap_or(DEFAULT_ALARM_EVALUATION_PERIODS),
            description: o.description.clone(),
        }),
        dead_letter_rate: a.dead_letter_rate.as_ref().map(|d| RateAlarmResolved {
            tiers: [
                (None, d.above),
                (Some(Tier::Warning), d.warning),
                (Some(Tier::Critical), d.critical),
            ]
            .into_iter()
            .filter_map(|(tier, threshold)| {
                Some(RateTierResolved {
                    tier,
                    threshold: threshold?,
                    actions: tier_actions(tier),
                })
            })
            .collect(),
            period: d.period.unwrap_or(DEFAULT_RATE_PERIOD),
            for_: d.for_.unwrap_or(DEFAULT_RATE_FOR),
            description: d.description.clone(),
        }),
        runbook: a.runbook.clone(),
    }
}

impl Resolved {
    /// Every queue or topic name of the channel, with the role it plays.
    /// The RabbitMQ exchanges the channel declares: name, the spec field it comes from, and
    /// whether it is the dead-letter exchange.
    pub fn exchanges(&self) -> Vec<(&str, &'static str, bool)> {
        let Some(rb) = &self.rabbitmq else {
            return Vec::new();
        };
        let mut v = Vec::new();
        if let Some(x) = &rb.exchange {
            v.push((x.name.as_str(), "/spec/rabbitmq/exchange/name", false));
        }
        if let Some(x) = rb.dead_letter_exchange.as_ref().filter(|x| !x.is_default()) {
            v.push((
                x.name.as_str(),
                "/spec/rabbitmq/deadLetterExchange/name",
                true,
            ));
        }
        v
    }

    pub fn names(&self) -> Vec<(&str, &'static str)> {
        let mut v = vec![
            (self.main.as_str(), "main"),
            (self.dead_letter.as_str(), "dead-letter"),
        ];
        v.extend(self.retry_stages.iter().map(|s| (s.name.as_str(), "retry")));
        if let Some(i) = &self.invalid {
            v.push((i.name.as_str(), "invalid-message"));
        }
        if let Some(k) = &self.kafka {
            v.extend(
                k.exception_dead_letters
                    .iter()
                    .map(|n| (n.as_str(), "exception dead-letter")),
            );
        }
        v
    }

    /// The Pub/Sub (or Azure Service Bus) subscriptions of the channel, with the role each
    /// plays (none elsewhere).
    pub fn subscriptions(&self) -> Vec<(&str, &'static str)> {
        if let Some(s) = self.azure.as_ref().and_then(|a| a.subscription.as_deref()) {
            return vec![(s, "subscription")];
        }
        self.pubsub.as_ref().map_or_else(Vec::new, |p| {
            vec![
                (p.subscription.as_str(), "subscription"),
                (
                    p.dead_letter_subscription.as_str(),
                    "dead-letter subscription",
                ),
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{kafka, kafka_channel, ms, resolve_error, resolved_on};
    use super::*;

    /// `spec.invalid`: the default name per backend (Kafka after the main topic, as Spring
    /// names its DLT), a template, the retention or discard decision, and its place in
    /// `names()` where collisions are found.
    #[test]
    fn the_invalid_message_channel_is_named_and_kept_per_backend() {
        let name = |b: Backend, spec: &str| {
            resolved_on(b, "orders", &format!("  retry: {{maxAttempts: 2}}\n{spec}"))
                .invalid
                .map(|i| i.name)
        };
        assert_eq!(name(Backend::Sqs, ""), None, "only when the spec asks");
        assert_eq!(
            name(Backend::Sqs, "  invalid: {}\n").as_deref(),
            Some("orders-invalid")
        );
        assert_eq!(
            name(Backend::Sqs, "  invalid: {}\n  sqs: {fifo: true}\n").as_deref(),
            Some("orders-invalid.fifo")
        );
        assert_eq!(
            name(Backend::Rabbitmq, "  invalid: {}\n").as_deref(),
            Some("orders.invalid")
        );
        assert_eq!(
            name(Backend::Kafka, "  name: \"{channel}.v2\"\n  invalid: {}\n").as_deref(),
            Some("orders.v2-invalid-dlt"),
            "Kafka: the main topic's name, not the channel id"
        );
        assert_eq!(
            name(Backend::Kafka, "  invalid: {name: \"{channel}.poison\"}\n").as_deref(),
            Some("orders.poison")
        );

        let r = resolved_on(
            Backend::Sqs,
            "orders",
            "  retry: {maxAttempts: 2}\n  invalid: {}\n",
        );
        let i = r.invalid.as_ref().expect("invalid");
        assert_eq!(i.retention, Some(SQS_DEFAULT_DLQ_RETENTION), "SQS: 14d");
        assert!(r.names().contains(&("orders-invalid", "invalid-message")));
        let r = resolved_on(
            Backend::Rabbitmq,
            "orders",
            "  retry: {maxAttempts: 2}\n  invalid: {discard: {after: 2d, reason: replayed}}\n",
        );
        let i = r.invalid.as_ref().expect("invalid");
        assert_eq!(i.retention, Some(Duration::from_secs(2 * 86_400)));
        assert_eq!(
            i.discard.as_ref().and_then(|d| d.reason.as_deref()),
            Some("replayed")
        );
        assert_eq!(r.discard, None, "the DLQ's decision is its own");
        assert_eq!(
            resolved_on(
                Backend::Kafka,
                "orders",
                "  retry: {maxAttempts: 2}\n  invalid: {}\n"
            )
            .invalid
            .and_then(|i| i.retention),
            None,
            "Kafka: the broker's default, which lint reports"
        );
    }

    #[test]
    fn exponential_delays_truncate_each_step_like_spring() {
        // 1000, 1500, 2250, 3375, 5062 (5062.5 truncated), then 7593: Spring's sequence.
        let r = kafka("  retry: {maxAttempts: 7, backoff: {initial: 1s, multiplier: 1.5}}\n");
        let d: Vec<u64> = r.delays.iter().map(|d| d.as_millis()).collect();
        assert_eq!(d, [1000, 1500, 2250, 3375, 5062, 7593]);
        // `initial` above `max` starts at `max`.
        let r = kafka("  retry: {maxAttempts: 3, backoff: {initial: 10s, max: 4s}}\n");
        assert_eq!(r.delays, ms(&[4000, 4000]));
    }

    /// `above` is the untiered form; `warning` or `critical` make the alarm tiered, and the
    /// single threshold counts as critical.
    #[test]
    fn an_alarm_is_tiered_only_with_warning_or_critical() {
        let r = resolved_on(
            Backend::Sqs,
            "orders",
            "  retry: {maxAttempts: 2}\n  alarms:\n    depth: {above: 5}\n    oldestMessageAge: {warning: 30m}\n",
        );
        let depth = r.alarms.depth.as_ref().expect("depth alarm");
        assert!(!depth.is_tiered(), "`above` alone is untiered");
        assert_eq!(depth.tiers[0].severity(), Tier::Critical);
        let age = r.alarms.oldest_message_age.as_ref().expect("age alarm");
        assert!(age.is_tiered(), "`warning` is a tier");
        assert_eq!(age.tiers[0].severity(), Tier::Warning);
        let r = resolved_on(
            Backend::Sqs,
            "orders",
            "  retry: {maxAttempts: 2}\n  alarms:\n    depth: {critical: 9}\n",
        );
        let depth = r.alarms.depth.as_ref().expect("depth alarm");
        assert!(depth.is_tiered(), "`critical` is a tier");
    }

    /// `deadLetterRate` resolves to fractions, lowest tier first, with the 5m/10m defaults;
    /// the invalid-message queue never has one (the rate is the channel's).
    #[test]
    fn a_rate_alarm_resolves_to_fractions_with_its_defaults() {
        let r = resolved_on(
            Backend::Rabbitmq,
            "orders",
            "  retry: {maxAttempts: 2}\n  alarms:\n    deadLetterRate: {above: 0.1%}\n",
        );
        let rate = r.alarms.dead_letter_rate.as_ref().expect("rate alarm");
        assert!(!rate.is_tiered());
        assert_eq!(rate.tiers.len(), 1);
        assert_eq!(rate.tiers[0].fraction(), 0.001);
        assert_eq!(rate.tiers[0].severity(), Tier::Critical);
        assert_eq!(rate.tiers[0].threshold.to_string(), "0.1%");
        assert_eq!(rate.period, Duration::from_secs(300));
        assert_eq!(rate.for_, Duration::from_secs(600));
        assert_eq!(rate.evaluation_periods(), 2);
        let r = resolved_on(
            Backend::Sqs,
            "orders",
            "  retry: {maxAttempts: 2}\n  alarms:\n    deadLetterRate: {critical: 1%, warning: 0.1%, period: 1m, for: 3m, description: d}\n    actions: {warning: [\"arn:w\"], critical: [\"arn:c\", \"arn:c\"]}\n  invalid:\n    alarms: {depth: {above: 0}}\n",
        );
        let rate = r.alarms.dead_letter_rate.as_ref().expect("rate alarm");
        assert!(rate.is_tiered());
        let tiers: Vec<(Option<Tier>, f64, Vec<String>)> = rate
            .tiers
            .iter()
            .map(|t| (t.tier, t.fraction(), t.actions.clone()))
            .collect();
        assert_eq!(
            tiers,
            [
                (Some(Tier::Warning), 0.001, vec!["arn:w".to_owned()]),
                (Some(Tier::Critical), 0.01, vec!["arn:c".to_owned()])
            ]
        );
        assert_eq!(rate.evaluation_periods(), 3);
        assert_eq!(rate.description.as_deref(), Some("d"));
        let inv = r.invalid.as_ref().expect("invalid");
        assert_eq!(inv.alarms.dead_letter_rate, None);
    }

    /// A delay that reached `max` stays there, as in Spring's `ExponentialBackOff`
    /// (`currentInterval >= maxInterval` returns the max), whatever the multiplier (the
    /// schema refuses one below 1; `delays` does not rely on it).
    #[test]
    fn a_delay_at_max_stays_at_max() {
        let text = "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: orders}\nspec:\n  target: k\n  retry: {maxAttempts: 4, backoff: {initial: 10s, max: 4s}}\n";
        let ws = crate::spec::load::load_str("c.yaml", text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let mut channel = ws.channels[0].value.clone();
        let mut set = |max: u64, multiplier: f64| {
            let backoff = channel
                .spec
                .retry
                .as_mut()
                .and_then(|r| r.backoff.as_mut())
                .expect("backoff");
            backoff.max = Some(Duration::from_secs(max));
            backoff.multiplier = Some(multiplier);
            delays(&channel, None)
        };
        assert_eq!(set(4, 0.5), ms(&[4000, 4000, 4000]));
        assert_eq!(
            set(20, 0.5),
            ms(&[10_000, 5000, 2500]),
            "below max: multiplied"
        );
    }

    /// `discard` and `retention` in one block, or a `discard` without `after`: the error points
    /// into the block that says it, `invalid` or `deadLetter`.
    #[test]
    fn discard_errors_point_into_their_own_block() {
        let e = resolve_error(
            Backend::Sqs,
            "  invalid: {retention: 1d, discard: {after: 2d, reason: r}}\n",
        );
        assert_eq!(
            (e.pointer, e.rule, e.message.as_str()),
            (
                "/spec/invalid/retention",
                "deadletter/discard-and-retention",
                "`invalid.retention` (1d) and `invalid.discard` both say how long invalid messages are kept"
            )
        );
        let e = resolve_error(Backend::Sqs, "  invalid: {discard: {reason: r}}\n");
        assert_eq!(
            (e.pointer, e.rule, e.message.as_str()),
            (
                "/spec/invalid/discard",
                "spec/required",
                "`invalid.discard` has no `after`: when are invalid messages discarded?"
            )
        );
        let e = resolve_error(
            Backend::Sqs,
            "  deadLetter: {retention: 1d, discard: {after: 2d, reason: r}}\n",
        );
        assert_eq!(
            (e.pointer, e.message.as_str()),
            (
                "/spec/deadLetter/retention",
                "`deadLetter.retention` (1d) and `deadLetter.discard` both say how long dead letters are kept"
            )
        );
        let e = resolve_error(Backend::Sqs, "  deadLetter: {discard: {reason: r}}\n");
        assert_eq!(
            (e.pointer, e.message.as_str()),
            (
                "/spec/deadLetter/discard",
                "`deadLetter.discard` has no `after`: when are dead letters discarded?"
            )
        );
    }

    /// `names()`: every queue or topic with its role, main first; `subscriptions()`: Pub/Sub's
    /// two subscriptions (none elsewhere).
    #[test]
    fn names_and_subscriptions_list_every_resource_with_its_role() {
        let r = kafka_channel(
            "orders",
            "  retry: {maxAttempts: 2}\n  invalid: {}\n  kafka: {exceptionBasedDlts: [-poison]}\n",
        );
        assert_eq!(
            r.names(),
            [
                ("orders", "main"),
                ("orders-dlt", "dead-letter"),
                ("orders-retry", "retry"),
                ("orders-invalid-dlt", "invalid-message"),
                ("orders-poison-dlt", "exception dead-letter"),
            ]
        );
        assert_eq!(r.subscriptions(), Vec::<(&str, &str)>::new());
        let r = resolved_on(Backend::Pubsub, "orders", "  retry: {maxAttempts: 5}\n");
        assert_eq!(
            r.names(),
            [("orders", "main"), ("orders-dlq", "dead-letter")]
        );
        assert_eq!(
            r.subscriptions(),
            [
                ("orders-sub", "subscription"),
                ("orders-dlq-sub", "dead-letter subscription"),
            ]
        );
    }

    /// `archive --due`'s horizon: the retention minus `before`, per backend's retention as
    /// resolved (SQS 14d and Pub/Sub 7d when unset), never below zero; a RabbitMQ DLQ
    /// without a TTL never expires, a Kafka DLT without a retention is the broker's guess.
    #[test]
    fn the_due_horizon_is_the_retention_minus_before() {
        let d = |s: &str| crate::spec::duration::Duration::parse(s).expect("duration");
        let due = |b: Backend, spec: &str| {
            resolved_on(
                b,
                "app.orders",
                &format!("  retry: {{maxAttempts: 2}}\n{spec}"),
            )
            .due(DEFAULT_ARCHIVE_BEFORE)
        };
        let archive = "  deadLetter: {archive: {to: a, before: 1d}}\n";
        assert_eq!(due(Backend::Sqs, archive), Due::OlderThan(d("13d")));
        assert_eq!(due(Backend::Pubsub, archive), Due::OlderThan(d("6d")));
        assert_eq!(due(Backend::Rabbitmq, archive), Due::Never);
        assert_eq!(due(Backend::Kafka, archive), Due::Unknown);
        // The default `before` (2d), with or without the block.
        assert_eq!(
            due(Backend::Sqs, "  deadLetter: {archive: {to: a}}\n"),
            Due::OlderThan(d("12d"))
        );
        assert_eq!(due(Backend::Sqs, ""), Due::OlderThan(d("12d")));
        // `discard.after` is the retention too.
        assert_eq!(
            due(
                Backend::Rabbitmq,
                "  deadLetter: {discard: {after: 3d, reason: r}, archive: {to: a, before: 1h}}\n"
            ),
            Due::OlderThan(d("2d23h"))
        );
        assert_eq!(
            due(
                Backend::Kafka,
                "  deadLetter: {retention: 1h, archive: {to: a, before: 59m59s}}\n"
            ),
            Due::OlderThan(d("1s"))
        );
        // `before` at or beyond the retention: everything is due at once.
        for before in ["14d", "20d"] {
            assert_eq!(
                due(
                    Backend::Sqs,
                    &format!("  deadLetter: {{archive: {{to: a, before: {before}}}}}\n")
                ),
                Due::OlderThan(d("0s")),
                "{before}"
            );
        }
    }

    #[test]
    fn an_archive_needs_a_place_it_can_write_to() {
        let e = resolve_error(Backend::Sqs, "  deadLetter: {archive: {before: 1d}}\n");
        assert_eq!(
            (e.pointer, e.rule, e.message.as_str()),
            (
                "/spec/deadLetter/archive",
                "spec/required",
                "`deadLetter.archive` has no `to`: where are dead letters archived?"
            )
        );
        for bad in ["gs://b/p", "s3://", "s3:///p"] {
            let e = resolve_error(
                Backend::Sqs,
                &format!("  deadLetter: {{archive: {{to: \"{bad}\"}}}}\n"),
            );
            assert_eq!(e.rule, "deadletter/archive-location", "{bad}");
        }
        let r = resolved_on(
            Backend::Sqs,
            "orders",
            "  retry: {maxAttempts: 2}\n  deadLetter: {archive: {to: \" s3://b/p \"}}\n",
        );
        assert_eq!(
            r.archive,
            Some(ArchiveResolved {
                to: "s3://b/p".into(),
                before: DEFAULT_ARCHIVE_BEFORE
            })
        );
    }
}
