//! RabbitMQ desired state (pure, no I/O): a resolved channel becomes its queues (main, retry
//! per delay, DLQ), their policies or x-arguments, and the channel's exchange and bindings.

use serde_json::{Value, json};

use super::*;
use crate::resource::{Desired, Props, Role};
use crate::spec::model::{DlxMode, ExchangeKind, QueueType, RetryModel};
use crate::spec::resolve::Resolved;

/// What one queue should carry, as (policy key, value): written to a policy definition in
/// policy mode or as `x-` arguments in arguments mode.
pub(super) type Settings = Vec<(&'static str, Value)>;

/// The desired resources of one channel (pure).
pub fn desired(r: &Resolved) -> Vec<Desired> {
    let Some(rb) = &r.rabbitmq else {
        return Vec::new();
    };
    let vhost = rb.vhost.as_str();
    let mut out = Vec::new();
    let dl_exchange = || ("dead-letter-exchange", json!(""));
    let mut queues: Vec<(&str, Role, Role, Settings)> = Vec::new();

    let mut dlq = Settings::new();
    if let Some(t) = r.dead_letter_retention {
        dlq.push(("message-ttl", json!(t.as_millis())));
    }
    queues.push((
        &r.dead_letter,
        Role::DeadLetter,
        Role::DeadLetterPolicy,
        dlq,
    ));

    for stage in &r.retry_stages {
        queues.push((
            &stage.name,
            Role::Retry,
            Role::RetryPolicy,
            vec![
                ("message-ttl", json!(stage.delay.as_millis())),
                dl_exchange(),
                ("dead-letter-routing-key", json!(r.main)),
            ],
        ));
    }

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
    queues.push((&r.main, Role::Main, Role::MainPolicy, main));

    for (name, role, policy_role, settings) in queues {
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
            for (k, v) in &settings {
                props.insert(format!("arguments.x-{k}"), v.clone());
            }
        }
        out.push(Desired {
            id: id(&r.target, Kind::Queue, vhost, name),
            channel: r.channel.clone(),
            role,
            props,
            immutable: true,
            present: true,
        });
        // The policy carrying the settings in policy mode; in arguments mode (or with nothing
        // to set) a dlqctl policy of that name must not exist.
        let present = rb.dlx == DlxMode::Policy && !settings.is_empty();
        let mut props = Props::new();
        if present {
            props.insert("pattern".into(), json!(exact_pattern(name)));
            props.insert("apply-to".into(), json!("queues"));
            props.insert("priority".into(), json!(rb.policy_priority));
            for (k, v) in settings {
                props.insert(format!("definition.{k}"), v);
            }
        }
        out.push(Desired {
            id: id(&r.target, Kind::Policy, vhost, name),
            channel: r.channel.clone(),
            role: policy_role,
            props,
            immutable: false,
            present,
        });
    }

    if let Some(x) = &rb.exchange {
        out.push(Desired {
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
        });
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
