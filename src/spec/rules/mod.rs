//! The second validation layer: what a JSON schema cannot say.
//!
//! Backend limits (SQS retention 60 s–14 d, ...), relations between fields (the DLQ outlives
//! its source; retries fit inside the retention), relations between documents (the target
//! exists and is of the right backend; names never collide) and advice (a DLQ nobody watches).
//! Each rule has a stable id and a test in `tests/fixtures/invalid/` that fails without it.
//!
//! One module per concern: `targets` (the Targets document), `channel` (one channel as a
//! whole, and the entry to the rest), `sqs`, `rabbitmq`, `kafka` (with `connect`, its Connect
//! connectors), `pubsub` and `azure` (each backend's limits), `alarms`, `envelope` (`deadLetter.envelope` mappings and `classes`), `names` (valid, owned, unique names, also across channels), and
//! `common`, what they all share (below every one of them, so no rule module calls back up
//! here). This module
//! runs them in a fixed order, applies `spec.lint.allow`, and re-exports the limits and name
//! checks other modules use. Findings come out in the order the rules run; `diag::sort`
//! orders them for display.

use rayon::prelude::*;

use super::load::{Doc, Workspace};
use super::model::Channel;
use super::schema::did_you_mean;
use crate::diag::Diagnostic;

mod alarms;
mod azure;
mod channel;
mod common;
mod connect;
mod deadletter;
mod envelope;
mod headers;
mod kafka;
mod names;
mod pubsub;
mod rabbitmq;
mod sqs;
mod sqs_access;
mod targets;

pub use alarms::CLOUDWATCH_MAX_EVALUATION;
pub use common::Checked;
pub use deadletter::drops_messages;
pub use kafka::KAFKA_MIN_RETENTION;
pub use names::{
    KAFKA_MAX_NAME, PUBSUB_MAX_NAME, RABBIT_MAX_NAME_BYTES, SQS_MAX_NAME, kafka_name_problem,
    pubsub_name_problem, rabbit_name_problem, sqs_name_problem,
};
pub use pubsub::{PUBSUB_MAX_ATTEMPTS, PUBSUB_MIN_ATTEMPTS};
pub use rabbitmq::RABBIT_MAX_TTL_MS;
pub use sqs::{SQS_MAX_RECEIVE_COUNT, SQS_MAX_RETENTION, SQS_MAX_VISIBILITY, SQS_MIN_RETENTION};

/// The rules that only warn or inform: the ones `spec.lint.allow` can silence.
pub const ADVICE_RULES: [&str; 21] = [
    "retry/none",
    "pubsub/subscription-expires",
    "sqs/dlq-retention",
    "kafka/dlt-partitions",
    "rabbitmq/at-most-once",
    "deadletter/weaker-encryption",
    "deadletter/wider-access",
    "deadletter/retention-implicit",
    "deadletter/discard-undeclared",
    "deadletter/archive-never-due",
    "retry/excessive",
    "sqs/fifo-redrive-order",
    "alarms/missing",
    "alarms/actions-unused",
    "alarms/actions-tier",
    "sqs/backoff-consumer",
    "retry/jitter-consumer",
    "rabbitmq/dlx-consumer-publishes",
    "classes/unreachable",
    "deadletter/header-dropped-and-kept",
    "azure-servicebus/backoff-unsupported",
];

/// Runs every rule; returns the channels that resolved (for the planner) and adds findings.
pub fn check(ws: &Workspace) -> (Vec<Diagnostic>, Vec<Checked<'_>>) {
    run(ws, true)
}

/// Runs every rule for its findings alone (`lint`, `import`): each resolved channel is dropped
/// as soon as its own rules ran, so 5,000 of them never wait side by side (BENCHMARKS.md §13).
pub fn findings(ws: &Workspace) -> Vec<Diagnostic> {
    run(ws, false).0
}

