//! The second validation layer: what a JSON schema cannot say.
//!
//! Backend limits (SQS retention 60 s–14 d, ...), relations between fields (the DLQ outlives
//! its source; retries fit inside the retention), relations between documents (the target
//! exists and is of the right backend; names never collide) and advice (a DLQ nobody watches).
//! Each rule has a stable id and a test in `tests/fixtures/invalid/` that fails without it.

use std::collections::BTreeMap;

use super::duration::Duration;
use super::load::{Doc, Workspace};
use super::model::{Backend, Channel, KafkaNaming, QueueType, RetryModel, Target};
use super::resolve::{self, Resolved};
use super::schema::did_you_mean;
use crate::diag::{Diagnostic, Loc};

pub const SQS_MIN_RETENTION: Duration = Duration::from_secs(60);
pub const SQS_MAX_RETENTION: Duration = Duration::from_secs(14 * 86_400);
pub const SQS_MAX_VISIBILITY: Duration = Duration::from_secs(12 * 3_600);
pub const SQS_MAX_RECEIVE_COUNT: u32 = 1000;
pub const SQS_MAX_NAME: usize = 80;
pub const RABBIT_MAX_NAME_BYTES: usize = 255;
/// `x-message-ttl` is an unsigned 32-bit number of milliseconds.
pub const RABBIT_MAX_TTL_MS: u64 = u32::MAX as u64;
pub const KAFKA_MAX_NAME: usize = 249;
pub const KAFKA_MIN_RETENTION: Duration = Duration::from_secs(1);
pub const CLOUDWATCH_MAX_EVALUATION: Duration = Duration::from_secs(86_400);

/// The rules that only warn or inform: the ones `spec.lint.allow` can silence.
pub const ADVICE_RULES: [&str; 5] = [
    "retry/none",
    "alarms/missing",
    "alarms/unsupported-backend",
    "sqs/backoff-consumer",
    "retry/jitter-consumer",
];

/// A channel that passed the required-field checks, resolved against its target.
pub struct Checked<'a> {
    pub doc: &'a Doc<Channel>,
    pub resolved: Resolved,
}

/// Runs every rule; returns the channels that resolved (for the planner) and adds findings.
pub fn check(ws: &Workspace) -> (Vec<Diagnostic>, Vec<Checked<'_>>) {
    let mut out = Vec::new();
    let targets = collect_targets(ws, &mut out);
    let mut checked = Vec::new();
    for doc in &ws.channels {
        let mut local = Vec::new();
        if let Some(r) = check_channel(doc, &targets, ws.targets.is_empty(), &mut local) {
            checked.push(Checked { doc, resolved: r });
        }
        let allow: &[String] = doc
            .value
            .spec
            .lint
            .as_ref()
            .map(|l| l.allow.as_slice())
            .unwrap_or(&[]);
        local.retain(|d| {
            d.severity == crate::diag::Severity::Error || !allow.iter().any(|a| a == d.rule)
        });
        for (i, a) in allow.iter().enumerate() {
            if ADVICE_RULES.contains(&a.as_str()) {
                continue;
            }
            let mut d = Diagnostic::warning(
                "lint/unknown-rule",
                format!(
                    "`spec.lint.allow[{i}]` is `{a}`, which is not a rule that can be silenced"
                ),
            )
            .at(doc.locs.value(&format!("/spec/lint/allow/{i}")));
            d = match did_you_mean(a, ADVICE_RULES.into_iter()) {
                Some(m) => d.hint(format!("did you mean `{m}`?")),
                None => d.hint(format!(
                    "only warnings and notes can be silenced: {}",
                    ADVICE_RULES.join(", ")
                )),
            };
            local.push(d);
        }
        out.extend(local);
    }
    check_across(&checked, &mut out);
    (out, checked)
}

type TargetMap<'a> = BTreeMap<&'a str, (&'a Target, Loc)>;

fn collect_targets<'a>(ws: &'a Workspace, out: &mut Vec<Diagnostic>) -> TargetMap<'a> {
    let mut map: TargetMap<'a> = BTreeMap::new();
    for doc in &ws.targets {
        for (name, t) in &doc.value.targets {
            let base = format!("/targets/{name}");
            let loc = doc.locs.key(&base);
            if let Some((_, first)) = map.get(name.as_str()) {
                out.push(
                    Diagnostic::error(
                        "target/duplicate",
                        format!("target `{name}` is defined twice"),
                    )
                    .at(loc)
                    .related(*first, "first defined here"),
                );
                continue;
            }
            check_target(name, t, doc, &base, out);
            map.insert(name, (t, loc));
        }
    }
    map
}

