//! The draw door: how `dlqctl graph` draws a channel on this backend. Pub/Sub: redelivered with its own backoff, then dead-lettered; no retry topic; its alarms are the Cloud Monitoring policies `dlqctl alerts --format cloud-monitoring` writes. Pure.

use crate::backend::kit::draw::{Draw, Drawing, Retries};
use crate::resource::Desired;
use crate::spec::resolve::Resolved;

impl Draw for super::Pubsub {
    fn drawing(r: &Resolved, _desired: &[Desired], _attempts: &str) -> Drawing {
        Drawing {
            noun: "topic",
            default_keep: "until consumed",
            retries: Retries::Redeliver,
            last_failure: format!("after {} delivery attempts", r.max_attempts),
            alarms: None,
            // `dlqctl alerts --format cloud-monitoring` writes them, one policy per tier.
            alerts_as: "Cloud Monitoring policy",
        }
    }
}
