//! CloudWatch alarms on a channel's dead-letter queue (and, from `invalid.alarms`, on its
//! invalid-message queue, named after that queue the same way): what they should be, how they
//! read back, and the full definition PutMetricAlarm sends.
//!
//! Up to two alarms per channel and tier, named from the DLQ's name by a fixed template
//! (documented in docs/sqs.md): `{dlq}-depth` on ApproximateNumberOfMessagesVisible and
//! `{dlq}-oldest-age` on ApproximateAgeOfOldestMessage (seconds) for a single threshold, and
//! `{dlq}-depth-{tier}` / `{dlq}-oldest-age-{tier}` (`warning`, `critical`) for tiers. All use
//! namespace AWS/SQS, dimension QueueName, statistic Maximum, GreaterThanThreshold and
//! TreatMissingData notBreaching (SQS stops publishing metrics for an idle queue, which must
//! not page anyone).
//!
//! The dead-letter rate (`alarms.deadLetterRate`) is a metric-math alarm on the channel,
//! `{dlq}-dead-letter-rate` (`-{tier}` for tiers): no SQS metric counts the messages a redrive
//! policy moves into a DLQ (NumberOfMessagesSent does not), so what entered the DLQ in a period
//! is what its count (visible and in flight) grew by plus what left it (deleted by a consumer
//! or a redrive), over what was sent to the source: `arr = DIFF(vis + nv) + del`, then
//! `IF(src > 0, IF(arr > 0, arr, 0) / src, 0)` with `vis` and `nv` the DLQ's
//! ApproximateNumberOfMessagesVisible and ...NotVisible (Maximum), `del` its
//! NumberOfMessagesDeleted (Sum) and `src` the source's NumberOfMessagesSent (Sum), each over
//! the alarm's period, against the threshold as a fraction; EvaluationPeriods = for / period.
//! (Counting in-flight messages and clamping the sum, not the growth, is what the exporter
//! does too: clamping the growth alone counts a drained DLQ's deletions on top.) CloudWatch's metric-math
//! documentation lists DIFF and IF without the "not in alarms" caution it gives AVG, SUM and
//! the like, and refuses only SEARCH in alarms.
//!
//! PutMetricAlarm replaces the whole alarm, so every field it takes is owned: fields dlqctl
//! never sets are desired absent (`null`) and shown in a plan when someone sets them.

use std::collections::BTreeMap;

use aws_sdk_cloudwatch::types::{
    ComparisonOperator, Dimension, Metric, MetricAlarm, MetricDataQuery, MetricStat, Statistic, Tag,
};
use serde_json::{Value, json};

use crate::backend::wire::aws::{Aws, AwsError, Pages, classify};
use crate::resource::{Desired, Kind, Props, ResourceId, Role};
use crate::spec::model::{Backend, Tier};
use crate::spec::resolve::{
    AlarmResolved, AlarmsResolved, RateAlarmResolved, RateTierResolved, Resolved, TierResolved,
};

/// DescribeAlarms takes at most 100 names per call.
pub const NAMES_PER_CALL: usize = 100;
pub const DEPTH_SUFFIX: &str = "-depth";
pub const OLDEST_AGE_SUFFIX: &str = "-oldest-age";
pub const NAMESPACE: &str = "AWS/SQS";
pub const DEPTH_METRIC: &str = "ApproximateNumberOfMessagesVisible";
pub const OLDEST_AGE_METRIC: &str = "ApproximateAgeOfOldestMessage";
pub const DEPTH_DESCRIPTION: &str = "messages wait in the dead-letter queue";
pub const OLDEST_AGE_DESCRIPTION: &str =
    "the oldest dead letter is older than the threshold (seconds)";
pub const INVALID_DEPTH_DESCRIPTION: &str = "invalid messages wait in the invalid-message queue";
pub const INVALID_OLDEST_AGE_DESCRIPTION: &str =
    "the oldest invalid message is older than the threshold (seconds)";

pub const RATE_SUFFIX: &str = "-dead-letter-rate";
pub const RATE_DESCRIPTION: &str = "the share of the source's messages that were dead-lettered is above the threshold (a fraction: 0.001 is 0.1%)";
/// What entered the DLQ in a period (metric math over the queries [`rate_metrics`] names):
/// its growth, visible and in flight, plus what was deleted from it.
pub const ARRIVALS_EXPRESSION: &str = "DIFF(vis + nv) + del";
/// The metric-math expression of the rate alarm: the arrivals (never below 0) over the sends.
pub const RATE_EXPRESSION: &str = "IF(src > 0, IF(arr > 0, arr, 0) / src, 0)";
/// The DLQ's in-flight count, part of what entered it.
pub const NOT_VISIBLE_METRIC: &str = "ApproximateNumberOfMessagesNotVisible";
/// The source's metric: messages sent to it.
pub const SENT_METRIC: &str = "NumberOfMessagesSent";
/// The DLQ's metric: messages deleted from it (by a consumer, or a redrive back).
pub const DELETED_METRIC: &str = "NumberOfMessagesDeleted";