fn check_target(
    name: &str,
    t: &Target,
    doc: &Doc<super::model::Targets>,
    base: &str,
    out: &mut Vec<Diagnostic>,
) {
    let fields: [(&str, bool, &[Backend]); 10] = [
        ("region", t.region.is_some(), &[Backend::Sqs]),
        ("endpoint", t.endpoint.is_some(), &[Backend::Sqs]),
        ("profile", t.profile.is_some(), &[Backend::Sqs]),
        ("url", t.url.is_some(), &[Backend::Rabbitmq]),
        ("vhost", t.vhost.is_some(), &[Backend::Rabbitmq]),
        (
            "usernameEnv",
            t.username_env.is_some(),
            &[Backend::Rabbitmq],
        ),
        (
            "passwordEnv",
            t.password_env.is_some(),
            &[Backend::Rabbitmq],
        ),
        (
            "bootstrapServers",
            t.bootstrap_servers.is_some(),
            &[Backend::Kafka],
        ),
        ("properties", t.properties.is_some(), &[Backend::Kafka]),
        (
            "secretProperties",
            t.secret_properties.is_some(),
            &[Backend::Kafka],
        ),
    ];
    for (field, set, backends) in fields {
        if set && !backends.contains(&t.backend) {
            out.push(
                Diagnostic::error(
                    "target/field-not-applicable",
                    format!(
                        "`targets.{name}.{field}` does not apply to {} target",
                        t.backend.with_article()
                    ),
                )
                .at(doc.locs.key(&format!("{base}/{field}"))),
            );
        }
    }
    let required: &[(&str, bool)] = match t.backend {
        Backend::Sqs => &[("region", t.region.is_some())],
        Backend::Rabbitmq => &[
            ("url", t.url.is_some()),
            ("ownership", t.ownership.is_some()),
        ],
        Backend::Kafka => &[
            ("bootstrapServers", t.bootstrap_servers.is_some()),
            ("ownership", t.ownership.is_some()),
        ],
    };
    for (field, set) in required {
        if !set {
            let mut d = Diagnostic::error(
                "target/missing-field",
                format!(
                    "`targets.{name}.{field}` is required for {} target",
                    t.backend.with_article()
                ),
            )
            .at(doc.locs.key(base));
            if *field == "ownership" {
                d = d.hint(format!(
                    "{} has no place to record ownership; declare the name prefixes dlqctl may manage, e.g. `ownership: {{prefixes: [\"orders.\"]}}`",
                    t.backend.display_name()
                ));
            }
            out.push(d);
        }
    }
    for (field, value) in [("url", &t.url), ("endpoint", &t.endpoint)] {
        if let Some(v) = value
            && !(v.starts_with("http://") || v.starts_with("https://"))
        {
            out.push(
                Diagnostic::error(
                    "target/url",
                    format!(
                        "`targets.{name}.{field}` must be an http:// or https:// URL, found `{v}`"
                    ),
                )
                .at(doc.locs.value(&format!("{base}/{field}"))),
            );
        }
    }
    if let Some(o) = &t.ownership {
        for (i, p) in o.prefixes.iter().enumerate() {
            if p.is_empty() {
                out.push(
                    Diagnostic::error(
                        "target/ownership",
                        format!("`targets.{name}.ownership.prefixes[{i}]` is empty, which would claim every resource"),
                    )
                    .at(doc.locs.value(&format!("{base}/ownership/prefixes/{i}"))),
                );
            }
        }
    }
}

