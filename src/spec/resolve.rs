//! A channel's effective settings on its backend: names expanded, defaults filled in.
//!
//! Both the lint rules (name validity, collisions, ranges) and the planner (desired resources)
//! read a channel through this one view, so what lint checks is exactly what apply creates.
//! Pure: no I/O.

use super::access::{Encryption, parse_policy};
use super::duration::Duration;
use super::model::{
    AlarmActions, Alarms, Backend, Channel, ChannelSpec, Discard, DlxMode, Envelope, ExchangeKind,
    KafkaNaming, QueuePolicy, QueueType, RetryModel, Target, Tier, TopicReuse,
};

/// How many times `redrive` brings one message back unless `deadLetter.maxRedrives` says.
pub const DEFAULT_MAX_REDRIVES: u32 = 3;

/// SQS's own default retention, which dlqctl keeps for the main queue.
pub const SQS_DEFAULT_RETENTION: Duration = Duration::from_secs(4 * 86_400);
/// SQS's maximum, dlqctl's default for dead-letter queues: dead letters wait for people.
pub const SQS_DEFAULT_DLQ_RETENTION: Duration = Duration::from_secs(14 * 86_400);
pub const SQS_DEFAULT_VISIBILITY: Duration = Duration::from_secs(30);
/// Spring Kafka's default back-off (FixedBackOff, 1000 ms).
pub const KAFKA_DEFAULT_DELAY: Duration = Duration::from_secs(1);
/// Spring Kafka's default retry topic suffix (`RetryTopicConstants.DEFAULT_RETRY_SUFFIX`).
pub const SPRING_RETRY_SUFFIX: &str = "-retry";
/// Spring Kafka's default dead-letter topic suffix (`RetryTopicConstants.DEFAULT_DLT_SUFFIX`).
pub const SPRING_DLT_SUFFIX: &str = "-dlt";
/// The invalid-message topic's default suffix on the main topic: `<main>-invalid-dlt`.
pub const KAFKA_INVALID_SUFFIX: &str = "-invalid-dlt";
pub const DEFAULT_POLICY_PRIORITY: i32 = 10;
/// CloudWatch alarm defaults: one period of a minute (SQS publishes metrics per minute).
pub const DEFAULT_ALARM_PERIOD: Duration = Duration::from_secs(60);
pub const DEFAULT_ALARM_EVALUATION_PERIODS: u32 = 1;
/// Pub/Sub's own defaults, which dlqctl keeps when the spec says nothing: a subscription keeps
/// messages 7 days (also its maximum), waits 10 s for an ack, and backs off at most 600 s.
pub const PUBSUB_DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 86_400);
pub const PUBSUB_DEFAULT_ACK_DEADLINE: Duration = Duration::from_secs(10);
pub const PUBSUB_DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(600);

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
    /// `spec.invalid`: the invalid-message queue or topic, where poison messages go at once.
    pub invalid: Option<InvalidResolved>,
    /// Which headers carry a dead letter's error (`deadLetter.envelope`, default dlqctl's).
    pub envelope: Envelope,
    /// Kafka: the dead-letter topic's consumer group (`deadLetter.consumerGroup`).
    pub dead_letter_group: Option<String>,
    /// How many times `redrive` may bring one message back (`deadLetter.maxRedrives`).
    pub max_redrives: u32,
    pub sqs: Option<SqsResolved>,
    pub rabbitmq: Option<RabbitResolved>,
    pub kafka: Option<KafkaResolved>,
    pub pubsub: Option<PubsubResolved>,
    /// The alarms the spec asks for, defaults filled in: CloudWatch alarms on SQS targets,
    /// Prometheus rules (`dlqctl alerts`) on RabbitMQ and Kafka targets.
    pub alarms: AlarmsResolved,
    /// What `status` and `redrive --dry-run` also hide of its messages (the target's `redact`).
    pub redact: crate::spec::model::Redact,
}

/// `spec.alarms` with defaults filled in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlarmsResolved {
    /// Messages waiting in the DLQ: fires above each tier's `threshold` messages.
    pub depth: Option<AlarmResolved>,
    /// Age of the oldest dead letter: fires above each tier's `threshold` seconds.
    pub oldest_message_age: Option<AlarmResolved>,
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