/// The queue an alarm watches: its QueueName dimension, or a metric-math alarm's first
/// query's (the DLQ, in the queries [`rate_metrics`] writes).
pub fn watched_queue(props: &Props) -> Option<&str> {
    props
        .get("Dimensions")
        .and_then(|d| d.get("QueueName"))
        .and_then(Value::as_str)
        .or_else(|| {
            props
                .get("Metrics")?
                .get(0)?
                .pointer("/MetricStat/Metric/Dimensions/QueueName")?
                .as_str()
        })
}

/// Whether an alarm watches SQS: its own namespace is AWS/SQS, or (a metric-math alarm,
/// which has none) it has metric queries and every one of them reads AWS/SQS. What
/// `plan --prune` may consider; tags then decide whether dlqctl made it.
pub fn is_sqs_alarm(props: &Props) -> bool {
    if props.get("Namespace").and_then(Value::as_str) == Some(NAMESPACE) {
        return true;
    }
    let Some(queries) = props.get("Metrics").and_then(Value::as_array) else {
        return false;
    };
    let namespaces: Vec<Option<&str>> = queries
        .iter()
        .filter_map(|q| q.get("MetricStat"))
        .map(|m| m.pointer("/Metric/Namespace").and_then(Value::as_str))
        .collect();
    !namespaces.is_empty() && namespaces.iter().all(|n| *n == Some(NAMESPACE))
}

/// The rate alarm's untiered name: `{dlq}-dead-letter-rate`.
pub fn rate_alarm_name(dlq: &str) -> String {
    format!("{dlq}{RATE_SUFFIX}")
}

/// The rate alarm's `Metrics`: the DLQ's visible count and deletions and the source's sends,
/// each over `period` seconds, then the expression (the only query whose data is returned:
/// the value the alarm watches).
pub fn rate_metrics(dlq: &str, source: &str, period: u64) -> Value {
    let stat = |id: &str, queue: &str, metric: &str, stat: &str| {
        json!({
            "Id": id,
            "MetricStat": {
                "Metric": {"Namespace": NAMESPACE, "MetricName": metric, "Dimensions": {"QueueName": queue}},
                "Period": period,
                "Stat": stat,
            },
            "ReturnData": false,
        })
    };
    json!([
        stat("vis", dlq, DEPTH_METRIC, "Maximum"),
        stat("nv", dlq, NOT_VISIBLE_METRIC, "Maximum"),
        stat("del", dlq, DELETED_METRIC, "Sum"),
        stat("src", source, SENT_METRIC, "Sum"),
        {"Id": "arr", "Expression": ARRIVALS_EXPRESSION, "Label": "dead-lettered", "ReturnData": false},
        {"Id": "rate", "Expression": RATE_EXPRESSION, "Label": "dead-letter rate", "ReturnData": true},
    ])
}

/// The alarm names of a dead-letter queue: `{dlq}-depth`, `{dlq}-oldest-age`.
pub fn alarm_names(dlq: &str) -> [String; 2] {
    [
        format!("{dlq}{DEPTH_SUFFIX}"),
        format!("{dlq}{OLDEST_AGE_SUFFIX}"),
    ]
}

/// The name of one alarm: the untiered name (`{dlq}-depth`), or with `-{tier}` appended.
pub fn tier_name(untiered: &str, tier: Option<Tier>) -> String {
    match tier {
        None => untiered.to_owned(),
        Some(t) => format!("{untiered}-{t}"),
    }
}

/// The channel's alarms. An alarm with a single threshold (or none) is one name, as before
/// tiers existed, so existing estates plan empty; a tiered alarm is one name per tier, and
/// its untiered name is desired absent. A name the spec does not ask for is desired absent,
/// so a dlqctl alarm left over from an earlier spec is deleted (guarded like any delete).
/// Not covered: tier alarms left over after a spec goes back to a single threshold (they are
/// not read, to keep untiered plans as they were); `plan --prune` finds them.
///
/// The invalid-message queue (`spec.invalid`) gets the same pair from `invalid.alarms`, named
/// after its own queue, with their own actions (the producing team, usually).
pub fn desired(r: &Resolved) -> Vec<Desired> {
    let mut out = queue_alarms(
        r,
        &r.dead_letter,
        &r.alarms,
        [DEPTH_DESCRIPTION, OLDEST_AGE_DESCRIPTION],
    );
    if let Some(i) = &r.invalid {
        out.extend(queue_alarms(
            r,
            &i.name,
            &i.alarms,
            [INVALID_DEPTH_DESCRIPTION, INVALID_OLDEST_AGE_DESCRIPTION],
        ));
    }
    out.extend(rate_alarms(r));
    out
}