fn check_channel(
    doc: &Doc<Channel>,
    targets: &TargetMap<'_>,
    no_targets_doc: bool,
    out: &mut Vec<Diagnostic>,
) -> Option<Resolved> {
    let spec = &doc.value.spec;
    let name = &doc.value.metadata.name;
    let at = |p: &str| doc.locs.value(p);
    let key = |p: &str| doc.locs.key(p);

    let mut complete = true;
    if spec.retry.as_ref().and_then(|r| r.max_attempts).is_none() {
        out.push(
            Diagnostic::error(
                "spec/required",
                format!("channel `{name}` has no `spec.retry.maxAttempts`"),
            )
            .at(key(if doc.locs.has("/spec/retry") { "/spec/retry" } else { "/spec" }))
            .hint("say how many deliveries a message gets before it is dead-lettered, e.g. `retry: {maxAttempts: 5}`"),
        );
        complete = false;
    }
    let Some(target_name) = spec.target.as_deref() else {
        out.push(
            Diagnostic::error(
                "spec/required",
                format!("channel `{name}` has no `spec.target`"),
            )
            .at(key("/spec"))
            .hint("name a connection from the Targets document (dlqctl.yaml), here or in Defaults"),
        );
        return None;
    };
    let Some((target, _)) = targets.get(target_name) else {
        let mut d = Diagnostic::error(
            "target/unknown",
            format!("`spec.target` is `{target_name}`, which no Targets document defines"),
        )
        .at(at("/spec/target"));
        d = if no_targets_doc {
            d.hint("no Targets document was found: create `dlqctl.yaml` (kind: Targets) beside or above the specs, or pass --targets FILE")
        } else if let Some(m) = did_you_mean(target_name, targets.keys().copied()) {
            d.hint(format!("did you mean `{m}`?"))
        } else {
            d.hint(format!(
                "defined targets: {}",
                targets.keys().copied().collect::<Vec<_>>().join(", ")
            ))
        };
        out.push(d);
        return None;
    };
    let backend = target.backend;
    for (block, b) in [
        ("sqs", Backend::Sqs),
        ("rabbitmq", Backend::Rabbitmq),
        ("kafka", Backend::Kafka),
    ] {
        let set = match b {
            Backend::Sqs => spec.sqs.is_some(),
            Backend::Rabbitmq => spec.rabbitmq.is_some(),
            Backend::Kafka => spec.kafka.is_some(),
        };
        if set && b != backend {
            out.push(
                Diagnostic::error(
                    "target/backend-mismatch",
                    format!(
                        "`spec.{block}` is set, but target `{target_name}` is {} target",
                        backend.with_article()
                    ),
                )
                .at(key(&format!("/spec/{block}")))
                .hint(format!(
                    "use a `{backend}:` block, or point `spec.target` at {} target",
                    b.with_article()
                )),
            );
        }
    }
    if !complete {
        return None;
    }
    let r = match resolve::resolve(&doc.value, target_name, target) {
        Ok(r) => r,
        Err(e) => {
            let mut d = Diagnostic::error(e.rule, e.message).at(at(e.pointer));
            if let Some(h) = e.hint {
                d = d.hint(h);
            }
            out.push(d);
            return None;
        }
    };

    if r.max_attempts == 1 {
        out.push(
            Diagnostic::warning(
                "retry/none",
                "`spec.retry.maxAttempts` is 1: a message that fails once goes straight to the dead-letter queue, with no retry",
            )
            .at(at("/spec/retry/maxAttempts"))
            .hint("use 2 or more to retry; keep 1 only if failures are never transient"),
        );
    }
    let has_alarms = spec
        .alarms
        .as_ref()
        .is_some_and(|a| a.depth.is_some() || a.oldest_message_age.is_some());
    if !has_alarms {
        out.push(
            Diagnostic::warning(
                "alarms/missing",
                format!("channel `{name}` has no alarms: a dead-letter queue nobody watches is a graveyard"),
            )
            .at(key(if doc.locs.has("/spec/alarms") { "/spec/alarms" } else { "/spec" }))
            .hint("add `alarms: {depth: {above: 0}}`, or silence with `lint: {allow: [alarms/missing]}`"),
        );
    }

    match backend {
        Backend::Sqs => check_sqs(doc, &r, out),
        Backend::Rabbitmq => check_rabbitmq(doc, &r, target, out),
        Backend::Kafka => check_kafka(doc, &r, target, out),
    }
    check_names(doc, &r, target, out);
    Some(r)
}

fn range_error(
    rule: &'static str,
    field: &str,
    value: Duration,
    min: Duration,
    max: Duration,
    backend: &str,
) -> Diagnostic {
    Diagnostic::error(
        rule,
        format!("`{field}` is {value}, outside {backend}'s range of {min} to {max}"),
    )
}

