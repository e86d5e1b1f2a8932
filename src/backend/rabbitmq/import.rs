//! Import from RabbitMQ: queues linked by dead-letter routing become channels.
//!
//! A queue's dead-lettering is read from its x-arguments and from the policy RabbitMQ applies
//! to it (arguments win, as in RabbitMQ). The links dlqctl's own topologies use are followed:
//! a retry queue with a TTL dead-letters back into its main queue through the default
//! exchange (the TTL retry loop; in policy mode the main queue dead-letters into its first
//! retry queue), or a quorum main queue with a delivery limit dead-letters into its DLQ. In
//! the TTL loop nothing on the broker points at the DLQ (the consumer publishes to it), so it
//! is found by name next to the main queue (`<stem>.dlq`, `<stem>-dlq`, ...), unless the main
//! queue dead-letters through a named exchange: then the DLQ is the queue bound to that
//! exchange with the dead-letter routing key (`rabbitmq.deadLetterExchange`). The
//! invalid-message queue (`spec.invalid`) is found by name the same way (`<stem>.invalid`).
//! Retry delays
//! become a backoff; the number of attempts is not recorded anywhere on the broker, so import
//! writes the fewest that use every retry queue and says so.
//!
//! Pure: it groups what [`crate::backend::rabbitmq::read::Reader::read`] returned.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::id as resource_id;
use crate::backend::kit::import::{
    self as import_kit, Candidate, channel, common_stem, fit_backoff, millis, non_default,
    sanitise_channel_id, template, valid_channel_id,
};
use crate::resource::Role;
use crate::resource::{Kind, Live, ResourceId};
use crate::spec::model::{
    ChannelSpec, DeadLetter, DeadLetterExchange, DeadLetterStrategy, DlxMode, ExchangeBinding,
    ExchangeKind, Invalid, QueueType, RabbitMqOptions, Retry, RetryModel, Target,
};
use crate::spec::resolve::DEFAULT_POLICY_PRIORITY;

/// The channel and role each live object would have if it were imported (see
/// [`import_kit::labels`]).
pub fn labels(
    live: &BTreeMap<ResourceId, Live>,
    target_name: &str,
    target: &Target,
) -> BTreeMap<ResourceId, (String, Role)> {
    let vhosts: BTreeSet<&str> = live.keys().map(|i| i.scope.as_str()).collect();
    let candidates = vhosts
        .into_iter()
        .flat_map(|vhost| {
            let s = Scope {
                live,
                target_name,
                target,
                vhost,
            };
            group(&s, &BTreeMap::new(), None).0
        })
        .collect();
    import_kit::labels(candidates, target_name, target, super::desired::desired)
}

/// The dead-lettering settings dlqctl writes (policy keys; `x-` + key as arguments).
const SETTINGS: [&str; 6] = [
    "message-ttl",
    "dead-letter-exchange",
    "dead-letter-routing-key",
    "delivery-limit",
    "dead-letter-strategy",
    "overflow",
];

/// Names tried for the dead-letter queue of a TTL retry loop, after the channel's stem (and
/// after the main queue's name), in this order.
pub const DLQ_SUFFIXES: [&str; 11] = [
    ".dlq",
    "-dlq",
    "_dlq",
    ".dead-letter",
    "-dead-letter",
    ".dead",
    "-dead",
    ".failed",
    "-failed",
    ".error",
    "-error",
];

/// How many queues, policies, exchanges and bindings were read.
pub fn counts(live: &BTreeMap<ResourceId, Live>) -> BTreeMap<&'static str, usize> {
    let mut out = BTreeMap::new();
    for id in live.keys() {
        let k = match id.kind {
            Kind::Queue => "queues",
            Kind::Policy => "policies",
            Kind::Exchange => "exchanges",
            Kind::Binding => "bindings",
            _ => continue,
        };
        *out.entry(k).or_insert(0) += 1;
    }
    out
}

/// Policies applied to owned queues whose names are outside the prefixes (not read yet).
pub fn foreign_policies(live: &BTreeMap<ResourceId, Live>) -> Vec<String> {
    let owned: BTreeSet<&str> = live
        .keys()
        .filter(|i| i.kind == Kind::Policy)
        .map(|i| i.name.as_str())
        .collect();
    let mut out: Vec<String> = live
        .iter()
        .filter(|(i, _)| i.kind == Kind::Queue)
        .filter_map(|(_, l)| l.props.get("@policy").and_then(Value::as_str))
        .filter(|p| !owned.contains(p))
        .map(str::to_owned)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Where a queue's dead-lettering settings come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    None,
    Arguments,
    /// A policy named after the queue, matching exactly it (what dlqctl writes).
    OwnPolicy,
    /// Any other policy (a pattern over many queues, another name): a spec cannot say it.
    OtherPolicy,
    Mixed,
}

#[derive(Debug, Clone)]
struct Queue<'a> {
    name: &'a str,
    live: &'a Live,
    settings: BTreeMap<String, Value>,
    source: Source,
    policy: Option<String>,
    /// The settings the applied policy gives it, and the ones its x-arguments give it.
    policy_keys: Vec<&'static str>,
    argument_keys: Vec<&'static str>,
    /// The applied policy's pattern, when it was read.
    pattern: Option<String>,
}

impl Queue<'_> {
    fn ttl(&self) -> Option<u64> {
        self.settings.get("message-ttl").and_then(Value::as_u64)
    }

    /// The queue it dead-letters into through the default exchange; `Err` for another
    /// exchange (a spec cannot say that).
    fn edge(&self) -> Result<Option<&str>, String> {
        match self.settings.get("dead-letter-exchange") {
            None => Ok(None),
            Some(Value::String(x)) if x.is_empty() => Ok(self
                .settings
                .get("dead-letter-routing-key")
                .and_then(Value::as_str)),
            Some(x) => Err(format!(
                "it dead-letters through exchange {x}; dlqctl dead-letters through the default exchange"
            )),
        }
    }

    /// The named exchange it dead-letters through and its dead-letter routing key, if any.
    fn named_dlx(&self) -> Option<(&str, Option<&str>)> {
        match self.settings.get("dead-letter-exchange") {
            Some(Value::String(x)) if !x.is_empty() => Some((
                x.as_str(),
                self.settings
                    .get("dead-letter-routing-key")
                    .and_then(Value::as_str),
            )),
            _ => None,
        }
    }

    fn queue_type(&self) -> QueueType {
        match self.live.props.get("type").and_then(Value::as_str) {
            Some("quorum") => QueueType::Quorum,
            _ => QueueType::Classic,
        }
    }
}

