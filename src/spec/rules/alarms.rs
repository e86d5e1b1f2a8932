//! Rules on `spec.alarms`, for every backend: each alarm has a threshold in one form (a
//! single `above`, or `warning`/`critical` tiers), tiers in order, an age alarm that can fire
//! before the dead letters expire, a runbook that is a URL, a dead-letter rate only where it
//! means something (the channel's alarms) and over some time. Then per backend: CloudWatch's
//! limits on periods and thresholds, the rate's `for` in whole periods, and ARNs as actions
//! (SQS targets, provisioned by `apply`); on RabbitMQ and Kafka targets (Prometheus rules written by `dlqctl alerts`), the
//! warning that `actions` are not used, since Alertmanager routes alerts by their labels.
//!
//! Depends only on the model, the resolved channel, `diag` and the loaded document.

use crate::diag::Diagnostic;
use crate::spec::duration::Duration;
use crate::spec::load::Doc;
use crate::spec::model::{AlarmActions, Alarms, Backend, Channel, Tier};
use crate::spec::ratio::Ratio;
use crate::spec::resolve::Resolved;

pub const CLOUDWATCH_MAX_EVALUATION: Duration = Duration::from_secs(86_400);

/// One alarm of the spec with its three thresholds as numbers (messages, or milliseconds for
/// the age), and how to show a threshold to the user.
struct Thresholds {
    name: &'static str,
    above: Option<u64>,
    warning: Option<u64>,
    critical: Option<u64>,
    show: fn(u64) -> String,
}

fn thresholds(sc: &AlarmScope) -> Vec<Thresholds> {
    let Some(alarms) = sc.alarms else {
        return Vec::new();
    };
    let ms = |d: Option<Duration>| d.map(Duration::as_millis);
    let mut out = Vec::new();
    if let Some(d) = &alarms.depth {
        out.push(Thresholds {
            name: "depth",
            above: d.above,
            warning: d.warning,
            critical: d.critical,
            show: |n| format!("{n} messages"),
        });
    }
    if let Some(a) = &alarms.oldest_message_age {
        out.push(Thresholds {
            name: "oldestMessageAge",
            above: ms(a.above),
            warning: ms(a.warning),
            critical: ms(a.critical),
            show: |n| Duration::from_millis(n).to_string(),
        });
    }
    if let Some(r) = &alarms.dead_letter_rate {
        out.push(Thresholds {
            name: "deadLetterRate",
            above: r.above.map(ratio_key),
            warning: r.warning.map(ratio_key),
            critical: r.critical.map(ratio_key),
            show: |n| show_ratio(f64::from_bits(n)),
        });
    }
    out
}

/// A ratio as a number that orders like it: the bits of a positive finite `f64` (a ratio's
/// percent is one, above 0) order as the value does.
fn ratio_key(r: Ratio) -> u64 {
    r.percent().to_bits()
}

/// A percent from [`ratio_key`]'s bits, as the user wrote it: `0.1%`.
fn show_ratio(percent: f64) -> String {
    format!("{percent}%")
}

/// Which alarms the rules look at: the channel's (`spec.alarms`, on its dead-letter queue) or
/// the invalid-message queue's (`spec.invalid.alarms`), with where they are written and what
/// the queue they watch keeps.
struct AlarmScope<'a> {
    alarms: Option<&'a Alarms>,
    /// JSON pointer of the block: `/spec/alarms`.
    pointer: &'static str,
    /// The block for messages: `spec.alarms`.
    field: &'static str,
    /// The watched queue: `dead-letter queue`.
    queue: &'static str,
    /// How long it keeps a message, and whether that is a written discard decision.
    retention: Option<Duration>,
    discarded: bool,
    /// Where that retention is written, for the hint: `spec.deadLetter.retention`.
    retention_field: &'static str,
}

/// Every rule on `spec.alarms` (and on `spec.invalid.alarms`) for a resolved channel, on its
/// backend.
pub(super) fn check_alarms(doc: &Doc<Channel>, r: &Resolved, out: &mut Vec<Diagnostic>) {
    let dead_letter = AlarmScope {
        alarms: doc.value.spec.alarms.as_ref(),
        pointer: "/spec/alarms",
        field: "spec.alarms",
        queue: "dead-letter queue",
        retention: r.dead_letter_retention,
        discarded: r.discard.is_some(),
        retention_field: "spec.deadLetter.retention",
    };
    check_scope(doc, r, &dead_letter, out);
    let invalid = doc.value.spec.invalid.as_ref().zip(r.invalid.as_ref());
    if let Some((spec, i)) = invalid {
        let sc = AlarmScope {
            alarms: spec.alarms.as_ref(),
            pointer: "/spec/invalid/alarms",
            field: "spec.invalid.alarms",
            queue: "invalid-message queue",
            retention: i.retention,
            discarded: i.discard.is_some(),
            retention_field: "spec.invalid.retention",
        };
        // SQS: CloudWatch alarms on the queue (`apply`); RabbitMQ and Kafka: Prometheus
        // rules on its series (`dlqctl alerts`, role `invalid`).
        check_scope(doc, r, &sc, out);
    }
}

