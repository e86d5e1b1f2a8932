//! A channel's RabbitMQ settings: the vhost, queue type, dead-lettering mode and retry model,
//! the exchanges it declares (names expanded), and its retry queues, one per distinct delay.

use super::common::{ResolveError, RetryStage, expand, template_error};
use super::defaults::DEFAULT_POLICY_PRIORITY;
use crate::spec::duration::Duration;
use crate::spec::model::{
    ChannelSpec, DeadLetterStrategy, DlxMode, ExchangeKind, QueueType, RetryModel, Target,
};

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
    /// The main queue dead-letters into its first retry queue (the broker drives the TTL
    /// loop): always in policy mode, with `rejectToRetry: true` in arguments mode.
    pub reject_to_retry: bool,
    /// `deliveryLimit`: the main queue dead-letters at least once (`dead-letter-strategy`
    /// and `overflow: reject-publish` set); `false`: RabbitMQ's at-most-once default.
    pub at_least_once: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetterExchangeResolved {
    /// `""`: RabbitMQ's default exchange (nothing to declare or bind).
    pub name: String,
    pub kind: ExchangeKind,
    /// The dead-letter routing key; `None`: dead letters keep their own routing keys.
    pub routing_key: Option<String>,
    /// The key the DLQ is bound to the exchange with.
    pub binding_key: String,
}

impl DeadLetterExchangeResolved {
    /// RabbitMQ's default exchange: it routes by queue name and cannot be declared or bound.
    pub fn is_default(&self) -> bool {
        self.name.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExchangeResolved {
    pub name: String,
    pub kind: ExchangeKind,
    pub routing_keys: Vec<String>,
}

/// A channel that shares the dead-letter destination of `owner` (`deadLetter.of`)
/// dead-letters through the owner's exchange, with the owner's routing key.
pub(super) fn share_from(mine: &mut RabbitResolved, owner: &RabbitResolved) {
    mine.dead_letter_exchange
        .clone_from(&owner.dead_letter_exchange);
}

/// `spec.rabbitmq` with defaults filled in, the exchanges' names (and the dead-letter routing
/// key) expanded. `queues`: the main queue's and the DLQ's names.
pub(super) fn resolve(
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
        Some(x) => {
            let kind = x.kind.unwrap_or(ExchangeKind::Direct);
            let routing_key = match (&x.routing_key, x.keep_routing_key) {
                (Some(k), _) => Some(
                    expand(k, name, None, None)
                        .map_err(|m| err("/spec/rabbitmq/deadLetterExchange/routingKey", m))?,
                ),
                (None, Some(true)) => None,
                (None, _) => Some(dead_letter.to_owned()),
            };
            let binding_key = match (&x.binding_key, &routing_key) {
                (Some(k), _) => expand(k, name, None, None)
                    .map_err(|m| err("/spec/rabbitmq/deadLetterExchange/bindingKey", m))?,
                (None, Some(k)) => k.clone(),
                (None, None) if kind == ExchangeKind::Fanout => String::new(),
                (None, None) => main.to_owned(),
            };
            Some(DeadLetterExchangeResolved {
                name: expand(&x.name, name, None, None)
                    .map_err(|m| err("/spec/rabbitmq/deadLetterExchange/name", m))?,
                kind,
                routing_key,
                binding_key,
            })
        }
        None => None,
    };
    let dlx = o.dlx.unwrap_or(DlxMode::Policy);
    Ok(RabbitResolved {
        reject_to_retry: dlx == DlxMode::Policy || o.reject_to_retry == Some(true),
        at_least_once: o.dead_letter_strategy != Some(DeadLetterStrategy::AtMostOnce),
        vhost: o
            .vhost
            .or_else(|| target.vhost.clone())
            .unwrap_or_else(|| "/".to_owned()),
        queue_type: o.queue_type.unwrap_or(QueueType::Classic),
        dlx,
        retry_model,
        exchange,
        dead_letter_exchange,
        policy_priority: o.policy_priority.unwrap_or(DEFAULT_POLICY_PRIORITY),
    })
}

/// The retry queues (`ttl` model): one per distinct delay, named by `retry.name` or
/// `<channel>.retry[.<delay>]`, in the order a message meets them.
pub(super) fn retry_stages(
    spec: &ChannelSpec,
    name: &str,
    delays: &[Duration],
) -> Result<Vec<RetryStage>, ResolveError> {
    let uniq = distinct(delays);
    let default_t = if uniq.len() == 1 {
        "{channel}.retry"
    } else {
        "{channel}.retry.{delay}"
    };
    let t = spec
        .retry
        .as_ref()
        .and_then(|r| r.name.as_deref())
        .unwrap_or(default_t);
    let mut retry_stages = Vec::new();
    for (i, d) in uniq.iter().enumerate() {
        let n = expand(t, name, Some(*d), Some(i + 1))
            .map_err(|m| template_error("/spec/retry/name", m))?;
        retry_stages.push(RetryStage { name: n, delay: *d });
    }
    Ok(retry_stages)
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

#[cfg(test)]
mod tests {
    use super::super::tests::{ms, names, resolved_on};
    use super::*;
    use crate::spec::model::Backend;

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
}
