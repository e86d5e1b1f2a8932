//! Pub/Sub desired state (pure, no I/O): a resolved channel becomes its dead-letter topic,
//! that topic's subscription (where dead letters wait), its main topic, and the consumer's
//! subscription with the dead-letter and retry policies, in that apply order (the roles order
//! them: a subscription needs its topic, and a dead-letter policy needs its topic to exist).

use serde_json::{Value, json};

use super::*;
use crate::resource::{Desired, Role};
use crate::spec::resolve::{PUBSUB_DEFAULT_ACK_DEADLINE, Resolved};

/// The desired resources of one channel (pure).
pub fn desired(r: &Resolved) -> Vec<Desired> {
    let Some(p) = &r.pubsub else {
        return Vec::new();
    };
    let opt = |d: Option<crate::spec::duration::Duration>| d.map_or(Value::Null, secs);
    let (min_backoff, max_backoff) = p
        .backoff
        .map_or((Value::Null, Value::Null), |(a, b)| (secs(a), secs(b)));
    let expiry = p.expire_after.map_or_else(|| json!(NEVER), secs);
    let dead_letter_sub: Props = [
        (TOPIC, json!(r.dead_letter)),
        (ACK_DEADLINE, secs(PUBSUB_DEFAULT_ACK_DEADLINE)),
        (RETENTION, opt(r.dead_letter_retention)),
        // Dead letters do not dead-letter further, and wait for people: no policies, and no
        // expiry unless the spec says (`pubsub.expireAfter`, what an adopted estate has).
        (DEAD_LETTER_TOPIC, Value::Null),
        (MAX_ATTEMPTS, Value::Null),
        (MIN_BACKOFF, Value::Null),
        (MAX_BACKOFF, Value::Null),
        (EXPIRY, expiry.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let main_sub: Props = [
        (TOPIC, json!(r.main)),
        (ACK_DEADLINE, secs(p.ack_deadline)),
        (RETENTION, opt(r.retention)),
        (DEAD_LETTER_TOPIC, json!(r.dead_letter)),
        (MAX_ATTEMPTS, json!(r.max_attempts)),
        (MIN_BACKOFF, min_backoff),
        (MAX_BACKOFF, max_backoff),
        (EXPIRY, expiry),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    [
        (
            topic_id(&r.target, &r.dead_letter),
            Role::DeadLetter,
            Props::new(),
        ),
        (
            subscription_id(&r.target, &p.dead_letter_subscription),
            Role::DeadLetterSubscription,
            dead_letter_sub,
        ),
        (topic_id(&r.target, &r.main), Role::Main, Props::new()),
        (
            subscription_id(&r.target, &p.subscription),
            Role::Subscription,
            main_sub,
        ),
    ]
    .into_iter()
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
