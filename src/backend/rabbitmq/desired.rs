//! RabbitMQ desired state (pure, no I/O): a resolved channel becomes its queues (main, retry
//! per delay, DLQ, the invalid-message queue of `spec.invalid`), their policies or x-arguments, the channel's exchange and bindings, and a
//! named dead-letter exchange with the DLQ's binding to it.

use serde_json::{Value, json};

use super::*;
use crate::resource::{Desired, Props, Role};
use crate::spec::model::{DlxMode, ExchangeKind, QueueType, RetryModel};
use crate::spec::resolve::{
    DeadLetterExchangeResolved, ExchangeResolved, RabbitResolved, Resolved,
};

/// What one queue should carry, as (policy key, value): written to a policy definition in
/// policy mode or as `x-` arguments in arguments mode.
pub(super) type Settings = Vec<(&'static str, Value)>;

/// The desired resources of one channel (pure).
pub fn desired(r: &Resolved) -> Vec<Desired> {
    let Some(rb) = &r.rabbitmq else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for q in queue_settings(r, rb) {
        out.extend(queue_and_policy(r, rb, q));
    }
    if let Some(x) = &rb.exchange {
        out.extend(exchange_and_bindings(r, rb, x));
    }
    if let Some(x) = rb.dead_letter_exchange.as_ref().filter(|x| !x.is_default()) {
        out.extend(dead_letter_exchange(r, rb, x));
    }
    out
}

/// One queue of the channel, its role and its policy's role, and the settings it carries.
struct QueueSettings<'r> {
    name: &'r str,
    role: Role,
    policy_role: Role,
    settings: Settings,
}

/// What each queue carries, DLQ first, then the invalid-message queue, a retry queue per
/// delay, and the main queue.
fn queue_settings<'r>(r: &'r Resolved, rb: &RabbitResolved) -> Vec<QueueSettings<'r>> {
    let dl_exchange = || ("dead-letter-exchange", json!(""));
    let mut queues: Vec<QueueSettings> = Vec::new();

    let mut dlq = Settings::new();
    if let Some(t) = r.dead_letter_retention {
        dlq.push(("message-ttl", json!(t.as_millis())));
    }
    queues.push(QueueSettings {
        name: &r.dead_letter,
        role: Role::DeadLetter,
        policy_role: Role::DeadLetterPolicy,
        settings: dlq,
    });

    // Consumers publish poison messages here themselves; it dead-letters nowhere.
    if let Some(i) = &r.invalid {
        queues.push(QueueSettings {
            name: &i.name,
            role: Role::Invalid,
            policy_role: Role::InvalidPolicy,
            settings: i
                .retention
                .map(|t| ("message-ttl", json!(t.as_millis())))
                .into_iter()
                .collect(),
        });
    }

    for stage in &r.retry_stages {
        queues.push(QueueSettings {
            name: &stage.name,
            role: Role::Retry,
            policy_role: Role::RetryPolicy,
            settings: vec![
                ("message-ttl", json!(stage.delay.as_millis())),
                dl_exchange(),
                ("dead-letter-routing-key", json!(r.main)),
            ],
        });
    }

    queues.push(QueueSettings {
        name: &r.main,
        role: Role::Main,
        policy_role: Role::MainPolicy,
        settings: main_settings(r, rb),
    });
    queues
}

/// Whether the spec gives the channel's main queue a dead-letter exchange. Not in arguments
/// mode with retry queues and no named dead-letter exchange (`dlx: arguments`, as consumers
/// seed the queues): the consumer publishes a failure to the retry queues itself, and the
/// main queue dead-letters nowhere by design (issue 52, M12 and second review F8).
pub(super) fn main_dead_letters(r: &Resolved) -> bool {
    r.rabbitmq.as_ref().is_some_and(|rb| {
        main_settings(r, rb)
            .iter()
            .any(|(k, _)| *k == "dead-letter-exchange")
    })
}

