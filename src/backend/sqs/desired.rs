//! SQS desired state (pure, no I/O): a resolved channel becomes its DLQ, its invalid-message
//! queue if the spec asks for one (RedriveAllowPolicy `denyAll`: no queue may dead-letter into
//! it, consumers send to it), its main queue with the redrive policy, and the alarms on the
//! DLQ (and on the invalid-message queue).

use serde_json::{Value, json};

use super::alarms;
use super::*;
use crate::resource::{Desired, Props, Role};
use crate::spec::access::Encryption;
use crate::spec::resolve::Resolved;

/// The encryption and policy keys of one queue, where the spec owns them. A KMS key turns
/// SSE-SQS off (AWS does so by itself; moto keeps it on unless told). Without a KMS key the
/// data key reuse period is not owned: it means nothing then.
fn protection(props: &mut Props, encryption: Option<&Encryption>, policy: Option<&Value>) {
    let mut set = |k: &str, v: Value| {
        props.insert(k.to_owned(), v);
    };
    match encryption {
        Some(Encryption::Kms { key, reuse_secs }) => {
            set(KMS_KEY, json!(key));
            set(KMS_REUSE, json!(reuse_secs));
            set(MANAGED_SSE, json!(false));
        }
        Some(e) => {
            set(KMS_KEY, Value::Null);
            set(MANAGED_SSE, json!(*e == Encryption::Managed));
        }
        None => {}
    }
    if let Some(p) = policy {
        set(POLICY, p.clone());
    }
}

/// The desired resources of one channel (pure): DLQ, invalid-message queue, main queue,
/// alarms. The invalid-message queue is encrypted like the DLQ (poison messages are dead
/// letters too); its access policy is not owned.
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
        (ALLOW_SOURCES, json!(allowed_sources(r))),
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
    let (mut dlq, mut main) = (dlq, main);
    protection(&mut main, s.encryption.as_ref(), s.policy.as_ref());
    protection(
        &mut dlq,
        s.dead_letter_encryption.as_ref(),
        s.dead_letter_policy.as_ref(),
    );
    let invalid = invalid.map(|(name, role, mut props)| {
        protection(&mut props, s.dead_letter_encryption.as_ref(), None);
        (name, role, props)
    });
    // A channel sharing another's DLQ (`deadLetter.of`) leaves it, and its alarms, to the owner.
    let owned = r.dead_letter_of.is_none();
    let mut out: Vec<Desired> = owned
        .then_some((&r.dead_letter, Role::DeadLetter, dlq))
        .into_iter()
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
    if owned {
        out.extend(alarms::desired(r));
    }
    out
}