fn run(ws: &Workspace, keep: bool) -> (Vec<Diagnostic>, Vec<Checked<'_>>) {
    let mut out = Vec::new();
    let targets = targets::collect_targets(ws, &mut out);
    let found = channel::TargetsFound {
        none: ws.targets.is_empty() && ws.unread_targets.is_empty(),
        unread: &ws.unread_targets,
    };
    // One channel's rules read only that channel and the targets: the channels are checked
    // side by side (plan at 5,000 channels waited on this before its first read, BENCHMARKS.md
    // §13), then taken in their files' order, so findings and their order do not depend on
    // timing.
    type Each<'w> = (
        Option<(names::Crossing, Option<Checked<'w>>)>,
        Vec<Diagnostic>,
    );
    let each: Vec<Each> = ws
        .channels
        .par_iter()
        .map(|doc| {
            let mut local = Vec::new();
            let resolved = channel::check_channel(doc, &targets, &found, &mut local);
            apply_lint_allow(doc, &mut local);
            let kept = resolved.map(|resolved| {
                let crossing = names::Crossing::of(doc, &resolved);
                (crossing, keep.then_some(Checked { doc, resolved }))
            });
            (kept, local)
        })
        .collect();
    let mut crossings = Vec::with_capacity(each.len());
    let mut checked = Vec::with_capacity(if keep { each.len() } else { 0 });
    for (kept, local) in each {
        if let Some((crossing, c)) = kept {
            crossings.push(crossing);
            checked.extend(c);
        }
        out.extend(local);
    }
    names::check_across(&crossings, &mut out);
    // Shared dead-letter destinations: each sharer gets its owner's, each owner its sources.
    let (docs, mut resolved): (Vec<_>, Vec<_>) =
        checked.into_iter().map(|c| (c.doc, c.resolved)).unzip();
    crate::spec::resolve::link(&mut resolved);
    let checked = docs
        .into_iter()
        .zip(resolved)
        .map(|(doc, resolved)| Checked { doc, resolved })
        .collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule ids one Kafka channel (with `spec` lines appended) produces.
    fn kafka_rules(spec: &str) -> Vec<&'static str> {
        let text = format!(
            "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  k: {{backend: kafka, bootstrapServers: \"127.0.0.1:9092\", ownership: {{prefixes: [app.]}}}}\n---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: app.orders}}\nspec:\n  target: k\n  retry:\n    maxAttempts: 3\n{spec}  lint: {{allow: [alarms/missing, deadletter/retention-implicit]}}\n"
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

    /// The rule ids of one channel on `backend` (`sqs`, `rabbit`, `kafka` or `pubsub`), with `spec`
    /// lines appended and an optional Defaults document's `spec` lines.
    pub(super) fn rules_on(backend: &str, spec: &str, defaults: &str) -> Vec<&'static str> {
        findings_on(backend, spec, defaults)
            .iter()
            .map(|d| d.rule)
            .filter(|r| !matches!(*r, "sqs/backoff-consumer"))
            .collect()
    }

    /// The findings of one channel on `backend`, as [`rules_on`] builds it (all of them).
    pub(super) fn findings_on(backend: &str, spec: &str, defaults: &str) -> Vec<Diagnostic> {
        findings_of(
            backend,
            &format!(
                "  retry:\n    maxAttempts: 3\n    backoff: {{initial: 1s}}\n{spec}  lint: {{allow: [alarms/missing]}}\n"
            ),
            defaults,
        )
    }

    /// The findings of one channel on `backend` whose `spec` after `target` is `spec` alone
    /// (an SQS one gets `retention: 1h` unless it has one), with an optional Defaults
    /// document's `spec` lines.
    pub(super) fn findings_of(backend: &str, spec: &str, defaults: &str) -> Vec<Diagnostic> {
        let name = if backend == "sqs" {
            "quotes"
        } else {
            "app.quotes"
        };
        // SQS: a source retention below every DLQ retention here (`sqs/dlq-retention`).
        let spec = if backend == "sqs" && !spec.contains("  retention:") {
            format!("  retention: 1h\n{spec}")
        } else {
            spec.to_owned()
        };
        let defaults = if defaults.is_empty() {
            String::new()
        } else {
            format!("---\napiVersion: dlqctl/v1\nkind: Defaults\nspec:\n{defaults}")
        };
        let text = format!(
            "apiVersion: dlqctl/v1\nkind: Targets\ntargets:\n  sqs: {{backend: sqs, region: eu-west-1}}\n  rabbit: {{backend: rabbitmq, url: \"http://127.0.0.1:15672\", ownership: {{prefixes: [app.]}}}}\n  kafka: {{backend: kafka, bootstrapServers: \"127.0.0.1:9092\", ownership: {{prefixes: [app.]}}}}\n  pubsub: {{backend: pubsub, project: my-project}}\n{defaults}---\napiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: {name}}}\nspec:\n  target: {backend}\n{spec}"
        );
        let ws = crate::spec::load::load_str("c.yaml", &text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        check(&ws).0
    }

    #[test]
    fn a_dead_letter_retention_nobody_chose_is_reported_only_where_the_broker_chooses() {
        // Kafka: the broker's log.retention.ms.
        assert_eq!(rules_on("kafka", "", ""), ["deadletter/retention-implicit"]);
        // SQS: dlqctl writes the 14d maximum; RabbitMQ: no TTL keeps them until consumed.
        assert_eq!(rules_on("sqs", "", ""), Vec::<&str>::new());
        assert_eq!(rules_on("rabbit", "", ""), Vec::<&str>::new());
    }

    #[test]
    fn a_dead_letter_queue_that_drops_messages_needs_a_written_reason() {
        let retention = |d: &str| format!("  deadLetter: {{retention: {d}}}\n");
        let undeclared = ["deadletter/discard-undeclared"];
        assert_eq!(rules_on("rabbit", &retention("3d"), ""), undeclared);
        assert_eq!(rules_on("kafka", &retention("30d"), ""), undeclared);
        assert_eq!(rules_on("sqs", &retention("13d"), ""), undeclared);
        // SQS's maximum is not a decision: nothing keeps them longer.
        assert_eq!(rules_on("sqs", &retention("14d"), ""), Vec::<&str>::new());
        // Written down: silent, on every backend; without its reason, still undeclared.
        let discard =
            "  deadLetter: {discard: {after: 3d, reason: quotes expire, owner: pricing}}\n";
        for b in ["sqs", "rabbit", "kafka"] {
            assert_eq!(rules_on(b, discard, ""), Vec::<&str>::new(), "{b}");
            assert_eq!(
                rules_on(b, "  deadLetter: {discard: {after: 3d}}\n", ""),
                undeclared,
                "{b}"
            );
        }
    }

    #[test]
    fn discard_and_retention_are_one_answer_and_a_channel_s_own_replaces_the_defaults() {
        assert_eq!(
            rules_on(
                "rabbit",
                "  deadLetter: {retention: 3d, discard: {after: 1d, reason: r}}\n",
                ""
            ),
            ["deadletter/discard-and-retention"]
        );
        // Defaults keep 14d; the channel discards after 1d: the channel's answer holds.
        let defaults = "  deadLetter: {retention: 14d}\n";
        assert_eq!(
            rules_on(
                "sqs",
                "  deadLetter: {discard: {after: 1d, reason: r}}\n",
                defaults
            ),
            Vec::<&str>::new()
        );
        // And the other way round: a default discard, a channel that keeps them.
        let defaults = "  deadLetter: {discard: {after: 1d, reason: r}}\n";
        assert_eq!(
            rules_on("sqs", "  deadLetter: {retention: 14d}\n", defaults),
            Vec::<&str>::new()
        );
        // Both in one document is still an error, wherever it comes from.
        assert_eq!(
            rules_on(
                "sqs",
                "",
                "  deadLetter: {retention: 14d, discard: {after: 1d, reason: r}}\n"
            ),
            ["deadletter/discard-and-retention"]
        );
        // The same for `invalid`: a channel's own discard replaces a retention from Defaults.
        assert_eq!(
            rules_on(
                "sqs",
                "  invalid: {discard: {after: 1d, reason: r}}\n",
                "  invalid: {retention: 14d}\n"
            ),
            Vec::<&str>::new()
        );
        assert_eq!(
            rules_on(
                "rabbit",
                "  invalid: {retention: 3d, discard: {after: 1d}}\n",
                ""
            ),
            ["deadletter/discard-and-retention"]
        );
    }

    #[test]
    fn a_discard_must_leave_the_age_alarm_time_to_fire() {
        let spec = |after: &str, age: &str| {
            format!(
                "  retention: 10m\n  deadLetter: {{discard: {{after: {after}, reason: r}}}}\n  alarms:\n    oldestMessageAge: {age}\n    actions: [\"arn:aws:sns:eu-west-1:1:o\"]\n"
            )
        };
        // 59m + 2 × 60s = 1h1m: after a 1h discard.
        assert_eq!(
            rules_on(
                "sqs",
                &spec("1h", "{above: 59m, period: 60s, evaluationPeriods: 2}"),
                ""
            ),
            ["deadletter/discard-before-alarm"]
        );
        // 57m + 2m = 59m: in time.
        assert_eq!(
            rules_on(
                "sqs",
                &spec("1h", "{above: 57m, period: 60s, evaluationPeriods: 2}"),
                ""
            ),
            Vec::<&str>::new()
        );
        // Each tier on its own: the warning fires, the critical one cannot.
        assert_eq!(
            rules_on("sqs", &spec("1h", "{warning: 10m, critical: 1h}"), ""),
            ["deadletter/discard-before-alarm"]
        );
        // Prometheus rules (RabbitMQ, Kafka) wait the same `for`.
        assert_eq!(
            rules_on(
                "rabbit",
                &spec("30m", "{above: 29m, period: 60s}")
                    .replace("  retention: 10m\n", "")
                    .replace("    actions: [\"arn:aws:sns:eu-west-1:1:o\"]\n", ""),
                ""
            ),
            ["deadletter/discard-before-alarm"]
        );
        // A plain retention keeps its own rule, which knows no decision.
        assert_eq!(
            rules_on(
                "sqs",
                "  retention: 10m\n  deadLetter: {retention: 1h}\n  alarms:\n    oldestMessageAge: {above: 1h}\n    actions: [\"arn:aws:sns:eu-west-1:1:o\"]\n",
                ""
            ),
            [
                "alarms/age-beyond-retention",
                "deadletter/discard-undeclared"
            ]
        );
    }
}