fn queues<'a>(
    live: &'a BTreeMap<ResourceId, Live>,
    foreign: &'a BTreeMap<String, Live>,
    vhost: &str,
) -> BTreeMap<&'a str, Queue<'a>> {
    let policies: BTreeMap<&str, &Live> = live
        .iter()
        .filter(|(i, _)| i.kind == Kind::Policy && i.scope == vhost)
        .map(|(i, l)| (i.name.as_str(), l))
        .chain(foreign.iter().map(|(n, l)| (n.as_str(), l)))
        .collect();
    let mut out = BTreeMap::new();
    for (id, l) in live
        .iter()
        .filter(|(i, _)| i.kind == Kind::Queue && i.scope == vhost)
    {
        let mut settings = BTreeMap::new();
        let mut from_policy = false;
        let policy = l
            .props
            .get("@policy")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let own_policy = policy.as_deref().is_some_and(|p| {
            p == id.name
                && policies.get(p).is_some_and(|pl| {
                    pl.props.get("pattern").and_then(Value::as_str)
                        == Some(crate::backend::rabbitmq::exact_pattern(&id.name).as_str())
                })
        });
        let mut policy_keys = Vec::new();
        let mut pattern = None;
        if let Some(pl) = policy.as_deref().and_then(|p| policies.get(p)) {
            pattern = pl
                .props
                .get("pattern")
                .and_then(Value::as_str)
                .map(str::to_owned);
            for k in SETTINGS {
                if let Some(v) = pl.props.get(&format!("definition.{k}")) {
                    settings.insert(k.to_owned(), v.clone());
                    from_policy = true;
                    policy_keys.push(k);
                }
            }
        }
        let mut from_args = false;
        let mut argument_keys = Vec::new();
        for k in SETTINGS {
            // An x-argument wins over the policy's value, as in RabbitMQ.
            if let Some(v) = l.props.get(&format!("arguments.x-{k}")) {
                settings.insert(k.to_owned(), v.clone());
                from_args = true;
                argument_keys.push(k);
                policy_keys.retain(|p| *p != k);
            }
        }
        let from_policy = from_policy && !policy_keys.is_empty();
        let source = match (from_args, from_policy) {
            (false, false) => Source::None,
            (true, false) => Source::Arguments,
            (false, true) if own_policy => Source::OwnPolicy,
            (false, true) => Source::OtherPolicy,
            (true, true) => Source::Mixed,
        };
        out.insert(
            id.name.as_str(),
            Queue {
                name: id.name.as_str(),
                live: l,
                settings,
                source,
                policy,
                policy_keys,
                argument_keys,
                pattern,
            },
        );
    }
    out
}

/// The vhost being grouped: what every channel found in it is built from.
pub struct Scope<'a> {
    pub live: &'a BTreeMap<ResourceId, Live>,
    pub target_name: &'a str,
    pub target: &'a Target,
    pub vhost: &'a str,
}

/// The vhost's queues by name, with their dead-lettering settings.
type Queues<'a> = BTreeMap<&'a str, Queue<'a>>;

/// Groups queues, policies, exchanges and bindings into channels; returns them and what fits
/// no channel. `prefix`: only channels with a name starting with it (and only such objects
/// are reported as unmatched).
pub fn group(
    s: &Scope,
    foreign: &BTreeMap<String, Live>,
    prefix: Option<&str>,
) -> (Vec<Candidate>, Vec<String>) {
    let qs = queues(s.live, foreign, s.vhost);
    let mut unmatched = Vec::new();
    let (retries_of, failed) = retry_links(s, &qs, &mut unmatched);
    let mut mains: Vec<&str> = retries_of.keys().copied().collect();
    for q in qs.values() {
        // A queue dead-letters through a named exchange: a main queue, unless a retry queue
        // dead-letters into the queue that exchange routes to (then that queue is the main one).
        let named_main = q.named_dlx().is_some_and(|(x, key)| {
            dlx_target(s, &qs, x, key).map_or(true, |d| !retries_of.contains_key(d))
        });
        // A queue that dead-letters through the default exchange straight into a dead-end
        // queue, with no retry queue of its own: a one-attempt channel (dramatiq, most
        // hand-made set-ups).
        let one_attempt = q.ttl().is_none()
            && matches!(q.edge(), Ok(Some(d)) if d != q.name
                && !retries_of.contains_key(d)
                && qs.get(d).is_some_and(|d| matches!(d.edge(), Ok(None))));
        if (q.settings.contains_key("delivery-limit") || named_main || one_attempt)
            && !mains.contains(&q.name)
        {
            mains.push(q.name);
        }
    }
    mains.sort();
    let mut claimed: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for main in mains {
        if claimed.contains(main) || failed.contains(main) {
            continue;
        }
        let retries = retries_of.get(main).cloned().unwrap_or_default();
        match build(s, &qs, main, retries, &claimed) {
            Ok((c, names)) => {
                let keep = prefix.is_none_or(|p| names.iter().any(|n| n.starts_with(p)));
                claimed.extend(names);
                if keep {
                    out.push(c);
                }
            }
            Err((why, names)) => {
                for n in &names {
                    if prefix.is_none_or(|p| n.starts_with(p)) {
                        unmatched.push(format!(
                            "{}: fits no channel: {why}",
                            resource_id(s.target_name, Kind::Queue, s.vhost, n)
                        ));
                    }
                }
                claimed.extend(names);
            }
        }
    }
    let taken = Taken {
        channels: &out,
        claimed: &claimed,
        failed: &failed,
    };
    unmatched.extend(leftovers(s, &taken, prefix));
    (out, unmatched)
}

/// The retry queues of each main queue, from the TTL queues that dead-letter into it through
/// the default exchange; a queue dead-lettering through another exchange is reported (in
/// `unmatched`) and returned as failed.
fn retry_links<'q>(
    s: &Scope,
    qs: &'q Queues<'q>,
    unmatched: &mut Vec<String>,
) -> (BTreeMap<&'q str, Vec<&'q Queue<'q>>>, BTreeSet<&'q str>) {
    let mut retries_of: BTreeMap<&str, Vec<&Queue>> = BTreeMap::new();
    let mut failed: BTreeSet<&str> = BTreeSet::new();
    for q in qs.values() {
        match q.edge() {
            Ok(Some(t)) if t != q.name && qs.contains_key(t) && q.ttl().is_some() => {
                retries_of.entry(t).or_default().push(q);
            }
            Ok(_) => {}
            // Through a named exchange: a main queue with a dead-letter exchange.
            Err(_) if q.named_dlx().is_some() => {}
            Err(why) => {
                unmatched.push(format!(
                    "{}: fits no channel: {why}",
                    resource_id(s.target_name, Kind::Queue, s.vhost, q.name)
                ));
                failed.insert(q.name);
            }
        }
    }
    (retries_of, failed)
}

/// What the grouping has taken: the channels built, the queue names they (or a failed
/// attempt) claimed, and the queues that failed on their own.
struct Taken<'t> {
    channels: &'t [Candidate],
    claimed: &'t BTreeSet<String>,
    failed: &'t BTreeSet<&'t str>,
}

/// The objects of the vhost no channel took, each with why (only those named after `prefix`).
fn leftovers(s: &Scope, taken: &Taken, prefix: Option<&str>) -> Vec<String> {
    let in_channels: BTreeSet<&ResourceId> =
        taken.channels.iter().flat_map(|c| c.live.keys()).collect();
    let mut out = Vec::new();
    for (id, l) in s.live.iter().filter(|(i, _)| i.scope == s.vhost) {
        let named = match id.kind {
            Kind::Binding => l
                .props
                .get("source")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            _ => id.name.as_str(),
        };
        if in_channels.contains(id)
            || taken.claimed.contains(&id.name)
            || taken.failed.contains(id.name.as_str())
            || prefix.is_some_and(|p| !named.starts_with(p))
        {
            continue;
        }
        let why = match id.kind {
            Kind::Queue => "no dead-letter routing ties it to a retry loop or a delivery limit",
            Kind::Policy => "it applies to no imported queue",
            Kind::Exchange => "it routes into no imported main queue",
            _ => "it routes into no imported main queue",
        };
        out.push(format!("{id}: fits no channel: {why}"));
    }
    out
}

type Built = Result<(Candidate, Vec<String>), (String, Vec<String>)>;