/// The queues the DLQ's RedriveAllowPolicy lets dead-letter into it: the channel's main queue
/// and those of the channels sharing it (`deadLetter.of`), sorted as SQS's are read.
fn allowed_sources(r: &Resolved) -> Vec<&str> {
    let mut v: Vec<&str> = std::iter::once(r.main.as_str())
        .chain(r.dead_letter_sources.iter().map(String::as_str))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The queues' props of a channel whose `spec` ends with `extra`: DLQ, main queue.
    fn queues(extra: &str) -> (Props, Props) {
        let text = format!(
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: pay}}\nspec:\n  target: s\n  retry: {{maxAttempts: 3}}\n{extra}"
        );
        let ws = crate::spec::load::load_str("c.yaml", &text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let target = serde_json::from_value(json!({"backend": "sqs", "region": "us-east-1"}))
            .expect("target");
        let r =
            crate::spec::resolve::resolve(&ws.channels[0].value, "s", &target).expect("resolves");
        let d = desired(&r);
        (d[0].props.clone(), d[1].props.clone())
    }

    #[test]
    fn owned_encryption_becomes_the_attributes_and_a_kms_key_turns_sse_sqs_off() {
        let (dlq, main) = queues(
            "  sqs: {encryption: {kms: alias/k, dataKeyReuse: 10m}}\n  deadLetter: {sqs: {encryption: {managed: true}}}\n",
        );
        assert_eq!(main.get(KMS_KEY), Some(&json!("alias/k")));
        assert_eq!(main.get(KMS_REUSE), Some(&json!(600)));
        assert_eq!(main.get(MANAGED_SSE), Some(&json!(false)));
        assert_eq!(dlq.get(KMS_KEY), Some(&Value::Null), "a key is removed");
        assert_eq!(
            dlq.get(KMS_REUSE),
            None,
            "no key: the reuse period is not owned"
        );
        assert_eq!(dlq.get(MANAGED_SSE), Some(&json!(true)));

        let (dlq, _) = queues("  sqs: {encryption: {kms: alias/k}}\n");
        assert_eq!(
            dlq.get(KMS_KEY),
            Some(&json!("alias/k")),
            "the DLQ is encrypted alike"
        );
        assert_eq!(
            dlq.get(KMS_REUSE),
            Some(&json!(300)),
            "SQS's default reuse period"
        );

        let (dlq, main) = queues("");
        for p in [dlq, main] {
            assert!(
                [KMS_KEY, KMS_REUSE, MANAGED_SSE, POLICY]
                    .iter()
                    .all(|k| !p.contains_key(*k)),
                "unset: not owned {p:?}"
            );
        }
    }

    #[test]
    fn policies_belong_to_their_own_queue_and_are_normalised() {
        let (dlq, main) = queues(
            "  sqs:\n    policy: '{\"Version\": \"2012-10-17\", \"Statement\": {\"Sid\": \"a\"}}'\n",
        );
        assert_eq!(
            main.get(POLICY),
            Some(&json!({"Version": "2012-10-17", "Statement": [{"Sid": "a"}]}))
        );
        assert_eq!(
            dlq.get(POLICY),
            None,
            "the main queue's policy names the main queue"
        );
        let (dlq, _) = queues(
            "  deadLetter:\n    sqs:\n      policy: {Version: \"2012-10-17\", Statement: [{Sid: b}, {Sid: a}]}\n",
        );
        assert_eq!(
            dlq.get(POLICY),
            Some(&json!({"Version": "2012-10-17", "Statement": [{"Sid": "a"}, {"Sid": "b"}]}))
        );
    }

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
    fn encryption_from_defaults_is_replaced_whole_not_merged() {
        let text = "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  s: {backend: sqs, region: us-east-1}\n---\napiVersion: dlqctl/v1\nkind: Defaults\nspec:\n  sqs: {encryption: {kms: alias/k, dataKeyReuse: 10m}}\n---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: pay}\nspec:\n  target: s\n  retry: {maxAttempts: 3}\n  sqs: {encryption: {managed: true}}\n";
        let ws = crate::spec::load::load_str("c.yaml", text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let e = ws.channels[0]
            .value
            .spec
            .sqs
            .as_ref()
            .and_then(|s| s.encryption.clone());
        assert_eq!(
            e,
            Some(crate::spec::model::SqsEncryption {
                managed: Some(true),
                ..Default::default()
            }),
            "no `kms` or `dataKeyReuse` merged in from Defaults"
        );
    }

    #[test]
    fn a_dead_letter_sqs_block_in_defaults_reaches_only_sqs_channels() {
        let text = "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  s: {backend: sqs, region: us-east-1}\n  r: {backend: rabbitmq, url: \"http://127.0.0.1:15672\", ownership: {prefixes: [o.]}}\n---\napiVersion: dlqctl/v1\nkind: Defaults\nspec:\n  deadLetter: {sqs: {encryption: {kms: alias/k}}}\n---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: o.pay}\nspec:\n  target: r\n  retry: {maxAttempts: 3, backoff: {initial: 1s}}\n---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: pay}\nspec:\n  target: s\n  retry: {maxAttempts: 3}\n";
        let ws = crate::spec::load::load_str("c.yaml", text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let dl_sqs = |i: usize| {
            ws.channels[i]
                .value
                .spec
                .dead_letter
                .as_ref()
                .and_then(|d| d.sqs.clone())
        };
        assert!(dl_sqs(0).is_none(), "not on the RabbitMQ channel");
        assert!(dl_sqs(1).is_some(), "on the SQS channel");
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