/// The channel's dead-letter rate alarms, when the spec has one: the untiered name, or (for
/// tiers) one per tier with the untiered name desired absent. Without `deadLetterRate` no
/// name is read, so that channels without one cost plan no more DescribeAlarms names: a rate
/// alarm left over after the spec drops `deadLetterRate` is deleted by `plan --prune`, which
/// lists SQS's metric-math alarms too ([`is_sqs_alarm`]).
fn rate_alarms(r: &Resolved) -> Vec<Desired> {
    let Some(rate) = &r.alarms.dead_letter_rate else {
        return Vec::new();
    };
    let untiered = rate_alarm_name(&r.dead_letter);
    names_read(rate.is_tiered())
        .into_iter()
        .map(|tier| {
            let wanted = rate.tiers.iter().find(|t| t.tier == tier);
            alarm(
                r,
                tier_name(&untiered, tier),
                wanted.map(|t| rate_props(r, rate, t)),
            )
        })
        .collect()
}

fn rate_props(r: &Resolved, rate: &RateAlarmResolved, t: &RateTierResolved) -> Props {
    definition(
        description(
            rate.description.as_deref(),
            &r.channel,
            RATE_DESCRIPTION,
            t.tier,
            r.alarms.runbook.as_deref(),
        ),
        vec![
            ("Namespace", Value::Null),
            ("MetricName", Value::Null),
            ("Dimensions", json!({})),
            ("Statistic", Value::Null),
            ("ExtendedStatistic", Value::Null),
            ("Period", Value::Null),
            (
                "Metrics",
                rate_metrics(&r.dead_letter, &r.main, rate.period.as_millis() / 1000),
            ),
        ],
        rate.evaluation_periods(),
        json!(t.fraction()),
        &t.actions,
    )
}

/// The tiers whose names an alarm reads: its one name, or (tiered) the untiered name, desired
/// absent, and one per tier.
fn names_read(tiered: bool) -> Vec<Option<Tier>> {
    if tiered {
        std::iter::once(None)
            .chain(Tier::ALL.into_iter().map(Some))
            .collect()
    } else {
        vec![None]
    }
}

/// One alarm of the channel: `props` its definition, or `None` for a name desired absent.
fn alarm(r: &Resolved, name: String, props: Option<Props>) -> Desired {
    Desired {
        id: ResourceId {
            target: r.target.clone(),
            backend: Backend::Sqs,
            kind: Kind::Alarm,
            scope: String::new(),
            name,
        },
        channel: r.channel.clone(),
        role: Role::Alarm,
        present: props.is_some(),
        props: props.unwrap_or_default(),
        immutable: false,
    }
}

/// The alarms on one queue (the DLQ or the invalid-message queue), described by `what`.
fn queue_alarms(
    r: &Resolved,
    queue: &str,
    a: &AlarmsResolved,
    [depth_what, age_what]: [&str; 2],
) -> Vec<Desired> {
    let [depth_name, age_name] = alarm_names(queue);
    let mut out = Vec::new();
    for (untiered, metric, watched, what) in [
        (depth_name, DEPTH_METRIC, a.depth.as_ref(), depth_what),
        (
            age_name,
            OLDEST_AGE_METRIC,
            a.oldest_message_age.as_ref(),
            age_what,
        ),
    ] {
        for tier in names_read(watched.is_some_and(AlarmResolved::is_tiered)) {
            let wanted = watched.and_then(|x| {
                let t = x.tiers.iter().find(|t| t.tier == tier)?;
                Some((x, t))
            });
            out.push(alarm(
                r,
                tier_name(&untiered, tier),
                wanted.map(|(x, t)| props(r, queue, a, metric, (x, t), what)),
            ));
        }
    }
    out
}

/// The runbook's place in a default description: ` Runbook: <url>`.
pub const RUNBOOK_LEAD: &str = " Runbook: ";

/// dlqctl's own alarm description: `dlqctl channel <channel>: <what>`, the tier in brackets
/// after the channel for tiered alarms, the runbook after.
pub fn default_description(
    channel: &str,
    what: &str,
    tier: Option<Tier>,
    runbook: Option<&str>,
) -> String {
    let tier = tier.map(|t| format!(" ({t})")).unwrap_or_default();
    let runbook = runbook
        .map(|u| format!("{RUNBOOK_LEAD}{u}"))
        .unwrap_or_default();
    format!("dlqctl channel {channel}{tier}: {what}{runbook}")
}