/// The channel around the main queue `main`, with the queue names it claims; or why it fits
/// no channel, with the queue names that reason applies to.
fn build(
    s: &Scope,
    qs: &Queues,
    main: &str,
    mut retries: Vec<&Queue>,
    claimed: &BTreeSet<String>,
) -> Built {
    let fail = |why: String, names: &[&str]| -> Built {
        Err((why, names.iter().map(|n| (*n).to_owned()).collect()))
    };
    let Some(m) = qs.get(main) else {
        return fail("it was not read".into(), &[main]);
    };
    retries.sort_by_key(|r| (r.ttl(), r.name));
    let mut names: Vec<&str> = vec![main];
    names.extend(retries.iter().map(|r| r.name));
    let (model, dlq) = match retry_loop(s, qs, m, !retries.is_empty(), &names, claimed) {
        Ok(found) => found,
        Err(why) => return fail(why, &names),
    };
    names.push(dlq);
    if claimed.contains(dlq) {
        return fail(
            format!("its dead-letter queue {dlq} already belongs to another channel"),
            &names,
        );
    }
    let Some(d) = qs.get(dlq) else {
        return fail(format!("its dead-letter queue {dlq} was not read"), &names);
    };
    let invalid = invalid_queue(qs, main, &names, claimed);
    names.extend(invalid.map(|q| q.name));
    let members = Members {
        main: m,
        retries,
        dlq: d,
        invalid,
        model,
    };
    match candidate(s, &members, &names) {
        Ok(c) => Ok((c, names.iter().map(|n| (*n).to_owned()).collect())),
        Err(why) => fail(why, &names),
    }
}

/// The retry model and dead-letter queue the main queue's links give: a delivery limit
/// dead-letters into its DLQ; a TTL retry loop's DLQ is found by name, unless the main queue
/// dead-letters through a named exchange, which routes to it.
fn retry_loop<'q>(
    s: &Scope,
    qs: &'q Queues<'q>,
    m: &'q Queue<'q>,
    has_retries: bool,
    names: &[&str],
    claimed: &BTreeSet<String>,
) -> Result<(Loop, &'q str), String> {
    let through_dlx = || -> Option<Result<&'q str, String>> {
        let (x, key) = m.named_dlx()?;
        Some(dlx_target(s, qs, x, key).and_then(|d| {
            if names.contains(&d) {
                Err(format!(
                    "it dead-letters through exchange {x} into {d}, a queue of its own retry loop"
                ))
            } else {
                Ok(d)
            }
        }))
    };
    let Some(limit) = m.settings.get("delivery-limit").and_then(Value::as_u64) else {
        if let Some(d) = through_dlx() {
            return d.map(|d| (Loop::Ttl, d));
        }
        // Through the default exchange straight into its DLQ (a one-attempt channel, or
        // x-arguments where a reject on the main queue means dead).
        if let Ok(Some(d)) = m.edge()
            && !names.contains(&d)
            && let Some(q) = qs.get(d)
        {
            return Ok((Loop::Ttl, q.name));
        }
        return ttl_dead_letter_queue(qs, m.name, names, claimed).map(|d| (Loop::Ttl, d));
    };
    if has_retries {
        return Err(
            "it has both a delivery limit and TTL retry queues; a spec has one retry model".into(),
        );
    }
    if let Some(d) = through_dlx() {
        return d.map(|d| (Loop::DeliveryLimit(limit), d));
    }
    match m.edge() {
        Ok(Some(d)) if qs.contains_key(d) && d != m.name => Ok((Loop::DeliveryLimit(limit), d)),
        _ => Err("it has a delivery limit but dead-letters into no queue of this vhost".into()),
    }
}

/// The queue a named dead-letter exchange routes a dead letter with `key` to: the one queue of
/// the vhost bound to that owned exchange with exactly that key (what dlqctl declares).
fn dlx_target<'q>(
    s: &Scope,
    qs: &'q Queues<'q>,
    exchange: &str,
    key: Option<&str>,
) -> Result<&'q str, String> {
    dlx_binding(s, qs, exchange, key).map(|(d, _)| d)
}

/// The queue a named dead-letter exchange routes the channel's dead letters to, with the key
/// it is bound by: the one queue bound to it with the dead-letter routing key (any key for a
/// fanout exchange, which ignores keys); without a dead-letter routing key (messages keep
/// their own), the one queue bound to it, by its one binding.
fn dlx_binding<'q>(
    s: &Scope,
    qs: &'q Queues<'q>,
    exchange: &str,
    key: Option<&str>,
) -> Result<(&'q str, String), String> {
    if !s.live.contains_key(&resource_id(
        s.target_name,
        Kind::Exchange,
        s.vhost,
        exchange,
    )) {
        return Err(format!(
            "it dead-letters through exchange {exchange}, which does not exist or is outside the ownership prefixes"
        ));
    }
    let fanout = exchange_kind(s.live.get(&resource_id(
        s.target_name,
        Kind::Exchange,
        s.vhost,
        exchange,
    ))) == ExchangeKind::Fanout;
    let to: Vec<(&str, String)> = s
        .live
        .iter()
        .filter(|(i, _)| i.kind == Kind::Binding && i.scope == s.vhost)
        .map(|(_, b)| {
            let get = |k: &str| b.props.get(k).and_then(Value::as_str).unwrap_or_default();
            (get("source"), get("destination"), get("routing_key"))
        })
        .filter(|(src, _, k)| *src == exchange && (fanout || key.is_none_or(|key| *k == key)))
        .filter_map(|(_, d, k)| qs.get(d).map(|q| (q.name, k.to_owned())))
        .collect();
    let with = key.map_or_else(
        || "without a dead-letter routing key (messages keep their own keys)".to_owned(),
        |k| format!("with key {k}"),
    );
    match to.as_slice() {
        [(d, k)] => Ok((d, k.clone())),
        [] => Err(format!(
            "it dead-letters through exchange {exchange} {with}, but no queue is bound to it{}",
            if key.is_some() && !fanout {
                " with that key"
            } else {
                ""
            }
        )),
        _ => {
            let mut queues: Vec<&str> = to.iter().map(|(d, _)| *d).collect();
            queues.dedup();
            Err(if queues.len() == 1 {
                format!(
                    "it dead-letters through exchange {exchange} {with} into {}, bound to it by several keys; a spec binds the dead-letter queue by one key",
                    queues[0]
                )
            } else {
                format!(
                    "it dead-letters through exchange {exchange} {with} into several queues ({}); a spec has one dead-letter queue",
                    queues.join(", ")
                )
            })
        }
    }
}

