//! A channel's Azure Service Bus settings: the queue (or topic and subscription) that carries
//! the retry budget, its peek-lock duration, dead-lettering on expiry, and where its dead
//! letters wait: the entity's built-in `$DeadLetterQueue` subqueue, or a queue of its own that
//! the entity forwards them to when `deadLetter.name` names one.

use super::common::{ResolveError, expand, template_error};
use super::defaults::{AZURE_DEAD_LETTER_SUBQUEUE, AZURE_DEFAULT_LOCK_DURATION};
use crate::spec::duration::Duration;
use crate::spec::model::ChannelSpec;

/// An Azure Service Bus channel's entities and settings (`main` is the queue or topic).
#[derive(Debug, Clone, PartialEq)]
pub struct AzureResolved {
    /// The subscription on the main topic that carries the settings; `None`: `main` is a
    /// queue and carries them itself.
    pub subscription: Option<String>,
    pub lock_duration: Duration,
    pub dead_lettering_on_expiration: bool,
    /// The queue the entity forwards its dead letters to (`deadLetter.name`); `None`: they
    /// stay in the entity's built-in `$DeadLetterQueue` subqueue.
    pub forward_to: Option<String>,
}

impl AzureResolved {
    /// The data-plane path of the entity that carries the settings: `queue`, or
    /// `topic/subscriptions/sub`.
    pub fn entity_path(&self, main: &str) -> String {
        match &self.subscription {
            Some(s) => format!("{main}/subscriptions/{s}"),
            None => main.to_owned(),
        }
    }
}

/// The built-in dead-letter subqueue's path of an entity path.
pub fn dead_letter_subqueue(entity_path: &str) -> String {
    format!("{entity_path}/{AZURE_DEAD_LETTER_SUBQUEUE}")
}

/// `spec.azure-servicebus` with defaults filled in, and the channel's dead-letter path: the
/// forward target's name when `deadLetter.name` is set, else the entity's subqueue.
pub(super) fn resolve(
    spec: &ChannelSpec,
    name: &str,
    main: &str,
) -> Result<(AzureResolved, String), ResolveError> {
    let o = spec.azure_servicebus.clone().unwrap_or_default();
    let subscription = o
        .subscription
        .as_deref()
        .map(|t| expand(t, name, None, None))
        .transpose()
        .map_err(|m| template_error("/spec/azure-servicebus/subscription", m))?;
    let forward_to = spec
        .dead_letter
        .as_ref()
        .and_then(|d| d.name.as_deref())
        .map(|t| expand(t, name, None, None))
        .transpose()
        .map_err(|m| template_error("/spec/deadLetter/name", m))?;
    let a = AzureResolved {
        subscription,
        lock_duration: o.lock_duration.unwrap_or(AZURE_DEFAULT_LOCK_DURATION),
        dead_lettering_on_expiration: o.dead_lettering_on_message_expiration.unwrap_or(true),
        forward_to,
    };
    let dead_letter = a
        .forward_to
        .clone()
        .unwrap_or_else(|| dead_letter_subqueue(&a.entity_path(main)));
    Ok((a, dead_letter))
}