fn props(
    r: &Resolved,
    queue: &str,
    all: &AlarmsResolved,
    metric: &str,
    (a, t): (&AlarmResolved, &TierResolved),
    what: &str,
) -> Props {
    definition(
        description(
            a.description.as_deref(),
            &r.channel,
            what,
            t.tier,
            all.runbook.as_deref(),
        ),
        vec![
            ("Namespace", json!(NAMESPACE)),
            ("MetricName", json!(metric)),
            ("Dimensions", json!({"QueueName": queue})),
            ("Statistic", json!("Maximum")),
            ("ExtendedStatistic", Value::Null),
            ("Period", json!(a.period.as_millis() / 1000)),
        ],
        a.evaluation_periods,
        json!(t.threshold),
        &t.actions,
    )
}

/// An alarm's AlarmDescription: the spec's own, none for `""`, else dlqctl's default.
fn description(
    own: Option<&str>,
    channel: &str,
    what: &str,
    tier: Option<Tier>,
    runbook: Option<&str>,
) -> Value {
    match own {
        None => json!(default_description(channel, what, tier, runbook)),
        Some("") => Value::Null,
        Some(d) => json!(d),
    }
}

/// The whole definition PutMetricAlarm sends (it replaces the alarm, so every field is
/// owned): `watched`, what the alarm watches (a metric, or metric-math `Metrics`), and the
/// fields every dlqctl alarm sets alike.
fn definition(
    description: Value,
    watched: Vec<(&str, Value)>,
    evaluation_periods: u32,
    threshold: Value,
    actions: &[String],
) -> Props {
    [
        ("AlarmDescription", description),
        ("EvaluationPeriods", json!(evaluation_periods)),
        ("DatapointsToAlarm", Value::Null),
        ("Threshold", threshold),
        ("ComparisonOperator", json!("GreaterThanThreshold")),
        ("TreatMissingData", json!("notBreaching")),
        ("Unit", Value::Null),
        ("ActionsEnabled", json!(true)),
        ("AlarmActions", json!(actions)),
        ("OKActions", json!([])),
        ("InsufficientDataActions", json!([])),
    ]
    .into_iter()
    .chain(watched)
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// A number as JSON: integral values as integers (`5.0` reads back as `5`).
fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

fn sorted(list: &[String]) -> Value {
    let mut v = list.to_vec();
    v.sort();
    v.dedup();
    json!(v)
}

/// A live alarm in the same flat shape as [`desired`]'s props.
pub fn live_props(a: &MetricAlarm) -> Props {
    let mut p = Props::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            p.insert(k.to_owned(), v);
        }
    };
    put("AlarmDescription", a.alarm_description().map(|s| json!(s)));
    put("Namespace", a.namespace().map(|s| json!(s)));
    put("MetricName", a.metric_name().map(|s| json!(s)));
    let dims: serde_json::Map<String, Value> = a
        .dimensions()
        .iter()
        .filter_map(|d| Some((d.name()?.to_owned(), json!(d.value()?))))
        .collect();
    put("Dimensions", Some(Value::Object(dims)));
    put("Statistic", a.statistic().map(|s| json!(s.as_str())));
    put(
        "ExtendedStatistic",
        a.extended_statistic().map(|s| json!(s)),
    );
    put("Period", a.period().map(|n| json!(n)));
    put(
        "EvaluationPeriods",
        a.evaluation_periods().map(|n| json!(n)),
    );
    put(
        "DatapointsToAlarm",
        a.datapoints_to_alarm().map(|n| json!(n)),
    );
    put("Threshold", a.threshold().map(number));
    put(
        "ComparisonOperator",
        a.comparison_operator().map(|c| json!(c.as_str())),
    );
    put("TreatMissingData", a.treat_missing_data().map(|s| json!(s)));
    put("Unit", a.unit().map(|u| json!(u.as_str())));
    put("ActionsEnabled", a.actions_enabled().map(|b| json!(b)));
    if !a.metrics().is_empty() {
        put(
            "Metrics",
            Some(Value::Array(a.metrics().iter().map(query_json).collect())),
        );
    }
    put("AlarmActions", Some(sorted(a.alarm_actions())));
    put("OKActions", Some(sorted(a.ok_actions())));
    put(
        "InsufficientDataActions",
        Some(sorted(a.insufficient_data_actions())),
    );
    p
}

