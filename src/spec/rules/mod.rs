//! The second validation layer: what a JSON schema cannot say.
//!
//! Backend limits (SQS retention 60 s–14 d, ...), relations between fields (the DLQ outlives
//! its source; retries fit inside the retention), relations between documents (the target
//! exists and is of the right backend; names never collide) and advice (a DLQ nobody watches).
//! Each rule has a stable id and a test in `tests/fixtures/invalid/` that fails without it.
//!
//! One module per concern: `targets` (the Targets document), `channel` (one channel as a
//! whole, and the entry to the rest), `sqs`, `rabbitmq` and `kafka` (each backend's limits),
//! `alarms`, and `names` (valid, owned, unique names, also across channels). This module
//! runs them in a fixed order, applies `spec.lint.allow`, and re-exports the limits and name
//! checks other modules use. Findings come out in the order the rules run; `diag::sort`
//! orders them for display.

use super::duration::Duration;
use super::load::{Doc, Workspace};
use super::model::Channel;
use super::resolve::Resolved;
use super::schema::did_you_mean;
use crate::diag::Diagnostic;

mod alarms;
mod channel;
mod kafka;
mod names;
mod rabbitmq;
mod sqs;
mod targets;

pub use alarms::CLOUDWATCH_MAX_EVALUATION;
pub use kafka::KAFKA_MIN_RETENTION;
pub use names::{
    KAFKA_MAX_NAME, RABBIT_MAX_NAME_BYTES, SQS_MAX_NAME, kafka_name_problem, rabbit_name_problem,
    sqs_name_problem,
};
pub use rabbitmq::RABBIT_MAX_TTL_MS;
pub use sqs::{SQS_MAX_RECEIVE_COUNT, SQS_MAX_RETENTION, SQS_MAX_VISIBILITY, SQS_MIN_RETENTION};

/// The rules that only warn or inform: the ones `spec.lint.allow` can silence.
pub const ADVICE_RULES: [&str; 9] = [
    "retry/none",
    "retry/excessive",
    "sqs/fifo-redrive-order",
    "alarms/missing",
    "alarms/actions-unused",
    "alarms/actions-tier",
    "sqs/backoff-consumer",
    "retry/jitter-consumer",
    "rabbitmq/dlx-consumer-publishes",
];

/// A channel that passed the required-field checks, resolved against its target.
pub struct Checked<'a> {
    pub doc: &'a Doc<Channel>,
    pub resolved: Resolved,
}

/// Runs every rule; returns the channels that resolved (for the planner) and adds findings.
pub fn check(ws: &Workspace) -> (Vec<Diagnostic>, Vec<Checked<'_>>) {
    let mut out = Vec::new();
    let targets = targets::collect_targets(ws, &mut out);
    let mut checked = Vec::new();
    for doc in &ws.channels {
        let mut local = Vec::new();
        if let Some(r) = channel::check_channel(doc, &targets, ws.targets.is_empty(), &mut local) {
            checked.push(Checked { doc, resolved: r });
        }
        apply_lint_allow(doc, &mut local);
        out.extend(local);
    }
    names::check_across(&checked, &mut out);
    (out, checked)
}

/// Drops the warnings and notes `spec.lint.allow` silences (errors stay), then reports
/// `lint/unknown-rule` for each entry that names no rule that can be silenced.
fn apply_lint_allow(doc: &Doc<Channel>, local: &mut Vec<Diagnostic>) {
    let allow: &[String] = doc
        .value
        .spec
        .lint
        .as_ref()
        .map(|l| l.allow.as_slice())
        .unwrap_or(&[]);
    local.retain(|d| {
        d.severity == crate::diag::Severity::Error || !allow.iter().any(|a| a == d.rule)
    });
    for (i, a) in allow.iter().enumerate() {
        if ADVICE_RULES.contains(&a.as_str()) {
            continue;
        }
        let mut d = Diagnostic::warning(
            "lint/unknown-rule",
            format!("`spec.lint.allow[{i}]` is `{a}`, which is not a rule that can be silenced"),
        )
        .at(doc.locs.value(&format!("/spec/lint/allow/{i}")));
        d = match did_you_mean(a, ADVICE_RULES.into_iter()) {
            Some(m) => d.hint(format!("did you mean `{m}`?")),
            None => d.hint(format!(
                "only warnings and notes can be silenced: {}",
                ADVICE_RULES.join(", ")
            )),
        };
        local.push(d);
    }
}

