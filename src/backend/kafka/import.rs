//! Import from Kafka: a topic with a dead-letter topic next to it (`<main>-dlt`, `.dlt` or
//! `_dlt`, or the blocking recoverer's `<main>.DLT`) becomes a channel, with its retry topics
//! (`<main>-retry…`, `.retry…`, `_retry…`, by the same suffix set) and its invalid-message
//! topic (`<main>-invalid-dlt`, `spec.invalid`).
//!
//! Topics carry no links, so the grouping follows Spring Kafka's naming, the same profiles
//! dlqctl writes (docs/kafka.md). Which profile, backoff and number of attempts give exactly
//! the live retry topics is found by trying candidates and resolving each as `plan` would;
//! the first that reproduces every name wins. When the names do not carry the delays
//! (`-retry`, `-retry-0`, ...), import says that the delays it wrote are assumptions.
//!
//! Pure: it groups what [`crate::backend::kafka::read::Reader::inventory`] read.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{DEFAULTS_KEY, topic_id};
use crate::backend::kit::import::{
    self as import_kit, Candidate, channel, fit_backoff, millis, sanitise_channel_id, template,
    valid_channel_id,
};
use crate::resource::Role;
use crate::resource::{Live, ResourceId};
use crate::spec::model::{
    Backoff, ChannelSpec, ConfigValue, DeadLetter, Invalid, KafkaNaming, KafkaOptions, Retry,
    Target, TopicReuse,
};
use crate::spec::resolve;

/// The channel and role each live topic would have if it were imported (see
/// [`import_kit::labels`]).
pub fn labels(
    live: &BTreeMap<ResourceId, Live>,
    target_name: &str,
    target: &Target,
) -> BTreeMap<ResourceId, (String, Role)> {
    import_kit::labels(
        group(live, target_name, target).0,
        target_name,
        target,
        super::desired::desired,
    )
}

/// Groups topics into channels; returns them and what fits no channel.
pub fn group(
    live: &BTreeMap<ResourceId, Live>,
    target_name: &str,
    target: &Target,
) -> (Vec<Candidate>, Vec<String>) {
    let topics: BTreeSet<&str> = live.keys().map(|i| i.name.as_str()).collect();
    // The DLT next to a main topic, with the suffix set that names it and its retry topics.
    let dlt_of = |main: &str| {
        SUFFIX_SETS
            .iter()
            .map(|(r, d)| (format!("{main}{d}"), *r, *d))
            .find(|(d, _, _)| topics.contains(d.as_str()))
    };
    let is_dlt = |t: &str| SUFFIX_SETS.iter().any(|(_, d)| t.ends_with(d));
    let mains: Vec<&str> = topics
        .iter()
        .copied()
        .filter(|t| dlt_of(t).is_some())
        .collect();
    let mut claimed: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    let mut unmatched = Vec::new();
    for main in &mains {
        let Some((dlt, retry_suffix, dlt_suffix)) = dlt_of(main) else {
            continue;
        };
        let retries: Vec<&str> = topics
            .iter()
            .copied()
            .filter(|t| {
                t.strip_prefix(*main)
                    .and_then(|r| r.strip_prefix(retry_suffix))
                    .is_some_and(|r| r.is_empty() || r.starts_with('-'))
                    && !mains.contains(t)
                    && dlt_of(t).is_none()
                    && !is_dlt(t)
            })
            .collect();
        let invalid = format!("{main}{}", resolve::KAFKA_INVALID_SUFFIX);
        let invalid =
            (topics.contains(invalid.as_str()) && !claimed.contains(&invalid)).then_some(invalid);
        let mut names: Vec<String> = vec![(*main).to_owned(), dlt.clone()];
        names.extend(retries.iter().map(|r| (*r).to_owned()));
        names.extend(invalid.clone());
        let t = Topics {
            live,
            target_name,
            target,
            main,
            dlt: &dlt,
            retry_suffix,
            dlt_suffix,
            retries: &retries,
            invalid: invalid.as_deref(),
        };
        match build(&t) {
            Ok(c) => out.push(c),
            Err(why) => {
                for n in &names {
                    unmatched.push(format!(
                        "{}: fits no channel: {why}",
                        topic_id(target_name, n)
                    ));
                }
            }
        }
        claimed.extend(names);
    }
    for t in &topics {
        if !claimed.contains(*t) {
            unmatched.push(format!(
                "{}: fits no channel: no `{t}-dlt` topic next to it, and it is no other channel's retry or dead-letter topic",
                topic_id(target_name, t)
            ));
        }
    }
    (out, unmatched)
}