/// The main queue's settings: its retention, and where it dead-letters for the retry model
/// (the DLQ after a delivery limit; the first retry queue in a TTL loop in policy mode).
///
/// With a named dead-letter exchange, whatever the main queue dead-letters *into the DLQ* goes
/// through it with its routing key: after a delivery limit, and in the TTL model whenever the
/// main queue does not dead-letter into a retry queue (no retry queue, or arguments mode,
/// where the consumer publishes to the retry queues itself and a reject means "dead").
fn main_settings(r: &Resolved, rb: &RabbitResolved) -> Settings {
    let into_dlq = || -> Settings {
        match &rb.dead_letter_exchange {
            Some(x) => std::iter::once(("dead-letter-exchange", json!(x.name)))
                .chain(
                    x.routing_key
                        .as_ref()
                        .map(|k| ("dead-letter-routing-key", json!(k))),
                )
                .collect(),
            None => vec![
                ("dead-letter-exchange", json!("")),
                ("dead-letter-routing-key", json!(r.dead_letter)),
            ],
        }
    };
    let mut main = Settings::new();
    if let Some(t) = r.retention {
        main.push(("message-ttl", json!(t.as_millis())));
    }
    match rb.retry_model {
        RetryModel::DeliveryLimit => {
            main.push(("delivery-limit", json!(r.max_attempts.saturating_sub(1))));
            main.extend(into_dlq());
            // Quorum dead-lettering is at-most-once unless both of these are set.
            if rb.at_least_once {
                main.push(("dead-letter-strategy", json!("at-least-once")));
                main.push(("overflow", json!("reject-publish")));
            }
        }
        RetryModel::Ttl => match r.retry_stages.first() {
            // In policy mode (and in arguments mode with `rejectToRetry`) a rejected message
            // goes to the first retry queue rather than being dropped.
            Some(first) if rb.reject_to_retry => {
                main.push(("dead-letter-exchange", json!("")));
                main.push(("dead-letter-routing-key", json!(first.name)));
            }
            // A one-attempt channel (no retry queue) dead-letters into its DLQ, through the
            // default exchange unless the spec names one: a reject (or an expiry) is dead.
            None => main.extend(into_dlq()),
            // Arguments mode with retry queues: the main queue stays plain, as consumers
            // declare it, unless the spec names a dead-letter exchange (the default one
            // included): then a reject goes to the DLQ.
            _ if rb.dead_letter_exchange.is_some() => main.extend(into_dlq()),
            _ => {}
        },
    }
    main
}

/// A queue and the policy of its name: the settings go to x-arguments or to the policy by
/// the channel's dlx mode, and the policy is absent when it carries nothing.
fn queue_and_policy(r: &Resolved, rb: &RabbitResolved, q: QueueSettings) -> [Desired; 2] {
    let vhost = rb.vhost.as_str();
    let mut props = Props::new();
    props.insert("durable".into(), json!(true));
    props.insert("auto_delete".into(), json!(false));
    props.insert(
        "type".into(),
        json!(match rb.queue_type {
            QueueType::Classic => "classic",
            QueueType::Quorum => "quorum",
        }),
    );
    for key in OWNED_ARGUMENTS {
        props.insert(format!("arguments.{key}"), Value::Null);
    }
    if rb.queue_type == QueueType::Quorum {
        props.insert("arguments.x-queue-type".into(), json!("quorum"));
    }
    if rb.dlx == DlxMode::Arguments {
        for (k, v) in &q.settings {
            props.insert(format!("arguments.x-{k}"), v.clone());
        }
    }
    let queue = Desired {
        id: id(&r.target, Kind::Queue, vhost, q.name),
        channel: r.channel.clone(),
        role: q.role,
        props,
        immutable: true,
        present: true,
    };
    // The policy carrying the settings in policy mode; in arguments mode (or with nothing
    // to set) a dlqctl policy of that name must not exist.
    let present = rb.dlx == DlxMode::Policy && !q.settings.is_empty();
    let mut props = Props::new();
    if present {
        props.insert("pattern".into(), json!(exact_pattern(q.name)));
        props.insert("apply-to".into(), json!("queues"));
        props.insert("priority".into(), json!(rb.policy_priority));
        for (k, v) in q.settings {
            props.insert(format!("definition.{k}"), v);
        }
    }
    let policy = Desired {
        id: id(&r.target, Kind::Policy, vhost, q.name),
        channel: r.channel.clone(),
        role: q.policy_role,
        props,
        immutable: false,
        present,
    };
    [queue, policy]
}

