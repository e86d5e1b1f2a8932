//! Rules on one channel as a whole: required fields, its target (exists, right backend),
//! resolving it against the target, and the advice every backend shares (no retry, no
//! alarms, jitter). It then hands the resolved channel to its backend's rules and to the
//! name rules.
//!
//! The entry point of the per-channel rules; depends on `targets` (to look targets up), on
//! the backend modules, `names` and `resolve`.

use super::names::check_names;
use super::targets::TargetMap;
use super::{azure, deadletter, kafka, pubsub, rabbitmq, sqs};
use crate::diag::Diagnostic;
use crate::spec::duration::Duration;
use crate::spec::load::Doc;
use crate::spec::model::{Backend, Channel, Target};
use crate::spec::resolve::{self, Resolved};
use crate::spec::schema::did_you_mean;

/// What was found of Targets documents besides the valid ones.
pub(super) struct TargetsFound<'w> {
    /// No Targets document at all, valid or not.
    pub none: bool,
    /// Targets of documents that failed validation, with the document's file.
    pub unread: &'w std::collections::BTreeMap<String, std::path::PathBuf>,
}

/// All rules on one channel; the resolved channel if it got far enough to resolve.
pub(super) fn check_channel(
    doc: &Doc<Channel>,
    targets: &TargetMap<'_>,
    found: &TargetsFound<'_>,
    out: &mut Vec<Diagnostic>,
) -> Option<Resolved> {
    let complete = check_max_attempts(doc, out);
    let (target_name, target) = find_target(doc, targets, found, out)?;
    let backend = target.backend;
    check_backend_blocks(doc, target_name, backend, out);
    check_dead_letter_block(doc, target_name, backend, out);
    check_shared_fields(doc, backend, out);
    super::envelope::check_envelope(doc, backend, out);
    super::headers::check_redrive_headers(doc, out);
    check_consumer_group(doc, backend, out);
    if !complete {
        return None;
    }
    let r = resolve_channel(doc, target_name, target, out)?;
    check_advice(doc, &r, out);
    match backend {
        Backend::Sqs => sqs::check_sqs(doc, &r, out),
        Backend::Rabbitmq => rabbitmq::check_rabbitmq(doc, &r, target, out),
        Backend::Kafka => kafka::check_kafka(doc, &r, target, out),
        Backend::Pubsub => pubsub::check_pubsub(doc, &r, out),
        Backend::AzureServicebus => azure::check_azure(doc, &r, out),
    }
    deadletter::check_dead_letter(doc, &r, out);
    check_names(doc, &r, target, out);
    Some(r)
}

/// `deadletter/shared-field`: a channel that shares another's dead-letter destination
/// (`deadLetter.of`) does not describe it: its name, retention, alarms and dead-letter
/// exchange are the owner's to write, once.
fn check_shared_fields(doc: &Doc<Channel>, backend: Backend, out: &mut Vec<Diagnostic>) {
    let Some(owner) = doc
        .value
        .spec
        .dead_letter
        .as_ref()
        .and_then(|d| d.of.as_deref())
    else {
        return;
    };
    // `deadletter/shared-backend`: provisioned, statused and redriven on SQS only so far.
    if backend != Backend::Sqs {
        out.push(
            Diagnostic::error(
                "deadletter/shared-backend",
                format!(
                    "`deadLetter.of` shares channel `{owner}`'s dead-letter destination, which this version provisions on SQS only; this channel's target is {}",
                    backend.with_article()
                ),
            )
            .at(doc.locs.key("/spec/deadLetter/of"))
            .hint("give this channel its own dead-letter destination for now (remove `deadLetter.of`)"),
        );
    }
    let fields = crate::spec::model::DEAD_LETTER_OWNER_FIELDS
        .iter()
        .map(|f| (format!("/spec/deadLetter/{f}"), format!("deadLetter.{f}")))
        .chain([
            ("/spec/alarms".to_owned(), "alarms".to_owned()),
            (
                "/spec/rabbitmq/deadLetterExchange".to_owned(),
                "rabbitmq.deadLetterExchange".to_owned(),
            ),
        ]);
    // Defaults give such a channel none of these (the merge leaves them out): what is set,
    // the channel wrote.
    let written = serde_json::to_value(&doc.value).unwrap_or_default();
    for (pointer, field) in fields {
        if written.pointer(&pointer).is_some_and(|v| !v.is_null()) {
            out.push(
                Diagnostic::error(
                    "deadletter/shared-field",
                    format!(
                        "`{field}` is set, but this channel shares the dead-letter destination of channel `{owner}` (`deadLetter.of`), which declares it"
                    ),
                )
                .at(doc.locs.key(&pointer))
                .hint(format!("write it in channel `{owner}`'s spec, once, and remove it here")),
            );
        }
    }
}

