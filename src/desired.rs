//! Spec → desired resources: pure, per backend, no I/O.

use crate::resource::Desired;
use crate::spec::model::Backend;
use crate::spec::resolve::Resolved;

/// Every resource a channel needs on its backend.
pub fn for_channel(r: &Resolved) -> Vec<Desired> {
    match r.backend {
        Backend::Rabbitmq => crate::backend::rabbitmq::desired(r),
        Backend::Sqs => crate::backend::sqs::desired(r),
        Backend::Kafka => crate::backend::kafka::desired(r),
    }
}
