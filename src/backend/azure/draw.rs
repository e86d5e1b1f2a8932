//! The draw door: how `dlqctl graph` draws a channel on this backend. Azure Service Bus
//! redelivers an abandoned message at once, then dead-letters it after maxDeliveryCount
//! deliveries; no retry queue; its alarms are the Prometheus rules `dlqctl alerts` writes.
//! Pure.

use crate::backend::kit::draw::{Draw, Drawing, Retries};
use crate::resource::Desired;
use crate::spec::resolve::Resolved;

impl Draw for super::Azure {
    fn drawing(r: &Resolved, _desired: &[Desired], _attempts: &str) -> Drawing {
        let topic = r.azure.as_ref().is_some_and(|a| a.subscription.is_some());
        Drawing {
            noun: if topic { "topic" } else { "queue" },
            default_keep: "until consumed",
            retries: Retries::Redeliver,
            last_failure: format!(
                "after {} deliveries (MaxDeliveryCountExceeded)",
                r.max_attempts
            ),
            alarms: None,
            alerts_as: "alert rule",
        }
    }
}