/// The DLQ of a TTL retry loop: nothing on the broker points at it (the consumer publishes
/// to it), so it is the unclaimed dead-end queue named like the channel's stem plus a suffix.
fn ttl_dead_letter_queue<'q>(
    qs: &'q Queues<'q>,
    main: &str,
    names: &[&str],
    claimed: &BTreeSet<String>,
) -> Result<&'q str, String> {
    let stem = common_stem(names);
    let stem = if stem.is_empty() {
        main.to_owned()
    } else {
        stem
    };
    let tried: Vec<String> = DLQ_SUFFIXES
        .iter()
        .flat_map(|s| [format!("{stem}{s}"), format!("{main}{s}")])
        .collect();
    let found = tried.iter().find(|n| {
        qs.get(n.as_str()).is_some_and(|q| {
            !claimed.contains(n.as_str())
                && matches!(q.edge(), Ok(None))
                && !names.contains(&q.name)
        })
    });
    match found {
        Some(d) => Ok(qs.get(d.as_str()).map_or("", |q| q.name)),
        None => Err(format!(
            "it is the main queue of a TTL retry loop, but no dead-letter queue was found next to it (looked for {})",
            tried.iter().take(4).cloned().collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Names tried for the invalid-message queue, after the channel's stem (and after the main
/// queue's name), in this order.
pub const INVALID_SUFFIXES: [&str; 2] = [".invalid", "-invalid"];

/// The invalid-message queue of a channel (`spec.invalid`): like a TTL loop's DLQ, nothing
/// on the broker points at it (the consumer publishes poison messages to it), so it is the
/// unclaimed dead-end queue named like the channel's stem (or main queue) plus `.invalid`.
fn invalid_queue<'q>(
    qs: &'q Queues<'q>,
    main: &str,
    names: &[&str],
    claimed: &BTreeSet<String>,
) -> Option<&'q Queue<'q>> {
    let stem = common_stem(names);
    let stems = [stem.as_str(), main];
    INVALID_SUFFIXES
        .iter()
        .flat_map(|sfx| stems.map(|s| format!("{s}{sfx}")))
        .filter(|n| !n.starts_with(['.', '-']))
        .find_map(|n| {
            qs.get(n.as_str()).filter(|q| {
                !claimed.contains(q.name)
                    && !names.contains(&q.name)
                    && matches!(q.edge(), Ok(None))
                    && !q.settings.contains_key("delivery-limit")
            })
        })
}

/// The queues of one channel as its dead-letter links tie them, with its retry model.
struct Members<'q> {
    main: &'q Queue<'q>,
    /// By TTL, then name.
    retries: Vec<&'q Queue<'q>>,
    dlq: &'q Queue<'q>,
    /// The invalid-message queue, if one was found by name.
    invalid: Option<&'q Queue<'q>>,
    model: Loop,
}

impl<'q> Members<'q> {
    /// A delivery limit without `dead-letter-strategy: at-least-once` and without an overflow
    /// (RabbitMQ's at-most-once default): `deadLetterStrategy: atMostOnce`. Any other mix is
    /// left for the plan to report.
    fn at_most_once(&self) -> bool {
        matches!(self.model, Loop::DeliveryLimit(_))
            && self.main.settings.get("dead-letter-strategy") != Some(&Value::from("at-least-once"))
            && !self.main.settings.contains_key("overflow")
    }

    /// The main queue dead-letters into its first retry queue through the default exchange:
    /// the broker drives the TTL loop (policy mode's shape; `rejectToRetry` in arguments mode).
    fn rejects_to_retry(&self) -> bool {
        self.model == Loop::Ttl
            && self
                .retries
                .first()
                .is_some_and(|r| self.main.edge() == Ok(Some(r.name)))
    }

    /// Main queue, retry queues, dead-letter queue, invalid-message queue, in that order.
    fn all(&self) -> Vec<&'q Queue<'q>> {
        std::iter::once(self.main)
            .chain(self.retries.iter().copied())
            .chain([self.dlq])
            .chain(self.invalid)
            .collect()
    }
}

/// The spec (and the live objects it covers) the channel's queues make, or why a spec cannot
/// say how they are set up. `names`: the channel's queue names, main first.
fn candidate(s: &Scope, ms: &Members, names: &[&str]) -> Result<Candidate, String> {
    let (main, dlq) = (ms.main.name, ms.dlq.name);
    let members = ms.all();
    let mode = dlx_mode(&members)?;
    if let Ok(Some(t)) = ms.main.edge()
        && ms.model == Loop::Ttl
        && match ms.retries.first() {
            Some(r) => r.name != t && !(t == dlq && mode == DlxMode::Arguments),
            None => t != dlq,
        }
    {
        return Err(format!(
            "it dead-letters into {t}, not into its first retry queue"
        ));
    }
    let types: BTreeSet<String> = members
        .iter()
        .map(|q| format!("{:?}", q.queue_type()))
        .collect();
    if types.len() > 1 {
        return Err(
            "its queues are of different types (classic and quorum); a spec gives them one type"
                .into(),
        );
    }
    let id = channel_id(names, main);
    let braces = |n: &str| format!("the name {n} holds `{{` or `}}`, which a name template cannot");
    let main_t = template(main, &id).ok_or_else(|| braces(main))?;
    let dlq_t = template(dlq, &id).ok_or_else(|| braces(dlq))?;
    let mut found = Gathered {
        live: member_objects(s, &members),
        findings: Vec::new(),
    };
    let (retry, retry_model) = retry_settings(s, ms, &id, &mut found.findings)?;
    let dlx = dead_letter_exchange(s, ms, mode, &id, &mut found)?;
    let exchange = exchange(
        s,
        &members,
        main,
        dlx.as_ref().and_then(|d| d.1.as_ref()),
        &id,
        &mut found,
    );
    let queue_type = ms.main.queue_type();
    let target_vhost = s.target.vhost.clone().unwrap_or_else(|| "/".to_owned());
    let keep = crate::backend::kit::import::dead_letter_keep(
        crate::spec::model::Backend::Rabbitmq,
        ms.dlq.ttl().map(millis),
    );
    let invalid = match ms.invalid {
        Some(q) => {
            let t = template(q.name, &id).ok_or_else(|| braces(q.name))?;
            let keep = crate::backend::kit::import::dead_letter_keep(
                crate::spec::model::Backend::Rabbitmq,
                q.ttl().map(millis),
            );
            Some(Invalid {
                name: non_default(t, "{channel}.invalid"),
                retention: keep.0,
                discard: keep.1,
                alarms: None,
            })
        }
        None => None,
    };
    let spec = ChannelSpec {
        target: Some(s.target_name.to_owned()),
        name: non_default(main_t, "{channel}"),
        invalid,
        retention: ms.main.ttl().map(millis),
        retry: Some(retry),
        dead_letter: Some(DeadLetter {
            of: None,
            subscription: None,
            name: non_default(dlq_t, "{channel}.dlq"),
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
        rabbitmq: Some(RabbitMqOptions {
            vhost: (s.vhost != target_vhost).then(|| s.vhost.to_owned()),
            queue_type: (queue_type != QueueType::Classic).then_some(queue_type),
            dlx: (mode != DlxMode::Policy).then_some(mode),
            retry_model,
            exchange,
            dead_letter_exchange: dlx.map(|d| d.0),
            policy_priority: policy_priority(s, &members),
            reject_to_retry: (mode == DlxMode::Arguments && ms.rejects_to_retry()).then_some(true),
            dead_letter_strategy: ms.at_most_once().then_some(DeadLetterStrategy::AtMostOnce),
        }),
        ..ChannelSpec::default()
    };
    Ok(Candidate {
        channel: channel(&id, spec),
        live: found.live,
        findings: found.findings,
        to_adopt: Vec::new(),
        unreadable: Vec::new(),
    })
}

/// What a channel gathers besides its spec: the live objects it covers and the findings.
struct Gathered {
    live: BTreeMap<ResourceId, Live>,
    findings: Vec<String>,
}

/// The channel's name: the queues' common stem, else the main queue's name (made valid).
fn channel_id(names: &[&str], main: &str) -> String {
    let stem = common_stem(names);
    if valid_channel_id(&stem) {
        stem
    } else if valid_channel_id(main) {
        main.to_owned()
    } else {
        sanitise_channel_id(main)
    }
}

/// The one way the whole channel's dead-lettering is set (a spec says policy or x-arguments,
/// and its policies are named after their queues); mixed or foreign sources are refused.
fn dlx_mode(members: &[&Queue]) -> Result<DlxMode, String> {
    let sources: BTreeSet<String> = members
        .iter()
        .filter(|q| q.source != Source::None)
        .map(|q| format!("{:?}", q.source))
        .collect();
    match sources
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] | ["OwnPolicy"] => Ok(DlxMode::Policy),
        ["Arguments"] => Ok(DlxMode::Arguments),
        _ => {
            // Each queue and the object its settings come from, as RabbitMQ applies them: the
            // x-arguments, then the one policy it applies (the highest priority that matches).
            let said: Vec<String> = members
                .iter()
                .filter_map(|q| {
                    let p = q.policy.as_deref().unwrap_or("-");
                    let keys = |k: &[&str]| k.join(", ");
                    match q.source {
                        Source::OtherPolicy if q.name == p => Some(format!(
                            "{} gets {} from policy `{p}`, whose pattern `{}` matches more than that queue",
                            q.name,
                            keys(&q.policy_keys),
                            q.pattern.as_deref().unwrap_or("?")
                        )),
                        Source::OtherPolicy => Some(format!(
                            "{} gets {} from policy `{p}`, which is not named after it",
                            q.name,
                            keys(&q.policy_keys)
                        )),
                        Source::Mixed => Some(format!(
                            "{} gets {} from its x-arguments and {} from policy `{p}`",
                            q.name,
                            keys(&q.argument_keys),
                            keys(&q.policy_keys)
                        )),
                        _ => None,
                    }
                })
                .collect();
            Err(if said.is_empty() {
                let by = |s: Source| {
                    members
                        .iter()
                        .filter(|q| q.source == s)
                        .map(|q| q.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                format!(
                    "its queues mix x-arguments ({}) and policies named after them ({}); a spec uses one or the other",
                    by(Source::Arguments),
                    by(Source::OwnPolicy)
                )
            } else {
                format!(
                    "{}; a spec sets each queue's dead-lettering in one place: x-arguments only, or one policy named after the queue that matches only it",
                    said.join("; ")
                )
            })
        }
    }
}

/// The retry block: attempts from the delivery limit, or the backoff the TTL loop's delays
/// fit (with the fewest attempts that use every retry queue, said in a finding).
fn retry_settings(
    s: &Scope,
    ms: &Members,
    id: &str,
    findings: &mut Vec<String>,
) -> Result<(Retry, Option<RetryModel>), String> {
    let mut retry = Retry {
        max_attempts: None,
        backoff: None,
        name: None,
    };
    if let Loop::DeliveryLimit(limit) = ms.model {
        retry.max_attempts = u32::try_from(limit).ok().map(|l| l.saturating_add(1));
        return Ok((retry, Some(RetryModel::DeliveryLimit)));
    }
    if ms.retries.is_empty() {
        // Only a main queue that dead-letters through a named exchange gets here: a reject
        // (or an expiry) is the end of the line.
        retry.max_attempts = Some(1);
        findings.push(format!(
            "{}: no retry queue: `retry.maxAttempts` was set to 1 (a rejected message goes to the dead-letter queue); set the number of deliveries your consumer makes before it rejects",
            resource_id(s.target_name, Kind::Queue, s.vhost, ms.main.name)
        ));
        return Ok((retry, None));
    }
    let ttls: Vec<u64> = ms.retries.iter().filter_map(|r| r.ttl()).collect();
    let mut distinct = ttls.clone();
    distinct.dedup();
    if distinct.len() != ttls.len() {
        return Err(
            "two of its retry queues have the same TTL; a spec has one retry queue per delay"
                .into(),
        );
    }
    let Some((backoff, attempts)) = fit_backoff(&distinct) else {
        return Err(format!(
            "its retry delays ({} ms) do not follow an exponential backoff a spec can express",
            distinct
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    retry.max_attempts = Some(attempts);
    retry.backoff = Some(backoff);
    findings.push(format!(
        "{}: RabbitMQ does not record how many attempts the consumer makes; `retry.maxAttempts` was set to {attempts}, the fewest that use every retry queue: set the number your consumer uses",
        resource_id(s.target_name, Kind::Queue, s.vhost, ms.main.name)
    ));
    let Some(t) = retry_template(&ms.retries, id) else {
        return Err(
            "the names of its retry queues follow no template ({channel}, {delay}, {index})".into(),
        );
    };
    let default = if distinct.len() == 1 {
        "{channel}.retry"
    } else {
        "{channel}.retry.{delay}"
    };
    retry.name = non_default(t, default);
    Ok((retry, None))
}

/// The channel's queues and the policies named after them, as read.
fn member_objects(s: &Scope, members: &[&Queue]) -> BTreeMap<ResourceId, Live> {
    let mut out = BTreeMap::new();
    for q in members {
        out.insert(
            resource_id(s.target_name, Kind::Queue, s.vhost, q.name),
            q.live.clone(),
        );
        let pid = resource_id(s.target_name, Kind::Policy, s.vhost, q.name);
        if let Some(pl) = s.live.get(&pid) {
            out.insert(pid, pl.clone());
        }
    }
    out
}

/// Bindings into a channel's queues, by source exchange.
type ByExchange<'l> = BTreeMap<&'l str, Vec<(&'l ResourceId, &'l Live)>>;

/// Every binding of the vhost into one of the channel's queues, by source exchange.
fn bindings_by_exchange<'l>(s: &Scope<'l>, members: &[&Queue]) -> ByExchange<'l> {
    let mut out: ByExchange = BTreeMap::new();
    for (bid, bl) in s
        .live
        .iter()
        .filter(|(i, _)| i.kind == Kind::Binding && i.scope == s.vhost)
    {
        let get = |k: &str| bl.props.get(k).and_then(Value::as_str).unwrap_or_default();
        if members.iter().any(|q| q.name == get("destination")) {
            out.entry(get("source")).or_default().push((bid, bl));
        }
    }
    out
}

/// The read exchange a spec binds to the main queue: the one with the most bindings into it
/// (ties: the first by name).
fn chosen_exchange<'l>(s: &Scope, by_exchange: &ByExchange<'l>, main: &str) -> Option<&'l str> {
    by_exchange
        .iter()
        .filter(|(x, bs)| {
            s.live
                .contains_key(&resource_id(s.target_name, Kind::Exchange, s.vhost, x))
                && bs
                    .iter()
                    .any(|(_, b)| b.props.get("destination").and_then(Value::as_str) == Some(main))
        })
        .max_by_key(|(x, bs)| (bs.len(), std::cmp::Reverse(**x)))
        .map(|(x, _)| *x)
}

/// A named dead-letter exchange as a spec says it, with the binding it routes the channel's
/// dead letters by: (spec, (exchange, DLQ binding id)).
/// The DLQ binding is `None` for the default exchange.
type FoundDlx<'l> = (DeadLetterExchange, Option<(&'l str, ResourceId)>);

