//! Rules for channels on an Azure Service Bus target: the documented ranges of a queue's or
//! subscription's properties (maxDeliveryCount, lockDuration), what the built-in dead-letter
//! subqueue cannot do (it observes no time-to-live), and where dead letters may be forwarded
//! (not to the entity that dead-letters them).
//!
//! Sources: the ARM reference of `Microsoft.ServiceBus/namespaces/queues` (2021-11-01:
//! "The maximum value for LockDuration is 5 minutes; the default value is 1 minute";
//! maxDeliveryCount "default value is 10"), and "Service Bus dead-letter queues" on Microsoft
//! Learn ("time-to-live isn't observed for messages in the DLQ"). The lower bounds (a
//! delivery count of 1, a lock of 5 s) and the delivery count's upper bound of 2000 are the
//! Azure portal's and the .NET administration client's checks, not stated in the ARM
//! reference: docs/azure.md says so.
//!
//! Ownership is by name prefix (the ARM resources of queues, topics and subscriptions carry no
//! tags), so a forward target outside the prefixes is `target/outside-ownership`, as any name.
//!
//! Depends on `alarms`, the shared helpers in `rules` and the resolved channel.

use super::common::range_error;
use crate::diag::Diagnostic;
use crate::spec::duration::Duration;
use crate::spec::load::Doc;
use crate::spec::model::Channel;
use crate::spec::resolve::Resolved;

pub const AZURE_MIN_DELIVERY_COUNT: u32 = 1;
pub const AZURE_MAX_DELIVERY_COUNT: u32 = 2000;
pub const AZURE_MIN_LOCK: Duration = Duration::from_secs(5);
pub const AZURE_MAX_LOCK: Duration = Duration::from_secs(300);

pub(super) fn check_azure(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    // The alarms become Prometheus rules over `dlqctl exporter`: the shared rules.
    super::alarms::check_alarms(doc, r, out);
    let at = |p: &str| doc.locs.value(p);
    // `azure-servicebus/max-delivery-count`: maxDeliveryCount is 1 to 2000.
    if !(AZURE_MIN_DELIVERY_COUNT..=AZURE_MAX_DELIVERY_COUNT).contains(&r.max_attempts) {
        out.push(
            Diagnostic::error(
                "azure-servicebus/max-delivery-count",
                format!(
                    "`spec.retry.maxAttempts` is {}, but Service Bus's maxDeliveryCount is {AZURE_MIN_DELIVERY_COUNT} to {AZURE_MAX_DELIVERY_COUNT}",
                    r.max_attempts
                ),
            )
            .at(at("/spec/retry/maxAttempts"))
            .hint("Service Bus dead-letters a message after maxDeliveryCount deliveries"),
        );
    }
    let Some(a) = &r.azure else { return };
    // `azure-servicebus/lock-duration`: 5 s to 5 min.
    if !(AZURE_MIN_LOCK..=AZURE_MAX_LOCK).contains(&a.lock_duration) {
        out.push(
            range_error(
                "azure-servicebus/lock-duration",
                "spec.azure-servicebus.lockDuration",
                a.lock_duration,
                AZURE_MIN_LOCK,
                AZURE_MAX_LOCK,
                "Service Bus",
            )
            .at(at("/spec/azure-servicebus/lockDuration"))
            .hint("a consumer that needs longer renews its lock; the lock itself is at most 5m"),
        );
    }
    // `azure-servicebus/forward-to-self`: the entity forwarding its dead letters to itself
    // would redeliver them as new messages, forever.
    if let Some(f) = &a.forward_to
        && *f == r.main
    {
        out.push(
            Diagnostic::error(
                "azure-servicebus/forward-to-self",
                format!(
                    "`spec.deadLetter.name` is `{f}`, the channel's own {}: its dead letters would be forwarded back to it as new messages",
                    if a.subscription.is_some() { "topic" } else { "queue" }
                ),
            )
            .at(at("/spec/deadLetter/name"))
            .hint("name another queue, or remove `deadLetter.name` to keep dead letters in the built-in `$DeadLetterQueue` subqueue"),
        );
    }
    // `azure-servicebus/subqueue-retention`: the built-in subqueue keeps dead letters until
    // they are received; a retention there would be a promise Service Bus does not keep.
    let dl = doc.value.spec.dead_letter.as_ref();
    if a.forward_to.is_none() && dl.is_some_and(|d| d.retention.is_some() || d.discard.is_some()) {
        let pointer = if doc.locs.has("/spec/deadLetter/retention") {
            "/spec/deadLetter/retention"
        } else {
            "/spec/deadLetter/discard"
        };
        out.push(
            Diagnostic::error(
                "azure-servicebus/subqueue-retention",
                format!(
                    "the dead letters wait in `{}`, the built-in subqueue, which observes no time-to-live: they are kept until received, whatever `deadLetter` says",
                    r.dead_letter
                ),
            )
            .at(doc.locs.key(pointer))
            .hint("remove it, or name a dead-letter queue (`deadLetter.name`): dlqctl forwards dead letters there and gives it this retention"),
        );
    }
    // `azure-servicebus/backoff-unsupported`: Service Bus redelivers an abandoned message at
    // once; it has no delay between deliveries.
    if doc
        .value
        .spec
        .retry
        .as_ref()
        .is_some_and(|x| x.backoff.is_some())
    {
        out.push(
            Diagnostic::warning(
                "azure-servicebus/backoff-unsupported",
                "Service Bus has no delay between deliveries: an abandoned message (or one whose lock expired) is delivered again at once, so `retry.backoff` is not provisioned",
            )
            .at(doc.locs.key("/spec/retry/backoff"))
            .hint("a consumer that must wait defers the message or schedules a copy (ScheduledEnqueueTimeUtc) itself; remove `backoff`"),
        );
    }
}