/// The rules on one block of alarms.
fn check_scope(doc: &Doc<Channel>, r: &Resolved, sc: &AlarmScope, out: &mut Vec<Diagnostic>) {
    let Some(alarms) = sc.alarms else {
        return;
    };
    let (ap, af) = (sc.pointer, sc.field);
    check_forms(doc, sc, out);
    check_rate(doc, sc, out);
    check_age_retention(doc, sc, out);
    check_unused_tier_actions(doc, sc, out);
    if let Some(url) = &alarms.runbook
        && !(url.starts_with("https://") || url.starts_with("http://"))
    {
        out.push(
            Diagnostic::error(
                "alarms/runbook",
                format!("`{af}.runbook` is `{url}`, which is not an http(s) URL"),
            )
            .at(doc.locs.value(&format!("{ap}/runbook")))
            .hint("give the address people open when the alarm fires, e.g. `https://wiki.example.com/runbooks/dlq`"),
        );
    }
    match r.backend {
        Backend::Sqs => check_cloudwatch(doc, sc, out),
        Backend::Rabbitmq | Backend::Kafka => actions_unused(doc, sc, r.backend, out),
        Backend::AzureServicebus => check_azure_actions(doc, sc, out),
        Backend::Pubsub => {
            actions_unused(doc, sc, r.backend, out);
            check_cloud_monitoring(doc, sc, out);
        }
    }
}

/// `alarms/threshold` (an alarm without a threshold, or with `above` and tiers) and
/// `alarms/tier-order` (a warning at or above the critical threshold).
fn check_forms(doc: &Doc<Channel>, sc: &AlarmScope, out: &mut Vec<Diagnostic>) {
    let (ap, af) = (sc.pointer, sc.field);
    for t in thresholds(sc) {
        let name = t.name;
        let tiered = t.warning.is_some() || t.critical.is_some();
        if t.above.is_none() && !tiered {
            out.push(
                Diagnostic::error(
                    "alarms/threshold",
                    format!("`{af}.{name}` has no threshold: it would never fire"),
                )
                .at(doc.locs.key(&format!("{ap}/{name}")))
                .hint("give `above:` (one alarm), or `warning:` and/or `critical:` (one alarm per tier)"),
            );
        }
        if t.above.is_some() && tiered {
            out.push(
                Diagnostic::error(
                    "alarms/threshold",
                    format!("`{af}.{name}` has both `above` and tiers; `above` is the single-threshold form"),
                )
                .at(doc.locs.key(&format!("{ap}/{name}/above")))
                .hint("keep `warning`/`critical` and remove `above` (an `above` alarm is the same as a `critical` one)"),
            );
        }
        if let (Some(w), Some(c)) = (t.warning, t.critical)
            && w >= c
        {
            out.push(
                Diagnostic::error(
                    "alarms/tier-order",
                    format!(
                        "`{af}.{name}.warning` is {}, not below `critical` ({}): the warning would never come first",
                        (t.show)(w),
                        (t.show)(c)
                    ),
                )
                .at(doc.locs.value(&format!("{ap}/{name}/warning")))
                .hint("warn early and page later: `warning` below `critical`"),
            );
        }
    }
}

/// `alarms/rate-scope` (the rate anywhere but `spec.alarms`) and the `alarms/period` every
/// backend shares: a rate measured over no time at all (Prometheus refuses `rate(…[0s])`).
fn check_rate(doc: &Doc<Channel>, sc: &AlarmScope, out: &mut Vec<Diagnostic>) {
    let (ap, af) = (sc.pointer, sc.field);
    let Some(rate) = sc.alarms.and_then(|a| a.dead_letter_rate.as_ref()) else {
        return;
    };
    if ap != "/spec/alarms" {
        out.push(
            Diagnostic::error(
                "alarms/rate-scope",
                format!("`{af}.deadLetterRate`: the dead-letter rate is the channel's, not the {}'s: it counts what enters every dead-letter destination of the channel (this queue included) against the source", sc.queue),
            )
            .at(doc.locs.key(&format!("{ap}/deadLetterRate")))
            .hint("move it to `spec.alarms.deadLetterRate`"),
        );
    }
    if rate.period.is_some_and(|p| p.as_millis() == 0) {
        out.push(
            Diagnostic::error(
                "alarms/period",
                format!("`{af}.deadLetterRate.period` is 0s: a rate is measured over some time"),
            )
            .at(doc.locs.value(&format!("{ap}/deadLetterRate/period")))
            .hint("measure over minutes, e.g. `period: 5m` (the default)"),
        );
    }
}