#[derive(Debug, Clone, PartialEq)]
pub struct RetryStage {
    pub name: String,
    pub delay: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SqsResolved {
    pub visibility_timeout: Duration,
    pub fifo: bool,
    /// `sqs.encryption`: the main queue's (`None`: not managed).
    pub encryption: Option<Encryption>,
    /// The dead-letter queue's: `deadLetter.sqs.encryption` if written, else the main
    /// queue's.
    pub dead_letter_encryption: Option<Encryption>,
    /// `sqs.policy`, normalised (`None`: not managed, or not a policy: the rules say why).
    pub policy: Option<serde_json::Value>,
    /// `deadLetter.sqs.policy`, normalised (the main queue's policy is not inherited: it
    /// names the main queue).
    pub dead_letter_policy: Option<serde_json::Value>,
}

/// A Pub/Sub channel's subscriptions and their settings (`main` and `dead_letter` are the
/// topics).
#[derive(Debug, Clone, PartialEq)]
pub struct PubsubResolved {
    /// The target's project.
    pub project: String,
    /// The consumer's subscription on the main topic, with the dead-letter policy.
    pub subscription: String,
    /// The dead-letter topic's subscription, which holds the dead letters.
    pub dead_letter_subscription: String,
    pub ack_deadline: Duration,
    /// retryPolicy (minimum, maximum backoff); `None`: no retry policy (redelivery at once).
    pub backoff: Option<(Duration, Duration)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RabbitResolved {
    pub vhost: String,
    pub queue_type: QueueType,
    pub dlx: DlxMode,
    pub retry_model: RetryModel,
    pub exchange: Option<ExchangeResolved>,
    /// The named exchange the main queue dead-letters through (`None`: the default one).
    pub dead_letter_exchange: Option<DeadLetterExchangeResolved>,
    pub policy_priority: i32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetterExchangeResolved {
    pub name: String,
    pub kind: ExchangeKind,
    /// The dead-letter routing key, and the DLQ's binding key.
    pub routing_key: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExchangeResolved {
    pub name: String,
    pub kind: ExchangeKind,
    pub routing_keys: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct KafkaResolved {
    pub partitions: u32,
    pub replication_factor: u16,
    pub dead_letter_partitions: u32,
    pub naming: KafkaNaming,
    /// The retry topic suffix Spring uses (`kafka.retryTopicSuffix`, default `-retry`).
    pub retry_topic_suffix: String,
    /// The dead-letter topic suffix Spring uses (`kafka.dltSuffix`, default `-dlt`).
    pub dlt_suffix: String,
    /// Spring's exception-based dead-letter topics (`kafka.exceptionBasedDlts`), in the spec's
    /// order: `<main><suffix><dltSuffix>`.
    pub exception_dead_letters: Vec<String>,
    pub config: std::collections::BTreeMap<String, String>,
    /// `kafka.acls`, as written (`None`: dlqctl owns no ACLs of this channel).
    pub acls: Option<crate::spec::model::KafkaAcls>,
}

/// Why a channel could not be resolved; each names the JSON pointer of the field at fault.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolveError {
    pub pointer: &'static str,
    pub rule: &'static str,
    pub message: String,
    pub hint: Option<String>,
}

/// Expands `{channel}`, `{delay}` and `{index}` in a name template.
pub fn expand(
    template: &str,
    channel: &str,
    delay: Option<Duration>,
    index: Option<usize>,
) -> Result<String, String> {
    let mut out = String::with_capacity(template.len() + channel.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return Err(format!("`{template}` has an unclosed `{{`"));
        };
        match &after[..close] {
            "channel" => out.push_str(channel),
            "delay" => match delay {
                Some(d) => out.push_str(&d.as_millis().to_string()),
                None => {
                    return Err(format!(
                        "`{template}`: `{{delay}}` is only valid in retry names"
                    ));
                }
            },
            "index" => match index {
                Some(i) => out.push_str(&i.to_string()),
                None => {
                    return Err(format!(
                        "`{template}`: `{{index}}` is only valid in retry names"
                    ));
                }
            },
            other => {
                return Err(format!(
                    "`{template}` uses `{{{other}}}`; templates know `{{channel}}`, `{{delay}}` and `{{index}}`"
                ));
            }
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
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

/// The suffix Spring Kafka uses for a configured one: `DestinationTopicSuffixes` keeps it only
/// when `StringUtils.hasText` (a character that is not Java whitespace), else it silently
/// takes the default. Lint refuses a blank suffix (`kafka/suffix`), so that never surprises.
pub fn spring_suffix<'a>(configured: Option<&'a str>, default: &'a str) -> &'a str {
    match configured {
        Some(s) if java_has_text(s) => s,
        _ => default,
    }
}

/// Spring's `StringUtils.hasText`: some character that is not Java whitespace.
pub fn java_has_text(s: &str) -> bool {
    // Java's `Character.isWhitespace`: Unicode space separators except the no-break ones,
    // line and paragraph separators, and the ASCII controls \t \n \v \f \r and 0x1C–0x1F
    // (Rust's `is_whitespace` adds U+0085 and the no-break spaces).
    let java_whitespace = |c: char| {
        (c.is_whitespace() && !matches!(c, '\u{85}' | '\u{a0}' | '\u{2007}' | '\u{202f}'))
            || ('\u{1c}'..='\u{1f}').contains(&c)
    };
    !s.chars().all(java_whitespace)
}

/// Spring Kafka's retry topics for the given delays, as (name suffix after the main topic,
/// delay). Mirrors `DestinationTopicPropertiesFactory.getTopicSuffix` and
/// `reusableTopicAttempts`, with `retry_suffix` in place of Spring's `-retry` (its
/// `retryTopicSuffix`). With `reuse` (`SameIntervalTopicReuseStrategy.SINGLE_TOPIC`, the
/// `@RetryableTopic` default since Spring Kafka 3.2) the trailing attempts that share one delay
/// (fixed backoff, or the attempts at `maxDelay`) reuse a single topic, and a lone retry topic
/// is the plain suffix (`-retry`). Otherwise each topic gets its delay in ms (`-retry-1000`),
/// or its 0-based index (`-retry-0`) with `by_index`
/// (`TopicSuffixingStrategy.SUFFIX_WITH_INDEX_VALUE`) and, without reuse, for a fixed backoff;
/// without reuse a repeated delay also gets its repetition (`-retry-3000-1`). Spring joins with
/// `-` whatever the suffix: `.retry` gives `.retry-0`.
pub fn spring_retry_suffixes(
    delays: &[Duration],
    retry_suffix: &str,
    by_index: bool,
    reuse: bool,
) -> Vec<(String, Duration)> {
    let n = delays.len();
    let count = |d: &Duration| delays.iter().filter(|x| *x == d).count();
    let reusable = match delays.last() {
        Some(last) if reuse && n > 1 => count(last) - 1,
        _ => 0,
    };
    let topics = n - reusable;
    let fixed = by_index || (n > 1 && delays.iter().all(|d| Some(d) == delays.first()));
    let mut out: Vec<(String, Duration)> = Vec::with_capacity(topics);
    for (i, d) in delays.iter().take(topics).enumerate() {
        let suffix = if reuse && topics == 1 {
            retry_suffix.to_owned()
        } else if fixed {
            format!("{retry_suffix}-{i}")
        } else if !reuse && count(d) > 1 {
            let first = delays.iter().position(|x| x == d).unwrap_or(i);
            format!("{retry_suffix}-{}-{}", d.as_millis(), i - first)
        } else {
            format!("{retry_suffix}-{}", d.as_millis())
        };
        // Spring names a repeated delay in mid-chain the same; it is one topic.
        if !out.iter().any(|(s, _)| *s == suffix) {
            out.push((suffix, *d));
        }
    }
    out
}

fn distinct(delays: &[Duration]) -> Vec<Duration> {
    let mut out: Vec<Duration> = Vec::new();
    for d in delays {
        if !out.contains(d) {
            out.push(*d);
        }
    }
    out
}

/// The SQS encryption and policies of a channel (visibility and FIFO left at their zero).
fn sqs_access(spec: &ChannelSpec) -> SqsResolved {
    let own = spec.sqs.as_ref();
    let dl = spec.dead_letter.as_ref().and_then(|d| d.sqs.as_ref());
    let encryption = own
        .and_then(|s| s.encryption.as_ref())
        .and_then(Encryption::from_spec);
    let policy = |p: Option<&QueuePolicy>| p.and_then(|p| parse_policy(p).ok());
    SqsResolved {
        visibility_timeout: Duration::from_secs(0),
        fifo: false,
        dead_letter_encryption: match dl.and_then(|d| d.encryption.as_ref()) {
            Some(e) => Encryption::from_spec(e),
            None => encryption.clone(),
        },
        encryption,
        policy: policy(own.and_then(|s| s.policy.as_ref())),
        dead_letter_policy: policy(dl.and_then(|d| d.policy.as_ref())),
    }
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
    };
    let kafka_naming = kafka_options
        .and_then(|k| k.naming)
        .unwrap_or(KafkaNaming::Spring);
    let kafka_retry = KafkaRetryNaming {
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
    let (retention, dead_letter_retention) = match &discard {
        Some(d) => (retentions(spec, backend).0, Some(d.after)),
        None => retentions(spec, backend),
    };
    let sqs = (backend == Backend::Sqs).then(|| SqsResolved {
        visibility_timeout: spec
            .sqs
            .as_ref()
            .and_then(|s| s.visibility_timeout)
            .unwrap_or(SQS_DEFAULT_VISIBILITY),
        fifo,
        ..sqs_access(spec)
    });
    let rabbitmq = if backend == Backend::Rabbitmq {
        Some(rabbitmq(
            spec,
            name,
            target,
            [&main, &dead_letter],
            rabbit_model,
        )?)
    } else {
        None
    };
    let kafka = (backend == Backend::Kafka).then(|| kafka(spec, &main, &kafka_retry, dlt_suffix));
    let pubsub = if backend == Backend::Pubsub {
        Some(pubsub(spec, name, target)?)
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
        retry_stages,
        delays,
        max_attempts,
        retention,
        dead_letter_retention,
        discard,
        invalid,
        envelope: spec
            .dead_letter
            .as_ref()
            .and_then(|d| d.envelope)
            .unwrap_or(Envelope::Dlqctl),
        dead_letter_group: spec
            .dead_letter
            .as_ref()
            .and_then(|d| d.consumer_group.clone()),
        max_redrives: spec
            .dead_letter
            .as_ref()
            .and_then(|d| d.max_redrives)
            .unwrap_or(DEFAULT_MAX_REDRIVES),
        sqs,
        rabbitmq,
        kafka,
        pubsub,
        alarms: spec.alarms.as_ref().map(alarms).unwrap_or_default(),
        redact: target.redact.clone().unwrap_or_default(),
    })
}

/// A name template that does not expand (`name/template`), at `pointer`.
fn template_error(pointer: &'static str, message: String) -> ResolveError {
    ResolveError {
        pointer,
        rule: "name/template",
        message,
        hint: None,
    }
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

/// How a Kafka channel's retry topics are named: the profile, and Spring's retry suffix.
struct KafkaRetryNaming<'a> {
    naming: KafkaNaming,
    retry_suffix: &'a str,
}

/// The retry queues or topics, in the order a message meets them (none on SQS).
fn retry_stages(
    spec: &ChannelSpec,
    name: &str,
    backend: Backend,
    main: &str,
    delays: &[Duration],
    kafka: &KafkaRetryNaming<'_>,
) -> Result<Vec<RetryStage>, ResolveError> {
    let err = template_error;
    let retry_template = spec.retry.as_ref().and_then(|r| r.name.as_deref());
    let kafka_reuse = spec
        .kafka
        .as_ref()
        .and_then(|k| k.same_interval_topic_reuse)
        .unwrap_or(TopicReuse::SingleTopic);
    let mut retry_stages = Vec::new();
    match backend {
        Backend::Sqs | Backend::Pubsub => {}
        Backend::Kafka => {
            // Retry topics follow Spring Kafka's grouping; `spring` and `index` name them as
            // Spring does (suffixes on the main topic), `custom` by the `retry.name` template.
            let by_index = kafka.naming == KafkaNaming::Index;
            let reuse = kafka_reuse == TopicReuse::SingleTopic;
            for (i, (suffix, d)) in
                spring_retry_suffixes(delays, kafka.retry_suffix, by_index, reuse)
                    .into_iter()
                    .enumerate()
            {
                let n = match (kafka.naming, retry_template) {
                    (KafkaNaming::Custom, Some(t)) => expand(t, name, Some(d), Some(i + 1))
                        .map_err(|m| err("/spec/retry/name", m))?,
                    _ => format!("{main}{suffix}"),
                };
                retry_stages.push(RetryStage { name: n, delay: d });
            }
        }
        Backend::Rabbitmq => {
            let uniq = distinct(delays);
            let default_t = if uniq.len() == 1 {
                "{channel}.retry"
            } else {
                "{channel}.retry.{delay}"
            };
            let t = retry_template.unwrap_or(default_t);
            for (i, d) in uniq.iter().enumerate() {
                let n = expand(t, name, Some(*d), Some(i + 1))
                    .map_err(|m| err("/spec/retry/name", m))?;
                retry_stages.push(RetryStage { name: n, delay: *d });
            }
        }
    }

    Ok(retry_stages)
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
        Backend::Pubsub => {
            return Err(ResolveError {
                pointer: "/spec/invalid",
                rule: "invalid/backend",
                message: "`spec.invalid` is not provisioned on Pub/Sub in this version".into(),
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
        alarms: inv.alarms.as_ref().map(alarms).unwrap_or_default(),
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

/// `spec.rabbitmq` with defaults filled in, the exchanges' names (and the dead-letter routing
/// key) expanded. `queues`: the main queue's and the DLQ's names.
fn rabbitmq(
    spec: &ChannelSpec,
    name: &str,
    target: &Target,
    queues: [&str; 2],
    retry_model: RetryModel,
) -> Result<RabbitResolved, ResolveError> {
    let [main, dead_letter] = queues;
    let err = template_error;
    let o = spec.rabbitmq.clone().unwrap_or_default();
    let exchange = match &o.exchange {
        Some(x) => Some(ExchangeResolved {
            name: expand(&x.name, name, None, None)
                .map_err(|m| err("/spec/rabbitmq/exchange/name", m))?,
            kind: x.kind.unwrap_or(ExchangeKind::Direct),
            routing_keys: x
                .routing_keys
                .clone()
                .unwrap_or_else(|| vec![main.to_owned()]),
        }),
        None => None,
    };
    let dead_letter_exchange = match &o.dead_letter_exchange {
        Some(x) => Some(DeadLetterExchangeResolved {
            name: expand(&x.name, name, None, None)
                .map_err(|m| err("/spec/rabbitmq/deadLetterExchange/name", m))?,
            kind: x.kind.unwrap_or(ExchangeKind::Direct),
            routing_key: match &x.routing_key {
                Some(k) => expand(k, name, None, None)
                    .map_err(|m| err("/spec/rabbitmq/deadLetterExchange/routingKey", m))?,
                None => dead_letter.to_owned(),
            },
        }),
        None => None,
    };
    Ok(RabbitResolved {
        vhost: o
            .vhost
            .or_else(|| target.vhost.clone())
            .unwrap_or_else(|| "/".to_owned()),
        queue_type: o.queue_type.unwrap_or(QueueType::Classic),
        dlx: o.dlx.unwrap_or(DlxMode::Policy),
        retry_model,
        exchange,
        dead_letter_exchange,
        policy_priority: o.policy_priority.unwrap_or(DEFAULT_POLICY_PRIORITY),
    })
}

/// `spec.pubsub` and `deadLetter.subscription` with defaults filled in, the subscription
/// names expanded.
fn pubsub(spec: &ChannelSpec, name: &str, target: &Target) -> Result<PubsubResolved, ResolveError> {
    let o = spec.pubsub.clone().unwrap_or_default();
    let subscription = expand(
        o.subscription.as_deref().unwrap_or("{channel}-sub"),
        name,
        None,
        None,
    )
    .map_err(|m| template_error("/spec/pubsub/subscription", m))?;
    let dead_letter_subscription = expand(
        spec.dead_letter
            .as_ref()
            .and_then(|d| d.subscription.as_deref())
            .unwrap_or("{channel}-dlq-sub"),
        name,
        None,
        None,
    )
    .map_err(|m| template_error("/spec/deadLetter/subscription", m))?;
    let backoff = spec
        .retry
        .as_ref()
        .and_then(|r| r.backoff.as_ref())
        .map(|b| {
            (
                b.initial,
                b.max.unwrap_or(PUBSUB_DEFAULT_MAX_BACKOFF.max(b.initial)),
            )
        });
    Ok(PubsubResolved {
        project: target.project.clone().unwrap_or_default(),
        subscription,
        dead_letter_subscription,
        ack_deadline: o.ack_deadline.unwrap_or(PUBSUB_DEFAULT_ACK_DEADLINE),
        backoff,
    })
}

/// `spec.kafka` with defaults filled in.
fn kafka(
    spec: &ChannelSpec,
    main: &str,
    retry: &KafkaRetryNaming<'_>,
    dlt_suffix: &str,
) -> KafkaResolved {
    let o = spec.kafka.clone().unwrap_or_default();
    let partitions = o.partitions.unwrap_or(1);
    KafkaResolved {
        partitions,
        replication_factor: o.replication_factor.unwrap_or(1),
        dead_letter_partitions: o.dead_letter_partitions.unwrap_or(partitions),
        naming: retry.naming,
        retry_topic_suffix: retry.retry_suffix.to_owned(),
        dlt_suffix: dlt_suffix.to_owned(),
        // `DestinationTopicPropertiesFactory.createCustomDltProperties`: the routing rule's
        // suffix, then the DLT suffix, on the main topic.
        exception_dead_letters: o
            .exception_based_dlts
            .iter()
            .flatten()
            .map(|suffix| format!("{main}{suffix}{dlt_suffix}"))
            .collect(),
        config: o
            .config
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.to_string()))
            .collect(),
        acls: o.acls,
    }
}

/// `spec.alarms` (or `spec.invalid.alarms`) with defaults filled in.
fn alarms(a: &Alarms) -> AlarmsResolved {
    let actions = a.actions.as_ref();
    let tiers = |above: Option<u64>, warning: Option<u64>, critical: Option<u64>| {
        [
            (None, above),
            (Some(Tier::Warning), warning),
            (Some(Tier::Critical), critical),
        ]
        .into_iter()
        .filter_map(|(tier, threshold)| {
            let mut actions =
                actions.map_or_else(Vec::new, |x: &AlarmActions| x.for_tier(tier).to_vec());
            actions.sort();
            actions.dedup();
            Some(TierResolved {
                tier,
                threshold: threshold?,
                actions,
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
        if let Some(x) = &rb.dead_letter_exchange {
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

    /// The Pub/Sub subscriptions of the channel, with the role each plays (none elsewhere).
    pub fn subscriptions(&self) -> Vec<(&str, &'static str)> {
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
    use super::*;

    #[test]
    fn templates_expand_known_placeholders_only() {
        assert_eq!(
            expand("{channel}.dlq", "orders", None, None).unwrap(),
            "orders.dlq"
        );
        assert_eq!(
            expand(
                "{channel}-retry-{delay}",
                "o",
                Some(Duration::from_secs(2)),
                None
            )
            .unwrap(),
            "o-retry-2000"
        );
        assert!(expand("{chanel}.dlq", "o", None, None).is_err());
        assert!(expand("{channel", "o", None, None).is_err());
        assert!(expand("{delay}", "o", None, None).is_err());
    }

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|m| Duration::from_millis(*m)).collect()
    }

    fn suffixes(delays: &[u64], by_index: bool) -> Vec<String> {
        spring_retry_suffixes(&ms(delays), SPRING_RETRY_SUFFIX, by_index, true)
            .into_iter()
            .map(|(s, _)| s)
            .collect()
    }

    fn multiple(delays: &[u64], by_index: bool) -> Vec<String> {
        spring_retry_suffixes(&ms(delays), SPRING_RETRY_SUFFIX, by_index, false)
            .into_iter()
            .map(|(s, _)| s)
            .collect()
    }

    /// The expectations of Spring Kafka's own DestinationTopicPropertiesFactoryTests with
    /// `MULTIPLE_TOPICS` (the `RetryTopicConfigurationBuilder` default).
    #[test]
    fn multiple_topics_suffixes_match_spring_kafka() {
        assert_eq!(
            multiple(&[1000, 2000], false),
            ["-retry-1000", "-retry-2000"]
        );
        assert_eq!(
            multiple(&[5000, 5000], false),
            ["-retry-0", "-retry-1"],
            "fixed backoff: by index"
        );
        assert_eq!(
            multiple(&[1000, 2000, 3000, 3000], false),
            [
                "-retry-1000",
                "-retry-2000",
                "-retry-3000-0",
                "-retry-3000-1"
            ],
            "the attempts at maxDelay"
        );
        assert_eq!(multiple(&[1000, 2000], true), ["-retry-0", "-retry-1"]);
        assert_eq!(
            multiple(&[1000], false),
            ["-retry-1000"],
            "a lone topic keeps its delay"
        );
    }

    /// The cases of Spring Kafka's reference ("Topic Naming") and of
    /// `DestinationTopicPropertiesFactory` with the 3.2+ default `SINGLE_TOPIC` reuse.
    #[test]
    fn retry_topic_suffixes_match_spring_kafka() {
        // Exponential 1000 × 2, 4 attempts: one topic per delay.
        assert_eq!(
            suffixes(&[1000, 2000, 4000], false),
            ["-retry-1000", "-retry-2000", "-retry-4000"]
        );
        // The attempts at maxDelay share the last topic (the reference's 16 s example).
        assert_eq!(
            suffixes(&[1000, 2000, 4000, 8000, 16000, 16000, 16000], false),
            [
                "-retry-1000",
                "-retry-2000",
                "-retry-4000",
                "-retry-8000",
                "-retry-16000"
            ]
        );
        // Fixed delay: one topic, no delay appended; likewise a single retry.
        assert_eq!(suffixes(&[1000, 1000, 1000], false), ["-retry"]);
        assert_eq!(suffixes(&[3000], false), ["-retry"]);
        assert_eq!(suffixes(&[], false), Vec::<String>::new());
        // SUFFIX_WITH_INDEX_VALUE: 0-based indexes, same grouping.
        assert_eq!(
            suffixes(&[1000, 2000, 4000], true),
            ["-retry-0", "-retry-1", "-retry-2"]
        );
        assert_eq!(
            suffixes(&[1000, 2000, 4000, 4000], true),
            ["-retry-0", "-retry-1", "-retry-2"]
        );
        assert_eq!(suffixes(&[1000, 1000], true), ["-retry"]);
    }

    fn kafka(spec: &str) -> Resolved {
        kafka_channel("app.orders", spec)
    }

    fn kafka_channel(channel: &str, spec: &str) -> Resolved {
        resolved_on(Backend::Kafka, channel, spec)
    }

    fn resolved_on(backend: Backend, channel: &str, spec: &str) -> Resolved {
        let text = format!(
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {channel}}}\nspec:\n  target: k\n{spec}"
        );
        let ws = crate::spec::load::load_str("c.yaml", &text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let target = Target {
            backend,
            region: None,
            endpoint: None,
            profile: None,
            url: None,
            amqp_url: None,
            vhost: None,
            username_env: None,
            password_env: None,
            bootstrap_servers: Some("127.0.0.1:9092".into()),
            properties: None,
            secret_properties: None,
            project: None,
            emulator_host: None,
            grant_service_agent: None,
            project_number: None,
            ownership: None,
            alerts: None,
            redact: None,
        };
        resolve(&ws.channels[0].value, "k", &target).expect("resolves")
    }

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

    fn names(r: &Resolved) -> Vec<(&str, u64)> {
        r.retry_stages
            .iter()
            .map(|s| (s.name.as_str(), s.delay.as_millis()))
            .collect()
    }

    #[test]
    fn kafka_profiles_name_topics_after_the_main_topic() {
        let r = kafka("  retry: {maxAttempts: 4, backoff: {initial: 1s, multiplier: 2}}\n");
        assert_eq!(
            names(&r),
            [
                ("app.orders-retry-1000", 1000),
                ("app.orders-retry-2000", 2000),
                ("app.orders-retry-4000", 4000)
            ]
        );
        assert_eq!(r.dead_letter, "app.orders-dlt");

        // Spring suffixes the main topic, not the channel id.
        let r = kafka(
            "  name: \"{channel}.v2\"\n  retry: {maxAttempts: 3}\n  kafka: {naming: index}\n",
        );
        assert_eq!(
            names(&r),
            [("app.orders.v2-retry", 1000)],
            "fixed 1 s default backoff: one topic"
        );
        assert_eq!(r.dead_letter, "app.orders.v2-dlt");

        let r = kafka(
            "  retry: {maxAttempts: 4, backoff: {initial: 1s, multiplier: 3, max: 5s}}\n  kafka: {naming: index}\n",
        );
        assert_eq!(
            names(&r),
            [
                ("app.orders-retry-0", 1000),
                ("app.orders-retry-1", 3000),
                ("app.orders-retry-2", 5000)
            ]
        );

        let r =
            kafka("  retry: {maxAttempts: 3}\n  kafka: {sameIntervalTopicReuse: multipleTopics}\n");
        assert_eq!(
            names(&r),
            [("app.orders-retry-0", 1000), ("app.orders-retry-1", 1000)]
        );

        let r = kafka(
            "  retry: {maxAttempts: 3, name: \"{channel}.retry.{index}\", backoff: {initial: 1s, multiplier: 2}}\n  deadLetter: {name: \"{channel}.dead\"}\n  kafka: {naming: custom}\n",
        );
        assert_eq!(
            names(&r),
            [("app.orders.retry.1", 1000), ("app.orders.retry.2", 2000)]
        );
        assert_eq!(r.dead_letter, "app.orders.dead");
    }

    /// The retry and DLT topic names of a Kafka channel, in the order a record meets them.
    fn topic_names(r: &Resolved) -> Vec<String> {
        let mut v: Vec<String> = r.retry_stages.iter().map(|s| s.name.clone()).collect();
        v.push(r.dead_letter.clone());
        v
    }

    /// `kafka.retryTopicSuffix` and `kafka.dltSuffix`, resolved through the spec as Spring
    /// Kafka's own tests configure them (spring-kafka, `spring-kafka/src/test/java/org/
    /// springframework/kafka/retrytopic/`). Spring's backoffs in spec form: `new
    /// ExponentialBackOff(1000, 2)` keeps spring-core's default `maxInterval` of 30 s, `new
    /// ExponentialBackOff()` is 2 s × 1.5 up to 30 s, `FixedBackOff(n)` is a lone `initial`.
    #[test]
    fn custom_suffixes_match_spring_kafkas_own_tests() {
        // The suffixes of DestinationTopicPropertiesFactoryTests (`retryTopicSuffix`,
        // `dltSuffix` fields), which Spring appends with no `-` of its own.
        let sfx = "retryTopicSuffix: test-retry-suffix, dltSuffix: test-dlt-suffix";
        let case = |retry: &str, kafka: &str| {
            topic_names(&kafka_channel(
                "mainTopic",
                &format!("  retry: {retry}\n  kafka: {{{sfx}{kafka}}}\n"),
            ))
        };

        // DestinationTopicPropertiesFactoryTests.shouldCreateMainAndDltProperties: one
        // attempt, no retry topic, the DLT by `dltSuffix`.
        assert_eq!(
            case(
                "{maxAttempts: 1}",
                ", sameIntervalTopicReuse: multipleTopics"
            ),
            ["mainTopictest-dlt-suffix"]
        );
        // DestinationTopicPropertiesFactoryTests
        // .shouldCreateTwoRetryPropertiesForMultipleBackoffValues: ExponentialBackOff(1000, 2),
        // 3 attempts, SUFFIX_WITH_DELAY_VALUE, MULTIPLE_TOPICS.
        assert_eq!(
            case(
                "{maxAttempts: 3, backoff: {initial: 1s, multiplier: 2, max: 30s}}",
                ", sameIntervalTopicReuse: multipleTopics"
            ),
            [
                "mainTopictest-retry-suffix-1000",
                "mainTopictest-retry-suffix-2000",
                "mainTopictest-dlt-suffix"
            ]
        );
        // DestinationTopicPropertiesFactoryTests
        // .shouldCreateOneRetryPropertyForFixedBackoffWithSingleTopicSameIntervalReuseStrategy:
        // FixedBackOff(1000), 5 attempts, SINGLE_TOPIC: the bare suffix.
        assert_eq!(
            case("{maxAttempts: 5, backoff: {initial: 1s}}", ""),
            ["mainTopictest-retry-suffix", "mainTopictest-dlt-suffix"]
        );
        // DestinationTopicPropertiesFactoryTests
        // .shouldCreateRetryPropertiesForFixedBackoffWithMultiTopicStrategy: FixedBackOff(5000),
        // 3 attempts, SUFFIX_WITH_DELAY_VALUE, MULTIPLE_TOPICS: a fixed delay is indexed.
        assert_eq!(
            case(
                "{maxAttempts: 3, backoff: {initial: 5s}}",
                ", sameIntervalTopicReuse: multipleTopics"
            ),
            [
                "mainTopictest-retry-suffix-0",
                "mainTopictest-retry-suffix-1",
                "mainTopictest-dlt-suffix"
            ]
        );
        // DestinationTopicPropertiesFactoryTests
        // .shouldSuffixRetryTopicsWithIndexIfSuffixWithIndexStrategy: `new
        // ExponentialBackOff()`, 3 attempts, SUFFIX_WITH_INDEX_VALUE, MULTIPLE_TOPICS.
        assert_eq!(
            case(
                "{maxAttempts: 3, backoff: {initial: 2s, multiplier: 1.5, max: 30s}}",
                ", naming: index, sameIntervalTopicReuse: multipleTopics"
            ),
            [
                "mainTopictest-retry-suffix-0",
                "mainTopictest-retry-suffix-1",
                "mainTopictest-dlt-suffix"
            ]
        );
        // DestinationTopicPropertiesFactoryTests
        // .shouldSuffixRetryTopicsWithIndexIfFixedDelayWithMultipleTopics: FixedBackOff(1000),
        // 3 attempts, SUFFIX_WITH_INDEX_VALUE, MULTIPLE_TOPICS.
        assert_eq!(
            case(
                "{maxAttempts: 3, backoff: {initial: 1s}}",
                ", naming: index, sameIntervalTopicReuse: multipleTopics"
            ),
            [
                "mainTopictest-retry-suffix-0",
                "mainTopictest-retry-suffix-1",
                "mainTopictest-dlt-suffix"
            ]
        );
        // The next three: ExponentialBackOff(1000, 2) with maxInterval 3000, 5 attempts, so
        // the delays are 1000, 2000, 3000, 3000.
        let capped = "{maxAttempts: 5, backoff: {initial: 1s, multiplier: 2, max: 3s}}";
        // DestinationTopicPropertiesFactoryTests.shouldSuffixRetryTopicsWithMixedIfMaxDelayReached:
        // SUFFIX_WITH_DELAY_VALUE, MULTIPLE_TOPICS.
        assert_eq!(
            case(capped, ", sameIntervalTopicReuse: multipleTopics"),
            [
                "mainTopictest-retry-suffix-1000",
                "mainTopictest-retry-suffix-2000",
                "mainTopictest-retry-suffix-3000-0",
                "mainTopictest-retry-suffix-3000-1",
                "mainTopictest-dlt-suffix"
            ]
        );
        // DestinationTopicPropertiesFactoryTests
        // .shouldReuseRetryTopicsIfMaxDelayReachedWithDelayValueSuffixingStrategy:
        // SUFFIX_WITH_DELAY_VALUE, SINGLE_TOPIC: the attempts at maxInterval share a topic.
        assert_eq!(
            case(capped, ""),
            [
                "mainTopictest-retry-suffix-1000",
                "mainTopictest-retry-suffix-2000",
                "mainTopictest-retry-suffix-3000",
                "mainTopictest-dlt-suffix"
            ]
        );
        // DestinationTopicPropertiesFactoryTests
        // .shouldReuseRetryTopicsIfMaxDelayReachedWithIndexValueSuffixingStrategy:
        // SUFFIX_WITH_INDEX_VALUE, SINGLE_TOPIC.
        assert_eq!(
            case(capped, ", naming: index"),
            [
                "mainTopictest-retry-suffix-0",
                "mainTopictest-retry-suffix-1",
                "mainTopictest-retry-suffix-2",
                "mainTopictest-dlt-suffix"
            ]
        );
        // DestinationTopicPropertiesFactoryTests
        // .shouldNotReuseRetryTopicsIfRepeatedIntervalsAreInTheMiddleOfChain: delays no
        // backoff of the spec produces (1000, 2000, 2000, 2000, 3000), so the naming itself.
        assert_eq!(
            spring_retry_suffixes(
                &ms(&[1000, 2000, 2000, 2000, 3000]),
                "test-retry-suffix",
                false,
                false
            )
            .into_iter()
            .map(|(s, _)| s)
            .collect::<Vec<_>>(),
            [
                "test-retry-suffix-1000",
                "test-retry-suffix-2000-0",
                "test-retry-suffix-2000-1",
                "test-retry-suffix-2000-2",
                "test-retry-suffix-3000"
            ]
        );

        // RetryTopicIntegrationTests.shouldRetryFifthTopicWithTwoListenersAndManualAssignment
        // (FifthTopicListener1): attempts 4, @BackOff(250), retryTopicSuffix "-listener1",
        // dltTopicSuffix "-listener1-dlt", SUFFIX_WITH_INDEX_VALUE, MULTIPLE_TOPICS; the
        // listener sees exactly these topics.
        assert_eq!(
            topic_names(&kafka_channel(
                "myRetryTopic5",
                "  retry: {maxAttempts: 4, backoff: {initial: 250ms}}\n  kafka: {naming: index, sameIntervalTopicReuse: multipleTopics, retryTopicSuffix: -listener1, dltSuffix: -listener1-dlt}\n",
            )),
            [
                "myRetryTopic5-listener1-0",
                "myRetryTopic5-listener1-1",
                "myRetryTopic5-listener1-2",
                "myRetryTopic5-listener1-dlt"
            ]
        );
    }

    /// The configuration of issue 18 (a Spring application with `retryTopicSuffix(".retry")`,
    /// `dltSuffix(".dlt")`, `suffixTopicsWithIndexValues()`, `exponentialBackoff(1000, 2,
    /// 16000)`, `maxAttempts(5)`), and the reference's examples (spring-kafka-docs
    /// `retrytopic/topic-naming.adoc`, "Retry Topics and DLT Suffixes").
    #[test]
    fn dotted_suffixes_are_joined_to_the_index_or_delay_with_a_dash() {
        let r = kafka_channel(
            "orders",
            "  retry: {maxAttempts: 5, backoff: {initial: 1s, multiplier: 2, max: 16s}}\n  kafka: {naming: index, retryTopicSuffix: .retry, dltSuffix: .dlt}\n",
        );
        assert_eq!(
            names(&r),
            [
                ("orders.retry-0", 1000),
                ("orders.retry-1", 2000),
                ("orders.retry-2", 4000),
                ("orders.retry-3", 8000)
            ]
        );
        assert_eq!(r.dead_letter, "orders.dlt");
        let k = r.kafka.as_ref().expect("kafka");
        assert_eq!(
            (k.retry_topic_suffix.as_str(), k.dlt_suffix.as_str()),
            (".retry", ".dlt")
        );

        // The same with delays (`spring`), and past maxInterval (the 16 s topic reused).
        let r = kafka_channel(
            "orders",
            "  retry: {maxAttempts: 8, backoff: {initial: 1s, multiplier: 2, max: 16s}}\n  kafka: {retryTopicSuffix: .retry, dltSuffix: .dlt}\n",
        );
        assert_eq!(
            topic_names(&r),
            [
                "orders.retry-1000",
                "orders.retry-2000",
                "orders.retry-4000",
                "orders.retry-8000",
                "orders.retry-16000",
                "orders.dlt"
            ]
        );

        // topic-naming.adoc: `@RetryableTopic(retryTopicSuffix = "-my-retry-suffix",
        // dltTopicSuffix = "-my-dlt-suffix")` with Spring's default 1 s fixed backoff and
        // 3 attempts: one reused retry topic.
        let r = kafka_channel(
            "my-annotated-topic",
            "  retry: {maxAttempts: 3}\n  kafka: {retryTopicSuffix: -my-retry-suffix, dltSuffix: -my-dlt-suffix}\n",
        );
        assert_eq!(
            topic_names(&r),
            [
                "my-annotated-topic-my-retry-suffix",
                "my-annotated-topic-my-dlt-suffix"
            ]
        );

        // An explicit `deadLetter.name` still names the DLT (lint refuses it beside dltSuffix).
        let r = kafka(
            "  retry: {maxAttempts: 2}\n  deadLetter: {name: x.dead}\n  kafka: {dltSuffix: .dlt}\n",
        );
        assert_eq!(r.dead_letter, "x.dead");
    }

    /// `kafka.exceptionBasedDlts`: Spring's exception-based DLTs, `<main><suffix><dltSuffix>`.
    #[test]
    fn exception_based_dlts_are_named_as_spring_kafka_names_them() {
        // DestinationTopicPropertiesFactoryTests.shouldCreateDltPropertiesForCustomExceptionBasedRouting:
        // routing key `deserialization`, dltSuffix `test-dlt-suffix`, one attempt: the custom
        // DLT (`desExcDltSuffix + dltSuffix`) and then the DLT.
        let r = kafka_channel(
            "mainTopic",
            "  retry: {maxAttempts: 1}\n  kafka: {retryTopicSuffix: test-retry-suffix, dltSuffix: test-dlt-suffix, exceptionBasedDlts: [deserialization]}\n",
        );
        assert_eq!(
            r.names(),
            [
                ("mainTopic", "main"),
                ("mainTopictest-dlt-suffix", "dead-letter"),
                (
                    "mainTopicdeserializationtest-dlt-suffix",
                    "exception dead-letter"
                )
            ]
        );
        // The reference (spring-kafka-docs retrytopic/features.adoc, "Routing of messages to
        // custom DLTs based on thrown exceptions"): `@ExceptionBasedDltDestination(suffix =
        // "-deserialization", ...)` on `my-annotated-topic` routes to
        // `my-annotated-topic-deserialization-dlt`. DestinationTopicTests builds its custom DLTs
        // the same way (`"-deserialization" + dltSuffix`, `"-custom"`, `"-validation"`).
        let r = kafka_channel(
            "my-annotated-topic",
            "  retry: {maxAttempts: 3}\n  kafka: {exceptionBasedDlts: [-deserialization, -custom, -validation]}\n",
        );
        let k = r.kafka.as_ref().expect("kafka");
        assert_eq!(
            k.exception_dead_letters,
            [
                "my-annotated-topic-deserialization-dlt",
                "my-annotated-topic-custom-dlt",
                "my-annotated-topic-validation-dlt"
            ]
        );
        assert_eq!(r.dead_letter, "my-annotated-topic-dlt");
        // With `deadLetter.name` the DLT is named outright; the exception-based ones stay
        // Spring's.
        let r = kafka(
            "  retry: {maxAttempts: 2}\n  deadLetter: {name: app.dead}\n  kafka: {dltSuffix: .dlt, exceptionBasedDlts: [.poison]}\n",
        );
        let k = r.kafka.as_ref().expect("kafka");
        assert_eq!(
            (r.dead_letter.as_str(), k.exception_dead_letters.as_slice()),
            ("app.dead", &["app.orders.poison.dlt".to_owned()][..])
        );
    }

    /// `DestinationTopicPropertiesFactory.DestinationTopicSuffixes`: a suffix without text
    /// (`StringUtils.hasText`) is replaced by Spring's default, silently.
    #[test]
    fn a_blank_suffix_is_spring_default_as_in_destination_topic_suffixes() {
        assert_eq!(spring_suffix(None, "-retry"), "-retry");
        assert_eq!(spring_suffix(Some(""), "-retry"), "-retry");
        assert_eq!(spring_suffix(Some(" \t\u{1f}"), "-dlt"), "-dlt");
        // Java's isWhitespace excludes the no-break space: Spring keeps it (lint refuses it).
        assert_eq!(spring_suffix(Some("\u{a0}"), "-dlt"), "\u{a0}");
        assert_eq!(spring_suffix(Some(".r"), "-retry"), ".r");
        let r = kafka(
            "  retry: {maxAttempts: 3}\n  kafka: {retryTopicSuffix: \"\", dltSuffix: \" \"}\n",
        );
        assert_eq!(topic_names(&r), ["app.orders-retry", "app.orders-dlt"]);
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

    /// SQS keeps a message 4 days by default, dlqctl's dead-letter queues 14 (SQS's maximum).
    #[test]
    fn sqs_retentions_default_to_four_and_fourteen_days() {
        assert_eq!(SQS_DEFAULT_RETENTION, Duration::from_secs(345_600));
        assert_eq!(SQS_DEFAULT_DLQ_RETENTION, Duration::from_secs(1_209_600));
        assert_eq!(PUBSUB_DEFAULT_RETENTION, Duration::from_secs(604_800));
        let r = resolved_on(Backend::Sqs, "orders", "  retry: {maxAttempts: 2}\n");
        assert_eq!(r.retention, Some(Duration::from_secs(345_600)));
        assert_eq!(
            r.dead_letter_retention,
            Some(Duration::from_secs(1_209_600))
        );
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

    /// RabbitMQ's `deliveryLimit` model redelivers from the main queue: no delays, no retry
    /// queues, whatever `retry.backoff` says; the `ttl` model gets a queue per delay.
    #[test]
    fn rabbitmq_delivery_limit_has_no_retry_queues() {
        let retry = "  retry: {maxAttempts: 3, backoff: {initial: 1s, multiplier: 2}}\n";
        let r = resolved_on(
            Backend::Rabbitmq,
            "orders",
            &format!("{retry}  rabbitmq: {{retryModel: deliveryLimit}}\n"),
        );
        assert_eq!(r.delays, Vec::<Duration>::new());
        assert_eq!(r.retry_stages, Vec::<RetryStage>::new());
        let r = resolved_on(Backend::Rabbitmq, "orders", retry);
        assert_eq!(r.delays, ms(&[1000, 2000]));
        assert_eq!(
            names(&r),
            [("orders.retry.1000", 1000), ("orders.retry.2000", 2000)]
        );
    }

    /// `sqs.fifo` reaches the resolved queue settings as well as the names.
    #[test]
    fn a_fifo_channel_resolves_to_fifo_queues() {
        let r = resolved_on(
            Backend::Sqs,
            "orders",
            "  retry: {maxAttempts: 2}\n  sqs: {fifo: true}\n",
        );
        let sqs = r.sqs.as_ref().expect("sqs settings");
        assert!(sqs.fifo, "fifo");
        assert_eq!(sqs.visibility_timeout, SQS_DEFAULT_VISIBILITY);
        assert_eq!(
            (r.main.as_str(), r.dead_letter.as_str()),
            ("orders.fifo", "orders-dlq.fifo")
        );
        let r = resolved_on(Backend::Sqs, "orders", "  retry: {maxAttempts: 2}\n");
        assert!(!r.sqs.as_ref().expect("sqs settings").fifo, "standard");
    }

    fn resolve_error(backend: Backend, spec: &str) -> ResolveError {
        let text = format!(
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: orders}}\nspec:\n  target: k\n  retry: {{maxAttempts: 2}}\n{spec}"
        );
        let ws = crate::spec::load::load_str("c.yaml", &text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let target: Target =
            serde_json::from_value(serde_json::json!({ "backend": backend })).expect("target");
        resolve(&ws.channels[0].value, "k", &target).expect_err("does not resolve")
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

    /// `exchanges()` lists the exchanges a RabbitMQ channel declares, the dead-letter one
    /// marked; none without `rabbitmq.exchange`/`deadLetterExchange`, none off RabbitMQ.
    #[test]
    fn exchanges_lists_the_declared_exchanges_dead_letter_one_marked() {
        let r = resolved_on(
            Backend::Rabbitmq,
            "orders",
            "  retry: {maxAttempts: 2}\n  rabbitmq:\n    exchange: {name: \"{channel}.in\"}\n    deadLetterExchange: {name: \"{channel}.dlx\"}\n",
        );
        assert_eq!(
            r.exchanges(),
            [
                ("orders.in", "/spec/rabbitmq/exchange/name", false),
                ("orders.dlx", "/spec/rabbitmq/deadLetterExchange/name", true),
            ]
        );
        let r = resolved_on(Backend::Rabbitmq, "orders", "  retry: {maxAttempts: 2}\n");
        assert_eq!(r.exchanges(), Vec::<(&str, &str, bool)>::new());
        let r = resolved_on(Backend::Sqs, "orders", "  retry: {maxAttempts: 2}\n");
        assert_eq!(r.exchanges(), Vec::<(&str, &str, bool)>::new());
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
}