fn check_sqs(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    let spec = &doc.value.spec;
    let at = |p: &str| doc.locs.value(p);
    for (field, pointer, value) in [
        ("spec.retention", "/spec/retention", spec.retention),
        (
            "spec.deadLetter.retention",
            "/spec/deadLetter/retention",
            spec.dead_letter.as_ref().and_then(|d| d.retention),
        ),
    ] {
        if let Some(v) = value
            && (v < SQS_MIN_RETENTION || v > SQS_MAX_RETENTION)
        {
            out.push(
                range_error(
                    "sqs/retention-range",
                    field,
                    v,
                    SQS_MIN_RETENTION,
                    SQS_MAX_RETENTION,
                    "SQS",
                )
                .at(at(pointer))
                .hint("SQS keeps messages between 60s and 14d (MessageRetentionPeriod)"),
            );
        }
    }
    if r.max_attempts > SQS_MAX_RECEIVE_COUNT {
        out.push(
            Diagnostic::error(
                "sqs/max-receive-count",
                format!(
                    "`spec.retry.maxAttempts` is {}, but SQS's maxReceiveCount is at most {SQS_MAX_RECEIVE_COUNT}",
                    r.max_attempts
                ),
            )
            .at(at("/spec/retry/maxAttempts")),
        );
    }
    let sqs = r.sqs.as_ref();
    let vis = sqs
        .map(|s| s.visibility_timeout)
        .unwrap_or(resolve::SQS_DEFAULT_VISIBILITY);
    if vis > SQS_MAX_VISIBILITY {
        out.push(
            range_error(
                "sqs/visibility-range",
                "spec.sqs.visibilityTimeout",
                vis,
                Duration::from_secs(0),
                SQS_MAX_VISIBILITY,
                "SQS",
            )
            .at(at("/spec/sqs/visibilityTimeout")),
        );
    }
    if vis.as_millis() % 1000 != 0 {
        out.push(
            Diagnostic::error(
                "sqs/whole-seconds",
                format!("`spec.sqs.visibilityTimeout` is {vis}; SQS counts it in whole seconds"),
            )
            .at(at("/spec/sqs/visibilityTimeout")),
        );
    }
    let fifo = sqs.is_some_and(|s| s.fifo);
    if let (Some(src), Some(dlq)) = (r.retention, r.dead_letter_retention)
        && !fifo
        && dlq <= src
        && (SQS_MIN_RETENTION..=SQS_MAX_RETENTION).contains(&src)
    {
        out.push(
            Diagnostic::error(
                "sqs/dlq-retention",
                format!(
                    "the dead-letter queue keeps messages {dlq}, not longer than its source ({src}); SQS keeps a message's original enqueue time when it moves to a standard DLQ, so dead letters would expire early"
                ),
            )
            .at(at(if doc.locs.has("/spec/deadLetter/retention") { "/spec/deadLetter/retention" } else { "/spec/retention" }))
            .hint(if src >= SQS_MAX_RETENTION {
                "the DLQ cannot keep messages longer than 14d (the SQS maximum): lower `spec.retention`".to_owned()
            } else {
                "make `spec.deadLetter.retention` longer than `spec.retention` (14d is the SQS maximum)".to_owned()
            }),
        );
    }
    if spec.retry.as_ref().is_some_and(|x| x.backoff.is_some()) {
        out.push(
            Diagnostic::info(
                "sqs/backoff-consumer",
                format!(
                    "SQS has no native backoff: messages are retried when the visibility timeout ({vis}) ends; the consumer must apply `retry.backoff` itself (ChangeMessageVisibility)"
                ),
            )
            .at(doc.locs.key("/spec/retry/backoff")),
        );
    }
    let retry_time =
        Duration::from_millis(vis.as_millis().saturating_mul(u64::from(r.max_attempts)));
    if let Some(src) = r.retention
        && retry_time >= src
    {
        out.push(
            Diagnostic::error(
                "retry/exceeds-retention",
                format!(
                    "{} attempts × visibility timeout {vis} = {retry_time}, which does not fit inside the retention of {src}: messages would expire before they are dead-lettered",
                    r.max_attempts
                ),
            )
            .at(at(if doc.locs.has("/spec/retention") { "/spec/retention" } else { "/spec/retry/maxAttempts" })),
        );
    }
    check_alarms(doc, out);
}

