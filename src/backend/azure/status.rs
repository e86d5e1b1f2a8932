//! Azure Service Bus status: the depth of each channel's dead letters from ARM's
//! `countDetails` (MessageCountDetails): a queue's `deadLetterMessageCount` is its built-in
//! `$DeadLetterQueue`; a forward queue's `activeMessageCount` is what waits there. Reading a
//! count touches no message. Samples, ages and error classes need the data plane (peek), which
//! is not built in this version: the status says so in a note, and shows no message.

use super::read::Reader;
use crate::backend::kit::errors::BackendError;
use crate::spec::resolve::Resolved;
use crate::status::{Depth, Measure, Observed, QueueDepth, ReadOptions};

/// A count of `countDetails` as a depth of waiting messages.
fn depth(n: Option<u64>) -> Depth {
    Depth {
        total: n,
        ready: n,
        in_flight: None,
        delayed: None,
        measure: Measure::Waiting,
        exists: true,
        lower_bound: false,
        basis: None,
    }
}

fn count(v: &serde_json::Value, key: &str) -> Option<u64> {
    v["properties"]["countDetails"][key].as_u64()
}

impl Reader {
    async fn observe(&self, r: &Resolved) -> Result<Observed, BackendError> {
        let Some(a) = &r.azure else {
            return Ok(Observed::missing(Vec::new()));
        };
        if a.subscription.is_some() {
            return Err(BackendError::Config {
                target: self.target.clone(),
                message: format!(
                    "channel `{}`: topic channels are not read in this version, only queues (docs/azure.md)",
                    r.channel
                ),
            });
        }
        let Some(main) = self.get_queue(&r.main).await? else {
            return Ok(Observed::missing(Vec::new()));
        };
        let others = vec![QueueDepth {
            name: r.main.clone(),
            role: "main",
            depth: depth(count(&main, "activeMessageCount")),
        }];
        let dead_letter = match &a.forward_to {
            None => depth(count(&main, "deadLetterMessageCount")),
            Some(f) => match self.get_queue(f).await? {
                Some(q) => depth(count(&q, "activeMessageCount")),
                None => Depth::missing(),
            },
        };
        let mut observed = Observed::missing(others);
        let waiting = dead_letter.total.is_some_and(|n| n > 0);
        observed.dead_letter = dead_letter;
        if waiting {
            observed.notes.push(
                "messages not read: samples, ages and error classes need Service Bus's data plane (peek), which this version does not read".into(),
            );
        }
        Ok(observed)
    }
}

impl crate::backend::kit::doors::Status for Reader {
    #[allow(clippy::type_complexity)]
    async fn status(
        &self,
        channels: &[&Resolved],
        _read: ReadOptions,
    ) -> Result<Vec<Result<Observed, BackendError>>, BackendError> {
        let mut out = Vec::with_capacity(channels.len());
        for r in channels {
            out.push(self.observe(r).await);
        }
        Ok(out)
    }
}