/// One query of a metric-math alarm in the shape [`rate_metrics`] writes (dimensions as a
/// map; fields CloudWatch left out, left out).
fn query_json(q: &MetricDataQuery) -> Value {
    let mut o = serde_json::Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            o.insert(k.to_owned(), v);
        }
    };
    put("Id", q.id().map(|s| json!(s)));
    put("Expression", q.expression().map(|s| json!(s)));
    put("Label", q.label().map(|s| json!(s)));
    put("Period", q.period().map(|n| json!(n)));
    put("ReturnData", q.return_data().map(|b| json!(b)));
    put(
        "MetricStat",
        q.metric_stat().map(|m| {
            let mut stat = serde_json::Map::new();
            if let Some(metric) = m.metric() {
                let dims: serde_json::Map<String, Value> = metric
                    .dimensions()
                    .iter()
                    .filter_map(|d| Some((d.name()?.to_owned(), json!(d.value()?))))
                    .collect();
                stat.insert(
                    "Metric".to_owned(),
                    json!({
                        "Namespace": metric.namespace(),
                        "MetricName": metric.metric_name(),
                        "Dimensions": dims,
                    }),
                );
            }
            if let Some(p) = m.period() {
                stat.insert("Period".to_owned(), json!(p));
            }
            if let Some(s) = m.stat() {
                stat.insert("Stat".to_owned(), json!(s));
            }
            if let Some(u) = m.unit() {
                stat.insert("Unit".to_owned(), json!(u.as_str()));
            }
            Value::Object(stat)
        }),
    );
    Value::Object(o)
}

/// The `Metrics` of a desired alarm as the SDK's queries (`None`: not a metric-math alarm).
fn queries(desired: &Props) -> Option<Vec<MetricDataQuery>> {
    let list = desired.get("Metrics")?.as_array()?;
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let int = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_i64)
            .and_then(|n| i32::try_from(n).ok())
    };
    Some(
        list.iter()
            .map(|q| {
                let stat = q.get("MetricStat").map(|m| {
                    let metric = m.get("Metric").map(|x| {
                        let dims = x.get("Dimensions").and_then(Value::as_object).map(|o| {
                            o.iter()
                                .filter_map(|(k, v)| {
                                    Some(Dimension::builder().name(k).value(v.as_str()?).build())
                                })
                                .collect()
                        });
                        Metric::builder()
                            .set_namespace(text(x, "Namespace"))
                            .set_metric_name(text(x, "MetricName"))
                            .set_dimensions(dims)
                            .build()
                    });
                    MetricStat::builder()
                        .set_metric(metric)
                        .set_period(int(m, "Period"))
                        .set_stat(text(m, "Stat"))
                        .build()
                });
                MetricDataQuery::builder()
                    .set_id(text(q, "Id"))
                    .set_expression(text(q, "Expression"))
                    .set_label(text(q, "Label"))
                    .set_period(int(q, "Period"))
                    .set_return_data(q.get("ReturnData").and_then(Value::as_bool))
                    .set_metric_stat(stat)
                    .build()
            })
            .collect(),
    )
}

/// A live alarm: its properties and its ARN (for tags).
#[derive(Debug, Clone)]
pub struct LiveAlarm {
    pub props: Props,
    pub arn: Option<String>,
}

/// Reads the named alarms, at most 100 names per DescribeAlarms call; absent names are
/// simply missing from the answer.
pub async fn read(aws: &Aws, names: &[String]) -> Result<BTreeMap<String, LiveAlarm>, AwsError> {
    let mut out = BTreeMap::new();
    for chunk in names.chunks(NAMES_PER_CALL) {
        let what = match chunk {
            [one] => format!("alarm {one}"),
            _ => format!("{} alarms ({} ...)", chunk.len(), chunk[0]),
        };
        describe(aws, Some(chunk), None, &what, &mut out).await?;
    }
    Ok(out)
}

/// Every metric alarm whose name starts with `prefix` (`""`: all of the account and region),
/// 100 per DescribeAlarms page: what `import` and `plan --prune` look through.
pub async fn list(aws: &Aws, prefix: &str) -> Result<BTreeMap<String, LiveAlarm>, AwsError> {
    let what = if prefix.is_empty() {
        "alarms".to_owned()
    } else {
        format!("alarms starting with {prefix}")
    };
    let mut out = BTreeMap::new();
    let prefix = (!prefix.is_empty()).then_some(prefix);
    describe(aws, None, prefix, &what, &mut out).await?;
    Ok(out)
}

/// One paginated DescribeAlarms (metric alarms, 100 a page), by names or by name prefix.
async fn describe(
    aws: &Aws,
    names: Option<&[String]>,
    prefix: Option<&str>,
    what: &str,
    out: &mut BTreeMap<String, LiveAlarm>,
) -> Result<(), AwsError> {
    let mut token: Option<String> = None;
    let mut pages = Pages::default();
    loop {
        let page = aws
            .read("cloudwatch:DescribeAlarms", |c| {
                let names = names.map(<[String]>::to_vec);
                let prefix = prefix.map(str::to_owned);
                let (token, what) = (token.clone(), what.to_owned());
                async move {
                    c.cloudwatch
                        .describe_alarms()
                        .set_alarm_names(names)
                        .set_alarm_name_prefix(prefix)
                        .alarm_types(aws_sdk_cloudwatch::types::AlarmType::MetricAlarm)
                        .max_records(100)
                        .set_next_token(token)
                        .send()
                        .await
                        .map_err(|e| classify("cloudwatch:DescribeAlarms", &what, e))
                }
            })
            .await?;
        for a in page.metric_alarms() {
            if let Some(name) = a.alarm_name() {
                out.insert(
                    name.to_owned(),
                    LiveAlarm {
                        props: live_props(a),
                        arn: a.alarm_arn().map(str::to_owned),
                    },
                );
            }
        }
        match pages.next("cloudwatch:DescribeAlarms", what, page.next_token())? {
            Some(t) => token = Some(t),
            None => return Ok(()),
        }
    }
}

