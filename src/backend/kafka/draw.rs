//! The draw door: how `dlqctl graph` draws a channel on this backend. Kafka: a chain of retry topics, then the dead-letter topic. Pure.

use crate::backend::kit::draw::{Draw, Drawing, Retries};
use crate::resource::Desired;
use crate::spec::resolve::Resolved;

impl Draw for super::Kafka {
    fn drawing(_r: &Resolved, _desired: &[Desired], attempts: &str) -> Drawing {
        Drawing {
            noun: "topic",
            default_keep: "for the broker's default retention",
            retries: Retries::Chain,
            last_failure: format!("fails, {attempts}"),
            alarms: None,
            alerts_as: "alert rule",
        }
    }
}