/// The channel's exchange and its bindings to the main queue, one per routing key.
fn exchange_and_bindings(r: &Resolved, rb: &RabbitResolved, x: &ExchangeResolved) -> Vec<Desired> {
    let vhost = rb.vhost.as_str();
    let mut out = vec![Desired {
        id: id(&r.target, Kind::Exchange, vhost, &x.name),
        channel: r.channel.clone(),
        role: Role::Exchange,
        props: exchange_props(x.kind),
        immutable: true,
        present: true,
    }];
    for key in &x.routing_keys {
        out.push(Desired {
            id: id(
                &r.target,
                Kind::Binding,
                vhost,
                &binding_name(&x.name, &r.main, key),
            ),
            channel: r.channel.clone(),
            role: Role::Binding,
            props: binding_props(&x.name, &r.main, key),
            immutable: true,
            present: true,
        });
    }
    out
}

/// The named dead-letter exchange and the DLQ's binding to it with the dead-letter routing key.
/// Their roles order them after the DLQ and before the queues and policies that dead-letter
/// into the exchange (and, deleting, after them).
fn dead_letter_exchange(
    r: &Resolved,
    rb: &RabbitResolved,
    x: &DeadLetterExchangeResolved,
) -> [Desired; 2] {
    let vhost = rb.vhost.as_str();
    [
        Desired {
            id: id(&r.target, Kind::Exchange, vhost, &x.name),
            channel: r.channel.clone(),
            role: Role::DeadLetterExchange,
            props: exchange_props(x.kind),
            immutable: true,
            present: true,
        },
        Desired {
            id: id(
                &r.target,
                Kind::Binding,
                vhost,
                &binding_name(&x.name, &r.dead_letter, &x.binding_key),
            ),
            channel: r.channel.clone(),
            role: Role::DeadLetterBinding,
            props: binding_props(&x.name, &r.dead_letter, &x.binding_key),
            immutable: true,
            present: true,
        },
    ]
}

/// What dlqctl declares every exchange with.
fn exchange_props(kind: ExchangeKind) -> Props {
    [
        ("type".to_owned(), json!(exchange_type(kind))),
        ("durable".to_owned(), json!(true)),
        ("auto_delete".to_owned(), json!(false)),
        ("internal".to_owned(), json!(false)),
    ]
    .into_iter()
    .collect()
}

fn binding_props(exchange: &str, queue: &str, key: &str) -> Props {
    [
        ("source".to_owned(), json!(exchange)),
        ("destination".to_owned(), json!(queue)),
        ("routing_key".to_owned(), json!(key)),
    ]
    .into_iter()
    .collect()
}