/// Adds tags to an existing alarm (adoption); other tags stay.
pub async fn tag(aws: &Aws, name: &str, arn: &str, tags: &[(&str, &str)]) -> Result<(), AwsError> {
    let what = format!("alarm {name}");
    let tags: Vec<Tag> = tags
        .iter()
        .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
        .collect();
    aws.write("cloudwatch:TagResource", |c| async move {
        c.cloudwatch
            .tag_resource()
            .resource_arn(arn)
            .set_tags(Some(tags))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| classify("cloudwatch:TagResource", &what, e))
    })
    .await
}

/// The tags of one alarm.
pub async fn tags(aws: &Aws, name: &str, arn: &str) -> Result<BTreeMap<String, String>, AwsError> {
    let what = format!("alarm {name}");
    let out = aws
        .read("cloudwatch:ListTagsForResource", |c| {
            let (arn, what) = (arn.to_owned(), what.clone());
            async move {
                c.cloudwatch
                    .list_tags_for_resource()
                    .resource_arn(arn)
                    .send()
                    .await
                    .map_err(|e| classify("cloudwatch:ListTagsForResource", &what, e))
            }
        })
        .await?;
    Ok(out
        .tags()
        .iter()
        .filter_map(|t| Some((t.key()?.to_owned(), t.value()?.to_owned())))
        .collect())
}

/// Creates or replaces an alarm with the full definition in `desired` (PutMetricAlarm
/// replaces every field). `tags` are set on creation; CloudWatch ignores them on updates.
pub async fn put(
    aws: &Aws,
    name: &str,
    desired: &Props,
    tags: &[(&str, &str)],
) -> Result<(), AwsError> {
    let what = format!("alarm {name}");
    let text = |k: &str| desired.get(k).and_then(Value::as_str).map(str::to_owned);
    let int = |k: &str| {
        desired
            .get(k)
            .and_then(Value::as_i64)
            .and_then(|n| i32::try_from(n).ok())
    };
    let list = |k: &str| -> Vec<String> {
        desired
            .get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let dimensions: Vec<Dimension> = desired
        .get("Dimensions")
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| Some(Dimension::builder().name(k).value(v.as_str()?).build()))
                .collect()
        })
        .unwrap_or_default();
    let metrics = queries(desired);
    let tags: Vec<Tag> = tags
        .iter()
        .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
        .collect();
    let req = |c: crate::backend::wire::aws::Clients| {
        c.cloudwatch
            .put_metric_alarm()
            .alarm_name(name)
            .set_alarm_description(text("AlarmDescription"))
            .set_namespace(text("Namespace"))
            .set_metric_name(text("MetricName"))
            .set_dimensions((!dimensions.is_empty()).then(|| dimensions.clone()))
            .set_metrics(metrics.clone())
            .set_statistic(text("Statistic").map(|s| Statistic::from(s.as_str())))
            .set_period(int("Period"))
            .set_evaluation_periods(int("EvaluationPeriods"))
            .set_threshold(desired.get("Threshold").and_then(Value::as_f64))
            .set_comparison_operator(
                text("ComparisonOperator").map(|s| ComparisonOperator::from(s.as_str())),
            )
            .set_treat_missing_data(text("TreatMissingData"))
            .set_actions_enabled(desired.get("ActionsEnabled").and_then(Value::as_bool))
            .set_alarm_actions(Some(list("AlarmActions")))
            .set_ok_actions(Some(list("OKActions")))
            .set_insufficient_data_actions(Some(list("InsufficientDataActions")))
            .set_tags((!tags.is_empty()).then(|| tags.clone()))
    };
    aws.write("cloudwatch:PutMetricAlarm", |c| async move {
        req(c)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| classify("cloudwatch:PutMetricAlarm", &what, e))
    })
    .await
}

pub async fn delete(aws: &Aws, name: &str) -> Result<(), AwsError> {
    let what = format!("alarm {name}");
    aws.write("cloudwatch:DeleteAlarms", |c| async move {
        c.cloudwatch
            .delete_alarms()
            .alarm_names(name)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| classify("cloudwatch:DeleteAlarms", &what, e))
    })
    .await
}