/// The suffix sets a Spring Kafka application names its retry and dead-letter topics with,
/// most common first: `@RetryableTopic`'s defaults (`-retry`, `-dlt`), the dotted and
/// underscored sets teams configure (`retryTopicSuffix`, `dltTopicSuffix`), and the blocking
/// `DeadLetterPublishingRecoverer`'s `.DLT` (no retry topics of its own; `-retry` then).
const SUFFIX_SETS: [(&str, &str); 4] = [
    ("-retry", "-dlt"),
    (".retry", ".dlt"),
    ("_retry", "_dlt"),
    ("-retry", ".DLT"),
];

/// The configs set on a topic (not broker defaults).
fn topic_configs(l: &Live) -> BTreeMap<String, Value> {
    let defaults: Vec<&str> = l
        .props
        .get(DEFAULTS_KEY)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    l.props
        .iter()
        .filter(|(k, _)| k.starts_with("config.") && !defaults.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The topic's effective retention (set on it, or the broker's default, written out: a
/// dead-letter channel should say how long it keeps messages).
fn retention(
    l: &Live,
    topic: &ResourceId,
    findings: &mut Vec<String>,
) -> Option<crate::spec::duration::Duration> {
    let v = l.props.get("config.retention.ms").cloned()?;
    match v.as_i64() {
        Some(ms) if ms >= 1000 => u64::try_from(ms).ok().map(millis),
        _ => {
            findings.push(format!(
                "{topic}: retention.ms = {v} cannot be written as a spec retention (at least 1s); left as is"
            ));
            None
        }
    }
}

/// A main topic with its dead-letter and retry topics, and what they were read from.
struct Topics<'a> {
    live: &'a BTreeMap<ResourceId, Live>,
    target_name: &'a str,
    target: &'a Target,
    main: &'a str,
    dlt: &'a str,
    /// Spring's retry topic suffix and DLT suffix that name this channel's topics.
    retry_suffix: &'a str,
    dlt_suffix: &'a str,
    retries: &'a [&'a str],
    /// `<main>-invalid-dlt`, when it exists.
    invalid: Option<&'a str>,
}

impl Topics<'_> {
    /// The topic as read.
    fn get(&self, name: &str) -> Option<&Live> {
        self.live.get(&topic_id(self.target_name, name))
    }
}

/// The channel the topics make, or why no naming profile gives exactly its retry topics.
fn build(t: &Topics) -> Result<Candidate, String> {
    let (Some(ml), Some(dl)) = (t.get(t.main), t.get(t.dlt)) else {
        return Err("it was not read".into());
    };
    let id = if valid_channel_id(t.main) {
        t.main.to_owned()
    } else {
        sanitise_channel_id(t.main)
    };
    let mut findings = Vec::new();
    let mut base = base_spec(t, &id, [ml, dl], &mut findings)?;
    base.invalid = invalid_spec(t, dl, &mut findings);
    let (spec, assumed) = matching_retry(t, &id, &base)?;
    if assumed {
        findings.push(format!(
            "{}: the retry topic names do not carry the delays; the backoff in the spec is an assumption (Spring's default 1s): set the one your consumer uses",
            topic_id(t.target_name, t.main)
        ));
    }
    let members: BTreeMap<ResourceId, Live> = std::iter::once(t.main)
        .chain(t.retries.iter().copied())
        .chain([t.dlt])
        .chain(t.invalid)
        .filter_map(|n| t.get(n).map(|l| (topic_id(t.target_name, n), l.clone())))
        .collect();
    Ok(Candidate {
        channel: channel(&id, spec),
        live: members,
        findings,
        to_adopt: Vec::new(),
        unreadable: Vec::new(),
    })
}