/// The channel's named dead-letter exchange: the one its main queue dead-letters through, or,
/// in a TTL loop by policy (where the main queue dead-letters into its first retry queue and
/// the consumer publishes dead letters itself), the one owned exchange bound to the DLQ and to
/// no other queue of the channel. The exchange and the DLQ's binding join the channel.
fn dead_letter_exchange<'l>(
    s: &Scope<'l>,
    ms: &Members,
    mode: DlxMode,
    id: &str,
    found: &mut Gathered,
) -> Result<Option<FoundDlx<'l>>, String> {
    let dlq = ms.dlq.name;
    // The exchange, the dead-letter routing key (`None`: messages keep their own) and the
    // key the DLQ is bound with.
    let (x, key, bound): (&'l str, Option<String>, String) = match ms.main.named_dlx() {
        Some((x, _))
            if mode == DlxMode::Policy && ms.model == Loop::Ttl && !ms.retries.is_empty() =>
        {
            return Err(format!(
                "in policy mode its main queue should dead-letter into its first retry queue, not through exchange {x}; with x-arguments a spec can say this"
            ));
        }
        Some((x, key)) => {
            let xid = resource_id(s.target_name, Kind::Exchange, s.vhost, x);
            // `retry_loop` found the DLQ through this exchange and key: both are there.
            let Some((xid, _)) = s.live.get_key_value(&xid) else {
                return Err(format!("its dead-letter exchange {x} was not read"));
            };
            let no_foreign = BTreeMap::new();
            let qs = queues(s.live, &no_foreign, s.vhost);
            let (_, bound) = dlx_binding(s, &qs, x, key)?;
            (xid.name.as_str(), key.map(str::to_owned), bound)
        }
        // x-arguments with retry queues, the main queue dead-lettering through the default
        // exchange into the DLQ: a reject means dead.
        None if mode == DlxMode::Arguments
            && !ms.retries.is_empty()
            && ms.main.edge() == Ok(Some(dlq)) =>
        {
            return Ok(Some((
                DeadLetterExchange {
                    name: String::new(),
                    kind: None,
                    routing_key: None,
                    keep_routing_key: None,
                    binding_key: None,
                },
                None,
            )));
        }
        None if (mode == DlxMode::Policy || ms.rejects_to_retry())
            && ms.model == Loop::Ttl
            && !ms.retries.is_empty() =>
        {
            let members = ms.all();
            let by_exchange = bindings_by_exchange(s, &members);
            let only_dlq: Vec<(&'l str, String)> = by_exchange
                .iter()
                .filter(|(x, _)| {
                    let xid = resource_id(s.target_name, Kind::Exchange, s.vhost, x);
                    s.live.contains_key(&xid)
                        && exchange_kind(s.live.get(&xid)) != ExchangeKind::Headers
                        && shared_dlx(s, x, dlq, ms.main.name).is_none()
                })
                .filter_map(|(x, bs)| match bs.as_slice() {
                    [(_, b)] if b.props.get("destination").and_then(Value::as_str) == Some(dlq) => {
                        let key = b.props.get("routing_key").and_then(Value::as_str)?;
                        Some((*x, key.to_owned()))
                    }
                    _ => None,
                })
                .collect();
            match only_dlq.as_slice() {
                [(x, k)] => (*x, Some(k.clone()), k.clone()),
                _ => return Ok(None),
            }
        }
        None => return Ok(None),
    };
    let xid = resource_id(s.target_name, Kind::Exchange, s.vhost, x);
    if exchange_kind(s.live.get(&xid)) == ExchangeKind::Headers {
        return Err(format!(
            "it dead-letters through headers exchange {x}, which ignores the dead-letter routing key; a spec's dead-letter exchange routes by it"
        ));
    }
    if let Some(other) = shared_dlx(s, x, dlq, ms.main.name) {
        return Err(format!(
            "its dead-letter exchange {x} also serves {other}; in a spec a dead-letter exchange belongs to one channel"
        ));
    }
    let bid = resource_id(
        s.target_name,
        Kind::Binding,
        s.vhost,
        &super::binding_name(x, dlq, &bound),
    );
    let braces = |n: &str| format!("the name {n} holds `{{` or `}}`, which a name template cannot");
    let name = template(x, id).ok_or_else(|| braces(x))?;
    let kind = exchange_kind(s.live.get(&xid));
    let routing_key = match &key {
        Some(k) if k != dlq => Some(template(k, id).ok_or_else(|| braces(k))?),
        _ => None,
    };
    // The binding key the spec would default to (see `spec::resolve::rabbitmq`).
    let default_bound = match (&key, kind) {
        (Some(k), _) => k.as_str(),
        (None, ExchangeKind::Fanout) => "",
        (None, _) => ms.main.name,
    };
    let binding_key = if bound == default_bound {
        None
    } else {
        Some(template(&bound, id).ok_or_else(|| braces(&bound))?)
    };
    for (i, l) in [(&xid, s.live.get(&xid)), (&bid, s.live.get(&bid))] {
        if let Some(l) = l {
            found.live.insert(i.clone(), l.clone());
        }
    }
    Ok(Some((
        DeadLetterExchange {
            name,
            kind: Some(kind).filter(|k| *k != ExchangeKind::Direct),
            routing_key,
            keep_routing_key: key.is_none().then_some(true),
            binding_key,
        },
        Some((x, bid)),
    )))
}

