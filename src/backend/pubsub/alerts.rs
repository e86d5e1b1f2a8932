//! Pub/Sub's alerts door: its depth and age are Cloud Monitoring metrics, which Prometheus
//! does not scrape; no Prometheus rule is written for it.

use crate::backend::kit::alerts::{AlertHome, Alerts};
use crate::spec::resolve::Resolved;

impl Alerts for super::Pubsub {
    fn home() -> AlertHome {
        AlertHome::CloudMonitoring
    }

    fn native_depth(_r: &Resolved, _matchers: &str, _n: u64) -> Option<String> {
        None
    }
}
