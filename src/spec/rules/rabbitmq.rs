//! Rules for channels on a RabbitMQ target: the 32-bit millisecond TTL limit, what the
//! `ttl` and `deliveryLimit` retry models need, the exchange binding and the named
//! dead-letter exchange.
//!
//! Depends on `alarms` and `channel` (the advice every broker shares), `names` (ownership)
//! and the resolved channel.

use super::alarms::check_alarms;
use super::common::{invalid_retention_at, jitter_info, retention_field, retention_pointer};
use super::names::check_scope;
use crate::diag::Diagnostic;
use crate::spec::load::Doc;
use crate::spec::model::{Backend, Channel, ExchangeKind, QueueType, RetryModel, Target};
use crate::spec::resolve::{RabbitResolved, Resolved};

/// `x-message-ttl` is an unsigned 32-bit number of milliseconds.
pub const RABBIT_MAX_TTL_MS: u64 = u32::MAX as u64;

pub(super) fn check_rabbitmq(
    doc: &Doc<Channel>,
    r: &Resolved,
    target: &Target,
    out: &mut Vec<Diagnostic>,
) {
    let Some(rb) = &r.rabbitmq else { return };
    check_alarms(doc, r, out);
    jitter_info(doc, Backend::Rabbitmq, out);
    check_retention_ttl(doc, r, out);
    check_backoff_required(doc, r, rb, out);
    check_retry_ttl(doc, r, out);
    check_delivery_limit(doc, rb, out);
    if let Some(x) = &rb.exchange {
        check_exchange(
            doc,
            &x.name,
            "exchange",
            "/spec/rabbitmq/exchange/name",
            target,
            out,
        );
    }
    check_dead_letter_exchange(doc, r, rb, target, out);
}

/// The named dead-letter exchange: a valid owned name, not the channel's own exchange, a type
/// that routes by the dead-letter routing key (`rabbitmq/dlx-exchange-type`), and a note where
/// the broker does not send to it (`rabbitmq/dlx-consumer-publishes`).
fn check_dead_letter_exchange(
    doc: &Doc<Channel>,
    r: &Resolved,
    rb: &RabbitResolved,
    target: &Target,
    out: &mut Vec<Diagnostic>,
) {
    let Some(x) = &rb.dead_letter_exchange else {
        return;
    };
    let pointer = "/spec/rabbitmq/deadLetterExchange/name";
    if x.is_default() {
        check_default_dead_letter_exchange(doc, r, x, out);
        return;
    }
    check_exchange(doc, &x.name, "dead-letter exchange", pointer, target, out);
    if rb.exchange.as_ref().is_some_and(|e| e.name == x.name) {
        out.push(
            Diagnostic::error(
                "name/collision",
                format!(
                    "the dead-letter exchange and the channel's exchange are both named `{}`",
                    x.name
                ),
            )
            .at(doc.locs.value(pointer))
            .related(
                doc.locs.value("/spec/rabbitmq/exchange/name"),
                "the channel's exchange",
            )
            .hint("give the dead-letter exchange its own name, e.g. `{channel}.dlx`"),
        );
    }
    if doc.locs.has("/spec/rabbitmq/deadLetterExchange/routingKey")
        && doc
            .locs
            .has("/spec/rabbitmq/deadLetterExchange/keepRoutingKey")
    {
        out.push(
            Diagnostic::error(
                "rabbitmq/dlx-exchange-type",
                "`deadLetterExchange` sets both `routingKey` and `keepRoutingKey`: a dead letter either gets that key or keeps its own",
            )
            .at(doc.locs.value("/spec/rabbitmq/deadLetterExchange/keepRoutingKey"))
            .hint("keep one of the two"),
        );
    }
    if x.kind == ExchangeKind::Headers {
        out.push(
            Diagnostic::error(
                "rabbitmq/dlx-exchange-type",
                "a `headers` exchange ignores routing keys: it cannot route dead letters by `deadLetterExchange.routingKey`",
            )
            .at(doc.locs.value("/spec/rabbitmq/deadLetterExchange/type"))
            .hint("use `direct` (the default), `topic` or `fanout`"),
        );
    }
    // Policy mode sends a rejected message round the retry loop: the exchange only sees what
    // the consumer publishes to it after the last attempt.
    if rb.reject_to_retry
        && rb.retry_model == RetryModel::Ttl
        && let Some(first) = r.retry_stages.first()
    {
        out.push(
            Diagnostic::info(
                "rabbitmq/dlx-consumer-publishes",
                format!(
                    "in policy mode the main queue dead-letters into its first retry queue `{}`, not through `{}`: after the last attempt the consumer publishes the message to `{}` with routing key `{}`",
                    first.name, x.name, x.name, x.routing_key.as_deref().unwrap_or(&x.binding_key)
                ),
            )
            .at(doc.locs.key("/spec/rabbitmq/deadLetterExchange"))
            .hint("with `dlx: arguments` a reject goes through the exchange (the consumer then publishes to the retry queues itself)"),
        );
    }
}

