//! `dlqctl import`: turns what already exists on a target into channel specs, so that teams
//! can adopt dead-letter infrastructure built by hand (or by another tool) instead of
//! rebuilding it.
//!
//! Each backend module reads nothing itself: it gets what a read-only [`Reader`] saw and groups
//! it into channels by following the live links (SQS RedrivePolicy, RabbitMQ dead-letter
//! routing, Kafka's retry/DLT naming, CloudWatch's QueueName dimension), then writes a
//! [`Channel`] for each group. Every candidate is then checked the way `plan` would check it:
//! resolved, turned into desired resources and diffed against the very objects that were read.
//! Whatever the spec cannot express shows up in that diff or as an unmanaged setting, and is
//! reported per resource, never dropped silently; so is every object that fits no channel.
//! Finally the spec is linted with the real rules: warnings that describe the live state as it
//! was found (no alarm on a DLQ) are allowed in the file with a comment saying why, and a
//! channel with lint errors is not written.

pub mod emit;
pub mod kafka;
pub mod rabbitmq;
pub mod sqs;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::backend::{BackendError, Reader};
use crate::desired::for_channel as desired_for;
use crate::diag::Severity;
use crate::plan::{self, Action};
use crate::resource::{Desired, Live, ResourceId};
use crate::spec::duration::Duration;
use crate::spec::model::{
    ApiVersion, Channel, ChannelKind, ChannelSpec, LintOptions, Metadata, Target,
};
use crate::spec::{load, resolve, rules};

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

/// A channel ready to be written, with what the user must know about it.
#[derive(Debug, Clone)]
pub struct Imported {
    pub channel: Channel,
    pub members: Vec<ResourceId>,
    pub findings: Vec<String>,
    pub to_adopt: Vec<ResourceId>,
    /// Comment lines for the top of the file.
    pub comments: Vec<String>,
}

/// Everything one import found.
#[derive(Debug, Default)]
pub struct Outcome {
    pub channels: Vec<Imported>,
    /// Objects in scope that fit no channel (or whose channel could not be written), with why.
    pub unmatched: Vec<String>,
    /// How much was read.
    pub read: BTreeMap<&'static str, usize>,
}

/// Reads the target (read-only) and builds checked channels from what it holds.
pub async fn run(
    reader: &Reader,
    target_name: &str,
    target: &Target,
    targets_text: &str,
    prefix: Option<&str>,
) -> Result<Outcome, BackendError> {
    let (candidates, unmatched, read) = match reader {
        Reader::Sqs(r) => {
            let mut inv = r
                .inventory(prefix)
                .await
                .map_err(|e| BackendError::aws(&r.target, e))?;
            // Follow redrive links to dead-letter queues outside the `--prefix` filter.
            for name in sqs::missing_dead_letter_queues(&inv, target) {
                if let Some(q) = r
                    .seen_queue(&name)
                    .await
                    .map_err(|e| BackendError::aws(&r.target, e))?
                {
                    inv.queues.insert(name, q);
                }
            }
            let read = BTreeMap::from([("queues", inv.queues.len()), ("alarms", inv.alarms.len())]);
            let (c, u) = sqs::group(&inv, target_name);
            (c, u, read)
        }
        Reader::Rabbitmq(r) => {
            let vhost = target.vhost.clone().unwrap_or_else(|| "/".to_owned());
            let live = r
                .read(&BTreeSet::from([vhost.clone()]))
                .await
                .map_err(|e| BackendError::http(&r.target, e))?;
            // Policies that apply to owned queues but are named outside the prefixes.
            let mut foreign = BTreeMap::new();
            for name in rabbitmq::foreign_policies(&live) {
                if let Some(p) = r
                    .policy(&vhost, &name)
                    .await
                    .map_err(|e| BackendError::http(&r.target, e))?
                {
                    foreign.insert(name, p);
                }
            }
            let read = rabbitmq::counts(&live);
            let (c, u) = rabbitmq::group(&live, &foreign, target_name, target, &vhost, prefix);
            (c, u, read)
        }
        Reader::Kafka(r) => {
            let live = r
                .inventory(prefix)
                .await
                .map_err(|e| BackendError::kafka(&r.target, e))?;
            let read = BTreeMap::from([("topics", live.len())]);
            let (c, u) = kafka::group(&live, target_name, target);
            (c, u, read)
        }
    };
    let mut out = Outcome {
        unmatched,
        read,
        ..Outcome::default()
    };
    let mut used: BTreeSet<String> = BTreeSet::new();
    for mut c in candidates {
        // Channel ids are unique per target.
        let base = c.channel.metadata.name.clone();
        let mut n = 2;
        while used.contains(&c.channel.metadata.name) {
            c.channel.metadata.name = format!("{base}-{n}");
            n += 1;
        }
        match check(c, target_name, target, targets_text) {
            Ok(imported) => {
                used.insert(imported.channel.metadata.name.clone());
                out.channels.push(imported);
            }
            Err(why) => out.unmatched.extend(why),
        }
    }
    Ok(out)
}

