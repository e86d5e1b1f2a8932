//! What the backends' import and prune doors share: the [`Candidate`] each returns (a channel
//! built from live objects, before the import driver checks it), what a target's import found
//! ([`Found`]), the [`Prunable`] objects no spec names, and the helpers that turn live names
//! and numbers back into spec values (templates, channel ids, backoffs). Pure: no I/O.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::resource::{Desired, Live, Props, ResourceId, Role};
use crate::spec::duration::Duration;
use crate::spec::model::{ApiVersion, Channel, ChannelKind, ChannelSpec, Metadata, Target};
use crate::spec::resolve::{self, Resolved};

/// A live object in a target's ownership scope that no spec names: what `plan --prune`
/// deletes.
#[derive(Debug, Clone)]
pub struct Prunable {
    pub id: ResourceId,
    pub live: Live,
    /// The channel it belonged to: its `dlqctl-channel` tag (SQS), or the channel its name
    /// suggests (RabbitMQ, Kafka), for grouping and ordering the deletes.
    pub channel: String,
    pub role: Role,
    /// What a delete needs besides the name (a RabbitMQ binding's source, destination, routing
    /// and properties key); carried in the change's `desired`.
    pub identity: Props,
}

/// The channel label of pruned objects whose names fit no channel.
pub const NO_SPEC_CHANNEL: &str = "(no spec)";

/// What a backend's import door found on a target: channel candidates, objects that fit
/// none (with why), and how much was read (for the summary).
pub type Found = (Vec<Candidate>, Vec<String>, BTreeMap<&'static str, usize>);

/// One channel built from live objects, before it is checked.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub channel: Channel,
    /// The live objects it was built from, as the plan reads them.
    pub live: BTreeMap<ResourceId, Live>,
    /// What the backend module already knows the spec leaves out, per resource.
    pub findings: Vec<String>,
    /// Objects that must be adopted (`--adopt`) before dlqctl may change them.
    pub to_adopt: Vec<ResourceId>,
    /// Property keys (prefixes) this endpoint cannot return, left out of the comparison
    /// (moto never returns RedriveAllowPolicy; `plan` says so in a note).
    pub unreadable: Vec<String>,
}

/// The live dead-letter retention as the spec says it: a retention that drops dead letters
/// (`rules::drops_messages`) becomes `discard: {after}` with no `reason`, since only a person
/// can say why; `dlqctl lint` then warns (`deadletter/discard-undeclared`) until one is
/// written. Import never invents a reason, and never silences that warning.
pub fn dead_letter_keep(
    backend: crate::spec::model::Backend,
    retention: Option<Duration>,
) -> (Option<Duration>, Option<crate::spec::model::Discard>) {
    match retention {
        Some(after) if crate::spec::rules::drops_messages(backend, Some(after)) => (
            None,
            Some(crate::spec::model::Discard {
                after: Some(after),
                reason: None,
                owner: None,
            }),
        ),
        other => (other, None),
    }
}

/// Relabels what `--prune` found with the channel and role each object would have if it were
/// imported (`labels` groups the objects the way the import door does); objects that fit no
/// channel keep the labels they had.
pub fn relabel(
    found: &mut [Prunable],
    labels: impl FnOnce(&BTreeMap<ResourceId, Live>) -> BTreeMap<ResourceId, (String, Role)>,
) {
    let live: BTreeMap<ResourceId, Live> = found
        .iter()
        .map(|p| (p.id.clone(), p.live.clone()))
        .collect();
    let labels = labels(&live);
    for p in found {
        if let Some((channel, role)) = labels.get(&p.id) {
            p.channel.clone_from(channel);
            p.role = *role;
        }
    }
}

