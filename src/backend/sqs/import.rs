//! Import from SQS and CloudWatch: a queue with a RedrivePolicy and the queue it dead-letters
//! into become one channel, with the CloudWatch alarms whose QueueName dimension is that
//! dead-letter queue, and its invalid-message queue (`spec.invalid`): nothing links that one
//! to the channel but its name (`{channel}-invalid`) or dlqctl's `dlqctl-channel` tag, and it
//! is a dead end (no RedrivePolicy, no queue dead-lettering into it).
//!
//! Pure: it groups what [`crate::backend::sqs::read::Reader::inventory`] read. The channel id is the
//! `dlqctl-channel` tag when dlqctl created the queues, else the main queue's name; explicit
//! name templates are written only where the defaults would not give the live names. An alarm
//! the spec cannot describe (another metric, another name, another statistic, ...) is left
//! out of the spec and reported; it then stays as it is, unmanaged.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::alarms::{
    self, DEPTH_DESCRIPTION, DEPTH_METRIC, NAMESPACE, OLDEST_AGE_DESCRIPTION, OLDEST_AGE_METRIC,
};
use super::live::{Inventory, SeenAlarm, SeenQueue};
use super::{
    DLQ_TARGET, FIFO, KMS_KEY, KMS_REUSE, MANAGED_SSE, MAX_RECEIVE, POLICY, RETENTION, TAG_CHANNEL,
    TAG_MANAGED_BY, TAG_MANAGED_BY_VALUE, VISIBILITY, in_prefixes, queue_id,
};
use crate::backend::kit::import::{
    Candidate, channel, non_default, number, sanitise_channel_id, template, valid_channel_id,
};
use crate::resource::{Kind, Live, ResourceId};
use crate::spec::access::{Encryption, live_encryption};
use crate::spec::duration::Duration;
use crate::spec::model::{
    AgeAlarm, AlarmActions, Alarms, ChannelSpec, DeadLetter, DeadLetterSqs, DepthAlarm, Invalid,
    QueuePolicy, Retry, SqsEncryption, SqsOptions, Target, Tier, TierActions,
};

fn prefixes(target: &Target) -> Vec<String> {
    crate::backend::kit::connect::prefixes(target)
}

/// The dead-letter target of a queue: a name in the same account and region, or a full ARN.
fn dead_letter_target(q: &SeenQueue) -> Option<&str> {
    q.live.props.get(DLQ_TARGET).and_then(Value::as_str)
}

