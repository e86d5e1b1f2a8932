//! `deadLetter.redrive`, resolved: which of a dead letter's headers a copy brought back by
//! `dlqctl redrive` (or replayed from an archive) leaves behind, beyond what each backend's
//! mover always drops (its attempt history: RabbitMQ's `x-death`, Spring's exception headers,
//! Pub/Sub's `CloudPubSubDeadLetter*`) and the counter it always rewrites
//! (`dlq-redrive-count`).
//!
//! Why a default list at all: some headers describe the trip a record made, not the record,
//! and break things when a copy carries them into a new trip. A replicator's provenance
//! header on a copy published to the source cluster makes the replicator take the copy for
//! a record it already replicated (kafbat/kafka-ui #1810: a replayed record with MSK
//! Replicator's header stopped replication of the topic); an old trace context parents new
//! work into a trace that ended long ago. The lists and their sources are in
//! docs/redrive.md, "Headers on the copy".
//!
//! Names match case-insensitively on every backend (RabbitMQ, Kafka, SQS and Pub/Sub names
//! are case-sensitive, but tracing headers come from HTTP, where `X-B3-TraceId` and
//! `x-b3-traceid` are one header, and propagators write either). Pure: no I/O; depends only
//! on the model.

use std::sync::{Arc, LazyLock};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::spec::model::RedriveHeaders;

/// Replication and pipeline headers a copy never carries unless `keepHeaders` says so.
pub const REPLICATION_HEADERS: [&str; 3] = [
    // Amazon MSK Replicator (identical topic names): the source cluster and topic of a
    // replicated record, which it reads to avoid replicating a record back.
    "__mskmr*",
    // Confluent Replicator's provenance header (`provenance.header.enable`), read for the
    // same purpose.
    "__replicator_id",
    // Kafka Connect's dead-letter context (`errors.deadletterqueue.context.headers.enable`):
    // Connect adds a fresh set when the copy fails again, beside the stale one.
    "__connect.errors.*",
];

/// Tracing headers a copy never carries unless `keepHeaders` says so: the copy is a new
/// message, published by dlqctl, not part of the original producer's trace.
pub const TRACING_HEADERS: [&str; 10] = [
    // W3C Trace Context.
    "traceparent",
    "tracestate",
    // Zipkin B3, single and multiple headers.
    "b3",
    "x-b3-*",
    // Jaeger.
    "uber-trace-id",
    // Datadog.
    "x-datadog-*",
    // AWS X-Ray's HTTP header (SQS's own `AWSTraceHeader` is a system attribute, which no
    // copy carries).
    "x-amzn-trace-id",
    // Google Cloud Trace, and the Pub/Sub client libraries' OpenTelemetry context.
    "x-cloud-trace-context",
    "googclient_traceparent",
    // Sentry.
    "sentry-trace",
];

/// One header-name glob, compiled as `deadLetter.redrive` reads it: case-insensitive, `*`
/// any run of characters (`/` and `.` included), `\` escapes.
pub fn glob(pattern: &str) -> Result<globset::Glob, globset::Error> {
    GlobBuilder::new(pattern)
        .case_insensitive(true)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
}

/// The default list, compiled once per process: every channel shares it (a compiled set
/// costs far more memory than its patterns, and a workspace may hold thousands of channels).
static DEFAULTS: LazyLock<GlobSet> =
    LazyLock::new(|| set(REPLICATION_HEADERS.into_iter().chain(TRACING_HEADERS)));

/// `deadLetter.redrive` with the default list: [`HeaderRules::sheds`] says whether a copy
/// leaves a header behind.
#[derive(Debug, Clone)]
pub struct HeaderRules {
    /// What the spec wrote, for equality.
    written: RedriveHeaders,
    /// `dropHeaders` and `keepHeaders`, compiled (shared by the views of a channel).
    drop: Arc<GlobSet>,
    keep: Arc<GlobSet>,
}

impl PartialEq for HeaderRules {
    fn eq(&self, other: &Self) -> bool {
        self.written == other.written
    }
}

impl Default for HeaderRules {
    fn default() -> Self {
        HeaderRules::resolve(None)
    }
}

