//! Call counts per API, shared by every wire client: what `plan --stats` prints and what the
//! call-count tests and benchmarks check.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Calls made, per API (`GET /api/queues/{vhost}`), and retries.
#[derive(Debug, Default)]
pub struct Stats {
    calls: Mutex<BTreeMap<String, u64>>,
}

impl Stats {
    pub fn count(&self, api: &str) {
        if let Ok(mut m) = self.calls.lock() {
            *m.entry(api.to_owned()).or_default() += 1;
        }
    }

    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.calls.lock().map(|m| m.clone()).unwrap_or_default()
    }
}