/// Dead-letter queues named by a redrive policy but not read (outside `--prefix`), inside
/// the ownership prefixes: import reads them too.
pub fn missing_dead_letter_queues(inv: &Inventory, target: &Target) -> Vec<String> {
    let prefixes = prefixes(target);
    let mut out: Vec<String> = inv
        .queues
        .values()
        .filter_map(dead_letter_target)
        .filter(|t| !t.contains(':') && !inv.queues.contains_key(*t) && in_prefixes(&prefixes, t))
        .map(str::to_owned)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The queue an alarm watches: its QueueName dimension, or for a metric-math alarm the
/// QueueName of its first query (dlqctl's rate alarm: the DLQ's visible count).
fn alarm_queue(a: &SeenAlarm) -> Option<&str> {
    alarms::watched_queue(&a.props)
}

/// The period of a metric-math alarm (its first query's), in seconds.
fn rate_period(a: &SeenAlarm) -> Option<u64> {
    a.props
        .get("Metrics")?
        .get(0)?
        .pointer("/MetricStat/Period")?
        .as_u64()
}

fn alarm_id(target: &str, name: &str) -> ResourceId {
    ResourceId {
        kind: Kind::Alarm,
        ..queue_id(target, name)
    }
}

fn dlqctl_channel(tags: &BTreeMap<String, String>) -> Option<&str> {
    (tags.get(TAG_MANAGED_BY).map(String::as_str) == Some(TAG_MANAGED_BY_VALUE))
        .then(|| tags.get(TAG_CHANNEL).map(String::as_str))
        .flatten()
}

/// Groups queues and alarms into channels; returns them and what fits no channel.
pub fn group(inv: &Inventory, target_name: &str) -> (Vec<Candidate>, Vec<String>) {
    let mut unmatched = Vec::new();
    let mut claimed: BTreeSet<String> = BTreeSet::new();
    let mut handled: BTreeSet<String> = BTreeSet::new();
    let mut alarms_handled: BTreeSet<String> = BTreeSet::new();
    // Each DLQ taken by a channel, with that channel (the owner of a shared DLQ).
    let mut owners: BTreeMap<String, String> = BTreeMap::new();
    let is_dlq: BTreeSet<&str> = inv.queues.values().filter_map(dead_letter_target).collect();
    // Sources first: a queue that is itself some queue's DLQ comes after those that are not.
    let mut mains: Vec<(&String, &SeenQueue)> = inv
        .queues
        .iter()
        .filter(|(_, q)| dead_letter_target(q).is_some())
        .collect();
    mains.sort_by_key(|(name, _)| (is_dlq.contains(name.as_str()), (*name).clone()));
    let mut out = Vec::new();
    for (main, mq) in mains {
        let id = queue_id(target_name, main);
        let Some(dlq) = dead_letter_target(mq) else {
            continue;
        };
        handled.insert(main.clone());
        // A DLQ an earlier channel took: this queue shares it (`deadLetter.of` that channel).
        if let Some(owner) = owners.get(dlq)
            && !claimed.contains(main)
            && !is_dlq.contains(main.as_str())
        {
            match sharer(inv, target_name, main, mq, owner) {
                Ok(c) => {
                    claimed.insert(main.clone());
                    out.push(c);
                }
                Err(why) => unmatched.push(format!("{id}: fits no channel: {why}")),
            }
            continue;
        }
        if let Some(why) = unlinkable(inv, main, dlq, &claimed) {
            unmatched.push(format!("{id}: fits no channel: it {why}"));
            continue;
        }
        let Some(dq) = inv.queues.get(dlq) else {
            continue;
        };
        let link = Link {
            inv,
            target_name,
            main,
            mq,
            dlq,
            dq,
        };
        match build(&link, &mut alarms_handled) {
            Ok(mut c) => {
                claimed.insert(main.clone());
                claimed.insert(dlq.to_owned());
                owners.insert(dlq.to_owned(), c.channel.metadata.name.clone());
                handled.insert(dlq.to_owned());
                if let Some(name) = invalid_queue(inv, &c, &claimed, &is_dlq) {
                    add_invalid(&link, &mut c, &name, &mut alarms_handled);
                    claimed.insert(name.clone());
                    handled.insert(name);
                }
                out.push(c);
            }
            Err(why) => unmatched.push(format!("{id}: fits no channel: {why}")),
        }
    }
    for name in inv.queues.keys() {
        if handled.contains(name) {
            continue;
        }
        let why = if is_dlq.contains(name.as_str()) {
            "it is the dead-letter queue of a queue that could not be imported (see above)"
        } else {
            "it has no RedrivePolicy, and no queue in scope dead-letters into it"
        };
        unmatched.push(format!(
            "{}: fits no channel: {why}",
            queue_id(target_name, name)
        ));
    }
    for (name, a) in &inv.alarms {
        if alarms_handled.contains(name) {
            continue;
        }
        let on = alarm_queue(a).unwrap_or("?");
        unmatched.push(format!(
            "{}: fits no channel: it watches queue {on}, which is not an imported dead-letter queue",
            alarm_id(target_name, name)
        ));
    }
    (out, unmatched)
}

/// The invalid-message queue of an imported channel: a dead-end queue no other channel took,
/// named `{channel}-invalid` (`-invalid.fifo`) or tagged as this dlqctl channel's.
fn invalid_queue(
    inv: &Inventory,
    c: &Candidate,
    claimed: &BTreeSet<String>,
    is_dlq: &BTreeSet<&str>,
) -> Option<String> {
    let id = c.channel.metadata.name.as_str();
    let fifo = c
        .channel
        .spec
        .sqs
        .as_ref()
        .and_then(|s| s.fifo)
        .unwrap_or(false);
    let default = if fifo {
        format!("{id}-invalid.fifo")
    } else {
        format!("{id}-invalid")
    };
    let dead_end = |name: &str, q: &SeenQueue| {
        !name.contains(['{', '}'])
            && !claimed.contains(name)
            && !is_dlq.contains(name)
            && dead_letter_target(q).is_none()
            && (q.live.props.get(FIFO) == Some(&Value::Bool(true))) == fifo
    };
    if inv
        .queues
        .get(&default)
        .is_some_and(|q| dead_end(&default, q))
    {
        return Some(default);
    }
    let mut tagged = inv.queues.iter().filter(|(name, q)| {
        dlqctl_channel(&q.tags) == Some(id)
            && !c
                .live
                .keys()
                .any(|k| k.kind == Kind::Queue && k.name == **name)
            && dead_end(name, q)
    });
    match (tagged.next(), tagged.next()) {
        (Some((name, _)), None) => Some(name.clone()),
        _ => None,
    }
}

/// Adds the invalid-message queue `name` to the channel: `spec.invalid` with a name template
/// where the default would not give it, its retention as the DLQ's is written, and the
/// alarms on it (marked in `alarms_handled`).
fn add_invalid(l: &Link, c: &mut Candidate, name: &str, alarms_handled: &mut BTreeSet<String>) {
    let (inv, target_name) = (l.inv, l.target_name);
    let Some(q) = inv.queues.get(name) else {
        return;
    };
    let id = c.channel.metadata.name.clone();
    let fifo = q.live.props.get(FIFO) == Some(&Value::Bool(true));
    let default = if fifo {
        "{channel}-invalid.fifo"
    } else {
        "{channel}-invalid"
    };
    let keep = crate::backend::kit::import::dead_letter_keep(
        crate::spec::model::Backend::Sqs,
        number(&q.live, RETENTION).map(Duration::from_secs),
    );
    let w = Watched {
        queue: name,
        descriptions: [
            alarms::INVALID_DEPTH_DESCRIPTION,
            alarms::INVALID_OLDEST_AGE_DESCRIPTION,
        ],
    };
    let mut g = Gathered::default();
    let watching = queue_alarms(l, &w, &id, alarms_handled, &mut g);
    c.live.extend(g.live);
    c.findings.extend(g.findings);
    c.to_adopt.extend(g.to_adopt);
    c.channel.spec.invalid = Some(Invalid {
        name: template(name, &id).and_then(|t| non_default(t, default)),
        retention: keep.0,
        discard: keep.1,
        alarms: watching,
    });
    let rid = queue_id(target_name, name);
    match q.tags.get(TAG_MANAGED_BY).map(String::as_str) {
        None => c.to_adopt.push(rid.clone()),
        Some(TAG_MANAGED_BY_VALUE) => {}
        Some(other) => c.findings.push(format!(
            "{rid}: tagged `{TAG_MANAGED_BY}: {other}`: another tool manages it, so dlqctl will never change it (a plan with changes shows it as impossible)"
        )),
    }
    c.live.insert(rid, q.live.clone());
}

/// Why the redrive link from `main` to `dlq` cannot become a channel (after "it "), if it
/// cannot: a spec's dead-letter queue is another queue of the same target, serving one channel.
fn unlinkable(
    inv: &Inventory,
    main: &str,
    dlq: &str,
    claimed: &BTreeSet<String>,
) -> Option<String> {
    if dlq.contains(':') {
        Some(format!(
            "dead-letters into {dlq}, in another account or region; a spec's dead-letter queue is a queue of the same target"
        ))
    } else if dlq == main {
        Some("dead-letters into itself".to_owned())
    } else if !inv.queues.contains_key(dlq) {
        Some(format!(
            "dead-letters into {dlq}, which was not found (deleted, or outside the target's ownership prefixes)"
        ))
    } else if claimed.contains(main) || claimed.contains(dlq) {
        Some(format!(
            "dead-letters into {dlq}, which is already part of another imported channel; a dead-letter queue serves one channel (its RedriveAllowPolicy names one source)"
        ))
    } else {
        None
    }
}

/// A queue whose RedrivePolicy names a DLQ another imported channel (`owner`) already took:
/// a channel of its own that shares the owner's DLQ (`deadLetter.of`), the DLQ's settings and
/// alarms left to the owner.
fn sharer(
    inv: &Inventory,
    target_name: &str,
    main: &str,
    mq: &SeenQueue,
    owner: &str,
) -> Result<Candidate, String> {
    let fifo = mq.live.props.get(FIFO) == Some(&Value::Bool(true));
    let stem = if fifo {
        main.strip_suffix(".fifo").unwrap_or(main)
    } else {
        main
    };
    let id = match dlqctl_channel(&mq.tags) {
        Some(a) if valid_channel_id(a) && a != owner => a.to_owned(),
        _ if valid_channel_id(stem) => stem.to_owned(),
        _ => sanitise_channel_id(stem),
    };
    let main_t = template(main, &id).ok_or_else(|| {
        format!("the name {main} holds `{{` or `}}`, which a name template cannot")
    })?;
    let max_attempts = number(&mq.live, MAX_RECEIVE)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| "its RedrivePolicy has no maxReceiveCount".to_owned())?;
    let secs = |k: &str| number(&mq.live, k).map(Duration::from_secs);
    // Its own encryption and policy, as a main queue's (the DLQ's are the owner's).
    let access = Access::of(mq, mq);
    let spec = ChannelSpec {
        target: Some(target_name.to_owned()),
        name: non_default(main_t, if fifo { "{channel}.fifo" } else { "{channel}" }),
        retention: secs(RETENTION),
        retry: Some(Retry {
            max_attempts: Some(max_attempts),
            backoff: None,
            name: None,
        }),
        dead_letter: Some(DeadLetter {
            of: Some(owner.to_owned()),
            ..DeadLetter::default()
        }),
        sqs: Some(SqsOptions {
            visibility_timeout: secs(VISIBILITY),
            fifo: fifo.then_some(true),
            encryption: access.encryption,
            policy: access.policy,
        }),
        ..ChannelSpec::default()
    };
    let rid = queue_id(target_name, main);
    let mut c = Candidate {
        channel: channel(&id, spec),
        live: BTreeMap::from([(rid.clone(), mq.live.clone())]),
        findings: Vec::new(),
        to_adopt: Vec::new(),
        unreadable: if inv.allow_policy_readable {
            Vec::new()
        } else {
            vec!["RedriveAllowPolicy.".to_owned()]
        },
    };
    match mq.tags.get(TAG_MANAGED_BY).map(String::as_str) {
        None => c.to_adopt.push(rid),
        Some(TAG_MANAGED_BY_VALUE) => {}
        Some(other) => c.findings.push(format!(
            "{rid}: tagged `{TAG_MANAGED_BY}: {other}`: another tool manages it, so dlqctl will never change it (a plan with changes shows it as impossible)"
        )),
    }
    Ok(c)
}