/// `alarms/age-beyond-retention`: an age threshold at or beyond the dead-letter retention
/// never fires, since the message is gone first.
fn check_age_retention(doc: &Doc<Channel>, sc: &AlarmScope, out: &mut Vec<Diagnostic>) {
    let (ap, af) = (sc.pointer, sc.field);
    let Some(retention) = sc.retention else {
        return;
    };
    // A written discard has its own rule, which counts the time the alarm needs to fire.
    if sc.discarded {
        return;
    }
    let Some(age) = sc.alarms.and_then(|a| a.oldest_message_age.as_ref()) else {
        return;
    };
    for (key, value) in [
        ("above", age.above),
        ("warning", age.warning),
        ("critical", age.critical),
    ] {
        if let Some(v) = value
            && v >= retention
        {
            out.push(
                Diagnostic::error(
                    "alarms/age-beyond-retention",
                    format!("`{af}.oldestMessageAge.{key}` is {v}, but the {} keeps messages for {retention}: the message is gone before anyone is told", sc.queue),
                )
                .at(doc.locs.value(&format!("{ap}/oldestMessageAge/{key}")))
                .hint(if sc.pointer == "/spec/alarms" {
                    "alarm well within the dead-letter retention, or keep dead letters longer (`spec.deadLetter.retention`)".to_owned()
                } else {
                    format!("alarm well within the retention, or keep messages longer (`{}`)", sc.retention_field)
                }),
            );
        }
    }
}

/// `alarms/actions-tier` (warning): actions for a tier that no alarm of the channel has.
fn check_unused_tier_actions(doc: &Doc<Channel>, sc: &AlarmScope, out: &mut Vec<Diagnostic>) {
    let (ap, af) = (sc.pointer, sc.field);
    let Some(AlarmActions::PerTier(per)) = sc.alarms.and_then(|a| a.actions.as_ref()) else {
        return;
    };
    let all = thresholds(sc);
    // A single-threshold alarm counts as critical.
    let has = |tier: Tier| {
        all.iter().any(|t| match tier {
            Tier::Warning => t.warning.is_some(),
            Tier::Critical => t.critical.is_some() || t.above.is_some(),
        })
    };
    for (tier, list) in [
        (Tier::Warning, &per.warning),
        (Tier::Critical, &per.critical),
    ] {
        if list.as_ref().is_some_and(|l| !l.is_empty()) && !has(tier) {
            out.push(
                Diagnostic::warning(
                    "alarms/actions-tier",
                    format!("`{af}.actions.{tier}` is set, but no alarm of the channel has a {tier} tier: these actions are never notified"),
                )
                .at(doc.locs.key(&format!("{ap}/actions/{tier}")))
                .hint(format!("add `{tier}:` to `depth`, `oldestMessageAge` or `deadLetterRate`, or remove `actions.{tier}`")),
            );
        }
    }
}

/// `alarms/period`, `alarms/whole-seconds` and `alarms/action`: CloudWatch's limits.
fn check_cloudwatch(doc: &Doc<Channel>, sc: &AlarmScope, out: &mut Vec<Diagnostic>) {
    let (ap, af) = (sc.pointer, sc.field);
    let Some(alarms) = sc.alarms else {
        return;
    };
    let periods = [
        (
            "depth",
            alarms
                .depth
                .as_ref()
                .map(|a| (a.period, a.evaluation_periods)),
        ),
        (
            "oldestMessageAge",
            alarms
                .oldest_message_age
                .as_ref()
                .map(|a| (a.period, a.evaluation_periods)),
        ),
    ];
    for (name, v) in periods {
        let Some((period, evals)) = v else { continue };
        let period = period.unwrap_or(Duration::from_secs(60));
        let pointer = format!("{ap}/{name}/period");
        if period.as_millis() % 60_000 != 0 || period.as_millis() == 0 {
            out.push(
                Diagnostic::error(
                    "alarms/period",
                    format!("`{af}.{name}.period` is {period}; SQS metrics are per minute, so the period must be a multiple of 60s"),
                )
                .at(doc.locs.value(&pointer)),
            );
        }
        let total = Duration::from_millis(
            period
                .as_millis()
                .saturating_mul(u64::from(evals.unwrap_or(1))),
        );
        if total > CLOUDWATCH_MAX_EVALUATION {
            out.push(
                Diagnostic::error(
                    "alarms/period",
                    format!("`{af}.{name}`: period × evaluationPeriods is {total}; CloudWatch evaluates at most 1d"),
                )
                .at(doc.locs.value(&pointer)),
            );
        }
    }
    if let Some(rate) = &alarms.dead_letter_rate {
        check_cloudwatch_rate(doc, sc, rate, out);
    }
    if let Some(age) = &alarms.oldest_message_age {
        for (key, value) in [
            ("above", age.above),
            ("warning", age.warning),
            ("critical", age.critical),
        ] {
            if let Some(v) = value
                && v.as_millis() % 1000 != 0
            {
                out.push(
                    Diagnostic::error(
                        "alarms/whole-seconds",
                        format!(
                            "`{af}.oldestMessageAge.{key}` is {v}; the metric is in whole seconds"
                        ),
                    )
                    .at(doc.locs.value(&format!("{ap}/oldestMessageAge/{key}"))),
                );
            }
        }
    }
    for (at, a) in alarms.actions.iter().flat_map(AlarmActions::entries) {
        if !a.starts_with("arn:") {
            let field = match at.split_once('/') {
                Some((tier, i)) => format!("{tier}[{i}]"),
                None => format!("[{at}]"),
            };
            let field = if field.starts_with('[') {
                format!("{af}.actions{field}")
            } else {
                format!("{af}.actions.{field}")
            };
            out.push(
                Diagnostic::error(
                    "alarms/action",
                    format!("`{field}` is `{a}`, which is not an ARN"),
                )
                .at(doc.locs.value(&format!("{ap}/actions/{at}")))
                .hint("alarm actions are ARNs, e.g. `arn:aws:sns:eu-west-1:123456789012:ops`"),
            );
        }
    }
}