/// The spec without its retry block: partitions, replication, retentions, the dead-letter
/// name where it is not the default, and the configs every topic shares.
fn base_spec(
    t: &Topics,
    id: &str,
    [ml, dl]: [&Live; 2],
    findings: &mut Vec<String>,
) -> Result<ChannelSpec, String> {
    let number = |l: &Live, k: &str| l.props.get(k).and_then(Value::as_u64);
    let partitions = number(ml, "partitions").and_then(|n| u32::try_from(n).ok());
    let dlt_partitions = number(dl, "partitions").and_then(|n| u32::try_from(n).ok());
    let replication = number(ml, "replication.factor").and_then(|n| u16::try_from(n).ok());
    let all: Vec<&Live> = std::iter::once(ml)
        .chain(t.retries.iter().filter_map(|r| t.get(r)))
        .chain([dl])
        .chain(t.invalid.and_then(|n| t.get(n)))
        .collect();
    let shared = shared_configs(ml, &all);
    let (main, dlt) = (t.main, t.dlt);
    // `.DLT` (the blocking recoverer's) is a name; the others are Spring suffix sets.
    let dead_letter_name = if t.dlt_suffix != ".DLT" {
        None
    } else {
        Some(template(dlt, id).ok_or_else(|| format!("the name {dlt} holds `{{` or `}}`"))?)
    };
    let non_default = |v: &str, d: &str| (v != d && t.dlt_suffix != ".DLT").then(|| v.to_owned());
    let keep = crate::backend::kit::import::dead_letter_keep(
        crate::spec::model::Backend::Kafka,
        retention(dl, &topic_id(t.target_name, dlt), findings),
    );
    Ok(ChannelSpec {
        target: Some(t.target_name.to_owned()),
        name: (id != main).then(|| main.to_owned()),
        retention: retention(ml, &topic_id(t.target_name, main), findings),
        retry: None,
        dead_letter: Some(DeadLetter {
            of: None,
            subscription: None,
            name: dead_letter_name,
            retention: keep.0,
            discard: keep.1,
            archive: None,
            envelope: None,
            classes: None,
            consumer_group: None,
            max_redrives: None,
            redrive: None,
            sqs: None,
        }),
        kafka: Some(KafkaOptions {
            partitions,
            replication_factor: replication,
            dead_letter_partitions: dlt_partitions.filter(|d| Some(*d) != partitions),
            naming: None,
            retry_topic_suffix: non_default(t.retry_suffix, "-retry"),
            dlt_suffix: non_default(t.dlt_suffix, "-dlt"),
            exception_based_dlts: None,
            same_interval_topic_reuse: None,
            acls: None,
            connectors: None,
            config: (!shared.is_empty()).then_some(shared),
            // Not found by import: a group whose configs are set but has no member is not
            // listed by ListGroups (docs/kafka.md "Share groups").
            share_groups: None,
        }),
        ..ChannelSpec::default()
    })
}

/// The invalid-message topic as `spec.invalid` says it: the default name, its retention as a
/// retention or a discard without a reason (as the dead-letter topic's). Partitions other than
/// the dead-letter topic's cannot be said (the spec gives it the DLT's): a finding.
fn invalid_spec(t: &Topics, dl: &Live, findings: &mut Vec<String>) -> Option<Invalid> {
    let name = t.invalid?;
    let il = t.get(name)?;
    let id = topic_id(t.target_name, name);
    let partitions = |l: &Live| l.props.get("partitions").and_then(Value::as_u64);
    if partitions(il) != partitions(dl) {
        findings.push(format!(
            "{id}: {} partitions, but a spec gives the invalid-message topic as many as the dead-letter topic ({}); a plan shows the difference",
            partitions(il).map_or("?".into(), |n| n.to_string()),
            partitions(dl).map_or("?".into(), |n| n.to_string())
        ));
    }
    let keep = crate::backend::kit::import::dead_letter_keep(
        crate::spec::model::Backend::Kafka,
        retention(il, &id, findings),
    );
    Some(Invalid {
        name: None,
        retention: keep.0,
        discard: keep.1,
        alarms: None,
    })
}

/// The main topic's configs (retention aside) that every topic of the channel has with the
/// same value: a spec sets one config for all of them.
fn shared_configs(ml: &Live, all: &[&Live]) -> BTreeMap<String, ConfigValue> {
    let mut shared: BTreeMap<String, ConfigValue> = BTreeMap::new();
    for (k, v) in topic_configs(ml) {
        if k == "config.retention.ms" {
            continue;
        }
        if all.iter().all(|l| topic_configs(l).get(&k) == Some(&v)) {
            let value = match &v {
                Value::Number(n) => n
                    .as_i64()
                    .map_or_else(|| ConfigValue::Text(n.to_string()), ConfigValue::Int),
                Value::Bool(b) => ConfigValue::Bool(*b),
                Value::String(s) => ConfigValue::Text(s.clone()),
                other => ConfigValue::Text(other.to_string()),
            };
            shared.insert(k.trim_start_matches("config.").to_owned(), value);
        }
    }
    shared
}

