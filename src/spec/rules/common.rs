//! What the rule modules share, below all of them: the checked channel, a duration outside a
//! backend's range, where a dead-letter or invalid-message retention is written, and the
//! jitter advice every broker-side retry gets.
//!
//! It exists so that the backend modules (`sqs`, `rabbitmq`, `kafka`, `pubsub`) and
//! `deadletter` never call back into `mod.rs` or `channel.rs`, which call them: the rules'
//! imports all point down, to here.

use crate::diag::Diagnostic;
use crate::spec::duration::Duration;
use crate::spec::load::Doc;
use crate::spec::model::{Backend, Channel};
use crate::spec::resolve::Resolved;

/// A channel that passed the required-field checks, resolved against its target.
pub struct Checked<'a> {
    pub doc: &'a Doc<Channel>,
    pub resolved: Resolved,
}

/// A duration outside a backend's range; the caller adds where and a hint.
pub(super) fn range_error(
    rule: &'static str,
    field: &str,
    value: Duration,
    min: Duration,
    max: Duration,
    backend: &str,
) -> Diagnostic {
    Diagnostic::error(
        rule,
        format!("`{field}` is {value}, outside {backend}'s range of {min} to {max}"),
    )
}

/// `<backend>/retention-range`: the main retention and the dead-letter one
/// (`deadLetter.retention` or `discard.after`) within the backend's `[min, max]`.
pub(super) fn check_retention_ranges(
    doc: &Doc<Channel>,
    rule: &'static str,
    (min, max): (Duration, Duration),
    backend: &str,
    hint: &str,
    out: &mut Vec<Diagnostic>,
) {
    let spec = &doc.value.spec;
    for (field, pointer, value) in [
        ("spec.retention", "/spec/retention", spec.retention),
        (
            retention_field(doc),
            retention_pointer(doc),
            spec.dead_letter.as_ref().and_then(|d| {
                d.retention
                    .or_else(|| d.discard.as_ref().and_then(|x| x.after))
            }),
        ),
        (
            invalid_retention_at(doc).0,
            invalid_retention_at(doc).1,
            spec.invalid.as_ref().and_then(|i| {
                i.retention
                    .or_else(|| i.discard.as_ref().and_then(|x| x.after))
            }),
        ),
    ] {
        if let Some(v) = value
            && (v < min || v > max)
        {
            out.push(
                range_error(rule, field, v, min, max, backend)
                    .at(doc.locs.value(pointer))
                    .hint(hint),
            );
        }
    }
}

/// Where the dead-letter retention is written: `discard.after`, or `retention`.
pub(super) fn retention_pointer(doc: &Doc<Channel>) -> &'static str {
    let discard = doc
        .value
        .spec
        .dead_letter
        .as_ref()
        .is_some_and(|d| d.discard.is_some());
    if discard {
        "/spec/deadLetter/discard/after"
    } else {
        "/spec/deadLetter/retention"
    }
}

/// The field name for messages: `deadLetter.discard.after` or `deadLetter.retention`.
pub(super) fn retention_field(doc: &Doc<Channel>) -> &'static str {
    if retention_pointer(doc).ends_with("after") {
        "spec.deadLetter.discard.after"
    } else {
        "spec.deadLetter.retention"
    }
}

/// The invalid-message retention's field name (for messages) and pointer:
/// `invalid.discard.after` or `invalid.retention`.
pub(super) fn invalid_retention_at(doc: &Doc<Channel>) -> (&'static str, &'static str) {
    let discard = doc
        .value
        .spec
        .invalid
        .as_ref()
        .is_some_and(|i| i.discard.is_some());
    if discard {
        ("spec.invalid.discard.after", "/spec/invalid/discard/after")
    } else {
        ("spec.invalid.retention", "/spec/invalid/retention")
    }
}

/// `retry/jitter-consumer`: brokers cannot add jitter; consumers do.
pub(super) fn jitter_info(doc: &Doc<Channel>, backend: Backend, out: &mut Vec<Diagnostic>) {
    if doc
        .value
        .spec
        .retry
        .as_ref()
        .and_then(|r| r.backoff.as_ref())
        .is_some_and(|b| b.jitter.is_some())
    {
        out.push(
            Diagnostic::info(
                "retry/jitter-consumer",
                format!("{} cannot add jitter to a delay: consumers apply `retry.backoff.jitter` themselves", backend.display_name()),
            )
            .at(doc.locs.key("/spec/retry/backoff/jitter")),
        );
    }
}
