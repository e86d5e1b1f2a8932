//! The alerts door: Azure Service Bus channels' alerts are Prometheus rules over `dlqctl
//! exporter` in this version (Azure Monitor's `DeadletteredMessages` metric alerts are not
//! written yet: docs/azure.md). Pure.

use crate::backend::kit::alerts::{AlertHome, Alerts};
use crate::spec::resolve::Resolved;

impl Alerts for super::Azure {
    fn home() -> AlertHome {
        AlertHome::Prometheus
    }

    fn native_depth(_r: &Resolved, _matchers: &str, _n: u64) -> Option<String> {
        None
    }
}
