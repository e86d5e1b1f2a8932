//! Rules on `spec.alarms`: CloudWatch's limits on periods and thresholds, and ARNs as
//! actions (checked for SQS targets, the only ones that provision alarms); on other backends,
//! the warning that alarms are not applied.
//!
//! Depends only on the model, `diag` and the loaded document.

use crate::diag::Diagnostic;
use crate::spec::duration::Duration;
use crate::spec::load::Doc;
use crate::spec::model::{Backend, Channel};

pub const CLOUDWATCH_MAX_EVALUATION: Duration = Duration::from_secs(86_400);

/// `alarms/period`, `alarms/whole-seconds` and `alarms/action`.
pub(super) fn check_alarms(doc: &Doc<Channel>, out: &mut Vec<Diagnostic>) {
    let Some(alarms) = &doc.value.spec.alarms else {
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
        let pointer = format!("/spec/alarms/{name}/period");
        if period.as_millis() % 60_000 != 0 || period.as_millis() == 0 {
            out.push(
                Diagnostic::error(
                    "alarms/period",
                    format!("`spec.alarms.{name}.period` is {period}; SQS metrics are per minute, so the period must be a multiple of 60s"),
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
                    format!("`spec.alarms.{name}`: period × evaluationPeriods is {total}; CloudWatch evaluates at most 1d"),
                )
                .at(doc.locs.value(&pointer)),
            );
        }
    }
    if let Some(age) = &alarms.oldest_message_age
        && age.above.as_millis() % 1000 != 0
    {
        out.push(
            Diagnostic::error(
                "alarms/whole-seconds",
                format!(
                    "`spec.alarms.oldestMessageAge.above` is {}; the metric is in whole seconds",
                    age.above
                ),
            )
            .at(doc.locs.value("/spec/alarms/oldestMessageAge/above")),
        );
    }
    for (i, a) in alarms.actions.iter().flatten().enumerate() {
        if !a.starts_with("arn:") {
            out.push(
                Diagnostic::error(
                    "alarms/action",
                    format!("`spec.alarms.actions[{i}]` is `{a}`, which is not an ARN"),
                )
                .at(doc.locs.value(&format!("/spec/alarms/actions/{i}")))
                .hint("alarm actions are ARNs, e.g. `arn:aws:sns:eu-west-1:123456789012:ops`"),
            );
        }
    }
}

/// `alarms/unsupported-backend`.
pub(super) fn alarms_unsupported(doc: &Doc<Channel>, backend: Backend, out: &mut Vec<Diagnostic>) {
    if doc.value.spec.alarms.is_some() {
        out.push(
            Diagnostic::warning(
                "alarms/unsupported-backend",
                format!("alarms are not provisioned for {} targets yet; `spec.alarms` is not applied", backend.display_name()),
            )
            .at(doc.locs.key("/spec/alarms"))
            .hint("alert on the dead-letter queue's depth in your monitoring system (e.g. Prometheus)"),
        );
    }
}