/// The channel and role each live object would have if it were imported: how `plan --prune`
/// groups and orders the deletes of objects no spec names (RabbitMQ and Kafka, where names
/// alone do not say which channel an object belonged to). Objects that fit no channel are
/// missing from the answer.
pub fn labels(
    live: &BTreeMap<ResourceId, Live>,
    target_name: &str,
    target: &Target,
) -> BTreeMap<ResourceId, (String, crate::resource::Role)> {
    use crate::spec::model::Backend;
    let candidates = match target.backend {
        Backend::Rabbitmq => {
            let vhosts: BTreeSet<&str> = live.keys().map(|i| i.scope.as_str()).collect();
            vhosts
                .into_iter()
                .flat_map(|v| {
                    rabbitmq::group(live, &BTreeMap::new(), target_name, target, v, None).0
                })
                .collect()
        }
        Backend::Kafka => kafka::group(live, target_name, target).0,
        Backend::Sqs => Vec::new(),
    };
    let mut out = BTreeMap::new();
    for c in candidates {
        let Ok(r) = resolve::resolve(&c.channel, target_name, target) else {
            continue;
        };
        for d in desired_for(&r) {
            if c.live.contains_key(&d.id) {
                out.insert(d.id, (c.channel.metadata.name.clone(), d.role));
            }
        }
    }
    out
}

/// Checks a candidate as `plan` and `lint` would: every remaining difference is a finding;
/// lint errors keep it from being written (`Err` lists why, per resource).
fn check(
    c: Candidate,
    target_name: &str,
    target: &Target,
    targets_text: &str,
) -> Result<Imported, Vec<String>> {
    let name = c.channel.metadata.name.clone();
    let members: Vec<ResourceId> = c.live.keys().cloned().collect();
    let refuse = |why: String| -> Vec<String> {
        members
            .iter()
            .map(|m| format!("{m}: not imported: channel `{name}` {why}"))
            .collect()
    };
    let resolved = resolve::resolve(&c.channel, target_name, target)
        .map_err(|e| refuse(format!("cannot be expressed: {}", e.message)))?;
    let mut findings = c.findings.clone();
    for mut d in desired_for(&resolved) {
        d.props
            .retain(|k, _| !c.unreadable.iter().any(|u| k.starts_with(u.as_str())));
        findings.extend(compare(&d, c.live.get(&d.id)));
    }
    let mut channel = c.channel;
    let mut comments = vec![format!(
        "Imported by `dlqctl import` from target `{target_name}`; review it before relying on it."
    )];
    // Lint it as it will be linted on disk; allow the warnings that describe what was found.
    let mut allowed: Vec<(String, String)> = Vec::new();
    for _ in 0..3 {
        let text = format!(
            "{}\n---\n{targets_text}",
            emit::document("channel.v1.json", &[], &to_value(&channel))
        );
        let ws = load::load_str("imported.yaml", &text);
        let (diags, _) = rules::check(&ws);
        let diags: Vec<_> = ws.diagnostics.iter().chain(diags.iter()).collect();
        let errors: Vec<String> = diags
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| format!("{} ({})", d.message, d.rule))
            .collect();
        if !errors.is_empty() {
            return Err(refuse(format!(
                "would not pass `dlqctl lint`: {}",
                errors.join("; ")
            )));
        }
        let warnings: Vec<(String, String)> = diags
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .map(|d| (d.rule.to_owned(), d.message.clone()))
            .filter(|(rule, _)| !allowed.iter().any(|(r, _)| r == rule))
            .collect();
        if warnings.is_empty() {
            break;
        }
        allowed.extend(warnings);
        let lint = channel.spec.lint.get_or_insert_with(LintOptions::default);
        lint.allow = allowed.iter().map(|(r, _)| r.clone()).collect();
    }
    if !allowed.is_empty() {
        comments.push(
            "lint.allow silences warnings that describe the live state as it was found:".into(),
        );
        for (rule, message) in &allowed {
            comments.push(format!("  {rule}: {message}"));
        }
    }
    Ok(Imported {
        channel,
        members,
        findings,
        to_adopt: c.to_adopt,
        comments,
    })
}

/// What `plan` would say about one desired resource against what import read, in words.
fn compare(d: &Desired, live: Option<&Live>) -> Vec<String> {
    let mut out = Vec::new();
    match plan::diff(d, live) {
        None => {}
        Some(c) if c.action == Action::Create => out.push(format!(
            "{}: does not exist, but the spec needs it: `dlqctl plan` will create it",
            d.id
        )),
        Some(c) if c.action == Action::Delete => out.push(format!(
            "{}: exists, but the spec cannot include it: `dlqctl plan` shows a delete if dlqctl owns it, and leaves it alone otherwise",
            d.id
        )),
        Some(c) => {
            let how = if c.action == Action::Replace {
                "replace it"
            } else {
                "change it"
            };
            for f in &c.fields {
                out.push(format!(
                    "{}: the spec cannot express {} = {}; `dlqctl plan` will {how} ({})",
                    d.id,
                    f.key,
                    show(f.old.as_ref()),
                    show(f.new.as_ref())
                ));
            }
        }
    }
    if let Some(l) = live
        && d.present
    {
        for u in plan::unmanaged(d, l) {
            out.push(format!(
                "{}: not in the spec, left as is (plans list it as a note): {u}",
                d.id
            ));
        }
    }
    out
}

fn show(v: Option<&Value>) -> String {
    v.map_or("(absent)".to_owned(), Value::to_string)
}

/// The channel as JSON (for the YAML writer), without empty mappings (`deadLetter: {}`
/// says nothing).
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