/// What else uses exchange `x` besides the channel whose main queue and DLQ these are: a
/// binding to another queue or exchange, or another queue or policy dead-lettering into it.
fn shared_dlx(s: &Scope, x: &str, dlq: &str, main: &str) -> Option<String> {
    s.live
        .iter()
        .filter(|(i, _)| i.scope == s.vhost)
        .find_map(|(i, l)| {
            let get = |k: &str| l.props.get(k).and_then(Value::as_str);
            let other = match i.kind {
                Kind::Binding => get("source") == Some(x) && get("destination") != Some(dlq),
                Kind::Queue => get("arguments.x-dead-letter-exchange") == Some(x) && i.name != main,
                Kind::Policy => get("definition.dead-letter-exchange") == Some(x) && i.name != main,
                _ => false,
            };
            other.then(|| i.to_string())
        })
}

/// An exchange's type as read (`direct` when unknown).
fn exchange_kind(live: Option<&Live>) -> ExchangeKind {
    match live
        .and_then(|l| l.props.get("type"))
        .and_then(Value::as_str)
    {
        Some("topic") => ExchangeKind::Topic,
        Some("fanout") => ExchangeKind::Fanout,
        Some("headers") => ExchangeKind::Headers,
        _ => ExchangeKind::Direct,
    }
}

/// The channel's exchange: the chosen exchange and its bindings into the main queue join the
/// channel; every other binding into its queues is reported and left as is, except the DLQ's
/// binding to the channel's dead-letter exchange (`dlx`: that exchange and binding).
fn exchange(
    s: &Scope,
    members: &[&Queue],
    main: &str,
    dlx: Option<&(&str, ResourceId)>,
    id: &str,
    found: &mut Gathered,
) -> Option<ExchangeBinding> {
    let by_exchange = bindings_by_exchange(s, members);
    let chosen = chosen_exchange(s, &by_exchange, main).filter(|x| dlx.is_none_or(|d| d.0 != *x));
    for (x, bs) in &by_exchange {
        for (bid, bl) in bs {
            let to_main = bl.props.get("destination").and_then(Value::as_str) == Some(main);
            if dlx.is_some_and(|d| d.1 == **bid) {
                continue;
            }
            if Some(*x) == chosen && to_main {
                found.live.insert((*bid).clone(), (*bl).clone());
            } else {
                found.findings.push(format!(
                    "{bid}: not in the spec, left as is (a spec binds one exchange to the main queue); `plan --prune` would delete it"
                ));
            }
        }
    }
    let x = chosen?;
    let xid = resource_id(s.target_name, Kind::Exchange, s.vhost, x);
    let kind = exchange_kind(s.live.get(&xid));
    let mut keys: Vec<String> = by_exchange
        .get(x)
        .into_iter()
        .flatten()
        .filter(|(_, b)| b.props.get("destination").and_then(Value::as_str) == Some(main))
        .filter_map(|(_, b)| b.props.get("routing_key").and_then(Value::as_str))
        .map(str::to_owned)
        .collect();
    keys.sort();
    keys.dedup();
    let Some(name) = template(x, id) else {
        found.findings.push(format!(
            "{xid}: not in the spec: the name {x} holds `{{` or `}}`, which a name template cannot"
        ));
        return None;
    };
    if let Some(l) = s.live.get(&xid) {
        found.live.insert(xid, l.clone());
    }
    Some(ExchangeBinding {
        name,
        kind: (kind != ExchangeKind::Direct).then_some(kind),
        routing_keys: (keys != [main.to_owned()]).then_some(keys),
    })
}

/// The priority of the channel's own policies, when it is not dlqctl's default.
fn policy_priority(s: &Scope, members: &[&Queue]) -> Option<i32> {
    members
        .iter()
        .filter(|q| q.source == Source::OwnPolicy)
        .find_map(|q| {
            s.live
                .get(&resource_id(s.target_name, Kind::Policy, s.vhost, q.name))
                .and_then(|p| p.props.get("priority"))
                .and_then(Value::as_i64)
                .and_then(|p| i32::try_from(p).ok())
        })
        .filter(|p| *p != DEFAULT_POLICY_PRIORITY)
}

/// The retry model found on the broker (with the delivery limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loop {
    Ttl,
    DeliveryLimit(u64),
}