/// A main queue and the dead-letter queue its RedrivePolicy names, with what they were read
/// from.
struct Link<'a> {
    inv: &'a Inventory,
    target_name: &'a str,
    main: &'a str,
    mq: &'a SeenQueue,
    dlq: &'a str,
    dq: &'a SeenQueue,
}

/// What a channel gathers besides its spec: the live objects it covers, the findings, and
/// the objects not tagged as dlqctl's yet.
#[derive(Default)]
struct Gathered {
    live: BTreeMap<ResourceId, Live>,
    findings: Vec<String>,
    to_adopt: Vec<ResourceId>,
}

/// The channel a redrive link makes, with the alarms on its dead-letter queue (marked in
/// `alarms_handled`), or why a spec cannot say it.
fn build(l: &Link, alarms_handled: &mut BTreeSet<String>) -> Result<Candidate, String> {
    let fifo = l.mq.live.props.get(FIFO) == Some(&Value::Bool(true));
    if (l.dq.live.props.get(FIFO) == Some(&Value::Bool(true))) != fifo {
        return Err(format!(
            "it and its dead-letter queue {} are not both FIFO or both standard, which SQS refuses",
            l.dlq
        ));
    }
    let id = channel_id(l, fifo);
    let mut spec = queue_spec(l, &id, fifo)?;
    let mut g = Gathered::default();
    g.live
        .insert(queue_id(l.target_name, l.main), l.mq.live.clone());
    g.live
        .insert(queue_id(l.target_name, l.dlq), l.dq.live.clone());
    for (name, q) in [(l.main, l.mq), (l.dlq, l.dq)] {
        let rid = queue_id(l.target_name, name);
        match q.tags.get(TAG_MANAGED_BY).map(String::as_str) {
            None => g.to_adopt.push(rid),
            Some(TAG_MANAGED_BY_VALUE) => {}
            Some(other) => g.findings.push(format!(
                "{rid}: tagged `{TAG_MANAGED_BY}: {other}`: another tool manages it, so dlqctl will never change it (a plan with changes shows it as impossible)"
            )),
        }
    }
    spec.alarms = dead_letter_alarms(l, &id, alarms_handled, &mut g);
    Ok(Candidate {
        channel: channel(&id, spec),
        live: g.live,
        findings: g.findings,
        to_adopt: g.to_adopt,
        unreadable: if l.inv.allow_policy_readable {
            Vec::new()
        } else {
            vec!["RedriveAllowPolicy.".to_owned()]
        },
    })
}