/// A duration outside a backend's range; the caller adds where and a hint.
fn range_error(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule ids one Kafka channel (with `spec` lines appended) produces.
    fn kafka_rules(spec: &str) -> Vec<&'static str> {
        let text = format!(
            "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  k: {{backend: kafka, bootstrapServers: \"127.0.0.1:9092\", ownership: {{prefixes: [app.]}}}}\n---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: app.orders}}\nspec:\n  target: k\n  retry:\n    maxAttempts: 3\n{spec}  lint: {{allow: [alarms/missing]}}\n"
        );
        let ws = crate::spec::load::load_str("c.yaml", &text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        check(&ws).0.iter().map(|d| d.rule).collect()
    }

    #[test]
    fn kafka_retry_templates_belong_to_the_custom_profile_only() {
        assert_eq!(kafka_rules(""), Vec::<&str>::new());
        assert_eq!(
            kafka_rules("    name: \"{channel}.r.{index}\"\n"),
            ["kafka/naming"],
            "ignored with spring"
        );
        assert_eq!(
            kafka_rules("  kafka: {naming: custom}\n"),
            ["kafka/naming"],
            "custom needs retry.name"
        );
        assert_eq!(
            kafka_rules("    name: \"{channel}.r.{index}\"\n  kafka: {naming: custom}\n"),
            Vec::<&str>::new()
        );
    }

    #[test]
    fn spring_suffixes_must_be_usable_and_not_overridden() {
        for ok in [
            "  kafka: {retryTopicSuffix: .retry, dltSuffix: .dlt}\n",
            "  kafka: {naming: index, retryTopicSuffix: _r, dltSuffix: -listener1-dlt}\n",
            // The DLT of the custom profile is still Spring's `<main><dltSuffix>`.
            "    name: \"{channel}.r.{index}\"\n  kafka: {naming: custom, dltSuffix: .dlt}\n",
        ] {
            assert_eq!(kafka_rules(ok), Vec::<&str>::new(), "{ok}");
        }
        for (bad, why) in [
            (
                "  kafka: {retryTopicSuffix: \"\"}\n",
                "empty: Spring's default instead",
            ),
            ("  kafka: {dltSuffix: \"\\t\"}\n", "whitespace only"),
            ("  kafka: {dltSuffix: \".d lt\"}\n", "a blank inside"),
            (
                "  kafka: {retryTopicSuffix: \"-retry\\u00e9\"}\n",
                "not ASCII",
            ),
            (
                "  deadLetter: {name: app.dead}\n  kafka: {dltSuffix: .dlt}\n",
                "named DLT",
            ),
            (
                "    name: \"{channel}.r.{index}\"\n  kafka: {naming: custom, retryTopicSuffix: .r}\n",
                "custom retry names",
            ),
        ] {
            assert_eq!(kafka_rules(bad), ["kafka/suffix"], "{why}");
        }
        // Exception-based DLTs: each suffix as a topic name's characters, and distinct names.
        assert_eq!(
            kafka_rules("  kafka: {exceptionBasedDlts: [-deserialization, .poison]}\n"),
            Vec::<&str>::new()
        );
        assert_eq!(
            kafka_rules("  kafka: {exceptionBasedDlts: [-bad/name]}\n"),
            ["kafka/suffix"]
        );
        assert_eq!(
            kafka_rules("  kafka: {exceptionBasedDlts: [-x, -x]}\n"),
            ["name/collision"]
        );
        assert_eq!(
            kafka_rules("  kafka: {exceptionBasedDlts: [\"\"]}\n"),
            ["name/collision"],
            "an empty one is the DLT itself"
        );
        // `dltSuffix` beside `deadLetter.name` still names the exception-based DLTs.
        assert_eq!(
            kafka_rules(
                "  deadLetter: {name: app.dead}\n  kafka: {dltSuffix: .dlt, exceptionBasedDlts: [-x]}\n"
            ),
            Vec::<&str>::new()
        );
        // The same suffix for both: with one retry topic, the two topics are one name.
        assert_eq!(
            kafka_rules("  kafka: {retryTopicSuffix: .x, dltSuffix: .x}\n"),
            ["name/collision"]
        );
    }
}