fn check_alarms(doc: &Doc<Channel>, out: &mut Vec<Diagnostic>) {
    let Some(alarms) = &doc.value.spec.alarms else {
        return;
    };
    let periods = [
        (
            "depth",
            alarms
                .depth
                .as_ref()
                .map(|a| (a.period, a.evaluation_periods)),
        ),
        (
            "oldestMessageAge",
            alarms
                .oldest_message_age
                .as_ref()
                .map(|a| (a.period, a.evaluation_periods)),
        ),
    ];
    for (name, v) in periods {
        let Some((period, evals)) = v else { continue };
        let period = period.unwrap_or(Duration::from_secs(60));
        let pointer = format!("/spec/alarms/{name}/period");
        if period.as_millis() % 60_000 != 0 || period.as_millis() == 0 {
            out.push(
                Diagnostic::error(
                    "alarms/period",
                    format!("`spec.alarms.{name}.period` is {period}; SQS metrics are per minute, so the period must be a multiple of 60s"),
                )
                .at(doc.locs.value(&pointer)),
            );
        }
        let total = Duration::from_millis(
            period
                .as_millis()
                .saturating_mul(u64::from(evals.unwrap_or(1))),
        );
        if total > CLOUDWATCH_MAX_EVALUATION {
            out.push(
                Diagnostic::error(
                    "alarms/period",
                    format!("`spec.alarms.{name}`: period × evaluationPeriods is {total}; CloudWatch evaluates at most 1d"),
                )
                .at(doc.locs.value(&pointer)),
            );
        }
    }
    if let Some(age) = &alarms.oldest_message_age
        && age.above.as_millis() % 1000 != 0
    {
        out.push(
            Diagnostic::error(
                "alarms/whole-seconds",
                format!(
                    "`spec.alarms.oldestMessageAge.above` is {}; the metric is in whole seconds",
                    age.above
                ),
            )
            .at(doc.locs.value("/spec/alarms/oldestMessageAge/above")),
        );
    }
    for (i, a) in alarms.actions.iter().flatten().enumerate() {
        if !a.starts_with("arn:") {
            out.push(
                Diagnostic::error(
                    "alarms/action",
                    format!("`spec.alarms.actions[{i}]` is `{a}`, which is not an ARN"),
                )
                .at(doc.locs.value(&format!("/spec/alarms/actions/{i}")))
                .hint("alarm actions are ARNs, e.g. `arn:aws:sns:eu-west-1:123456789012:ops`"),
            );
        }
    }
}

fn alarms_unsupported(doc: &Doc<Channel>, backend: Backend, out: &mut Vec<Diagnostic>) {
    if doc.value.spec.alarms.is_some() {
        out.push(
            Diagnostic::warning(
                "alarms/unsupported-backend",
                format!("alarms are not provisioned for {} targets yet; `spec.alarms` is not applied", backend.display_name()),
            )
            .at(doc.locs.key("/spec/alarms"))
            .hint("alert on the dead-letter queue's depth in your monitoring system (e.g. Prometheus)"),
        );
    }
}

fn jitter_info(doc: &Doc<Channel>, backend: Backend, out: &mut Vec<Diagnostic>) {
    if doc
        .value
        .spec
        .retry
        .as_ref()
        .and_then(|r| r.backoff.as_ref())
        .is_some_and(|b| b.jitter.is_some())
    {
        out.push(
            Diagnostic::info(
                "retry/jitter-consumer",
                format!("{} cannot add jitter to a delay: consumers apply `retry.backoff.jitter` themselves", backend.display_name()),
            )
            .at(doc.locs.key("/spec/retry/backoff/jitter")),
        );
    }
}