/// The channel's name: the `dlqctl-channel` tag the queues agree on (dlqctl made them), else
/// the main queue's name without `.fifo` (made valid).
fn channel_id(l: &Link, fifo: bool) -> String {
    let stem = if fifo {
        l.main.strip_suffix(".fifo").unwrap_or(l.main)
    } else {
        l.main
    };
    match (dlqctl_channel(&l.mq.tags), dlqctl_channel(&l.dq.tags)) {
        (Some(a), Some(b)) if a == b && valid_channel_id(a) => a.to_owned(),
        (Some(a), None) | (None, Some(a)) if valid_channel_id(a) => a.to_owned(),
        _ if valid_channel_id(stem) => stem.to_owned(),
        _ => sanitise_channel_id(stem),
    }
}

/// The spec of the two queues (no alarms yet): names only where the defaults would not give
/// the live ones, and the attempts from the RedrivePolicy's maxReceiveCount.
fn queue_spec(l: &Link, id: &str, fifo: bool) -> Result<ChannelSpec, String> {
    let braces = |n: &str| format!("the name {n} holds `{{` or `}}`, which a name template cannot");
    let main_t = template(l.main, id).ok_or_else(|| braces(l.main))?;
    let dlq_t = template(l.dlq, id).ok_or_else(|| braces(l.dlq))?;
    let (main_default, dlq_default) = if fifo {
        ("{channel}.fifo", "{channel}-dlq.fifo")
    } else {
        ("{channel}", "{channel}-dlq")
    };
    let secs = |q: &SeenQueue, k: &str| number(&q.live, k).map(Duration::from_secs);
    let max_attempts = number(&l.mq.live, MAX_RECEIVE)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| "its RedrivePolicy has no maxReceiveCount".to_owned())?;
    let access = Access::of(l.mq, l.dq);
    let keep = crate::backend::kit::import::dead_letter_keep(
        crate::spec::model::Backend::Sqs,
        secs(l.dq, RETENTION),
    );
    Ok(ChannelSpec {
        target: Some(l.target_name.to_owned()),
        name: non_default(main_t, main_default),
        retention: secs(l.mq, RETENTION),
        retry: Some(Retry {
            max_attempts: Some(max_attempts),
            backoff: None,
            name: None,
        }),
        dead_letter: Some(DeadLetter {
            of: None,
            subscription: None,
            name: non_default(dlq_t, dlq_default),
            retention: keep.0,
            discard: keep.1,
            archive: None,
            envelope: None,
            classes: None,
            consumer_group: None,
            max_redrives: None,
            redrive: None,
            sqs: dead_letter_sqs(&access),
        }),
        sqs: Some(SqsOptions {
            visibility_timeout: secs(l.mq, VISIBILITY),
            fifo: fifo.then_some(true),
            encryption: access.encryption,
            policy: access.policy,
        }),
        ..ChannelSpec::default()
    })
}

/// The encryption and policies of the two queues, as the spec says them. Encryption is
/// written when both queues report it and it is not SQS's default for a new queue (SSE-SQS
/// on both), and the
/// dead-letter queue's only where it differs from the main queue's; each policy where the
/// queue has one.
struct Access {
    encryption: Option<SqsEncryption>,
    dead_letter_encryption: Option<SqsEncryption>,
    policy: Option<QueuePolicy>,
    dead_letter_policy: Option<QueuePolicy>,
}

impl Access {
    fn of(main: &SeenQueue, dlq: &SeenQueue) -> Self {
        let encryption = |q: &SeenQueue| {
            let p = &q.live.props;
            live_encryption(p.get(KMS_KEY), p.get(KMS_REUSE), p.get(MANAGED_SSE))
        };
        let policy = |q: &SeenQueue| match q.live.props.get(POLICY) {
            Some(Value::Object(m)) => Some(QueuePolicy::Document(m.clone())),
            Some(Value::String(t)) => Some(QueuePolicy::Text(t.clone())),
            _ => None,
        };
        // Written only where both queues report it: an endpoint that does not says nothing.
        let (encryption, dead_letter_encryption) = match (encryption(main), encryption(dlq)) {
            (Some(me), Some(de)) => {
                let both_default = me == Encryption::Managed && de == Encryption::Managed;
                (
                    (!both_default).then(|| me.to_spec()),
                    (de != me).then(|| de.to_spec()),
                )
            }
            _ => (None, None),
        };
        Access {
            encryption,
            dead_letter_encryption,
            policy: policy(main),
            dead_letter_policy: policy(dlq),
        }
    }
}

fn dead_letter_sqs(a: &Access) -> Option<DeadLetterSqs> {
    (a.dead_letter_encryption.is_some() || a.dead_letter_policy.is_some()).then(|| DeadLetterSqs {
        encryption: a.dead_letter_encryption.clone(),
        policy: a.dead_letter_policy.clone(),
    })
}

