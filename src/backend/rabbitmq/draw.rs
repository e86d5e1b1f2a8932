//! The draw door: how `dlqctl graph` draws a channel on this backend. RabbitMQ: retry queues that send a failure back to the main queue. Pure.

use crate::backend::kit::draw::{Draw, Drawing, Retries};
use crate::resource::Desired;
use crate::spec::model::RetryModel;
use crate::spec::resolve::Resolved;

impl Draw for super::Rabbitmq {
    fn drawing(r: &Resolved, _desired: &[Desired], attempts: &str) -> Drawing {
        Drawing {
            noun: "queue",
            default_keep: "until consumed",
            retries: Retries::Loop,
            last_failure: match r.rabbitmq.as_ref().map(|rb| rb.retry_model) {
                Some(RetryModel::DeliveryLimit) => format!("dead-lettered {attempts}"),
                _ => format!("fails, {attempts}"),
            },
            alarms: None,
            alerts_as: "alert rule",
        }
    }
}