fn check_rabbitmq(doc: &Doc<Channel>, r: &Resolved, target: &Target, out: &mut Vec<Diagnostic>) {
    let spec = &doc.value.spec;
    let Some(rb) = &r.rabbitmq else { return };
    alarms_unsupported(doc, Backend::Rabbitmq, out);
    jitter_info(doc, Backend::Rabbitmq, out);
    for (field, pointer, value) in [
        ("spec.retention", "/spec/retention", r.retention),
        (
            "spec.deadLetter.retention",
            "/spec/deadLetter/retention",
            r.dead_letter_retention,
        ),
    ] {
        if let Some(v) = value
            && v.as_millis() > RABBIT_MAX_TTL_MS
        {
            out.push(
                Diagnostic::error(
                    "rabbitmq/ttl-range",
                    format!("`{field}` is {v}; RabbitMQ's message TTL is at most {RABBIT_MAX_TTL_MS} ms (about 49.7 days)"),
                )
                .at(doc.locs.value(pointer))
                .hint("leave the retention unset: RabbitMQ keeps messages until they are consumed"),
            );
        }
    }
    if rb.retry_model == RetryModel::Ttl
        && r.max_attempts > 1
        && spec
            .retry
            .as_ref()
            .and_then(|x| x.backoff.as_ref())
            .is_none()
    {
        out.push(
            Diagnostic::error(
                "rabbitmq/backoff-required",
                "the `ttl` retry model needs `spec.retry.backoff`: the delay is each retry queue's TTL",
            )
            .at(doc.locs.key("/spec/retry"))
            .hint("add `backoff: {initial: 5s}`, or use `rabbitmq: {queueType: quorum, retryModel: deliveryLimit}` for immediate redelivery"),
        );
    }
    for s in &r.retry_stages {
        if s.delay.as_millis() > RABBIT_MAX_TTL_MS {
            out.push(
                Diagnostic::error(
                    "rabbitmq/ttl-range",
                    format!(
                        "retry delay {} is longer than RabbitMQ's largest message TTL ({RABBIT_MAX_TTL_MS} ms, about 49.7 days)",
                        s.delay
                    ),
                )
                .at(doc.locs.value(if doc.locs.has("/spec/retry/backoff/max") {
                    "/spec/retry/backoff/max"
                } else {
                    "/spec/retry/backoff/initial"
                }))
                .hint("cap the delay with `backoff.max`"),
            );
        }
    }
    if rb.retry_model == RetryModel::DeliveryLimit && rb.queue_type != QueueType::Quorum {
        out.push(
            Diagnostic::error(
                "rabbitmq/delivery-limit-quorum",
                "`retryModel: deliveryLimit` needs quorum queues: classic queues do not count deliveries",
            )
            .at(doc.locs.value("/spec/rabbitmq/retryModel"))
            .hint("set `rabbitmq.queueType: quorum`"),
        );
    }
    if let Some(x) = &rb.exchange {
        check_scope(
            doc,
            &x.name,
            "exchange",
            target,
            "/spec/rabbitmq/exchange/name",
            out,
        );
        if x.name.starts_with("amq.") || x.name.is_empty() {
            out.push(
                Diagnostic::error(
                    "name/invalid",
                    format!(
                        "exchange `{}`: RabbitMQ reserves `amq.` names and the default exchange",
                        x.name
                    ),
                )
                .at(doc.locs.value("/spec/rabbitmq/exchange/name")),
            );
        }
    }
}

fn check_kafka(doc: &Doc<Channel>, r: &Resolved, _target: &Target, out: &mut Vec<Diagnostic>) {
    alarms_unsupported(doc, Backend::Kafka, out);
    jitter_info(doc, Backend::Kafka, out);
    let Some(k) = &r.kafka else { return };
    if k.dead_letter_partitions < k.partitions {
        out.push(
            Diagnostic::error(
                "kafka/dlt-partitions",
                format!(
                    "the dead-letter topic has {} partitions, fewer than its source's {}; a record published to the DLT's partition of the same number would fail",
                    k.dead_letter_partitions, k.partitions
                ),
            )
            .at(doc.locs.value("/spec/kafka/deadLetterPartitions"))
            .hint("give the DLT at least as many partitions as the main topic (Spring Kafka's DeadLetterPublishingRecoverer uses the same partition)"),
        );
    }
    for (field, pointer, value) in [
        ("spec.retention", "/spec/retention", r.retention),
        (
            "spec.deadLetter.retention",
            "/spec/deadLetter/retention",
            r.dead_letter_retention,
        ),
    ] {
        if let Some(v) = value
            && v < KAFKA_MIN_RETENTION
        {
            out.push(
                Diagnostic::error(
                    "kafka/retention-range",
                    format!("`{field}` is {v}; Kafka's retention.ms must be at least 1s here"),
                )
                .at(doc.locs.value(pointer)),
            );
        }
    }
    let retry_template = doc.value.spec.retry.as_ref().and_then(|t| t.name.as_ref());
    match (k.naming, retry_template) {
        (KafkaNaming::Custom, None) if !r.retry_stages.is_empty() => out.push(
            Diagnostic::error("kafka/naming", "`kafka.naming: custom` names the retry topics by `retry.name`, which is not set")
                .at(doc.locs.value("/spec/kafka/naming"))
                .hint("set `retry.name` (e.g. `{channel}.retry.{delay}`), or use `naming: spring`"),
        ),
        (KafkaNaming::Spring | KafkaNaming::Index, Some(_)) => out.push(
            Diagnostic::error(
                "kafka/naming",
                "`retry.name` would be ignored: with the `spring` and `index` naming profiles, retry topics are named as Spring Kafka names them",
            )
            .at(doc.locs.value("/spec/retry/name"))
            .hint("remove `retry.name`, or set `kafka.naming: custom`"),
        ),
        _ => {}
    }
    if k.config.contains_key("retention.ms") {
        out.push(
            Diagnostic::error(
                "kafka/config-retention",
                "`spec.kafka.config` sets `retention.ms`; use `spec.retention` and `spec.deadLetter.retention` instead",
            )
            .at(doc.locs.key("/spec/kafka/config/retention.ms")),
        );
    }
    let total = Duration::from_millis(r.delays.iter().map(|d| d.as_millis()).sum());
    if let Some(ret) = r.retention
        && total >= ret
    {
        out.push(
            Diagnostic::error(
                "retry/exceeds-retention",
                format!("the retry delays add up to {total}, which does not fit inside the retention of {ret}"),
            )
            .at(doc.locs.value("/spec/retention")),
        );
    }
}

