//! `dlqctl status` on Pub/Sub: not read yet. The design (issue 21): sample the dead-letter
//! subscription by pull and nack (it has no dead-letter policy of its own, so a nack only
//! makes the message visible again), with the depth from Cloud Monitoring
//! (`subscription/num_undelivered_messages`), which the emulator does not have. Until then
//! each channel answers with an error that says so, and the other backends' channels are
//! unaffected.

use super::read::Reader;
use crate::backend::wire::http::HttpError;
use crate::spec::resolve::Resolved;
use crate::status::{Observed, ReadOptions};

impl Reader {
    pub async fn status(
        &self,
        channels: &[&Resolved],
        _read: ReadOptions,
    ) -> Result<Vec<Result<Observed, HttpError>>, HttpError> {
        Ok(channels
            .iter()
            .map(|c| {
                Err(HttpError::Refused {
                    what: format!("channel {}", c.channel),
                    reason: "`dlqctl status` does not read Pub/Sub yet (docs/pubsub.md)".into(),
                })
            })
            .collect())
    }
}
