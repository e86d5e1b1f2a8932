//! A channel's effective settings on its backend: names expanded, defaults filled in.
//!
//! Both the lint rules (name validity, collisions, ranges) and the planner (desired resources)
//! read a channel through this one view, so what lint checks is exactly what apply creates.
//! Pure: no I/O.

use super::duration::Duration;
use super::model::{
    AlarmActions, Backend, Channel, ChannelSpec, DlxMode, Envelope, ExchangeKind, KafkaNaming,
    QueueType, RetryModel, Target, Tier, TopicReuse,
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
pub const DEFAULT_POLICY_PRIORITY: i32 = 10;
/// CloudWatch alarm defaults: one period of a minute (SQS publishes metrics per minute).
pub const DEFAULT_ALARM_PERIOD: Duration = Duration::from_secs(60);
pub const DEFAULT_ALARM_EVALUATION_PERIODS: u32 = 1;

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
    pub dead_letter_retention: Option<Duration>,
    /// Which headers carry a dead letter's error (`deadLetter.envelope`, default dlqctl's).
    pub envelope: Envelope,
    /// Kafka: the dead-letter topic's consumer group (`deadLetter.consumerGroup`).
    pub dead_letter_group: Option<String>,
    /// How many times `redrive` may bring one message back (`deadLetter.maxRedrives`).
    pub max_redrives: u32,
    pub sqs: Option<SqsResolved>,
    pub rabbitmq: Option<RabbitResolved>,
    pub kafka: Option<KafkaResolved>,
    /// The alarms the spec asks for, defaults filled in: CloudWatch alarms on SQS targets,
    /// Prometheus rules (`dlqctl alerts`) on RabbitMQ and Kafka targets.
    pub alarms: AlarmsResolved,
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

#[derive(Debug, Clone, PartialEq)]
pub struct RetryStage {
    pub name: String,
    pub delay: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SqsResolved {
    pub visibility_timeout: Duration,
    pub fifo: bool,
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
    pub config: std::collections::BTreeMap<String, String>,
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

/// Spring Kafka's retry topics for the given delays, as (name suffix after the main topic,
/// delay). Mirrors `DestinationTopicPropertiesFactory`. With `reuse`
/// (`SameIntervalTopicReuseStrategy.SINGLE_TOPIC`, the `@RetryableTopic` default since Spring
/// Kafka 3.2) the trailing attempts that share one delay (fixed backoff, or the attempts at
/// `maxDelay`) reuse a single topic, and a lone retry topic is plain `-retry`. Otherwise each
/// topic gets its delay in ms (`-retry-1000`), or its 0-based index (`-retry-0`) with
/// `by_index` (`TopicSuffixingStrategy.SUFFIX_WITH_INDEX_VALUE`) and, without reuse, for a
/// fixed backoff; without reuse a repeated delay also gets its repetition (`-retry-3000-1`).
pub fn spring_retry_suffixes(
    delays: &[Duration],
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
            "-retry".to_owned()
        } else if fixed {
            format!("-retry-{i}")
        } else if !reuse && count(d) > 1 {
            let first = delays.iter().position(|x| x == d).unwrap_or(i);
            format!("-retry-{}-{}", d.as_millis(), i - first)
        } else {
            format!("-retry-{}", d.as_millis())
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
    let (main, dead_letter) = main_and_dead_letter(spec, name, backend, fifo)?;
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
    };
    let kafka_naming = spec
        .kafka
        .as_ref()
        .and_then(|k| k.naming)
        .unwrap_or(KafkaNaming::Spring);
    let retry_stages = retry_stages(spec, name, backend, &main, &delays, kafka_naming)?;
    let (retention, dead_letter_retention) = retentions(spec, backend);
    let sqs = (backend == Backend::Sqs).then(|| SqsResolved {
        visibility_timeout: spec
            .sqs
            .as_ref()
            .and_then(|s| s.visibility_timeout)
            .unwrap_or(SQS_DEFAULT_VISIBILITY),
        fifo,
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
    let kafka = (backend == Backend::Kafka).then(|| kafka(spec, kafka_naming));
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
        alarms: alarms(spec),
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

/// The main queue or topic's name and the dead-letter one's, defaults per backend.
fn main_and_dead_letter(
    spec: &ChannelSpec,
    name: &str,
    backend: Backend,
    fifo: bool,
) -> Result<(String, String), ResolveError> {
    let err = template_error;
    let (main_default, dlq_default) = match backend {
        Backend::Sqs if fifo => ("{channel}.fifo", "{channel}-dlq.fifo"),
        Backend::Sqs => ("{channel}", "{channel}-dlq"),
        Backend::Rabbitmq => ("{channel}", "{channel}.dlq"),
        Backend::Kafka => ("{channel}", "{channel}-dlt"),
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
        // Spring Kafka suffixes the main topic (not the channel id) with `-dlt`.
        (Backend::Kafka, None) => format!("{main}-dlt"),
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
    kafka_naming: KafkaNaming,
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
        Backend::Sqs => {}
        Backend::Kafka => {
            // Retry topics follow Spring Kafka's grouping; `spring` and `index` name them as
            // Spring does (suffixes on the main topic), `custom` by the `retry.name` template.
            let by_index = kafka_naming == KafkaNaming::Index;
            let reuse = kafka_reuse == TopicReuse::SingleTopic;
            for (i, (suffix, d)) in spring_retry_suffixes(delays, by_index, reuse)
                .into_iter()
                .enumerate()
            {
                let n = match (kafka_naming, retry_template) {
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

/// The main and dead-letter retentions; on SQS, its defaults when unset.
fn retentions(spec: &ChannelSpec, backend: Backend) -> (Option<Duration>, Option<Duration>) {
    let r = spec.retention;
    let d = spec.dead_letter.as_ref().and_then(|d| d.retention);
    match backend {
        Backend::Sqs => (
            Some(r.unwrap_or(SQS_DEFAULT_RETENTION)),
            Some(d.unwrap_or(SQS_DEFAULT_DLQ_RETENTION)),
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

/// `spec.kafka` with defaults filled in.
fn kafka(spec: &ChannelSpec, naming: KafkaNaming) -> KafkaResolved {
    let o = spec.kafka.clone().unwrap_or_default();
    let partitions = o.partitions.unwrap_or(1);
    KafkaResolved {
        partitions,
        replication_factor: o.replication_factor.unwrap_or(1),
        dead_letter_partitions: o.dead_letter_partitions.unwrap_or(partitions),
        naming,
        config: o
            .config
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.to_string()))
            .collect(),
    }
}

/// `spec.alarms` with defaults filled in.
fn alarms(spec: &ChannelSpec) -> AlarmsResolved {
    let Some(a) = spec.alarms.as_ref() else {
        return AlarmsResolved::default();
    };
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
        v
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
        spring_retry_suffixes(&ms(delays), by_index, true)
            .into_iter()
            .map(|(s, _)| s)
            .collect()
    }

    fn multiple(delays: &[u64], by_index: bool) -> Vec<String> {
        spring_retry_suffixes(&ms(delays), by_index, false)
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
        let text = format!(
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: app.orders}}\nspec:\n  target: k\n{spec}"
        );
        let ws = crate::spec::load::load_str("c.yaml", &text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let target = Target {
            backend: Backend::Kafka,
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
            ownership: None,
            alerts: None,
        };
        resolve(&ws.channels[0].value, "k", &target).expect("resolves")
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
}
