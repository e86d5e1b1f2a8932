//! The draw door: how `dlqctl graph` draws a channel on this backend. Pub/Sub: redelivered with its own backoff, then dead-lettered; no retry topic. Pure.

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
        }
    }
}
