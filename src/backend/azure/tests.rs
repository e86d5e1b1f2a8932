//! The Service Bus pure doors: what a channel becomes (queue or topic + subscription, the
//! forward target), the plan's rules, and the note on the built-in subqueue.

use serde_json::json;

use super::*;
use crate::backend::kit::doors::Plan;
use crate::resource::Role;

fn target() -> serde_json::Value {
    json!({
        "backend": "azure-servicebus",
        "subscriptionId": "00000000-0000-0000-0000-000000000000",
        "resourceGroup": "rg",
        "namespace": "dlqctl-test",
        "accessTokenEnv": "AZURE_ACCESS_TOKEN",
        "ownership": {"prefixes": ["orders"]}
    })
}

fn resolved(spec: &str) -> crate::spec::resolve::Resolved {
    let text = format!(
        "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: orders}}\nspec:\n  target: az\n  retry: {{maxAttempts: 5}}\n  alarms: {{depth: {{above: 0}}}}\n{spec}"
    );
    crate::backend::resolved_example(&text, "az", target())
}

#[test]
fn a_queue_keeps_its_dead_letters_in_the_built_in_subqueue() {
    let r = resolved("  retention: 7d\n");
    assert_eq!(r.dead_letter, "orders/$DeadLetterQueue");
    let d = Azure::desired(&r);
    assert_eq!(d.len(), 1, "the subqueue is no resource: {d:?}");
    assert_eq!(d[0].id, queue_id("az", "orders"));
    assert_eq!(d[0].role, Role::Main);
    assert_eq!(
        serde_json::to_value(&d[0].props).expect("json"),
        json!({
            "maxDeliveryCount": 5,
            "lockDuration": 60,
            "defaultMessageTimeToLive": 604800,
            "deadLetteringOnMessageExpiration": true,
            "forwardDeadLetteredMessagesTo": null
        })
    );
    let notes = Azure::notes(&d, &Default::default());
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].message.contains("orders/$DeadLetterQueue"),
        "{}",
        notes[0].message
    );
}

#[test]
fn a_named_dead_letter_queue_is_created_first_and_forwarded_to() {
    let r = resolved(
        "  deadLetter: {name: \"{channel}-dlq\", retention: 14d}\n  azure-servicebus: {lockDuration: 30s, deadLetteringOnMessageExpiration: false}\n",
    );
    assert_eq!(r.dead_letter, "orders-dlq");
    let d = Azure::desired(&r);
    let ids: Vec<_> = d.iter().map(|x| (x.role, x.id.name.as_str())).collect();
    assert_eq!(
        ids,
        [(Role::DeadLetter, "orders-dlq"), (Role::Main, "orders")]
    );
    assert_eq!(
        d[0].props.get(TIME_TO_LIVE).cloned().unwrap_or_default(),
        json!(14 * 86_400)
    );
    assert_eq!(
        d[0].props
            .get(DEAD_LETTERING_ON_EXPIRATION)
            .cloned()
            .unwrap_or_default(),
        json!(false)
    );
    assert_eq!(
        d[1].props
            .get(FORWARD_DEAD_LETTERS)
            .cloned()
            .unwrap_or_default(),
        json!("orders-dlq")
    );
    assert_eq!(
        d[1].props.get(LOCK_DURATION).cloned().unwrap_or_default(),
        json!(30)
    );
    assert_eq!(
        d[1].props.get(TIME_TO_LIVE).cloned().unwrap_or_default(),
        json!(null),
        "no retention: Service Bus's default"
    );
    assert_eq!(
        d[1].props
            .get(DEAD_LETTERING_ON_EXPIRATION)
            .cloned()
            .unwrap_or_default(),
        json!(false)
    );
    assert!(Azure::notes(&d, &Default::default()).is_empty());
}

#[test]
fn a_subscription_carries_the_settings_of_a_topic_channel() {
    let r = resolved("  azure-servicebus: {subscription: \"{channel}-billing\"}\n");
    assert_eq!(
        r.dead_letter,
        "orders/subscriptions/orders-billing/$DeadLetterQueue"
    );
    let d = Azure::desired(&r);
    assert_eq!(d.len(), 2);
    assert_eq!(d[0].id, topic_id("az", "orders"));
    assert!(
        d[0].props.is_empty(),
        "the topic holds no settings of the spec's"
    );
    assert_eq!(d[1].id, subscription_id("az", "orders", "orders-billing"));
    assert_eq!(d[1].id.name, "orders/subscriptions/orders-billing");
    assert_eq!(
        d[1].props
            .get(MAX_DELIVERY_COUNT)
            .cloned()
            .unwrap_or_default(),
        json!(5)
    );
}

#[test]
fn a_lower_or_new_time_to_live_is_destructive() {
    use crate::plan::{Action, Change, FieldChange};
    let r = resolved("  retention: 1h\n");
    let d = Azure::desired(&r).remove(0);
    let change = |old: serde_json::Value, new: serde_json::Value| {
        let field = FieldChange {
            key: TIME_TO_LIVE.into(),
            old: (!old.is_null()).then_some(old),
            new: Some(new),
        };
        let mut c = Change::of(&d, Action::Update, vec![field], Some(3));
        Azure::refine(&mut c);
        c.destructive
    };
    assert!(change(json!(86_400), json!(3600)).is_some());
    assert!(change(json!(null), json!(3600)).is_some());
    assert!(change(json!(3600), json!(86_400)).is_none());
}

#[test]
fn iso_durations_and_arms_never_become_seconds_and_null() {
    assert_eq!(iso_seconds("PT1M"), Some(60.0));
    assert_eq!(iso_seconds("P14D"), Some(1_209_600.0));
    assert_eq!(iso_seconds("P1DT1H1M1.5S"), Some(90_061.5));
    for bad in ["1M", "P1Y", "PT1X", "P", "PT5"] {
        assert_eq!(iso_seconds(bad), None, "{bad}");
    }
    assert_eq!(iso_text(&json!(90)).as_deref(), Some("PT90S"));
    assert_eq!(iso_text(&json!(1.5)).as_deref(), Some("PT1.5S"));
    let live = live_queue(&json!({"properties": {
        "maxDeliveryCount": 8, "lockDuration": "PT2M", "defaultMessageTimeToLive": NEVER,
        "deadLetteringOnMessageExpiration": true, "forwardDeadLetteredMessagesTo": "",
        "enableBatchedOperations": true,
        "countDetails": {"activeMessageCount": 2, "deadLetterMessageCount": 3}
    }}));
    assert_eq!(
        serde_json::to_value(&live.props).expect("json"),
        json!({
            "maxDeliveryCount": 8,
            "lockDuration": 120,
            "defaultMessageTimeToLive": null,
            "deadLetteringOnMessageExpiration": true,
            "forwardDeadLetteredMessagesTo": null
        }),
        "owned settings only; TimeSpan.MaxValue and an empty forward are unset"
    );
    assert_eq!(live.messages, Some(5));
}