/// The channel and role each live object of `candidates` has: how `plan --prune` groups and
/// orders the deletes of objects no spec names (RabbitMQ and Kafka, where names alone do not
/// say which channel an object belonged to). Each candidate is resolved and turned into its
/// desired resources, so the roles are the ones a plan gives; objects that fit no channel are
/// missing from the answer. `desired` is the backend's own desired door.
pub fn labels(
    candidates: Vec<Candidate>,
    target_name: &str,
    target: &Target,
    desired: fn(&Resolved) -> Vec<Desired>,
) -> BTreeMap<ResourceId, (String, Role)> {
    let mut out = BTreeMap::new();
    for c in candidates {
        let Ok(r) = resolve::resolve(&c.channel, target_name, target) else {
            continue;
        };
        for d in desired(&r) {
            if c.live.contains_key(&d.id) {
                out.insert(d.id, (c.channel.metadata.name.clone(), d.role));
            }
        }
    }
    out
}

/// The channel as JSON (for the YAML writer), without empty mappings (`deadLetter: {}`
/// says nothing; `invalid: {}` does, and stays).
pub fn to_value(c: &Channel) -> Value {
    fn prune(v: &mut Value) {
        if let Value::Object(map) = v {
            for x in map.values_mut() {
                prune(x);
            }
            map.retain(|_, x| !matches!(x, Value::Object(m) if m.is_empty()) && !x.is_null());
        }
    }
    let mut v = serde_json::to_value(c).unwrap_or(Value::Null);
    prune(&mut v);
    // `invalid: {}` does say something: provision the invalid-message queue by its defaults.
    if c.spec.invalid.is_some()
        && let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.entry("invalid")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
    }
    v
}

/// A new channel document with the given id and spec.
pub fn channel(name: &str, spec: ChannelSpec) -> Channel {
    Channel {
        api_version: ApiVersion::V1,
        kind: ChannelKind::Channel,
        metadata: Metadata {
            name: name.to_owned(),
            labels: BTreeMap::new(),
        },
        spec,
    }
}