/// `deadLetterExchange: {name: ""}`, RabbitMQ's default exchange: it routes a dead letter to
/// the queue its routing key names, so the key must be the DLQ's name, and it has no type or
/// bindings (`rabbitmq/dlx-default-exchange`).
fn check_default_dead_letter_exchange(
    doc: &Doc<Channel>,
    r: &Resolved,
    x: &crate::spec::resolve::DeadLetterExchangeResolved,
    out: &mut Vec<Diagnostic>,
) {
    let base = "/spec/rabbitmq/deadLetterExchange";
    let mut refuse = |field: &str, message: String, hint: &str| {
        out.push(
            Diagnostic::error("rabbitmq/dlx-default-exchange", message)
                .at(doc.locs.value(&format!("{base}/{field}")))
                .hint(hint.to_owned()),
        );
    };
    match &x.routing_key {
        Some(k) if *k != r.dead_letter => refuse(
            "routingKey",
            format!(
                "the default exchange routes a dead letter with key `{k}` to the queue of that name, not to the dead-letter queue `{}`",
                r.dead_letter
            ),
            "leave `routingKey` unset (the DLQ's name), or name a dead-letter exchange bound to the DLQ",
        ),
        Some(_) => {}
        None => refuse(
            "keepRoutingKey",
            "through the default exchange a dead letter that keeps its own routing key goes back to the queue it was published to, not to the dead-letter queue".to_owned(),
            "remove `keepRoutingKey`, or name a dead-letter exchange bound to the DLQ",
        ),
    }
    if x.kind != ExchangeKind::Direct {
        refuse(
            "type",
            "the default exchange is a direct exchange; it cannot be given another type".to_owned(),
            "remove `type`",
        );
    }
    if doc.locs.has("/spec/rabbitmq/deadLetterExchange/bindingKey") {
        refuse(
            "bindingKey",
            "nothing can be bound to the default exchange".to_owned(),
            "remove `bindingKey`",
        );
    }
}

/// `rabbitmq/ttl-range` for the retentions, which become message TTLs.
fn check_retention_ttl(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    for (field, pointer, value) in [
        ("spec.retention", "/spec/retention", r.retention),
        (
            retention_field(doc),
            retention_pointer(doc),
            r.dead_letter_retention,
        ),
        (
            invalid_retention_at(doc).0,
            invalid_retention_at(doc).1,
            r.invalid.as_ref().and_then(|i| i.retention),
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
}

/// `rabbitmq/backoff-required`: under the `ttl` model the backoff is the retry queues' TTL.
fn check_backoff_required(
    doc: &Doc<Channel>,
    r: &Resolved,
    rb: &RabbitResolved,
    out: &mut Vec<Diagnostic>,
) {
    let spec = &doc.value.spec;
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
}

/// `rabbitmq/ttl-range` for the retry delays, which become retry queues' TTLs.
fn check_retry_ttl(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
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
}

/// `rabbitmq/delivery-limit-quorum`: only quorum queues count deliveries;
/// `rabbitmq/at-most-once`: a delivery limit whose dead letters the broker may drop.
fn check_delivery_limit(doc: &Doc<Channel>, rb: &RabbitResolved, out: &mut Vec<Diagnostic>) {
    if rb.retry_model == RetryModel::DeliveryLimit && !rb.at_least_once {
        out.push(
            Diagnostic::warning(
                "rabbitmq/at-most-once",
                "`deadLetterStrategy: atMostOnce`: the quorum main queue drops a dead letter the DLQ cannot take (full, gone, or not confirming)",
            )
            .at(doc.locs.value("/spec/rabbitmq/deadLetterStrategy"))
            .hint("remove `deadLetterStrategy` (at least once: `dead-letter-strategy: at-least-once` with `overflow: reject-publish`); the main queue is then replaced in arguments mode, updated in place in policy mode"),
        );
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
}

/// An exchange's name: inside the ownership prefixes, not one RabbitMQ reserves, and short
/// enough.
fn check_exchange(
    doc: &Doc<Channel>,
    name: &str,
    what: &str,
    pointer: &str,
    target: &Target,
    out: &mut Vec<Diagnostic>,
) {
    check_scope(doc, name, what, target, pointer, out);
    if name.starts_with("amq.") || name.is_empty() {
        out.push(
            Diagnostic::error(
                "name/invalid",
                format!("{what} `{name}`: RabbitMQ reserves `amq.` names and the default exchange"),
            )
            .at(doc.locs.value(pointer)),
        );
    } else if let Some(p) = super::names::rabbit_name_problem(name) {
        out.push(
            Diagnostic::error("name/invalid", format!("{what} `{name}`: {p}"))
                .at(doc.locs.value(pointer)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::findings_of;

    /// The rule ids of a RabbitMQ channel with these `spec` lines (`alarms/missing` and
    /// `retry/excessive` silenced).
    fn rabbit_rules(spec: &str) -> Vec<&'static str> {
        findings_of(
            "rabbit",
            &format!("{spec}  lint: {{allow: [alarms/missing, retry/excessive]}}\n"),
            "",
        )
        .iter()
        .map(|d| d.rule)
        .collect()
    }

    #[test]
    fn a_retention_may_be_the_largest_32_bit_ttl_but_not_more() {
        let spec = |retention: &str| {
            format!(
                "  retention: {retention}\n  retry: {{maxAttempts: 3, backoff: {{initial: 1s}}}}\n"
            )
        };
        assert_eq!(rabbit_rules(&spec("4294967295ms")), Vec::<&str>::new());
        assert_eq!(rabbit_rules(&spec("4294967296ms")), ["rabbitmq/ttl-range"]);
    }

    #[test]
    fn a_retry_delay_may_be_the_largest_32_bit_ttl_but_not_more() {
        let spec =
            |delay: &str| format!("  retry: {{maxAttempts: 2, backoff: {{initial: {delay}}}}}\n");
        assert_eq!(rabbit_rules(&spec("4294967295ms")), Vec::<&str>::new());
        assert_eq!(rabbit_rules(&spec("4294967296ms")), ["rabbitmq/ttl-range"]);
    }

    #[test]
    fn the_ttl_model_needs_a_backoff_only_when_it_retries() {
        assert_eq!(rabbit_rules("  retry: {maxAttempts: 1}\n"), ["retry/none"]);
        assert_eq!(
            rabbit_rules("  retry: {maxAttempts: 2}\n"),
            ["rabbitmq/backoff-required"]
        );
    }
}
