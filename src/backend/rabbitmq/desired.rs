//! RabbitMQ desired state (pure, no I/O): a resolved channel becomes its queues (main, retry
//! per delay, DLQ), their policies or x-arguments, and the channel's exchange and bindings.

use serde_json::{Value, json};

use super::*;
use crate::resource::{Desired, Props, Role};
use crate::spec::model::{DlxMode, ExchangeKind, QueueType, RetryModel};
use crate::spec::resolve::{ExchangeResolved, RabbitResolved, Resolved};

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
    out
}

/// One queue of the channel, its role and its policy's role, and the settings it carries.
struct QueueSettings<'r> {
    name: &'r str,
    role: Role,
    policy_role: Role,
    settings: Settings,
}

/// What each queue carries, DLQ first, then a retry queue per delay, then the main queue.
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

/// The main queue's settings: its retention, and where it dead-letters for the retry model
/// (the DLQ after a delivery limit; the first retry queue in a TTL loop in policy mode).
fn main_settings(r: &Resolved, rb: &RabbitResolved) -> Settings {
    let dl_exchange = || ("dead-letter-exchange", json!(""));
    let mut main = Settings::new();
    if let Some(t) = r.retention {
        main.push(("message-ttl", json!(t.as_millis())));
    }
    match rb.retry_model {
        RetryModel::DeliveryLimit => {
            main.push(("delivery-limit", json!(r.max_attempts.saturating_sub(1))));
            main.push(dl_exchange());
            main.push(("dead-letter-routing-key", json!(r.dead_letter)));
            // Quorum dead-lettering is at-most-once unless both of these are set.
            main.push(("dead-letter-strategy", json!("at-least-once")));
            main.push(("overflow", json!("reject-publish")));
        }
        RetryModel::Ttl => {
            // In policy mode a rejected message goes to the first retry queue rather than being
            // dropped. In arguments mode the main queue stays plain, as consumers declare it.
            if rb.dlx == DlxMode::Policy
                && let Some(first) = r.retry_stages.first()
            {
                main.push(dl_exchange());
                main.push(("dead-letter-routing-key", json!(first.name)));
            }
        }
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
        props: [
            ("type".to_owned(), json!(exchange_type(x.kind))),
            ("durable".to_owned(), json!(true)),
            ("auto_delete".to_owned(), json!(false)),
            ("internal".to_owned(), json!(false)),
        ]
        .into_iter()
        .collect(),
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
            props: [
                ("source".to_owned(), json!(x.name)),
                ("destination".to_owned(), json!(r.main)),
                ("routing_key".to_owned(), json!(key)),
            ]
            .into_iter()
            .collect(),
            immutable: true,
            present: true,
        });
    }
    out
}

pub(super) fn exchange_type(k: ExchangeKind) -> &'static str {
    match k {
        ExchangeKind::Direct => "direct",
        ExchangeKind::Topic => "topic",
        ExchangeKind::Fanout => "fanout",
        ExchangeKind::Headers => "headers",
    }
}