/// A `retry.name` template that gives every retry queue its live name: `{channel}` for the
/// stem, then `{delay}` (ms) or `{index}` (from 1) where the names differ.
fn retry_template(retries: &[&Queue], id: &str) -> Option<String> {
    let templates: Vec<String> = retries
        .iter()
        .map(|r| template(r.name, id))
        .collect::<Option<_>>()?;
    if let [only] = templates.as_slice() {
        return Some(only.clone());
    }
    let by = |placeholder: &str, value: &dyn Fn(usize, &Queue) -> String| -> Option<String> {
        let mut found: Option<String> = None;
        for (i, (t, r)) in templates.iter().zip(retries).enumerate() {
            let v = value(i, r);
            let pos = t.rfind(&v)?;
            let candidate = format!("{}{placeholder}{}", &t[..pos], &t[pos + v.len()..]);
            match &found {
                Some(f) if *f != candidate => return None,
                _ => found = Some(candidate),
            }
        }
        found
    };
    by("{delay}", &|_, r| r.ttl().unwrap_or(0).to_string())
        .or_else(|| by("{index}", &|i, _| (i + 1).to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(kind: Kind, name: &str) -> ResourceId {
        resource_id("r", kind, "/", name)
    }

    fn live(props: Value) -> Live {
        Live {
            props: serde_json::from_value(props).expect("props"),
            messages: None,
        }
    }

    fn scope(live: &BTreeMap<ResourceId, Live>) -> Scope<'_> {
        Scope {
            live,
            target_name: "r",
            target: Box::leak(Box::new(target())),
            vhost: "/",
        }
    }

    fn target() -> Target {
        serde_json::from_value(
            json!({"backend": "rabbitmq", "url": "http://x", "ownership": {"prefixes": ["o"]}}),
        )
        .expect("target")
    }

    #[test]
    fn a_hand_declared_ttl_loop_in_arguments_becomes_one_channel() {
        let plain = json!({"durable": true, "auto_delete": false, "type": "classic"});
        let mut retry = plain.clone();
        retry["arguments.x-message-ttl"] = json!(5000);
        retry["arguments.x-dead-letter-exchange"] = json!("");
        retry["arguments.x-dead-letter-routing-key"] = json!("orders.process");
        let l: BTreeMap<ResourceId, Live> = [
            (id(Kind::Queue, "orders.process"), live(plain.clone())),
            (id(Kind::Queue, "orders.retry"), live(retry)),
            (id(Kind::Queue, "orders.dlq"), live(plain.clone())),
            (id(Kind::Queue, "orders.other"), live(plain)),
        ]
        .into();
        let (found, unmatched) = group(&scope(&l), &BTreeMap::new(), None);
        assert_eq!(found.len(), 1, "{unmatched:?}");
        let c = &found[0].channel;
        assert_eq!(c.metadata.name, "orders");
        assert_eq!(c.spec.name.as_deref(), Some("{channel}.process"));
        let rb = c.spec.rabbitmq.as_ref().expect("rabbitmq");
        assert_eq!(rb.dlx, Some(DlxMode::Arguments));
        assert_eq!(
            c.spec
                .retry
                .as_ref()
                .and_then(|r| r.backoff.as_ref())
                .map(|b| b.initial.as_millis()),
            Some(5000)
        );
        assert_eq!(unmatched.len(), 1);
        assert!(unmatched[0].contains("orders.other"), "{unmatched:?}");
    }

    #[test]
    fn a_quorum_queue_with_a_delivery_limit_by_policy_becomes_a_delivery_limit_channel() {
        let quorum = json!({"durable": true, "auto_delete": false, "type": "quorum"});
        let mut main = quorum.clone();
        main["@policy"] = json!("o.work");
        let policy = json!({"pattern": "^o\\.work$", "apply-to": "queues", "priority": 20,
            "definition.delivery-limit": 4, "definition.dead-letter-exchange": "",
            "definition.dead-letter-routing-key": "o.failed",
            "definition.dead-letter-strategy": "at-least-once", "definition.overflow": "reject-publish"});
        let l: BTreeMap<ResourceId, Live> = [
            (id(Kind::Queue, "o.work"), live(main)),
            (id(Kind::Policy, "o.work"), live(policy)),
            (id(Kind::Queue, "o.failed"), live(quorum)),
        ]
        .into();
        let (found, unmatched) = group(&scope(&l), &BTreeMap::new(), None);
        assert!(unmatched.is_empty(), "{unmatched:?}");
        let c = &found[0].channel;
        assert_eq!(c.metadata.name, "o");
        assert_eq!(c.spec.retry.as_ref().and_then(|r| r.max_attempts), Some(5));
        let rb = c.spec.rabbitmq.as_ref().expect("rabbitmq");
        assert_eq!(rb.queue_type, Some(QueueType::Quorum));
        assert_eq!(rb.policy_priority, Some(20));
        assert_eq!(
            c.spec.dead_letter.as_ref().and_then(|d| d.name.as_deref()),
            Some("{channel}.failed")
        );
    }

    #[test]
    fn dead_lettering_from_a_pattern_policy_is_reported_not_guessed() {
        let mut retry = json!({"durable": true, "auto_delete": false, "type": "classic", "@policy": "all-retries"});
        retry["arguments.x-message-ttl"] = json!(1000);
        let foreign: BTreeMap<String, Live> = [(
            "all-retries".to_owned(),
            live(
                json!({"pattern": "\\.retry$", "definition.dead-letter-exchange": "",
                "definition.dead-letter-routing-key": "o.main"}),
            ),
        )]
        .into();
        let plain = json!({"durable": true, "auto_delete": false, "type": "classic"});
        let l: BTreeMap<ResourceId, Live> = [
            (id(Kind::Queue, "o.main"), live(plain.clone())),
            (id(Kind::Queue, "o.retry"), live(retry)),
            (id(Kind::Queue, "o.dlq"), live(plain)),
        ]
        .into();
        let (found, unmatched) = group(&scope(&l), &foreign, None);
        assert!(found.is_empty());
        assert!(
            unmatched
                .iter()
                .any(|u| u.contains("all-retries") && u.contains("o.retry")),
            "{unmatched:?}"
        );
        assert_eq!(
            unmatched.len(),
            3,
            "every queue of the group is listed: {unmatched:?}"
        );
    }

    /// The live state dlqctl's own apply leaves behind, in the shape the reader returns.
    fn applied(desired: &[crate::resource::Desired]) -> BTreeMap<ResourceId, Live> {
        let mut out = BTreeMap::new();
        for d in desired.iter().filter(|d| d.present) {
            let mut props: crate::resource::Props = d
                .props
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if d.id.kind == Kind::Queue
                && desired
                    .iter()
                    .any(|p| p.present && p.id.kind == Kind::Policy && p.id.name == d.id.name)
            {
                props.insert("@policy".into(), json!(d.id.name));
            }
            out.insert(
                d.id.clone(),
                Live {
                    props,
                    messages: None,
                },
            );
        }
        out
    }

    #[test]
    fn every_topology_dlqctl_writes_is_imported_back_to_a_spec_that_plans_empty() {
        let cases = [
            "retry: {maxAttempts: 4, backoff: {initial: 5s}}",
            "retry: {maxAttempts: 4, backoff: {initial: 1s, multiplier: 2}}\n  retention: 1d\n  deadLetter: {retention: 7d}",
            "retry: {maxAttempts: 5, backoff: {initial: 1s, multiplier: 3, max: 5s}}\n  rabbitmq: {dlx: arguments}",
            "name: \"{channel}.work\"\n  retry: {maxAttempts: 3, backoff: {initial: 2s, multiplier: 2}, name: \"{channel}.wait-{index}\"}\n  deadLetter: {name: \"{channel}-dead\"}",
            "retry: {maxAttempts: 6}\n  rabbitmq: {queueType: quorum, retryModel: deliveryLimit, policyPriority: 50}",
            "retry: {maxAttempts: 2, backoff: {initial: 3s}}\n  rabbitmq: {exchange: {name: \"{channel}.in\", type: topic, routingKeys: [a.#, b]}}",
            // A named dead-letter exchange, in each place the main queue's dead letters go.
            "retry: {maxAttempts: 1}\n  retention: 30s\n  rabbitmq: {deadLetterExchange: {name: \"{channel}.dlx\", routingKey: \"{channel}.dead\"}}",
            "retry: {maxAttempts: 1}\n  rabbitmq: {dlx: arguments, deadLetterExchange: {name: \"{channel}.dlx\", type: fanout}}",
            "retry: {maxAttempts: 3, backoff: {initial: 1s}}\n  rabbitmq: {dlx: arguments, deadLetterExchange: {name: \"{channel}.dlx\", type: topic, routingKey: dead.all}}",
            "retry: {maxAttempts: 3, backoff: {initial: 1s}}\n  rabbitmq: {deadLetterExchange: {name: \"{channel}.dlx\"}, exchange: {name: \"{channel}.in\"}}",
            "retry: {maxAttempts: 6}\n  rabbitmq: {queueType: quorum, retryModel: deliveryLimit, deadLetterExchange: {name: \"{channel}.dlx\", routingKey: dead}}",
        ];
        for case in cases {
            let text = format!(
                "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: o.ch}}\nspec:\n  target: r\n  {case}\n"
            );
            let ws = crate::spec::load::load_str("c.yaml", &text);
            assert!(ws.diagnostics.is_empty(), "{case}: {:?}", ws.diagnostics);
            let r = resolve_rabbit(&ws.channels[0].value);
            let live = applied(&crate::backend::rabbitmq::desired::desired(&r));
            let (found, unmatched) = group(&scope(&live), &BTreeMap::new(), None);
            assert_eq!(found.len(), 1, "{case}: {unmatched:?}");
            assert!(unmatched.is_empty(), "{case}: {unmatched:?}");
            let back = resolve_rabbit(&found[0].channel);
            for d in crate::backend::rabbitmq::desired::desired(&back) {
                assert_eq!(
                    crate::plan::diff(&d, live.get(&d.id)),
                    None,
                    "{case}: {}",
                    serde_json::to_string(&found[0].channel).unwrap_or_default()
                );
            }
        }
    }

    #[test]
    fn a_hand_made_named_dlx_setup_becomes_a_dead_letter_exchange() {
        // The shape of many hand-made setups: the main queue's x-arguments dead-letter through
        // `o.payments-dlx` with a key of their own; the DLQ is bound to it with that key.
        let plain = json!({"durable": true, "auto_delete": false, "type": "classic"});
        let mut main = plain.clone();
        main["arguments.x-dead-letter-exchange"] = json!("o.payments-dlx");
        main["arguments.x-dead-letter-routing-key"] = json!("payments.transactions.dead");
        main["arguments.x-message-ttl"] = json!(30000);
        let binding = json!({"source": "o.payments-dlx", "destination": "o.payments.parked",
            "routing_key": "payments.transactions.dead", "@properties_key": "payments.transactions.dead"});
        let bid = id(
            Kind::Binding,
            &crate::backend::rabbitmq::binding_name(
                "o.payments-dlx",
                "o.payments.parked",
                "payments.transactions.dead",
            ),
        );
        let l: BTreeMap<ResourceId, Live> = [
            (id(Kind::Queue, "o.payments.pending"), live(main)),
            (id(Kind::Queue, "o.payments.parked"), live(plain)),
            (
                id(Kind::Exchange, "o.payments-dlx"),
                live(json!({"type": "direct", "durable": true, "auto_delete": false, "internal": false})),
            ),
            (bid.clone(), live(binding)),
        ]
        .into();
        let (found, unmatched) = group(&scope(&l), &BTreeMap::new(), None);
        assert!(unmatched.is_empty(), "{unmatched:?}");
        assert_eq!(found.len(), 1);
        let c = &found[0];
        assert!(
            c.live.contains_key(&bid),
            "the DLQ's binding joins the channel"
        );
        assert!(
            c.findings.iter().all(|f| !f.contains("left as is")),
            "{:?}",
            c.findings
        );
        let rb = c.channel.spec.rabbitmq.as_ref().expect("rabbitmq");
        assert_eq!(rb.dlx, Some(DlxMode::Arguments));
        let x = rb
            .dead_letter_exchange
            .as_ref()
            .expect("a dead-letter exchange");
        assert_eq!(c.channel.metadata.name, "o.payments");
        assert_eq!(x.name, "{channel}-dlx");
        assert_eq!(x.routing_key.as_deref(), Some("payments.transactions.dead"));
        assert_eq!(c.channel.spec.retention.map(|r| r.as_millis()), Some(30000));
        // And the spec it gives wants exactly what is there.
        let back = resolve_rabbit(&c.channel);
        for d in crate::backend::rabbitmq::desired::desired(&back) {
            assert_eq!(crate::plan::diff(&d, l.get(&d.id)), None, "{}", d.id);
        }
    }

    #[test]
    fn a_dead_letter_exchange_that_serves_two_channels_or_ignores_keys_is_not_imported() {
        let plain = json!({"durable": true, "auto_delete": false, "type": "classic"});
        let main = |key: &str| {
            let mut m = plain.clone();
            m["arguments.x-dead-letter-exchange"] = json!("o.dlx");
            m["arguments.x-dead-letter-routing-key"] = json!(key);
            m
        };
        let binding = |dlq: &str, key: &str| {
            (
                id(
                    Kind::Binding,
                    &crate::backend::rabbitmq::binding_name("o.dlx", dlq, key),
                ),
                live(json!({"source": "o.dlx", "destination": dlq, "routing_key": key})),
            )
        };
        let exchange = |kind: &str| (id(Kind::Exchange, "o.dlx"), live(json!({"type": kind})));
        let shared: BTreeMap<ResourceId, Live> = [
            (id(Kind::Queue, "o.a"), live(main("a"))),
            (id(Kind::Queue, "o.a.dlq"), live(plain.clone())),
            (id(Kind::Queue, "o.b"), live(main("b"))),
            (id(Kind::Queue, "o.b.dlq"), live(plain.clone())),
            exchange("direct"),
            binding("o.a.dlq", "a"),
            binding("o.b.dlq", "b"),
        ]
        .into();
        let (found, unmatched) = group(&scope(&shared), &BTreeMap::new(), None);
        assert!(found.is_empty(), "{found:?}");
        assert!(
            unmatched.iter().any(|u| u.contains("also serves")),
            "{unmatched:?}"
        );

        let headers: BTreeMap<ResourceId, Live> = [
            (id(Kind::Queue, "o.a"), live(main("a"))),
            (id(Kind::Queue, "o.a.dlq"), live(plain.clone())),
            exchange("headers"),
            binding("o.a.dlq", "a"),
        ]
        .into();
        let (found, unmatched) = group(&scope(&headers), &BTreeMap::new(), None);
        assert!(found.is_empty(), "{found:?}");
        assert!(
            unmatched.iter().any(|u| u.contains("headers exchange")),
            "{unmatched:?}"
        );
    }

    fn resolve_rabbit(c: &crate::spec::model::Channel) -> crate::spec::resolve::Resolved {
        crate::spec::resolve::resolve(c, "r", &target()).expect("resolves")
    }

    #[test]
    fn retry_names_become_a_delay_or_index_template() {
        let mk = |name: &'static str, ttl: u64| {
            let l: &'static Live = Box::leak(Box::new(live(json!({}))));
            Queue {
                name,
                live: l,
                settings: [("message-ttl".to_owned(), json!(ttl))].into(),
                source: Source::Arguments,
                policy: None,
                policy_keys: Vec::new(),
                argument_keys: vec!["message-ttl"],
                pattern: None,
            }
        };
        let (a, b) = (mk("o.retry.1000", 1000), mk("o.retry.2000", 2000));
        assert_eq!(
            retry_template(&[&a, &b], "o").as_deref(),
            Some("{channel}.retry.{delay}")
        );
        let (a, b) = (mk("o.r1", 1000), mk("o.r2", 2000));
        assert_eq!(
            retry_template(&[&a, &b], "o").as_deref(),
            Some("{channel}.r{index}")
        );
    }
}