fn check_scope(
    doc: &Doc<Channel>,
    name: &str,
    what: &str,
    target: &Target,
    pointer: &str,
    out: &mut Vec<Diagnostic>,
) {
    let Some(own) = &target.ownership else { return };
    if !own.prefixes.iter().any(|p| name.starts_with(p.as_str())) {
        out.push(
            Diagnostic::error(
                "target/outside-ownership",
                format!(
                    "{what} `{name}` is outside the target's ownership prefixes ({}); dlqctl would never be allowed to manage it",
                    own.prefixes.join(", ")
                ),
            )
            .at(doc.locs.value(pointer))
            .hint("rename it, or add a prefix to the target's `ownership.prefixes`"),
        );
    }
}

/// Which field a resolved name came from, for pointing at it.
fn name_pointer(doc: &Doc<Channel>, backend: Backend, role: &str) -> &'static str {
    // Kafka's spring and index profiles derive retry and DLT names from the main topic's.
    let naming = doc.value.spec.kafka.as_ref().and_then(|k| k.naming);
    let derived = backend == Backend::Kafka && naming != Some(super::model::KafkaNaming::Custom);
    let main = if doc.locs.has("/spec/name") {
        "/spec/name"
    } else {
        "/metadata/name"
    };
    let field = match role {
        "main" => return main,
        "dead-letter" => "/spec/deadLetter/name",
        _ if derived => return main,
        _ => "/spec/retry/name",
    };
    if doc.locs.has(field) { field } else { main }
}

fn check_names(doc: &Doc<Channel>, r: &Resolved, target: &Target, out: &mut Vec<Diagnostic>) {
    let fifo = r.sqs.as_ref().is_some_and(|s| s.fifo);
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (name, role) in r.names() {
        let pointer = name_pointer(doc, r.backend, role);
        let at = doc.locs.value(pointer);
        if let Some((_, other)) = seen.iter().find(|(n, _)| *n == name) {
            let noun = r.backend.resource_noun();
            let (what, hint) = if role == *other {
                (
                    format!("two {role} {noun}s are both named `{name}`"),
                    "each retry delay needs its own name: put `{delay}` (or `{index}`) in `spec.retry.name`",
                )
            } else {
                (
                    format!("the {role} and {other} {noun}s are both named `{name}`"),
                    "give each its own name template",
                )
            };
            out.push(Diagnostic::error("name/collision", what).at(at).hint(hint));
            continue;
        }
        seen.push((name, role));
        check_scope(doc, name, &format!("{role} queue"), target, pointer, out);
        let problem = match r.backend {
            Backend::Sqs => sqs_name_problem(name, fifo),
            Backend::Rabbitmq => rabbit_name_problem(name),
            Backend::Kafka => kafka_name_problem(name),
        };
        if let Some(p) = problem {
            out.push(
                Diagnostic::error("name/invalid", format!("{role} name `{name}`: {p}"))
                    .at(at)
                    .hint("set the name template explicitly (`spec.name`, `spec.deadLetter.name`, `spec.retry.name`)"),
            );
        }
    }
}

pub fn sqs_name_problem(name: &str, fifo: bool) -> Option<String> {
    let base = match (name.strip_suffix(".fifo"), fifo) {
        (Some(b), true) => b,
        (None, true) => return Some("a FIFO queue's name must end in `.fifo`".into()),
        (Some(_), false) => {
            return Some("only FIFO queues may end in `.fifo` (set `sqs.fifo: true`)".into());
        }
        (None, false) => name,
    };
    if name.chars().count() > SQS_MAX_NAME {
        return Some(format!(
            "SQS names are at most {SQS_MAX_NAME} characters, this is {}",
            name.chars().count()
        ));
    }
    if base.is_empty() {
        return Some("empty name".into());
    }
    if let Some(c) = base
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Some(format!(
            "SQS names allow only A-Z, a-z, 0-9, `-` and `_`, not `{}`",
            c.escape_default()
        ));
    }
    None
}