/// SQS's alerts door: its alerts are the CloudWatch alarms `apply` provisions.
impl crate::backend::kit::alerts::Alerts for super::Sqs {
    fn home() -> crate::backend::kit::alerts::AlertHome {
        crate::backend::kit::alerts::AlertHome::CloudWatch
    }

    fn native_depth(_r: &Resolved, _matchers: &str, _n: u64) -> Option<String> {
        None
    }
}

/// One desired CloudWatch alarm as `dlqctl graph` draws it (`None`: not an alarm).
pub(super) fn drawn(a: &crate::resource::Desired) -> Option<crate::backend::kit::draw::DrawnAlarm> {
    if a.id.kind != crate::resource::Kind::Alarm {
        return None;
    }
    use crate::backend::kit::draw::Watch;
    let raw = a
        .props
        .get("Threshold")
        .and_then(serde_json::Value::as_f64)
        .unwrap_or(0.0);
    let threshold = raw.max(0.0) as u64;
    let metric = a
        .props
        .get("MetricName")
        .and_then(serde_json::Value::as_str);
    let watch = match metric {
        Some(OLDEST_AGE_METRIC) => Watch::Age(threshold),
        Some(_) => Watch::Depth(threshold),
        // The metric-math alarm: the dead-letter rate, on the channel's DLQ.
        None => Watch::Rate(raw),
    };
    Some(crate::backend::kit::draw::DrawnAlarm {
        id: a.id.clone(),
        watches: a
            .props
            .get("Dimensions")
            .and_then(|d| d.get("QueueName"))
            .and_then(|q| q.as_str())
            .map(str::to_owned),
        system: "CloudWatch alarm",
        watch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::same;

    /// `spec.invalid` on SQS: a queue no queue may dead-letter into (RedriveAllowPolicy
    /// `denyAll`), created before the main queue, with its own alarms and actions.
    #[test]
    fn the_invalid_message_queue_denies_redrive_and_has_its_own_alarms() {
        let ws = crate::spec::load::load_str(
            "c.yaml",
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: payments}\nspec:\n  target: s\n  retry: {maxAttempts: 3}\n  alarms: {depth: {above: 0}, actions: [\"arn:ops\"]}\n  invalid:\n    alarms: {depth: {above: 5}, actions: [\"arn:producers\"]}\n",
        );
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let target = serde_json::from_value(json!({"backend": "sqs", "region": "us-east-1"}))
            .expect("target");
        let r =
            crate::spec::resolve::resolve(&ws.channels[0].value, "s", &target).expect("resolves");
        let d = crate::backend::sqs::desired::desired(&r);
        let q = d
            .iter()
            .find(|x| x.id.name == "payments-invalid" && x.id.kind == Kind::Queue)
            .expect("the invalid queue");
        assert_eq!(q.role, Role::Invalid);
        assert_eq!(
            q.props.get("RedriveAllowPolicy.redrivePermission"),
            Some(&json!("denyAll"))
        );
        assert_eq!(
            q.props.get("RedriveAllowPolicy.sourceQueues"),
            Some(&Value::Null)
        );
        assert_eq!(
            q.props.get("MessageRetentionPeriod"),
            Some(&json!(1_209_600))
        );
        assert_eq!(
            q.props.get("RedrivePolicy.deadLetterTarget"),
            Some(&Value::Null)
        );
        let alarm = |name: &str| {
            d.iter()
                .find(|x| x.id.name == name && x.present)
                .unwrap_or_else(|| panic!("no alarm {name}"))
        };
        let inv = alarm("payments-invalid-depth");
        assert_eq!(
            inv.props.get("Dimensions"),
            Some(&json!({"QueueName": "payments-invalid"}))
        );
        assert_eq!(
            inv.props.get("AlarmActions"),
            Some(&json!(["arn:producers"]))
        );
        assert_eq!(inv.props.get("Threshold"), Some(&json!(5)));
        assert_eq!(
            alarm("payments-dlq-depth").props.get("AlarmActions"),
            Some(&json!(["arn:ops"]))
        );
        // An age alarm nobody asked for on the invalid queue is desired absent.
        assert!(
            d.iter()
                .any(|x| x.id.name == "payments-invalid-oldest-age" && !x.present)
        );
    }

    #[test]
    fn a_live_alarm_reads_back_in_the_desired_shape() {
        let live = MetricAlarm::builder()
            .alarm_name("p-dlq-depth")
            .namespace(NAMESPACE)
            .metric_name(DEPTH_METRIC)
            .dimensions(
                Dimension::builder()
                    .name("QueueName")
                    .value("p-dlq")
                    .build(),
            )
            .statistic(Statistic::Maximum)
            .period(60)
            .evaluation_periods(1)
            .threshold(0.0)
            .comparison_operator(ComparisonOperator::GreaterThanThreshold)
            .treat_missing_data("notBreaching")
            .actions_enabled(true)
            .alarm_actions("arn:b")
            .alarm_actions("arn:a")
            .build();
        let p = live_props(&live);
        assert_eq!(*p.get("Threshold").unwrap(), json!(0));
        assert_eq!(*p.get("Dimensions").unwrap(), json!({"QueueName": "p-dlq"}));
        assert_eq!(*p.get("AlarmActions").unwrap(), json!(["arn:a", "arn:b"]));
        assert_eq!(*p.get("OKActions").unwrap(), json!([]));
        assert!(same(&Value::Null, p.get("DatapointsToAlarm")));
        assert_eq!(number(2.5), json!(2.5));
    }

    /// The rate's metric-math alarms: one per tier (the untiered name desired absent), the
    /// threshold a fraction, EvaluationPeriods = for / period; and no rate name at all (so no
    /// extra DescribeAlarms name) for a channel without `deadLetterRate`.
    #[test]
    fn the_rate_is_a_metric_math_alarm_per_tier_and_costs_nothing_without_one() {
        let desired_of = |alarms: &str| {
            let ws = crate::spec::load::load_str(
                "c.yaml",
                &format!(
                    "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: pay}}\nspec:\n  target: s\n  retry: {{maxAttempts: 3}}\n  alarms: {alarms}\n"
                ),
            );
            assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
            let target = serde_json::from_value(json!({"backend": "sqs", "region": "us-east-1"}))
                .expect("target");
            let r = crate::spec::resolve::resolve(&ws.channels[0].value, "s", &target)
                .expect("resolves");
            desired(&r)
        };
        let d = desired_of(
            "{deadLetterRate: {warning: 0.1%, critical: 1%, period: 1m, for: 3m}, actions: [\"arn:ops\"]}",
        );
        let rate: Vec<(&str, bool)> = d
            .iter()
            .filter(|x| x.id.name.contains(RATE_SUFFIX))
            .map(|x| (x.id.name.as_str(), x.present))
            .collect();
        assert_eq!(
            rate,
            [
                ("pay-dlq-dead-letter-rate", false),
                ("pay-dlq-dead-letter-rate-warning", true),
                ("pay-dlq-dead-letter-rate-critical", true)
            ]
        );
        let critical = d
            .iter()
            .find(|x| x.id.name == "pay-dlq-dead-letter-rate-critical")
            .expect("critical");
        assert_eq!(critical.props.get("Threshold"), Some(&json!(0.01)));
        assert_eq!(critical.props.get("EvaluationPeriods"), Some(&json!(3)));
        assert_eq!(
            critical.props.get("Metrics"),
            Some(&rate_metrics("pay-dlq", "pay", 60))
        );
        assert_eq!(critical.props.get("MetricName"), Some(&Value::Null));
        assert_eq!(critical.props.get("Dimensions"), Some(&json!({})));
        assert_eq!(
            rate_metrics("pay-dlq", "pay", 60)[5]["Expression"],
            json!("IF(src > 0, IF(arr > 0, arr, 0) / src, 0)")
        );
        let without = desired_of("{depth: {above: 0}, actions: [\"arn:ops\"]}");
        assert!(
            !without.iter().any(|x| x.id.name.contains(RATE_SUFFIX)),
            "no rate name is read without deadLetterRate"
        );
    }

    /// `plan --prune` considers an alarm only when it watches SQS: the depth and age alarms
    /// by their namespace, the rate alarms (metric math, no namespace) by their queries.
    #[test]
    fn sqs_alarms_are_known_by_their_namespace_or_by_every_query() {
        let props = |v: Value| -> Props {
            v.as_object()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .collect()
        };
        assert!(is_sqs_alarm(&props(json!({"Namespace": NAMESPACE}))));
        assert!(is_sqs_alarm(&props(
            json!({"Namespace": null, "Metrics": rate_metrics("pay-dlq", "pay", 60)})
        )));
        assert!(!is_sqs_alarm(&props(json!({"Namespace": "AWS/Lambda"}))));
        assert!(!is_sqs_alarm(&props(json!({"Metrics": [
            {"Id": "a", "MetricStat": {"Metric": {"Namespace": NAMESPACE}}},
            {"Id": "b", "MetricStat": {"Metric": {"Namespace": "AWS/Lambda"}}},
            {"Id": "c", "Expression": "a / b"}
        ]}))));
        assert!(!is_sqs_alarm(&props(
            json!({"Metrics": [{"Id": "c", "Expression": "1"}]})
        )));
        assert!(!is_sqs_alarm(&Props::new()));
    }

    #[test]
    fn alarm_names_follow_the_documented_template() {
        assert_eq!(
            alarm_names("payments-dlq"),
            ["payments-dlq-depth", "payments-dlq-oldest-age"]
        );
    }
}