/// The alarm settings the spec can express, from the alarms watching the channel's queues
/// (untiered alarms first, then by name); the others are reported. Actions become one list
/// when every alarm has the same ones, else one list per tier (`warning`, `critical`: an
/// untiered alarm counts as critical); two alarms of one tier with different actions cannot
/// both be said, and the second is reported.
fn dead_letter_alarms(
    l: &Link,
    id: &str,
    alarms_handled: &mut BTreeSet<String>,
    g: &mut Gathered,
) -> Option<Alarms> {
    let w = Watched {
        queue: l.dlq,
        descriptions: [DEPTH_DESCRIPTION, OLDEST_AGE_DESCRIPTION],
    };
    queue_alarms(l, &w, id, alarms_handled, g)
}

/// The queue whose alarms are imported (the DLQ, or the invalid-message queue) and the
/// wording of dlqctl's default descriptions for it (depth, age).
struct Watched<'a> {
    queue: &'a str,
    descriptions: [&'static str; 2],
}

/// The alarms on one queue of the channel (on the DLQ, alarms on the main queue are reported).
fn queue_alarms(
    l: &Link,
    w: &Watched,
    id: &str,
    alarms_handled: &mut BTreeSet<String>,
    g: &mut Gathered,
) -> Option<Alarms> {
    let [depth_name, age_name] = alarms::alarm_names(w.queue);
    let mut alarms = Alarms::default();
    let mut actions: BTreeMap<Tier, Vec<String>> = BTreeMap::new();
    let on_dlq = w.queue == l.dlq;
    let mut ordered: Vec<(&String, &SeenAlarm)> = l
        .inv
        .alarms
        .iter()
        .filter(|(_, a)| {
            alarm_queue(a) == Some(w.queue) || (on_dlq && alarm_queue(a) == Some(l.main))
        })
        .collect();
    let rate_name = alarms::rate_alarm_name(w.queue);
    ordered.sort_by_key(|(n, _)| {
        (
            **n != depth_name,
            **n != age_name,
            **n != rate_name,
            (*n).clone(),
        )
    });
    for (name, a) in ordered {
        alarms_handled.insert(name.clone());
        let rid = alarm_id(l.target_name, name);
        let fits = alarm_fit(l, w, id, name, a).and_then(|(what, tier)| {
            let list = alarm_actions(a);
            let severity = tier.unwrap_or(Tier::Critical);
            if actions.get(&severity).is_some_and(|existing| *existing != list) {
                return Err(format!("its AlarmActions differ from another {severity} alarm's, and a spec gives every {severity} alarm the same `alarms.actions`"));
            }
            set_alarm(&mut alarms, a, id, what, tier)?;
            actions.insert(severity, list);
            Ok(())
        });
        if let Err(why) = fits {
            g.findings
                .push(format!("{rid}: not imported, left as is: {why}"));
            continue;
        }
        g.live.insert(
            rid.clone(),
            Live {
                props: a.props.clone(),
                messages: None,
            },
        );
        if !a.tags.contains_key(TAG_MANAGED_BY) {
            g.to_adopt.push(rid);
        }
    }
    if alarms.depth.is_none()
        && alarms.oldest_message_age.is_none()
        && alarms.dead_letter_rate.is_none()
    {
        return None;
    }
    let mut lists = actions.values();
    let first = lists.next().cloned().unwrap_or_default();
    alarms.actions = if lists.all(|l| *l == first) {
        (!first.is_empty()).then_some(AlarmActions::All(first))
    } else {
        let get = |t: Tier| actions.get(&t).cloned().filter(|l| !l.is_empty());
        Some(AlarmActions::PerTier(TierActions {
            warning: get(Tier::Warning),
            critical: get(Tier::Critical),
        }))
    };
    Some(alarms)
}

/// Which of dlqctl's alarms this one can become (its default description's wording and its
/// tier, from the name), or why the spec cannot take it over: another queue, metric or name,
/// or fields a spec cannot set.
fn alarm_fit(
    l: &Link,
    w: &Watched,
    id: &str,
    name: &str,
    a: &SeenAlarm,
) -> Result<(&'static str, Option<Tier>), String> {
    if alarm_queue(a) == Some(l.main) {
        return Err(format!(
            "it watches the main queue {}; dlqctl's alarms watch the dead-letter queue",
            l.main
        ));
    }
    if a.props.contains_key("Metrics") {
        return rate_fit(l, w, id, name, a);
    }
    let [depth_name, age_name] = alarms::alarm_names(w.queue);
    let metric = a
        .props
        .get("MetricName")
        .and_then(Value::as_str)
        .unwrap_or("");
    let (expected, what) = match metric {
        DEPTH_METRIC => (&depth_name, w.descriptions[0]),
        OLDEST_AGE_METRIC => (&age_name, w.descriptions[1]),
        other => {
            return Err(format!(
                "it watches {other}; dlqctl's alarms watch {DEPTH_METRIC} and {OLDEST_AGE_METRIC}"
            ));
        }
    };
    let Some(tier) = std::iter::once(None)
        .chain(Tier::ALL.into_iter().map(Some))
        .find(|t| alarms::tier_name(expected, *t) == name)
    else {
        return Err(format!(
            "dlqctl names this alarm {expected} (or {expected}-warning, {expected}-critical: a fixed template); rename it to adopt it"
        ));
    };
    let ours = dlqctl_channel(&a.tags) == Some(id);
    let problems = alarm_problems(a, w.queue);
    if !problems.is_empty() && !ours {
        return Err(format!("the spec cannot express {}", problems.join(", ")));
    }
    Ok((what, tier))
}