/// The first candidate retry block (profile, backoff, attempts) that, resolved as `plan`
/// would, gives exactly the live retry topic names; with whether its delays are a guess.
fn matching_retry(t: &Topics, id: &str, base: &ChannelSpec) -> Result<(ChannelSpec, bool), String> {
    let wanted: BTreeSet<&str> = t.retries.iter().copied().collect();
    candidates(t.main, t.retry_suffix, t.retries)
        .into_iter()
        .map(|(naming, reuse, backoff, attempts, assumed)| {
            let mut spec = base.clone();
            spec.retry = Some(Retry {
                max_attempts: Some(attempts),
                backoff,
                name: None,
            });
            if let Some(k) = spec.kafka.as_mut() {
                k.naming = (naming != KafkaNaming::Spring).then_some(naming);
                k.same_interval_topic_reuse = (reuse != TopicReuse::SingleTopic).then_some(reuse);
            }
            (spec, assumed)
        })
        .find(|(spec, _)| {
            let c = channel(id, spec.clone());
            resolve::resolve(&c, t.target_name, t.target).is_ok_and(|r| {
                let got: BTreeSet<&str> = r.retry_stages.iter().map(|s| s.name.as_str()).collect();
                got == wanted && r.dead_letter == t.dlt && r.main == t.main
            })
        })
        .ok_or_else(|| {
            format!(
                "its retry topics ({}) follow none of the naming profiles (spring, index; singleTopic, multipleTopics)",
                if t.retries.is_empty() { "none".to_owned() } else { t.retries.join(", ") }
            )
        })
}

type Try = (KafkaNaming, TopicReuse, Option<Backoff>, u32, bool);