/// `alarms/action` on Azure Service Bus: the actions of its Azure Monitor metric alerts
/// (`dlqctl alerts --format azure-monitor`) are action groups, named by their ARM resource id
/// (`/subscriptions/S/resourceGroups/RG/providers/Microsoft.Insights/actionGroups/NAME`; ARM
/// compares the provider and type case-insensitively).
fn check_azure_actions(doc: &Doc<Channel>, sc: &AlarmScope, out: &mut Vec<Diagnostic>) {
    let (ap, af) = (sc.pointer, sc.field);
    let Some(alarms) = sc.alarms else {
        return;
    };
    let is_action_group = |a: &str| {
        let parts: Vec<&str> = a.split('/').collect();
        parts.len() == 9
            && parts[0].is_empty()
            && parts[1].eq_ignore_ascii_case("subscriptions")
            && parts[3].eq_ignore_ascii_case("resourceGroups")
            && parts[5].eq_ignore_ascii_case("providers")
            && parts[6].eq_ignore_ascii_case("Microsoft.Insights")
            && parts[7].eq_ignore_ascii_case("actionGroups")
            && [2, 4, 8].iter().all(|&i| !parts[i].is_empty())
    };
    for (at, a) in alarms.actions.iter().flat_map(AlarmActions::entries) {
        if is_action_group(a) {
            continue;
        }
        let field = match at.split_once('/') {
            Some((tier, i)) => format!("{af}.actions.{tier}[{i}]"),
            None => format!("{af}.actions[{at}]"),
        };
        out.push(
            Diagnostic::error(
                "alarms/action",
                format!("`{field}` is `{a}`, which is not the resource id of an Azure Monitor action group"),
            )
            .at(doc.locs.value(&format!("{ap}/actions/{at}")))
            .hint("on Azure Service Bus the depth alarms are Azure Monitor metric alerts (`dlqctl alerts --format azure-monitor`), which notify action groups: `/subscriptions/SUB/resourceGroups/RG/providers/Microsoft.Insights/actionGroups/NAME`"),
        );
    }
}

/// The rate as a CloudWatch metric-math alarm: `period` a whole number of minutes (SQS
/// metrics are per minute; `alarms/period`), `for` a whole number of periods, at least one
/// (`alarms/for`: EvaluationPeriods = for / period), and no more than a day in all.
fn check_cloudwatch_rate(
    doc: &Doc<Channel>,
    sc: &AlarmScope,
    rate: &crate::spec::model::RateAlarm,
    out: &mut Vec<Diagnostic>,
) {
    let (ap, af) = (sc.pointer, sc.field);
    let period = rate
        .period
        .unwrap_or(crate::spec::resolve::DEFAULT_RATE_PERIOD);
    let for_ = rate.for_.unwrap_or(crate::spec::resolve::DEFAULT_RATE_FOR);
    let (pms, fms) = (period.as_millis(), for_.as_millis());
    // Zero is reported on every backend (`check_rate`).
    if pms == 0 {
        return;
    }
    // Point at what the spec wrote; a default has no place of its own, so at the block.
    let at = |key: &str, written: bool| {
        if written {
            doc.locs.value(&format!("{ap}/deadLetterRate/{key}"))
        } else {
            doc.locs.key(&format!("{ap}/deadLetterRate"))
        }
    };
    if pms % 60_000 != 0 {
        out.push(
            Diagnostic::error(
                "alarms/period",
                format!("`{af}.deadLetterRate.period` is {period}; SQS metrics are per minute, so the period must be a multiple of 60s"),
            )
            .at(at("period", rate.period.is_some())),
        );
        return;
    }
    if fms < pms || fms % pms != 0 {
        let below = Duration::from_millis(fms / pms * pms);
        let above = Duration::from_millis((fms / pms + 1) * pms);
        let suggest = if fms < pms {
            format!("`for: {period}` (one period)")
        } else {
            format!("`for: {below}` or `for: {above}`")
        };
        out.push(
            Diagnostic::error(
                "alarms/for",
                format!("`{af}.deadLetterRate.for` is {for_}, not a whole number of periods ({period}): CloudWatch counts an alarm's time in evaluation periods"),
            )
            .at(at("for", rate.for_.is_some()))
            .hint(format!("write {suggest}, or change `period`")),
        );
    }
    if for_ > CLOUDWATCH_MAX_EVALUATION {
        out.push(
            Diagnostic::error(
                "alarms/period",
                format!("`{af}.deadLetterRate.for` is {for_}; CloudWatch evaluates at most 1d"),
            )
            .at(at("for", rate.for_.is_some())),
        );
    }
}