/// Whether a metric-math alarm is dlqctl's dead-letter rate of this channel (`{dlq}-dead-
/// letter-rate`, its tier from the name), or why the spec cannot take it over.
fn rate_fit(
    l: &Link,
    w: &Watched,
    id: &str,
    name: &str,
    a: &SeenAlarm,
) -> Result<(&'static str, Option<Tier>), String> {
    if w.queue != l.dlq {
        return Err(format!(
            "a metric-math alarm on {}; dlqctl's rate alarm is the channel's, on its dead-letter queue",
            w.queue
        ));
    }
    let expected = alarms::rate_alarm_name(l.dlq);
    let Some(tier) = std::iter::once(None)
        .chain(Tier::ALL.into_iter().map(Some))
        .find(|t| alarms::tier_name(&expected, *t) == name)
    else {
        return Err(format!(
            "a metric-math alarm; dlqctl names its dead-letter rate alarm {expected} (or {expected}-warning, {expected}-critical)"
        ));
    };
    let mut problems = Vec::new();
    let period = rate_period(a).unwrap_or(0);
    if a.props.get("Metrics") != Some(&alarms::rate_metrics(l.dlq, l.main, period)) {
        problems.push(format!(
            "Metrics other than dlqctl's ({} of {} and {} of {}, `{}`)",
            DEPTH_METRIC,
            l.dlq,
            alarms::SENT_METRIC,
            l.main,
            alarms::RATE_EXPRESSION
        ));
    }
    let text = |k: &str| a.props.get(k).and_then(Value::as_str);
    for (k, v) in [
        ("ComparisonOperator", "GreaterThanThreshold"),
        ("TreatMissingData", "notBreaching"),
    ] {
        if text(k) != Some(v) {
            problems.push(format!("{k} = {} (dlqctl: {v})", show(a.props.get(k))));
        }
    }
    let threshold = a.props.get("Threshold").and_then(Value::as_f64);
    if threshold
        .and_then(crate::spec::ratio::Ratio::from_fraction)
        .is_none()
    {
        problems.push(format!(
            "Threshold = {} (dlqctl: a fraction above 0, at most 1)",
            show(a.props.get("Threshold"))
        ));
    }
    let evaluations = number_of(a, "EvaluationPeriods").unwrap_or(0);
    if period == 0
        || !period.is_multiple_of(60)
        || evaluations == 0
        || period.saturating_mul(evaluations) > 86_400
    {
        problems.push(format!(
            "Period = {period} s × EvaluationPeriods = {evaluations} (dlqctl: whole minutes, at most a day in total)"
        ));
    }
    let ours = dlqctl_channel(&a.tags) == Some(id);
    if !problems.is_empty() && !ours {
        return Err(format!("the spec cannot express {}", problems.join(", ")));
    }
    Ok((alarms::RATE_DESCRIPTION, tier))
}