/// Profiles, backoffs and attempt counts that may give these retry topics, most likely first;
/// the last field says whether the delays are a guess.
fn candidates(main: &str, retry_suffix: &str, retries: &[&str]) -> Vec<Try> {
    use KafkaNaming::{Index, Spring};
    use TopicReuse::{MultipleTopics, SingleTopic};
    let rests: Vec<&str> = retries
        .iter()
        .filter_map(|r| {
            r.strip_prefix(main)
                .and_then(|r| r.strip_prefix(retry_suffix))
        })
        .collect();
    let k = u32::try_from(rests.len()).unwrap_or(u32::MAX);
    if rests.is_empty() {
        return vec![(Spring, SingleTopic, None, 1, false)];
    }
    let fixed = |ms: u64| Backoff {
        initial: millis(ms),
        multiplier: None,
        max: None,
        jitter: None,
    };
    let growing = Backoff {
        initial: millis(1000),
        multiplier: Some(2.0),
        max: None,
        jitter: None,
    };
    let mut out: Vec<Try> = Vec::new();
    // `-retry-<ms>` and `-retry-<ms>-<n>`: the delays are in the names.
    let mut delays: Vec<u64> = Vec::new();
    let mut parsed = true;
    for r in &rests {
        let parts: Vec<&str> = r.trim_start_matches('-').split('-').collect();
        match parts.as_slice() {
            [ms] if !ms.is_empty() => match ms.parse::<u64>() {
                Ok(ms) => delays.push(ms),
                Err(_) => parsed = false,
            },
            [ms, n] => match (ms.parse::<u64>(), n.parse::<u64>()) {
                (Ok(ms), Ok(_)) => delays.push(ms),
                _ => parsed = false,
            },
            _ => parsed = false,
        }
    }
    if parsed {
        delays.sort_unstable();
        let mut distinct = delays.clone();
        distinct.dedup();
        if let Some((b, attempts)) = fit_backoff(&distinct) {
            out.push((Spring, SingleTopic, Some(b.clone()), attempts, false));
            out.push((Spring, MultipleTopics, Some(b.clone()), attempts, false));
            // Repeated delays (`-retry-4000-0`, `-retry-4000-1`): the attempts at the cap.
            let capped = Backoff {
                max: distinct.last().copied().map(millis),
                ..b
            };
            let all = u32::try_from(delays.len())
                .unwrap_or(u32::MAX)
                .saturating_add(1);
            out.push((Spring, MultipleTopics, Some(capped), all, false));
        }
    }
    // `-retry` or `-retry-0`, `-retry-1`, ...: indexes or a fixed delay; delays unknown.
    out.push((Spring, SingleTopic, Some(fixed(1000)), k + 1, true));
    out.push((Spring, SingleTopic, Some(fixed(1000)), 2, true));
    out.push((Index, SingleTopic, Some(growing.clone()), k + 1, true));
    out.push((Spring, MultipleTopics, Some(fixed(1000)), k + 1, true));
    out.push((Index, MultipleTopics, Some(growing), k + 1, true));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn topic(partitions: u64, retention: Option<i64>) -> Live {
        let mut props = json!({"partitions": partitions, "replication.factor": 1});
        if let Some(r) = retention {
            props["config.retention.ms"] = json!(r);
        }
        Live {
            props: serde_json::from_value(props).expect("props"),
            messages: None,
        }
    }

    fn target() -> Target {
        serde_json::from_value(
            json!({"backend": "kafka", "bootstrapServers": "x:1", "ownership": {"prefixes": ["inv."]}}),
        )
        .expect("target")
    }

    #[test]
    fn spring_named_topics_become_one_channel_with_their_backoff() {
        let l: BTreeMap<ResourceId, Live> = [
            ("inv.e", topic(3, Some(604_800_000))),
            ("inv.e-retry-1000", topic(3, Some(604_800_000))),
            ("inv.e-retry-2000", topic(3, Some(604_800_000))),
            ("inv.e-retry-4000", topic(3, Some(604_800_000))),
            ("inv.e-dlt", topic(3, Some(2_592_000_000))),
            ("inv.lonely", topic(1, None)),
        ]
        .into_iter()
        .map(|(n, l)| (topic_id("k", n), l))
        .collect();
        let (found, unmatched) = group(&l, "k", &target());
        assert_eq!(found.len(), 1, "{unmatched:?}");
        let spec = &found[0].channel.spec;
        assert_eq!(spec.retry.as_ref().and_then(|r| r.max_attempts), Some(4));
        assert_eq!(spec.retention.map(|d| d.to_string()).as_deref(), Some("7d"));
        assert!(found[0].findings.is_empty(), "{:?}", found[0].findings);
        assert_eq!(unmatched.len(), 1);
        assert!(unmatched[0].contains("inv.lonely"));
    }

    #[test]
    fn every_naming_profile_dlqctl_writes_is_imported_back_to_the_same_topics() {
        let backoffs: [(Option<Backoff>, u32); 4] = [
            (None, 1),
            (None, 3),
            (
                Some(Backoff {
                    initial: millis(1000),
                    multiplier: Some(2.0),
                    max: Some(millis(4000)),
                    jitter: None,
                }),
                5,
            ),
            (
                Some(Backoff {
                    initial: millis(500),
                    multiplier: Some(1.5),
                    max: None,
                    jitter: None,
                }),
                4,
            ),
        ];
        for naming in [KafkaNaming::Spring, KafkaNaming::Index] {
            for reuse in [TopicReuse::SingleTopic, TopicReuse::MultipleTopics] {
                for (backoff, attempts) in &backoffs {
                    let spec = ChannelSpec {
                        target: Some("k".into()),
                        retry: Some(Retry {
                            max_attempts: Some(*attempts),
                            backoff: backoff.clone(),
                            name: None,
                        }),
                        kafka: Some(KafkaOptions {
                            naming: Some(naming),
                            same_interval_topic_reuse: Some(reuse),
                            ..KafkaOptions::default()
                        }),
                        ..ChannelSpec::default()
                    };
                    let r = resolve::resolve(&channel("inv.p", spec), "k", &target())
                        .expect("resolves");
                    let mut names: BTreeSet<String> =
                        r.retry_stages.iter().map(|s| s.name.clone()).collect();
                    names.insert(r.main.clone());
                    names.insert(r.dead_letter.clone());
                    let l: BTreeMap<ResourceId, Live> = names
                        .iter()
                        .map(|n| (topic_id("k", n), topic(1, None)))
                        .collect();
                    let (found, unmatched) = group(&l, "k", &target());
                    let case = format!("{naming:?} {reuse:?} {backoff:?} x{attempts}: {names:?}");
                    assert_eq!(found.len(), 1, "{case}: {unmatched:?}");
                    let back =
                        resolve::resolve(&found[0].channel, "k", &target()).expect("resolves");
                    let mut got: BTreeSet<String> =
                        back.retry_stages.iter().map(|s| s.name.clone()).collect();
                    got.insert(back.main.clone());
                    got.insert(back.dead_letter.clone());
                    assert_eq!(got, names, "{case}");
                }
            }
        }
    }

    #[test]
    fn index_named_topics_are_imported_with_assumed_delays() {
        let l: BTreeMap<ResourceId, Live> =
            ["inv.o", "inv.o-retry-0", "inv.o-retry-1", "inv.o-dlt"]
                .into_iter()
                .map(|n| (topic_id("k", n), topic(1, None)))
                .collect();
        let (found, unmatched) = group(&l, "k", &target());
        assert_eq!(found.len(), 1, "{unmatched:?}");
        assert!(
            found[0].findings[0].contains("assumption"),
            "{:?}",
            found[0].findings
        );
    }
}
