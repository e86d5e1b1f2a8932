//! The draw door: how `dlqctl graph` draws a channel on this backend. SQS: redelivered after the visibility timeout; no retry queue; CloudWatch alarms watch the queues. Pure.

use crate::backend::kit::draw::{Draw, Drawing, Retries};
use crate::resource::Desired;
use crate::spec::resolve::Resolved;

impl Draw for super::Sqs {
    fn drawing(r: &Resolved, desired: &[Desired], _attempts: &str) -> Drawing {
        Drawing {
            noun: "queue",
            default_keep: "until consumed",
            retries: Retries::Redeliver,
            last_failure: format!("after {} receives", r.max_attempts),
            alarms: Some(desired.iter().filter_map(super::alarms::drawn).collect()),
            alerts_as: "CloudWatch alarm",
        }
    }
}