pub(super) fn exchange_type(k: ExchangeKind) -> &'static str {
    match k {
        ExchangeKind::Direct => "direct",
        ExchangeKind::Topic => "topic",
        ExchangeKind::Fanout => "fanout",
        ExchangeKind::Headers => "headers",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desired_of(rabbitmq: &str, retry: &str) -> Vec<Desired> {
        let text = format!(
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: o.pay}}\nspec:\n  target: r\n  retry: {retry}\n  rabbitmq: {rabbitmq}\n"
        );
        let ws = crate::spec::load::load_str("c.yaml", &text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let target = serde_json::from_value(
            json!({"backend": "rabbitmq", "url": "http://x", "ownership": {"prefixes": ["o"]}}),
        )
        .expect("target");
        let r =
            crate::spec::resolve::resolve(&ws.channels[0].value, "r", &target).expect("resolves");
        desired(&r)
    }

    fn props<'d>(ds: &'d [Desired], kind: Kind, name: &str) -> &'d Props {
        &ds.iter()
            .find(|d| d.id.kind == kind && d.id.name == name && d.present)
            .unwrap_or_else(|| panic!("no {kind:?} {name}"))
            .props
    }

    /// `spec.invalid`: a queue that dead-letters nowhere, its retention as a TTL (policy or
    /// argument, like the DLQ's), and nothing else of the channel points at it.
    #[test]
    fn the_invalid_message_queue_is_a_dead_end_with_its_own_ttl() {
        let ds = desired_of(
            "{}\n  invalid: {discard: {after: 2d, reason: r}}",
            "{maxAttempts: 1}",
        );
        let q = ds
            .iter()
            .find(|d| d.id.kind == Kind::Queue && d.id.name == "o.pay.invalid")
            .expect("the invalid queue");
        assert_eq!(q.role, Role::Invalid);
        let p = props(&ds, Kind::Policy, "o.pay.invalid");
        assert_eq!(p.get("definition.message-ttl"), Some(&json!(172_800_000)));
        assert!(!p.keys().any(|k| k.contains("dead-letter")), "{p:?}");
        for d in &ds {
            assert!(
                !d.props.values().any(|v| v == &json!("o.pay.invalid")),
                "{} points at the invalid queue",
                d.id
            );
        }
        let ds = desired_of(
            "{dlx: arguments}\n  invalid: {retention: 1d}",
            "{maxAttempts: 1}",
        );
        let q = props(&ds, Kind::Queue, "o.pay.invalid");
        assert_eq!(q.get("arguments.x-message-ttl"), Some(&json!(86_400_000)));
        assert_eq!(
            q.get("arguments.x-dead-letter-exchange"),
            Some(&Value::Null)
        );
        // No retention: no policy of its name may exist.
        let ds = desired_of("{}\n  invalid: {}", "{maxAttempts: 1}");
        assert!(
            ds.iter()
                .any(|d| d.id.kind == Kind::Policy && d.id.name == "o.pay.invalid" && !d.present)
        );
    }

    #[test]
    fn a_named_dead_letter_exchange_routes_the_main_queues_dead_letters_to_the_dlq() {
        let dlx = "{deadLetterExchange: {name: \"{channel}.dlx\", routingKey: \"{channel}.dead\"}";
        // Policy mode, no retry queue: the main queue's policy points at the exchange.
        let ds = desired_of(&format!("{dlx}}}"), "{maxAttempts: 1}");
        let p = props(&ds, Kind::Policy, "o.pay");
        assert_eq!(
            p.get("definition.dead-letter-exchange"),
            Some(&json!("o.pay.dlx"))
        );
        assert_eq!(
            p.get("definition.dead-letter-routing-key"),
            Some(&json!("o.pay.dead"))
        );
        let b = props(&ds, Kind::Binding, "o.pay.dlx -> o.pay.dlq [o.pay.dead]");
        assert_eq!(b.get("destination"), Some(&json!("o.pay.dlq")));
        assert_eq!(
            props(&ds, Kind::Exchange, "o.pay.dlx").get("type"),
            Some(&json!("direct"))
        );

        // Arguments mode with retry queues: a reject on the main queue means dead.
        let ds = desired_of(
            &format!("{dlx}, dlx: arguments}}"),
            "{maxAttempts: 3, backoff: {initial: 1s}}",
        );
        let q = props(&ds, Kind::Queue, "o.pay");
        assert_eq!(
            q.get("arguments.x-dead-letter-exchange"),
            Some(&json!("o.pay.dlx"))
        );
        assert_eq!(
            q.get("arguments.x-dead-letter-routing-key"),
            Some(&json!("o.pay.dead"))
        );

        // Policy mode with retry queues: a reject still goes round the retry loop.
        let ds = desired_of(
            &format!("{dlx}}}"),
            "{maxAttempts: 3, backoff: {initial: 1s}}",
        );
        let p = props(&ds, Kind::Policy, "o.pay");
        assert_eq!(p.get("definition.dead-letter-exchange"), Some(&json!("")));
        assert_eq!(
            p.get("definition.dead-letter-routing-key"),
            Some(&json!("o.pay.retry"))
        );

        // A delivery limit dead-letters through it; the routing key defaults to the DLQ's name.
        let ds = desired_of(
            "{queueType: quorum, retryModel: deliveryLimit, deadLetterExchange: {name: o.dlx}}",
            "{maxAttempts: 4}",
        );
        let p = props(&ds, Kind::Policy, "o.pay");
        assert_eq!(
            p.get("definition.dead-letter-exchange"),
            Some(&json!("o.dlx"))
        );
        assert_eq!(
            p.get("definition.dead-letter-routing-key"),
            Some(&json!("o.pay.dlq"))
        );
    }

    #[test]
    fn the_exchange_and_binding_go_after_the_dlq_and_before_what_dead_letters_into_them() {
        assert!(Role::DeadLetter < Role::DeadLetterExchange);
        assert!(Role::DeadLetterExchange < Role::DeadLetterBinding);
        assert!(Role::DeadLetterBinding < Role::DeadLetterPolicy);
        assert!(Role::DeadLetterBinding < Role::Main);
        assert!(Role::DeadLetterBinding < Role::MainPolicy);
    }
}