/// Cloud Monitoring's limits on the policies `dlqctl alerts --format cloud-monitoring`
/// writes (`alarms/period`): an alignment period of whole minutes, at least one, at most
/// 25 hours (90,000 s), and a condition duration of whole minutes (the Monitoring API's
/// `Aggregation.alignmentPeriod` and `MetricThreshold.duration`).
fn check_cloud_monitoring(doc: &Doc<Channel>, sc: &AlarmScope, out: &mut Vec<Diagnostic>) {
    const MAX_ALIGNMENT: u64 = 90_000_000;
    let (ap, af) = (sc.pointer, sc.field);
    let Some(alarms) = sc.alarms else {
        return;
    };
    let minute = |ms: u64| ms.is_multiple_of(60_000);
    let mut periods: Vec<(&str, Option<Duration>, Duration)> = Vec::new();
    if let Some(d) = &alarms.depth {
        periods.push(("depth", d.period, Duration::from_secs(60)));
    }
    if let Some(a) = &alarms.oldest_message_age {
        periods.push(("oldestMessageAge", a.period, Duration::from_secs(60)));
    }
    if let Some(r) = &alarms.dead_letter_rate {
        periods.push((
            "deadLetterRate",
            r.period,
            crate::spec::resolve::DEFAULT_RATE_PERIOD,
        ));
        if let Some(f) = r.for_
            && !minute(f.as_millis())
        {
            out.push(
                Diagnostic::error(
                    "alarms/period",
                    format!("`{af}.deadLetterRate.for` is {f}; Cloud Monitoring takes a condition's duration in whole minutes"),
                )
                .at(doc.locs.value(&format!("{ap}/deadLetterRate/for"))),
            );
        }
    }
    for (name, written, default) in periods {
        let p = written.unwrap_or(default).as_millis();
        // Zero is the rate's own finding on every backend.
        if p == 0 && name == "deadLetterRate" {
            continue;
        }
        if p == 0 || !minute(p) || p > MAX_ALIGNMENT {
            out.push(
                Diagnostic::error(
                    "alarms/period",
                    format!("`{af}.{name}.period` is {}; Cloud Monitoring aligns Pub/Sub metrics in whole minutes, from 1m to 25h", Duration::from_millis(p)),
                )
                .at(doc.locs.value(&format!("{ap}/{name}/period"))),
            );
        }
    }
}