/// The globs of `patterns` that compile (lint reports the others as errors, so plan, apply
/// and redrive never get here with one).
fn set<'a>(patterns: impl IntoIterator<Item = &'a str>) -> GlobSet {
    let mut b = GlobSetBuilder::new();
    let mut any = false;
    for p in patterns {
        if let Ok(g) = glob(p) {
            b.add(g);
            any = true;
        }
    }
    if !any {
        return GlobSet::empty();
    }
    b.build().unwrap_or_else(|_| GlobSet::empty())
}

impl HeaderRules {
    pub fn resolve(h: Option<&RedriveHeaders>) -> Self {
        let written = h.cloned().unwrap_or_default();
        let list = |l: &Option<Vec<String>>| {
            Arc::new(set(l
                .iter()
                .flatten()
                .map(String::as_str)
                .collect::<Vec<_>>()))
        };
        HeaderRules {
            drop: list(&written.drop_headers),
            keep: list(&written.keep_headers),
            written,
        }
    }

    /// Whether a copy leaves the header `name` behind: the default list or `dropHeaders`
    /// names it, and `keepHeaders` does not. (The backend's own drops and the redrive
    /// counter are the mover's, decided before this.)
    pub fn sheds(&self, name: &str) -> bool {
        (DEFAULTS.is_match(name) || self.drop.is_match(name)) && !self.keep.is_match(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(drop: &[&str], keep: &[&str]) -> HeaderRules {
        let l = |v: &[&str]| Some(v.iter().map(|s| (*s).to_owned()).collect());
        HeaderRules::resolve(Some(&RedriveHeaders {
            drop_headers: l(drop),
            keep_headers: l(keep),
        }))
    }

    #[test]
    fn the_default_list_drops_replication_and_tracing_headers_and_nothing_else() {
        let r = HeaderRules::default();
        for h in [
            "__mskmr",
            "__mskmr_source",
            "__replicator_id",
            "__connect.errors.topic",
            "traceparent",
            "TraceParent",
            "tracestate",
            "b3",
            "X-B3-TraceId",
            "x-b3-sampled",
            "uber-trace-id",
            "x-datadog-trace-id",
            "X-Amzn-Trace-Id",
            "googclient_traceparent",
            "sentry-trace",
        ] {
            assert!(r.sheds(h), "{h}");
        }
        for h in [
            "dlq-error-class",
            "baggage",
            "uberctx-tenant",
            "kafka_dlt-original-topic",
            "order-id",
            "b3x",
            "__replicator_idx",
        ] {
            assert!(!r.sheds(h), "{h}");
        }
    }

    #[test]
    fn keep_wins_over_drop_and_over_the_defaults() {
        let r = rules(
            &["x-internal-*", "tenant"],
            &["x-internal-keep", "traceparent"],
        );
        assert!(r.sheds("x-internal-secret"));
        assert!(r.sheds("X-Internal-Secret"), "case-insensitive");
        assert!(r.sheds("tenant"));
        assert!(!r.sheds("x-internal-keep"), "kept over dropHeaders");
        assert!(!r.sheds("traceparent"), "kept over the default list");
        assert!(
            r.sheds("tracestate"),
            "the rest of the defaults still apply"
        );
        assert!(!r.sheds("tenant-id"), "a glob matches the whole name");
        // A glob kept as a whole keeps every name it matches, even one dropped by name.
        let r = rules(&["__mskmr"], &["__*"]);
        assert!(!r.sheds("__mskmr"));
        assert!(!r.sheds("__connect.errors.topic"));
        // Escapes and sets.
        let r = rules(&["x-\\*", "x-[ab]"], &[]);
        assert!(r.sheds("x-*") && r.sheds("x-a") && !r.sheds("x-c") && !r.sheds("x-zz"));
    }

    #[test]
    fn a_glob_that_does_not_compile_drops_nothing_and_the_rest_still_apply() {
        assert!(glob("x-[").is_err());
        let r = rules(&["x-[", "y-*"], &["{"]);
        assert!(!r.sheds("x-["));
        assert!(r.sheds("y-1"));
        assert!(r.sheds("traceparent"));
    }

    #[test]
    fn rules_are_equal_when_the_spec_wrote_the_same() {
        assert_eq!(rules(&["a"], &[]), rules(&["a"], &[]));
        assert_ne!(rules(&["a"], &[]), rules(&[], &["a"]));
        assert_eq!(HeaderRules::default(), HeaderRules::resolve(None));
    }
}