/// `deadletter/consumer-group`: only a Kafka dead-letter topic has a consumer group.
fn check_consumer_group(doc: &Doc<Channel>, backend: Backend, out: &mut Vec<Diagnostic>) {
    let pointer = "/spec/deadLetter/consumerGroup";
    if backend != Backend::Kafka && doc.locs.has(pointer) {
        out.push(
            Diagnostic::error(
                "deadletter/consumer-group",
                format!(
                    "`deadLetter.consumerGroup` is for Kafka dead-letter topics; this channel's target is {}",
                    backend.as_str()
                ),
            )
            .at(doc.locs.key(pointer))
            .hint("remove it: a queue's depth already counts only the messages that wait"),
        );
    }
}

/// `spec/required` for `retry.maxAttempts`; false if it is missing.
fn check_max_attempts(doc: &Doc<Channel>, out: &mut Vec<Diagnostic>) -> bool {
    let spec = &doc.value.spec;
    let name = &doc.value.metadata.name;
    let key = |p: &str| doc.locs.key(p);
    if spec.retry.as_ref().and_then(|r| r.max_attempts).is_none() {
        out.push(
            Diagnostic::error(
                "spec/required",
                format!("channel `{name}` has no `spec.retry.maxAttempts`"),
            )
            .at(key(if doc.locs.has("/spec/retry") { "/spec/retry" } else { "/spec" }))
            .hint("say how many deliveries a message gets before it is dead-lettered, e.g. `retry: {maxAttempts: 5}`"),
        );
        return false;
    }
    true
}