/// `alarms/actions-unused` (warning): on RabbitMQ and Kafka targets alarms become Prometheus
/// rules (`dlqctl alerts`), which carry no actions.
fn actions_unused(
    doc: &Doc<Channel>,
    sc: &AlarmScope,
    backend: Backend,
    out: &mut Vec<Diagnostic>,
) {
    let (ap, af) = (sc.pointer, sc.field);
    let set = sc
        .alarms
        .and_then(|a| a.actions.as_ref())
        .is_some_and(|a| !a.is_empty());
    if set {
        out.push(
            Diagnostic::warning(
                "alarms/actions-unused",
                if backend == Backend::Pubsub {
                    format!("`{af}.actions` is not used on {} targets: their alarms are Cloud Monitoring alert policies (`dlqctl alerts --format cloud-monitoring`), whose notification channels are chosen in Cloud Monitoring", backend.display_name())
                } else {
                    format!("`{af}.actions` is not used on {} targets: their alarms are Prometheus rules (`dlqctl alerts`), and Alertmanager decides who is notified", backend.display_name())
                },
            )
            .at(doc.locs.key(&format!("{ap}/actions")))
            .hint(if backend == Backend::Pubsub {
                "add notification channels to the policies in Cloud Monitoring (they carry `severity`, `channel` and `target` user labels), and remove `actions`"
            } else {
                "route by the alerts' labels in Alertmanager (`severity`, `channel`, `target` and the channel's `metadata.labels`), and remove `actions`"
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::findings_of;

    /// The rule ids of an SQS channel with these `alarms` (notifying an SNS topic).
    fn alarm_rules(alarms: &str) -> Vec<&'static str> {
        findings_of(
            "sqs",
            &format!("  retry: {{maxAttempts: 3}}\n  alarms:\n{alarms}    actions: [\"arn:aws:sns:eu-west-1:1:o\"]\n"),
            "",
        )
        .iter()
        .map(|d| d.rule)
        .collect()
    }

    #[test]
    fn a_warning_at_the_critical_threshold_never_comes_first() {
        assert_eq!(
            alarm_rules("    depth: {warning: 4, critical: 5}\n"),
            Vec::<&str>::new()
        );
        assert_eq!(
            alarm_rules("    depth: {warning: 5, critical: 5}\n"),
            ["alarms/tier-order"]
        );
    }

    #[test]
    fn cloudwatch_evaluates_a_day_at_most() {
        assert_eq!(
            alarm_rules("    depth: {above: 0, period: 1h, evaluationPeriods: 24}\n"),
            Vec::<&str>::new()
        );
        assert_eq!(
            alarm_rules("    depth: {above: 0, period: 1h, evaluationPeriods: 25}\n"),
            ["alarms/period"]
        );
    }

    #[test]
    fn one_tier_alone_is_a_threshold() {
        for tier in ["warning", "critical"] {
            assert_eq!(
                alarm_rules(&format!("    depth: {{{tier}: 5}}\n")),
                Vec::<&str>::new(),
                "{tier}"
            );
        }
        assert_eq!(
            alarm_rules("    depth: {period: 60s}\n"),
            ["alarms/threshold"]
        );
    }

    #[test]
    fn a_runbook_is_an_http_or_https_url() {
        for ok in ["https://wiki.example.com/dlq", "http://wiki/dlq"] {
            assert_eq!(
                alarm_rules(&format!("    depth: {{above: 0}}\n    runbook: \"{ok}\"\n")),
                Vec::<&str>::new(),
                "{ok}"
            );
        }
        assert_eq!(
            alarm_rules("    depth: {above: 0}\n    runbook: wiki.example.com/dlq\n"),
            ["alarms/runbook"]
        );
    }

    /// The findings of a channel on `backend` whose invalid-message queue has these lines.
    fn invalid_findings(backend: &str, invalid: &str) -> Vec<crate::diag::Diagnostic> {
        findings_of(
            backend,
            &format!(
                "  retry: {{maxAttempts: 3, backoff: {{initial: 1s}}}}\n  invalid:\n{invalid}  lint: {{allow: [alarms/missing]}}\n"
            ),
            "",
        )
    }

    #[test]
    fn invalid_message_alarms_are_checked_on_every_backend_that_has_the_queue() {
        let alarms = "    alarms: {depth: {above: 0}, runbook: wiki/dlq}\n";
        let rules = |b: &str| -> Vec<&'static str> {
            invalid_findings(b, alarms)
                .iter()
                .map(|d| d.rule)
                .filter(|r| *r != "sqs/backoff-consumer")
                .collect()
        };
        assert_eq!(rules("sqs"), ["alarms/runbook"]);
        // `dlqctl alerts` writes them on RabbitMQ and Kafka (issue 34).
        assert_eq!(rules("rabbit"), ["alarms/runbook"]);
    }

    #[test]
    fn an_age_alarm_beyond_the_retention_names_the_retention_to_lengthen() {
        let hint = |found: Vec<crate::diag::Diagnostic>| {
            found
                .into_iter()
                .find(|d| d.rule == "alarms/age-beyond-retention")
                .and_then(|d| d.hint)
                .expect("reported with a hint")
        };
        assert_eq!(
            hint(invalid_findings(
                "sqs",
                "    retention: 1h\n    alarms: {oldestMessageAge: {above: 1h}, actions: [\"arn:aws:sns:eu-west-1:1:o\"]}\n"
            )),
            "alarm well within the retention, or keep messages longer (`spec.invalid.retention`)"
        );
        assert_eq!(
            hint(findings_of(
                "sqs",
                "  retry: {maxAttempts: 3}\n  deadLetter: {retention: 1h}\n  alarms: {oldestMessageAge: {above: 1h}, actions: [\"arn:aws:sns:eu-west-1:1:o\"]}\n",
                ""
            )),
            "alarm well within the dead-letter retention, or keep dead letters longer (`spec.deadLetter.retention`)"
        );
    }

    /// The rule ids of an SQS channel with these `alarms` lines, `actions` included.
    fn alarm_rules_with(alarms: &str) -> Vec<&'static str> {
        findings_of(
            "sqs",
            &format!("  retry: {{maxAttempts: 3}}\n  alarms:\n{alarms}"),
            "",
        )
        .iter()
        .map(|d| d.rule)
        .collect()
    }

    #[test]
    fn per_tier_actions_need_an_alarm_of_their_tier_and_above_counts_as_critical() {
        let arn = "[\"arn:aws:sns:eu-west-1:1:o\"]";
        let case = |depth: &str, actions: &str| {
            alarm_rules_with(&format!("    depth: {depth}\n    actions: {actions}\n"))
        };
        assert_eq!(
            case(
                "{warning: 5, critical: 10}",
                &format!("{{warning: {arn}, critical: {arn}}}")
            ),
            Vec::<&str>::new()
        );
        assert_eq!(
            case("{above: 5}", &format!("{{critical: {arn}}}")),
            Vec::<&str>::new()
        );
        assert_eq!(
            case(
                "{above: 5}",
                &format!("{{warning: {arn}, critical: {arn}}}")
            ),
            ["alarms/actions-tier"]
        );
        assert_eq!(
            case(
                "{warning: 5}",
                &format!("{{warning: {arn}, critical: {arn}}}")
            ),
            ["alarms/actions-tier"]
        );
        // An empty list notifies nobody either way: nothing to say about it.
        assert_eq!(
            case("{above: 5}", &format!("{{warning: [], critical: {arn}}}")),
            Vec::<&str>::new()
        );
    }

    #[test]
    fn a_cloudwatch_period_is_a_whole_number_of_minutes() {
        for ok in ["60s", "5m"] {
            assert_eq!(
                alarm_rules(&format!("    depth: {{above: 0, period: {ok}}}\n")),
                Vec::<&str>::new(),
                "{ok}"
            );
        }
        for bad in ["90s", "0s"] {
            assert_eq!(
                alarm_rules(&format!("    depth: {{above: 0, period: {bad}}}\n")),
                ["alarms/period"],
                "{bad}"
            );
        }
    }

    /// The rate alarm shares the threshold and tier rules of depth and age.
    #[test]
    fn a_rate_alarm_has_one_form_of_threshold_and_tiers_in_order() {
        assert_eq!(
            alarm_rules("    deadLetterRate: {warning: 0.1%, critical: 1%}\n"),
            Vec::<&str>::new()
        );
        assert_eq!(
            alarm_rules("    deadLetterRate: {above: 0.1%}\n"),
            Vec::<&str>::new()
        );
        assert_eq!(
            alarm_rules("    deadLetterRate: {warning: 1%, critical: 1%}\n"),
            ["alarms/tier-order"]
        );
        assert_eq!(
            alarm_rules("    deadLetterRate: {warning: 2.5%, critical: 1%}\n"),
            ["alarms/tier-order"]
        );
        assert_eq!(
            alarm_rules("    deadLetterRate: {above: 1%, critical: 2%}\n"),
            ["alarms/threshold"]
        );
        assert_eq!(
            alarm_rules("    deadLetterRate: {period: 5m}\n"),
            ["alarms/threshold"]
        );
        let message = super::super::tests::findings_of(
            "rabbit",
            "  retry: {maxAttempts: 3, backoff: {initial: 1s}}\n  alarms:\n    deadLetterRate: {warning: 2.5%, critical: 1%}\n",
            "",
        )
        .into_iter()
        .find(|d| d.rule == "alarms/tier-order")
        .map(|d| d.message)
        .expect("reported on RabbitMQ too");
        assert_eq!(
            message,
            "`spec.alarms.deadLetterRate.warning` is 2.5%, not below `critical` (1%): the warning would never come first"
        );
    }

    /// On SQS `for` becomes EvaluationPeriods (for / period): whole periods, at least one,
    /// at most a day; the period is whole minutes. Prometheus takes any `for`.
    #[test]
    fn on_sqs_a_rate_alarms_for_is_whole_periods_of_whole_minutes() {
        for ok in [
            "{above: 1%}",
            "{above: 1%, period: 1m, for: 3m}",
            "{above: 1%, period: 5m, for: 5m}",
            "{above: 1%, period: 1h, for: 1d}",
        ] {
            assert_eq!(
                alarm_rules(&format!("    deadLetterRate: {ok}\n")),
                Vec::<&str>::new(),
                "{ok}"
            );
        }
        for (bad, rules) in [
            ("{above: 1%, period: 5m, for: 7m}", vec!["alarms/for"]),
            ("{above: 1%, period: 5m, for: 1m}", vec!["alarms/for"]),
            ("{above: 1%, period: 15m}", vec!["alarms/for"]),
            ("{above: 1%, period: 90s, for: 3m}", vec!["alarms/period"]),
            ("{above: 1%, period: 0s}", vec!["alarms/period"]),
            ("{above: 1%, period: 1h, for: 25h}", vec!["alarms/period"]),
        ] {
            assert_eq!(
                alarm_rules(&format!("    deadLetterRate: {bad}\n")),
                rules,
                "{bad}"
            );
        }
        let hint = super::super::tests::findings_of(
            "sqs",
            "  retry: {maxAttempts: 3}\n  alarms:\n    deadLetterRate: {above: 1%, period: 5m, for: 7m}\n    actions: [\"arn:aws:sns:eu-west-1:1:o\"]\n",
            "",
        )
        .into_iter()
        .find(|d| d.rule == "alarms/for")
        .and_then(|d| d.hint)
        .expect("a hint");
        assert_eq!(hint, "write `for: 5m` or `for: 10m`, or change `period`");
        let rabbit = |rate: &str| -> Vec<&'static str> {
            super::super::tests::findings_of(
                "rabbit",
                &format!("  retry: {{maxAttempts: 3, backoff: {{initial: 1s}}}}\n  alarms:\n    deadLetterRate: {rate}\n"),
                "",
            )
            .iter()
            .map(|d| d.rule)
            .collect()
        };
        assert_eq!(
            rabbit("{above: 1%, period: 90s, for: 7m}"),
            Vec::<&str>::new()
        );
        assert_eq!(rabbit("{above: 1%, period: 0s}"), ["alarms/period"]);
    }

    /// Cloud Monitoring aligns in whole minutes (1m to 25h) and holds conditions for whole
    /// minutes: the policies `alerts --format cloud-monitoring` writes must be accepted.
    #[test]
    fn on_pubsub_periods_and_durations_are_whole_minutes() {
        let rules = |alarms: &str| -> Vec<&'static str> {
            super::super::tests::findings_of(
                "pubsub",
                &format!("  retry: {{maxAttempts: 5}}\n  alarms:\n{alarms}"),
                "",
            )
            .iter()
            .map(|d| d.rule)
            .collect()
        };
        assert_eq!(
            rules("    depth: {above: 0}\n    deadLetterRate: {above: 1%, period: 2m, for: 3m}\n"),
            Vec::<&str>::new()
        );
        assert_eq!(
            rules("    depth: {above: 0, period: 30s}\n"),
            ["alarms/period"]
        );
        assert_eq!(
            rules("    oldestMessageAge: {above: 1h, period: 26h}\n"),
            ["alarms/period"]
        );
        assert_eq!(
            rules("    deadLetterRate: {above: 1%, for: 90s}\n"),
            ["alarms/period"]
        );
    }

    #[test]
    fn the_rate_is_the_channels_not_the_invalid_queues() {
        let rules: Vec<&str> = invalid_findings(
            "sqs",
            "    alarms: {deadLetterRate: {above: 1%}, actions: [\"arn:aws:sns:eu-west-1:1:o\"]}\n",
        )
        .iter()
        .map(|d| d.rule)
        .filter(|r| *r != "sqs/backoff-consumer")
        .collect();
        assert_eq!(rules, ["alarms/rate-scope"]);
    }

    /// A channel whose only alarm is the rate is watched; on SQS its tiers need actions.
    #[test]
    fn a_rate_alarm_alone_watches_the_channel_and_on_sqs_needs_actions() {
        assert_eq!(
            alarm_rules("    deadLetterRate: {above: 1%}\n"),
            Vec::<&str>::new()
        );
        assert_eq!(
            alarm_rules_with(
                "    deadLetterRate: {warning: 0.1%, critical: 1%}\n    actions: {critical: [\"arn:aws:sns:eu-west-1:1:o\"]}\n"
            ),
            ["alarms/missing"]
        );
    }

    #[test]
    fn actions_are_unused_where_alertmanager_routes_and_only_when_there_are_some() {
        let rules = |backend: &str, actions: &str| -> Vec<&'static str> {
            findings_of(
                backend,
                &format!("  retry: {{maxAttempts: 3, backoff: {{initial: 1s}}}}\n  deadLetter: {{discard: {{after: 7d, reason: r}}}}\n  alarms:\n    depth: {{above: 0}}\n    actions: {actions}\n"),
                "",
            )
            .iter()
            .map(|d| d.rule)
            .collect()
        };
        let arn = "[\"arn:aws:sns:eu-west-1:1:o\"]";
        for b in ["rabbit", "kafka"] {
            assert_eq!(rules(b, arn), ["alarms/actions-unused"], "{b}");
            assert_eq!(rules(b, "[]"), Vec::<&str>::new(), "{b}");
        }
    }
}