/// The alarm's AlarmActions, sorted.
fn alarm_actions(a: &SeenAlarm) -> Vec<String> {
    let mut list: Vec<String> = a
        .props
        .get("AlarmActions")
        .and_then(Value::as_array)
        .map(|v| {
            v.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    list.sort();
    list
}

/// The spec's `description` for a live AlarmDescription, and the runbook it names: `None`
/// when it is dlqctl's default (with or without a runbook), `""` when there is none.
fn description_of(
    live: Option<&str>,
    id: &str,
    what: &str,
    tier: Option<Tier>,
) -> (Option<String>, Option<String>) {
    let Some(d) = live else {
        return (Some(String::new()), None);
    };
    let plain = alarms::default_description(id, what, tier, None);
    if d == plain {
        return (None, None);
    }
    if let Some(url) = d
        .strip_prefix(&plain)
        .and_then(|rest| rest.strip_prefix(alarms::RUNBOOK_LEAD))
        .filter(|u| !u.is_empty() && !u.contains(char::is_whitespace))
    {
        return (None, Some(url.to_owned()));
    }
    (Some(d.to_owned()), None)
}

/// Writes the alarm's threshold, period and description into the spec's depth or
/// oldest-message-age alarm (`what` says which), as `above` or as its tier; or why it cannot
/// join what the spec already says (a single threshold and tiers on one alarm, tiers with
/// different periods or descriptions, another runbook).
fn set_alarm(
    alarms: &mut Alarms,
    a: &SeenAlarm,
    id: &str,
    what: &str,
    tier: Option<Tier>,
) -> Result<(), String> {
    let (description, runbook) = description_of(
        a.props.get("AlarmDescription").and_then(Value::as_str),
        id,
        what,
        tier,
    );
    if let (Some(have), Some(new)) = (&alarms.runbook, &runbook)
        && have != new
    {
        return Err(format!(
            "its description names the runbook {new}, another alarm of the channel {have}"
        ));
    }
    let threshold = a
        .props
        .get("Threshold")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let period = number_of(a, "Period").map(Duration::from_secs);
    let evaluation_periods = number_of(a, "EvaluationPeriods").and_then(|n| u32::try_from(n).ok());
    // What both forms share, to compare a second tier with the first.
    let shared = (period, evaluation_periods, description.clone());
    let clash = |have: (Option<Duration>, Option<u32>, Option<String>), tiered: bool| {
        if !tiered || tier.is_none() {
            Err(
                "the channel already has this alarm (a single threshold and tiers cannot be mixed)"
                    .to_owned(),
            )
        } else if have != shared {
            Err("its period, evaluation periods or description differ from the other tier's, and a spec gives both tiers the same".to_owned())
        } else {
            Ok(())
        }
    };
    if what == alarms::RATE_DESCRIPTION {
        return set_rate(alarms, a, (description, runbook), tier);
    }
    if what == DEPTH_DESCRIPTION || what == alarms::INVALID_DEPTH_DESCRIPTION {
        match &mut alarms.depth {
            Some(d) => {
                clash(
                    (d.period, d.evaluation_periods, d.description.clone()),
                    d.above.is_none(),
                )?;
                match tier {
                    Some(Tier::Warning) => d.warning = Some(threshold),
                    _ => d.critical = Some(threshold),
                }
            }
            None => {
                let at = |t: Tier| (tier == Some(t)).then_some(threshold);
                alarms.depth = Some(DepthAlarm {
                    above: tier.is_none().then_some(threshold),
                    warning: at(Tier::Warning),
                    critical: at(Tier::Critical),
                    period,
                    evaluation_periods,
                    description,
                });
            }
        }
    } else {
        let threshold = Duration::from_secs(threshold);
        match &mut alarms.oldest_message_age {
            Some(o) => {
                clash(
                    (o.period, o.evaluation_periods, o.description.clone()),
                    o.above.is_none(),
                )?;
                match tier {
                    Some(Tier::Warning) => o.warning = Some(threshold),
                    _ => o.critical = Some(threshold),
                }
            }
            None => {
                let at = |t: Tier| (tier == Some(t)).then_some(threshold);
                alarms.oldest_message_age = Some(AgeAlarm {
                    above: tier.is_none().then_some(threshold),
                    warning: at(Tier::Warning),
                    critical: at(Tier::Critical),
                    period,
                    evaluation_periods,
                    description,
                });
            }
        }
    }
    if runbook.is_some() {
        alarms.runbook = runbook;
    }
    Ok(())
}

/// The rate alarm's threshold, period and `for` (period × EvaluationPeriods), as `above`
/// or as its tier of `deadLetterRate`; periods and `for` are written only where they are not
/// the defaults (5m, 10m).
fn set_rate(
    alarms: &mut Alarms,
    a: &SeenAlarm,
    (description, runbook): (Option<String>, Option<String>),
    tier: Option<Tier>,
) -> Result<(), String> {
    let Some(threshold) = a
        .props
        .get("Threshold")
        .and_then(Value::as_f64)
        .and_then(crate::spec::ratio::Ratio::from_fraction)
    else {
        return Err("its Threshold is not a fraction above 0 and at most 1".to_owned());
    };
    let period = rate_period(a).unwrap_or(0);
    let evaluations = number_of(a, "EvaluationPeriods").unwrap_or(1);
    let period_d = Duration::from_secs(period);
    let for_d = Duration::from_secs(period.saturating_mul(evaluations));
    let period = (period_d != crate::spec::resolve::DEFAULT_RATE_PERIOD).then_some(period_d);
    let for_ = (for_d != crate::spec::resolve::DEFAULT_RATE_FOR).then_some(for_d);
    match &mut alarms.dead_letter_rate {
        Some(r) => {
            if r.above.is_some() || tier.is_none() {
                return Err(
                    "the channel already has this alarm (a single threshold and tiers cannot be mixed)"
                        .to_owned(),
                );
            }
            if (r.period, r.for_, r.description.clone()) != (period, for_, description.clone()) {
                return Err("its period, evaluation periods or description differ from the other tier's, and a spec gives both tiers the same".to_owned());
            }
            match tier {
                Some(Tier::Warning) => r.warning = Some(threshold),
                _ => r.critical = Some(threshold),
            }
        }
        None => {
            let at = |t: Tier| (tier == Some(t)).then_some(threshold);
            alarms.dead_letter_rate = Some(crate::spec::model::RateAlarm {
                above: tier.is_none().then_some(threshold),
                warning: at(Tier::Warning),
                critical: at(Tier::Critical),
                period,
                for_,
                description,
            });
        }
    }
    if runbook.is_some() {
        alarms.runbook = runbook;
    }
    Ok(())
}

fn number_of(a: &SeenAlarm, key: &str) -> Option<u64> {
    a.props.get(key).and_then(Value::as_u64)
}

/// The fields of an alarm that a spec cannot give it (dlqctl owns every field of its
/// alarms: PutMetricAlarm replaces them all).
fn alarm_problems(a: &SeenAlarm, dlq: &str) -> Vec<String> {
    let mut out = Vec::new();
    let text = |k: &str| a.props.get(k).and_then(Value::as_str);
    let want = |k: &str, v: &str, out: &mut Vec<String>| {
        if text(k) != Some(v) {
            out.push(format!("{k} = {} (dlqctl: {v})", show(a.props.get(k))));
        }
    };
    want("Namespace", NAMESPACE, &mut out);
    want("Statistic", "Maximum", &mut out);
    want("ComparisonOperator", "GreaterThanThreshold", &mut out);
    want("TreatMissingData", "notBreaching", &mut out);
    if a.props.get("Dimensions") != Some(&serde_json::json!({"QueueName": dlq})) {
        out.push(format!("Dimensions = {}", show(a.props.get("Dimensions"))));
    }
    for k in ["ExtendedStatistic", "DatapointsToAlarm", "Unit"] {
        if a.props.get(k).is_some_and(|v| !v.is_null()) {
            out.push(format!("{k} = {}", show(a.props.get(k))));
        }
    }
    if a.props.get("ActionsEnabled") == Some(&Value::Bool(false)) {
        out.push("ActionsEnabled = false".to_owned());
    }
    for k in ["OKActions", "InsufficientDataActions"] {
        if a.props
            .get(k)
            .and_then(Value::as_array)
            .is_some_and(|v| !v.is_empty())
        {
            out.push(format!("{k} = {}", show(a.props.get(k))));
        }
    }
    match a.props.get("Threshold") {
        Some(v) if v.as_u64().is_some() => {}
        other => out.push(format!("Threshold = {} (whole, not negative)", show(other))),
    }
    let period = number_of(a, "Period").unwrap_or(0);
    let evaluations = number_of(a, "EvaluationPeriods").unwrap_or(0);
    if period == 0
        || !period.is_multiple_of(60)
        || period.saturating_mul(evaluations) > 86_400
        || evaluations == 0
    {
        out.push(format!(
            "Period = {period} s × EvaluationPeriods = {evaluations} (dlqctl: whole minutes, at most a day in total)"
        ));
    }
    out
}

fn show(v: Option<&Value>) -> String {
    v.map_or("(absent)".to_owned(), Value::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sqs::live::live_queue;

    fn queue(attrs: &[(&str, &str)], tags: &[(&str, &str)]) -> SeenQueue {
        let attributes: BTreeMap<String, String> = attrs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        SeenQueue {
            live: live_queue(&attributes),
            tags: tags
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            attributes,
        }
    }

    const ARN: &str = "arn:aws:sqs:us-east-1:123456789012:";

    #[test]
    fn every_sqs_example_is_imported_back_to_a_spec_that_plans_empty() {
        let target: Target =
            serde_json::from_value(serde_json::json!({"backend": "sqs", "region": "us-east-1"}))
                .expect("target");
        // The tiers example has the dead-letter rate's metric-math alarms (issue 36).
        for example in [
            "payments-sqs.yaml",
            "refunds-sqs-fifo.yaml",
            "chargebacks-sqs-tiers.yaml",
        ] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples")
                .join(example);
            let text = std::fs::read_to_string(&path).expect("example");
            let ws = crate::spec::load::load_str(example, &text);
            let mut c = ws.channels[0].value.clone();
            c.spec.target = Some("t".into());
            let r = crate::spec::resolve::resolve(&c, "t", &target).expect("resolves");
            let desired = crate::backend::sqs::desired::desired(&r);
            // What apply leaves: the desired properties (the DLQ's target by name, as the
            // reader shows it), the tags, and nothing the endpoint cannot return.
            let tags = [
                ("managed-by", "dlqctl"),
                ("dlqctl-channel", r.channel.as_str()),
            ];
            let mut inv = Inventory::default();
            for d in desired.iter().filter(|d| d.present) {
                let props: crate::resource::Props = d
                    .props
                    .iter()
                    .filter(|(k, v)| !v.is_null() && !k.starts_with("RedriveAllowPolicy"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let tags = tags
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect();
                if d.id.kind == Kind::Alarm {
                    inv.alarms
                        .insert(d.id.name.clone(), SeenAlarm { props, tags });
                } else {
                    let live = Live {
                        props,
                        messages: Some(0),
                    };
                    inv.queues.insert(
                        d.id.name.clone(),
                        SeenQueue {
                            live,
                            tags,
                            attributes: BTreeMap::new(),
                        },
                    );
                }
            }
            let (found, unmatched) = group(&inv, "t");
            assert!(unmatched.is_empty(), "{example}: {unmatched:?}");
            assert_eq!(found.len(), 1, "{example}");
            assert!(
                found[0].to_adopt.is_empty(),
                "tagged objects are dlqctl's already"
            );
            assert_eq!(found[0].channel.metadata.name, r.channel);
            let back =
                crate::spec::resolve::resolve(&found[0].channel, "t", &target).expect("resolves");
            // Every alarm comes back, the rate's metric-math alarms included.
            assert_eq!(back.alarms, r.alarms, "{example}");
            for d in crate::backend::sqs::desired::desired(&back) {
                let mut d = d;
                d.props.retain(|k, _| !k.starts_with("RedriveAllowPolicy"));
                assert_eq!(
                    crate::plan::diff(&d, found[0].live.get(&d.id)),
                    None,
                    "{example}: {}",
                    serde_json::to_string(&found[0].channel).unwrap_or_default()
                );
            }
        }
    }

    #[test]
    fn a_queue_and_its_redrive_target_become_one_channel() {
        let mut inv = Inventory::default();
        let redrive = format!(r#"{{"deadLetterTargetArn":"{ARN}pay-dlq","maxReceiveCount":5}}"#);
        inv.queues.insert(
            "pay".into(),
            queue(
                &[
                    ("QueueArn", &format!("{ARN}pay")),
                    ("RedrivePolicy", &redrive),
                    ("MessageRetentionPeriod", "345600"),
                    ("VisibilityTimeout", "30"),
                ],
                &[],
            ),
        );
        inv.queues.insert(
            "pay-dlq".into(),
            queue(
                &[
                    ("QueueArn", &format!("{ARN}pay-dlq")),
                    ("MessageRetentionPeriod", "1209600"),
                    ("VisibilityTimeout", "30"),
                ],
                &[],
            ),
        );
        inv.queues.insert(
            "lonely".into(),
            queue(&[("QueueArn", &format!("{ARN}lonely"))], &[]),
        );
        let (found, unmatched) = group(&inv, "t");
        assert_eq!(found.len(), 1);
        let c = &found[0];
        assert_eq!(c.channel.metadata.name, "pay");
        assert_eq!(c.channel.spec.name, None, "default names need no template");
        assert_eq!(
            c.channel.spec.retry.as_ref().and_then(|r| r.max_attempts),
            Some(5)
        );
        assert_eq!(c.to_adopt.len(), 2, "untagged queues are to be adopted");
        assert_eq!(unmatched.len(), 1);
        assert!(
            unmatched[0].contains("queue lonely: fits no channel"),
            "{unmatched:?}"
        );
    }
}