pub fn rabbit_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("empty name".into());
    }
    if name.len() > RABBIT_MAX_NAME_BYTES {
        return Some(format!(
            "RabbitMQ names are at most {RABBIT_MAX_NAME_BYTES} bytes, this is {}",
            name.len()
        ));
    }
    if name.starts_with("amq.") {
        return Some("names starting with `amq.` are reserved by RabbitMQ".into());
    }
    None
}

pub fn kafka_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("empty name".into());
    }
    if name == "." || name == ".." {
        return Some("`.` and `..` are not valid topic names".into());
    }
    if name.chars().count() > KAFKA_MAX_NAME {
        return Some(format!(
            "Kafka topic names are at most {KAFKA_MAX_NAME} characters, this is {}",
            name.chars().count()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Some(format!(
            "Kafka topic names allow only a-z, A-Z, 0-9, `.`, `_` and `-`, not `{}`",
            c.escape_default()
        ));
    }
    None
}

/// Rules across channels: unique channel names and resource names per target.
fn check_across(checked: &[Checked<'_>], out: &mut Vec<Diagnostic>) {
    let mut channels: BTreeMap<(&str, &str), Loc> = BTreeMap::new();
    let mut names: BTreeMap<(&str, String, &str), (Loc, &str)> = BTreeMap::new();
    for c in checked {
        let r = &c.resolved;
        let loc = c.doc.locs.value("/metadata/name");
        if let Some(first) = channels.get(&(r.target.as_str(), r.channel.as_str())) {
            out.push(
                Diagnostic::error(
                    "channel/duplicate",
                    format!(
                        "channel `{}` is defined twice for target `{}`",
                        r.channel, r.target
                    ),
                )
                .at(loc)
                .related(*first, "first defined here"),
            );
            continue;
        }
        channels.insert((r.target.as_str(), r.channel.as_str()), loc);
        // RabbitMQ names are per vhost; others per target.
        let scope = r
            .rabbitmq
            .as_ref()
            .map(|x| x.vhost.clone())
            .unwrap_or_default();
        for (name, role) in r.names() {
            let at = c.doc.locs.value(name_pointer(c.doc, r.backend, role));
            match names.get(&(r.target.as_str(), scope.clone(), name)) {
                // Within one channel, `check_names` has reported it already.
                Some((_, other)) if *other == r.channel => {}
                Some((first, other)) => out.push(
                    Diagnostic::error(
                        "name/collision",
                        format!(
                            "{role} {} `{name}` of channel `{}` is also used by channel `{other}` on target `{}`",
                            r.backend.resource_noun(),
                            r.channel,
                            r.target
                        ),
                    )
                    .at(at)
                    .related(*first, format!("used by `{other}` here")),
                ),
                None => {
                    names.insert((r.target.as_str(), scope.clone(), name), (at, r.channel.as_str()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule ids one Kafka channel (with `spec` lines appended) produces.
    fn kafka_rules(spec: &str) -> Vec<&'static str> {
        let text = format!(
            "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  k: {{backend: kafka, bootstrapServers: \"127.0.0.1:9092\", ownership: {{prefixes: [app.]}}}}\n---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: app.orders}}\nspec:\n  target: k\n  retry:\n    maxAttempts: 3\n{spec}  lint: {{allow: [alarms/missing]}}\n"
        );
        let ws = crate::spec::load::load_str("c.yaml", &text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        check(&ws).0.iter().map(|d| d.rule).collect()
    }

    #[test]
    fn kafka_retry_templates_belong_to_the_custom_profile_only() {
        assert_eq!(kafka_rules(""), Vec::<&str>::new());
        assert_eq!(
            kafka_rules("    name: \"{channel}.r.{index}\"\n"),
            ["kafka/naming"],
            "ignored with spring"
        );
        assert_eq!(
            kafka_rules("  kafka: {naming: custom}\n"),
            ["kafka/naming"],
            "custom needs retry.name"
        );
        assert_eq!(
            kafka_rules("    name: \"{channel}.r.{index}\"\n  kafka: {naming: custom}\n"),
            Vec::<&str>::new()
        );
    }
}
