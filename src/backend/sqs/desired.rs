//! SQS desired state (pure, no I/O): a resolved channel becomes its DLQ, its invalid-message
//! queue if the spec asks for one (RedriveAllowPolicy `denyAll`: no queue may dead-letter into
//! it, consumers send to it), its main queue with the redrive policy, and the alarms on the
//! DLQ (and on the invalid-message queue).

use serde_json::{Value, json};

use super::alarms;
use super::*;
use crate::resource::{Desired, Props, Role};
use crate::spec::resolve::Resolved;

/// The desired resources of one channel (pure): DLQ, invalid-message queue, main queue,
/// alarms.
pub fn desired(r: &Resolved) -> Vec<Desired> {
    let Some(s) = &r.sqs else { return Vec::new() };
    let secs = |d: Option<crate::spec::duration::Duration>| {
        d.map_or(Value::Null, |d| json!(d.as_millis() / 1000))
    };
    let visibility = json!(s.visibility_timeout.as_millis() / 1000);
    let dlq: Props = [
        (RETENTION, secs(r.dead_letter_retention)),
        (VISIBILITY, visibility.clone()),
        (FIFO, json!(s.fifo)),
        // A DLQ does not dead-letter further: a redrive policy on it is removed.
        (DLQ_TARGET, Value::Null),
        (MAX_RECEIVE, Value::Null),
        (ALLOW_PERMISSION, json!("byQueue")),
        (ALLOW_SOURCES, json!([r.main])),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    // Consumers send poison messages here themselves: no queue may dead-letter into it.
    let invalid = r.invalid.as_ref().map(|i| {
        let props: Props = [
            (RETENTION, secs(i.retention)),
            (VISIBILITY, visibility.clone()),
            (FIFO, json!(s.fifo)),
            (DLQ_TARGET, Value::Null),
            (MAX_RECEIVE, Value::Null),
            (ALLOW_PERMISSION, json!("denyAll")),
            (ALLOW_SOURCES, Value::Null),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        (&i.name, Role::Invalid, props)
    });
    let main: Props = [
        (RETENTION, secs(r.retention)),
        (VISIBILITY, visibility),
        (FIFO, json!(s.fifo)),
        (DLQ_TARGET, json!(r.dead_letter)),
        (MAX_RECEIVE, json!(r.max_attempts)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let mut out: Vec<Desired> = std::iter::once((&r.dead_letter, Role::DeadLetter, dlq))
        .chain(invalid)
        .chain([(&r.main, Role::Main, main)])
        .map(|(name, role, props)| Desired {
            id: queue_id(&r.target, name),
            channel: r.channel.clone(),
            role,
            props,
            immutable: false,
            present: true,
        })
        .collect();
    out.extend(alarms::desired(r));
    out
}