/// Whether `s` may be a channel id (`metadata.name`).
pub fn valid_channel_id(s: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    !s.is_empty()
        && s.len() <= 200
        && alnum(s.chars().next())
        && alnum(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// A channel id from a live name: invalid characters become `-`, and the ends are trimmed
/// to letters and digits.
pub fn sanitise_channel_id(name: &str) -> String {
    let replaced: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = replaced.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let id: String = trimmed.chars().take(200).collect();
    let id = id.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    if id.is_empty() {
        "imported".to_owned()
    } else {
        id.to_owned()
    }
}

/// The longest common prefix of the names that ends at a word boundary, without trailing
/// separators (`orders.process`, `orders.retry` → `orders`; `o.work`, `o.wait` → `o`, not
/// `o.w`; `payments`, `payments-dlq` → `payments`).
pub fn common_stem(names: &[&str]) -> String {
    let Some(first) = names.first() else {
        return String::new();
    };
    let mut len = first.len();
    for n in &names[1..] {
        len = len.min(
            first
                .char_indices()
                .zip(n.chars())
                .take_while(|((_, a), b)| a == b)
                .last()
                .map_or(0, |((i, a), _)| i + a.len_utf8()),
        );
    }
    let separator = |c: char| !c.is_ascii_alphanumeric();
    let prefix = &first[..len];
    // At a boundary: the whole of some name, or followed by a separator in every name.
    let at_boundary = names
        .iter()
        .all(|n| n.len() == len || n[len..].chars().next().is_some_and(separator));
    let cut = if at_boundary {
        prefix
    } else {
        prefix.rfind(separator).map_or("", |i| &prefix[..i])
    };
    cut.trim_end_matches(separator).to_owned()
}

/// A name template that expands to `name` for channel `channel`: `{channel}` for the leading
/// channel id, the rest literal. `None` when the name holds `{` or `}` (a template cannot).
pub fn template(name: &str, channel: &str) -> Option<String> {
    if name.contains(['{', '}']) {
        return None;
    }
    Some(match name.strip_prefix(channel) {
        Some(rest) if !channel.is_empty() => format!("{{channel}}{rest}"),
        _ => name.to_owned(),
    })
}

/// A template, or `None` when it is the backend's default (the spec leaves it out).
pub fn non_default(template: String, default: &str) -> Option<String> {
    (template != default).then_some(template)
}

/// Milliseconds as a spec duration.
pub fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// A live number property.
pub fn number(live: &Live, key: &str) -> Option<u64> {
    live.props.get(key).and_then(Value::as_u64)
}

/// A backoff that yields exactly these distinct delays, in this order, as the spec computes
/// them ([`resolve::delays`]): with the fewest attempts that use every delay. `None` when no
/// exponential backoff does.
pub fn fit_backoff(distinct: &[u64]) -> Option<(crate::spec::model::Backoff, u32)> {
    use crate::spec::model::Backoff;
    let first = *distinct.first()?;
    if first == 0 {
        return None;
    }
    let attempts = u32::try_from(distinct.len()).ok()? + 1;
    let mut candidates = vec![Backoff {
        initial: millis(first),
        multiplier: None,
        max: None,
        jitter: None,
    }];
    if let [_, second, ..] = distinct {
        let m = *second as f64 / first as f64;
        // Round to 3 decimals: people write 1.5 or 2, not 1.49999.
        let m = (m * 1000.0).round() / 1000.0;
        for max in [None, distinct.last().copied().map(millis)] {
            candidates.push(Backoff {
                initial: millis(first),
                multiplier: Some(m),
                max,
                jitter: None,
            });
        }
    }
    candidates.into_iter().find_map(|b| {
        let got = backoff_delays(&b, attempts);
        let mut seen: Vec<u64> = Vec::new();
        for d in got {
            if !seen.contains(&d) {
                seen.push(d);
            }
        }
        (seen == distinct).then_some((b, attempts))
    })
}

/// The delays a backoff gives for `attempts` deliveries (as `resolve::delays` computes them).
pub fn backoff_delays(b: &crate::spec::model::Backoff, attempts: u32) -> Vec<u64> {
    let mut c = channel("x", ChannelSpec::default());
    c.spec.retry = Some(crate::spec::model::Retry {
        max_attempts: Some(attempts),
        backoff: Some(b.clone()),
        name: None,
    });
    resolve::delays(&c, None)
        .into_iter()
        .map(Duration::as_millis)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_ids_come_from_the_shared_stem_of_the_names() {
        assert_eq!(
            common_stem(&["orders.process", "orders.retry", "orders.dlq"]),
            "orders"
        );
        assert_eq!(common_stem(&["payments", "payments-dlq"]), "payments");
        assert_eq!(common_stem(&["a", "b"]), "");
        assert_eq!(common_stem(&["o.ch.work", "o.ch.wait-1"]), "o.ch");
        assert_eq!(sanitise_channel_id("_weird name!"), "weird-name");
        assert!(valid_channel_id("orders.t1-2-3"));
        assert!(!valid_channel_id("-x"));
    }

    #[test]
    fn templates_reproduce_the_live_names() {
        assert_eq!(
            template("orders.process", "orders").as_deref(),
            Some("{channel}.process")
        );
        assert_eq!(template("other", "orders").as_deref(), Some("other"));
        assert_eq!(template("a{b}", "a"), None);
        for name in ["orders.process", "other"] {
            let t = template(name, "orders").unwrap_or_default();
            assert_eq!(
                resolve::expand(&t, "orders", None, None).as_deref(),
                Ok(name)
            );
        }
    }

    #[test]
    fn backoffs_are_fitted_to_the_live_delays() {
        let (b, n) = fit_backoff(&[5000]).expect("fixed");
        assert_eq!((b.initial.as_millis(), b.multiplier, n), (5000, None, 2));
        let (b, n) = fit_backoff(&[1000, 2000, 4000]).expect("exponential");
        assert_eq!((b.multiplier, n), (Some(2.0), 4));
        assert_eq!(backoff_delays(&b, n), vec![1000, 2000, 4000]);
        let (b, _) = fit_backoff(&[1000, 1500, 2250, 3375]).expect("x1.5");
        assert_eq!(b.multiplier, Some(1.5));
        assert!(
            fit_backoff(&[1000, 2000, 5000, 6000]).is_none(),
            "not exponential"
        );
    }
}
