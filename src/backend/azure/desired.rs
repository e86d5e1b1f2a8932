//! Azure Service Bus desired state (pure, no I/O): the dead-letter queue when dead letters are
//! forwarded, then the main queue, or the main topic and its subscription, in that apply order
//! (the roles order them: `forwardDeadLetteredMessagesTo` names an entity that must exist).

use serde_json::{Value, json};

use super::*;
use crate::resource::{Desired, Props, Role};
use crate::spec::resolve::Resolved;

/// The desired resources of one channel (pure).
pub fn desired(r: &Resolved) -> Vec<Desired> {
    let Some(a) = &r.azure else {
        return Vec::new();
    };
    let props = |pairs: Vec<(&str, Value)>| -> Props {
        pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    };
    let ttl = |d: Option<crate::spec::duration::Duration>| d.map_or(Value::Null, secs);
    // The entity that carries the retry budget: the queue, or the topic's subscription.
    let entity = props(vec![
        (MAX_DELIVERY_COUNT, json!(r.max_attempts)),
        (LOCK_DURATION, secs(a.lock_duration)),
        (TIME_TO_LIVE, ttl(r.retention)),
        (
            DEAD_LETTERING_ON_EXPIRATION,
            json!(a.dead_lettering_on_expiration),
        ),
        (
            FORWARD_DEAD_LETTERS,
            a.forward_to.as_ref().map_or(Value::Null, |f| json!(f)),
        ),
    ]);
    let mut out = Vec::new();
    if let Some(f) = &a.forward_to {
        // Dead letters of a dead-letter queue would only hide them further: it expires them
        // (its retention) and forwards nothing.
        out.push((
            queue_id(&r.target, f),
            Role::DeadLetter,
            props(vec![
                (TIME_TO_LIVE, ttl(r.dead_letter_retention)),
                (DEAD_LETTERING_ON_EXPIRATION, json!(false)),
                (FORWARD_DEAD_LETTERS, Value::Null),
            ]),
        ));
    }
    match &a.subscription {
        None => out.push((queue_id(&r.target, &r.main), Role::Main, entity)),
        Some(s) => {
            out.push((topic_id(&r.target, &r.main), Role::Main, Props::new()));
            out.push((
                subscription_id(&r.target, &r.main, s),
                Role::Subscription,
                entity,
            ));
        }
    }
    out.into_iter()
        .map(|(id, role, props)| Desired {
            id,
            channel: r.channel.clone(),
            role,
            props,
            immutable: false,
            present: true,
        })
        .collect()
}
