//! SQS desired state (pure, no I/O): a resolved channel becomes its DLQ, its main queue with
//! the redrive policy, and the DLQ's two alarms.

use serde_json::{Value, json};

use super::alarms;
use super::*;
use crate::resource::{Desired, Props, Role};
use crate::spec::resolve::Resolved;

/// The desired resources of one channel (pure): DLQ, main queue, two alarms.
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
    let mut out: Vec<Desired> = [
        (&r.dead_letter, Role::DeadLetter, dlq),
        (&r.main, Role::Main, main),
    ]
    .into_iter()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The payments example, resolved against an SQS target.
    fn payments() -> Resolved {
        crate::backend::resolved_example(
            include_str!("../../../examples/payments-sqs.yaml"),
            "local-sqs",
            json!({"backend": "sqs", "region": "us-east-1"}),
        )
    }

    #[test]
    fn the_dlq_comes_first_keeps_its_letters_and_dead_letters_nowhere() {
        let r = payments();
        let ds = desired(&r);
        let roles: Vec<Role> = ds.iter().map(|d| d.role).collect();
        assert_eq!(
            roles,
            [Role::DeadLetter, Role::Main, Role::Alarm, Role::Alarm]
        );
        assert!(
            ds.iter()
                .all(|d| d.present && !d.immutable && d.channel == r.channel)
        );
        let dlq = &ds[0];
        assert_eq!(
            dlq.id,
            queue_id("local-sqs", "payments-transactions-pending-dlq")
        );
        assert_eq!(dlq.props.get(RETENTION), Some(&json!(14 * 86_400)));
        assert_eq!(dlq.props.get(VISIBILITY), Some(&json!(30)));
        assert_eq!(dlq.props.get(FIFO), Some(&json!(false)));
        assert_eq!(dlq.props.get(DLQ_TARGET), Some(&Value::Null));
        assert_eq!(dlq.props.get(MAX_RECEIVE), Some(&Value::Null));
        assert_eq!(
            dlq.props.get(ALLOW_SOURCES),
            Some(&json!(["payments-transactions-pending"]))
        );
    }

    #[test]
    fn the_main_queue_points_at_the_dlq_after_max_attempts() {
        let ds = desired(&payments());
        let main = &ds[1];
        assert_eq!(
            main.id,
            queue_id("local-sqs", "payments-transactions-pending")
        );
        assert_eq!(main.props.get(RETENTION), Some(&json!(4 * 86_400)));
        assert_eq!(
            main.props.get(DLQ_TARGET),
            Some(&json!("payments-transactions-pending-dlq"))
        );
        assert_eq!(main.props.get(MAX_RECEIVE), Some(&json!(5)));
        assert!(!main.props.contains_key(ALLOW_SOURCES));
    }

    #[test]
    fn a_channel_on_another_backend_has_no_sqs_resources() {
        let mut r = payments();
        r.sqs = None;
        assert!(desired(&r).is_empty());
    }
}