/// `spec/required` for `spec.target`, or `target/unknown`; the target if it is defined.
fn find_target<'a, 'd>(
    doc: &'d Doc<Channel>,
    targets: &TargetMap<'a>,
    found: &TargetsFound<'_>,
    out: &mut Vec<Diagnostic>,
) -> Option<(&'d str, &'a Target)> {
    let spec = &doc.value.spec;
    let name = &doc.value.metadata.name;
    let at = |p: &str| doc.locs.value(p);
    let key = |p: &str| doc.locs.key(p);
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
        if found.unread.contains_key(target_name) {
            // Defined in a Targets document with errors: those errors are the finding.
            return None;
        }
        let mut d = Diagnostic::error(
            "target/unknown",
            format!("`spec.target` is `{target_name}`, which no Targets document defines"),
        )
        .at(at("/spec/target"));
        let broken: std::collections::BTreeSet<String> = found
            .unread
            .values()
            .map(|p| p.display().to_string())
            .collect();
        d = if found.none {
            d.hint("no Targets document was found: create `dlqctl.yaml` (kind: Targets) beside or above the specs, or pass --targets FILE")
        } else if !broken.is_empty() {
            let names = targets
                .keys()
                .copied()
                .chain(found.unread.keys().map(String::as_str));
            let guess = did_you_mean(target_name, names)
                .map(|m| format!("did you mean `{m}`? "))
                .unwrap_or_default();
            d.hint(format!(
                "{guess}the Targets document {} has errors (reported there), so its targets were not read",
                broken
                    .iter()
                    .map(|b| format!("`{b}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
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
    Some((target_name, target))
}

/// `target/backend-mismatch`: a backend block (`sqs:`, ...) that is not the target's.
fn check_backend_blocks(
    doc: &Doc<Channel>,
    target_name: &str,
    backend: Backend,
    out: &mut Vec<Diagnostic>,
) {
    let spec = &doc.value.spec;
    let key = |p: &str| doc.locs.key(p);
    for b in Backend::ALL {
        let block = b.as_str();
        let set = match b {
            Backend::Sqs => spec.sqs.is_some(),
            Backend::Rabbitmq => spec.rabbitmq.is_some(),
            Backend::Kafka => spec.kafka.is_some(),
            Backend::Pubsub => spec.pubsub.is_some(),
            Backend::AzureServicebus => spec.azure_servicebus.is_some(),
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
}

/// `target/backend-mismatch` for `deadLetter.sqs` on a RabbitMQ or Kafka channel.
fn check_dead_letter_block(
    doc: &Doc<Channel>,
    target_name: &str,
    backend: Backend,
    out: &mut Vec<Diagnostic>,
) {
    let pointer = "/spec/deadLetter/sqs";
    if backend != Backend::Sqs && doc.locs.has(pointer) {
        out.push(
            Diagnostic::error(
                "target/backend-mismatch",
                format!(
                    "`deadLetter.sqs` is set, but target `{target_name}` is {} target",
                    backend.with_article()
                ),
            )
            .at(doc.locs.key(pointer))
            .hint("remove it: it holds the encryption and policy of an SQS dead-letter queue"),
        );
    }
}

/// The channel's effective settings on its target, or the finding that says why not.
fn resolve_channel(
    doc: &Doc<Channel>,
    target_name: &str,
    target: &Target,
    out: &mut Vec<Diagnostic>,
) -> Option<Resolved> {
    let at = |p: &str| doc.locs.value(p);
    match resolve::resolve(&doc.value, target_name, target) {
        Ok(r) => Some(r),
        Err(e) => {
            let mut d = Diagnostic::error(e.rule, e.message).at(at(e.pointer));
            if let Some(h) = e.hint {
                d = d.hint(h);
            }
            out.push(d);
            None
        }
    }
}

/// `retry/none` and `alarms/missing`: advice for every backend.
fn check_advice(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    let spec = &doc.value.spec;
    let name = &doc.value.metadata.name;
    let at = |p: &str| doc.locs.value(p);
    let key = |p: &str| doc.locs.key(p);

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
    let has_alarms = spec.alarms.as_ref().is_some_and(|a| {
        a.depth.is_some() || a.oldest_message_age.is_some() || a.dead_letter_rate.is_some()
    });
    // On SQS, an alarm (any tier) with no actions; elsewhere Alertmanager routes alerts.
    let notifies_nobody = r.backend == Backend::Sqs
        && ([&r.alarms.depth, &r.alarms.oldest_message_age]
            .into_iter()
            .flatten()
            .flat_map(|a| &a.tiers)
            .any(|t| t.actions.is_empty())
            || r.alarms
                .dead_letter_rate
                .iter()
                .flat_map(|a| &a.tiers)
                .any(|t| t.actions.is_empty()));
    if notifies_nobody {
        out.push(
            Diagnostic::warning(
                "alarms/missing",
                format!("channel `{name}`'s alarms have no actions: an alarm that notifies nobody watches nothing"),
            )
            .at(key("/spec/alarms"))
            .hint("add `actions: [arn:aws:sns:…]`, or silence with `lint: {allow: [alarms/missing]}`"),
        );
    }
    excessive_retries(doc, r, out);
    // A channel sharing another's destination leaves its alarms to that owner.
    if !has_alarms && r.dead_letter_of.is_none() {
        out.push(
            Diagnostic::warning(
                "alarms/missing",
                format!("channel `{name}` has no alarms: a dead-letter queue nobody watches is a graveyard"),
            )
            .at(key(if doc.locs.has("/spec/alarms") { "/spec/alarms" } else { "/spec" }))
            .hint("add `alarms: {depth: {above: 0}}`, or silence with `lint: {allow: [alarms/missing]}`"),
        );
    }
}

/// More than this many deliveries is a stuck consumer rather than a retry budget.
pub const RETRY_EXCESSIVE_ATTEMPTS: u32 = 20;
/// Retries whose delays add up to more than this hold a message back for over a day.
pub const RETRY_EXCESSIVE_DELAY: Duration = Duration::from_secs(86_400);

/// `retry/excessive` (warning): more than 20 attempts, or retries that wait more than a day in
/// all — retrying a hundred times turns a slow dependency into a stuck consumer.
fn excessive_retries(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    let total = Duration::from_millis(r.delays.iter().map(|d| d.as_millis()).sum());
    let why = if r.max_attempts > RETRY_EXCESSIVE_ATTEMPTS {
        format!(
            "`spec.retry.maxAttempts` is {}: more than {RETRY_EXCESSIVE_ATTEMPTS} deliveries turn a slow dependency into a stuck consumer",
            r.max_attempts
        )
    } else if total > RETRY_EXCESSIVE_DELAY {
        format!(
            "the retries wait {total} in all before the dead-letter queue: a message is held back for more than a day"
        )
    } else {
        return;
    };
    out.push(
        Diagnostic::warning("retry/excessive", why)
            .at(doc.locs.value("/spec/retry/maxAttempts"))
            .hint("dead-letter sooner and redrive once the cause is fixed, or silence with `lint: {allow: [retry/excessive]}`"),
    );
}

#[cfg(test)]
mod tests {
    use super::super::tests::{findings_of, rules_on};

    #[test]
    fn only_a_kafka_dead_letter_topic_has_a_consumer_group() {
        let spec = "  deadLetter: {consumerGroup: app.dlt-readers}\n";
        assert_eq!(
            rules_on("kafka", spec, ""),
            ["deadletter/retention-implicit"]
        );
        for (b, name) in [("sqs", "sqs"), ("rabbit", "rabbitmq")] {
            let found = findings_of(
                b,
                &format!(
                    "  retry: {{maxAttempts: 3, backoff: {{initial: 1s}}}}\n{spec}  lint: {{allow: [alarms/missing]}}\n"
                ),
                "",
            );
            let d = found
                .iter()
                .find(|d| d.rule == "deadletter/consumer-group")
                .expect("a consumer group on a queue is reported");
            assert_eq!(
                d.message,
                format!(
                    "`deadLetter.consumerGroup` is for Kafka dead-letter topics; this channel's target is {name}"
                )
            );
        }
    }

    /// The `retry/excessive` findings of a channel with these `retry` settings.
    fn excessive(backend: &str, retry: &str) -> Vec<String> {
        findings_of(
            backend,
            &format!("  retry: {retry}\n  lint: {{allow: [alarms/missing]}}\n"),
            "",
        )
        .into_iter()
        .filter(|d| d.rule == "retry/excessive")
        .map(|d| d.message)
        .collect()
    }

    #[test]
    fn retries_are_excessive_past_twenty_deliveries_not_at_twenty() {
        assert_eq!(excessive("sqs", "{maxAttempts: 20}"), Vec::<String>::new());
        assert_eq!(
            excessive("sqs", "{maxAttempts: 21}"),
            [
                "`spec.retry.maxAttempts` is 21: more than 20 deliveries turn a slow dependency into a stuck consumer"
            ]
        );
    }

    #[test]
    fn retries_are_excessive_past_a_day_of_waiting_not_at_a_day() {
        // Four retries of 6h: exactly one day, the most that is not excessive.
        assert_eq!(
            excessive("rabbit", "{maxAttempts: 5, backoff: {initial: 6h}}"),
            Vec::<String>::new()
        );
        assert_eq!(
            excessive("rabbit", "{maxAttempts: 5, backoff: {initial: 6h1s}}"),
            [
                "the retries wait 1d4s in all before the dead-letter queue: a message is held back for more than a day"
            ]
        );
    }
}
