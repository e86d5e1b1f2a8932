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

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::emit;
use crate::backend::kit::import::{Candidate, to_value};
use crate::backend::{BackendError, Reader};
use crate::diag::Severity;
use crate::plan::{self, Action};
use crate::resource::{Desired, Live, ResourceId};
use crate::spec::model::{Channel, Target};
use crate::spec::{load, resolve, rules};

/// Warnings that ask for a decision only a person can write down: import leaves them
/// unsilenced (and says so in the file's comment), so `lint --deny-warnings` fails until then.
const DECISIONS: [&str; 1] = ["deadletter/discard-undeclared"];

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
    let (candidates, unmatched, read) = reader.import(target, prefix).await?;
    let mut out = Outcome {
        unmatched,
        read,
        ..Outcome::default()
    };
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut renamed: BTreeMap<String, String> = BTreeMap::new();
    let mut candidates = candidates;
    for c in &mut candidates {
        // Channel ids are unique per target.
        let base = c.channel.metadata.name.clone();
        let mut n = 2;
        while used.contains(&c.channel.metadata.name) {
            c.channel.metadata.name = format!("{base}-{n}");
            n += 1;
        }
        used.insert(c.channel.metadata.name.clone());
        renamed
            .entry(base)
            .or_insert(c.channel.metadata.name.clone());
    }
    // A shared destination's sharers name its owner by id (`deadLetter.of`), as renamed.
    for c in &mut candidates {
        if let Some(of) = c
            .channel
            .spec
            .dead_letter
            .as_mut()
            .and_then(|d| d.of.as_mut())
            && let Some(new) = renamed.get(of.as_str())
        {
            of.clone_from(new);
        }
    }
    let linked = linked(&candidates, target_name, target);
    let channels: Vec<Channel> = candidates.iter().map(|c| c.channel.clone()).collect();
    for (c, r) in candidates.into_iter().zip(linked) {
        let peers = sharing_peers(&c.channel, &channels);
        match check(c, r, &peers, target_name, targets_text) {
            Ok(imported) => out.channels.push(imported),
            Err(why) => out.unmatched.extend(why),
        }
    }
    Ok(out)
}

/// Each candidate resolved as `plan` resolves it, with shared destinations linked
/// ([`resolve::link`]): a sharer gets its owner's DLQ, an owner its sources.
fn linked(
    candidates: &[Candidate],
    target_name: &str,
    target: &Target,
) -> Vec<Result<resolve::Resolved, String>> {
    let each: Vec<Result<resolve::Resolved, String>> = candidates
        .iter()
        .map(|c| {
            resolve::resolve(&c.channel, target_name, target)
                .map_err(|e| format!("cannot be expressed: {}", e.message))
        })
        .collect();
    let mut ok: Vec<resolve::Resolved> = each.iter().filter_map(|r| r.clone().ok()).collect();
    resolve::link(&mut ok);
    let mut ok = ok.into_iter();
    each.into_iter()
        .map(|r| r.and_then(|_| ok.next().ok_or_else(|| "cannot be resolved".to_owned())))
        .collect()
}

/// The other channels of `c`'s shared destination (its owner and the owner's other sharers),
/// linted beside it as they will be on disk.
fn sharing_peers(c: &Channel, all: &[Channel]) -> Vec<Channel> {
    let of = |x: &Channel| x.spec.dead_letter.as_ref().and_then(|d| d.of.clone());
    let owner = of(c).unwrap_or_else(|| c.metadata.name.clone());
    all.iter()
        .filter(|x| x.metadata.name != c.metadata.name)
        .filter(|x| x.metadata.name == owner || of(x).as_deref() == Some(owner.as_str()))
        .cloned()
        .collect()
}

/// Checks a candidate as `plan` and `lint` would: every remaining difference is a finding;
/// lint errors keep it from being written (`Err` lists why, per resource).
fn check(
    c: Candidate,
    resolved: Result<resolve::Resolved, String>,
    peers: &[Channel],
    target_name: &str,
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
    let resolved = resolved.map_err(refuse)?;
    let mut findings = c.findings.clone();
    for mut d in crate::backend::desired(&resolved) {
        d.props
            .retain(|k, _| !c.unreadable.iter().any(|u| k.starts_with(u.as_str())));
        findings.extend(compare(&d, c.live.get(&d.id)));
    }
    let mut comments = vec![format!(
        "Imported by `dlqctl import` from target `{target_name}`; review it before relying on it."
    )];
    // Lint it as it will be linted on disk. Import never silences a warning: a risk found
    // live (no alarm, no retry, a DLQ keeping messages no longer than its source) stays a
    // warning with its fix, said at the top of the file too.
    // The channels it shares a destination with are linted beside it; only what is found in
    // its own document is its.
    let channel = c.channel;
    let own = emit::document("channel.v1.json", &[], &to_value(&channel));
    let mut text = own.clone();
    for p in peers {
        text.push_str("\n---\n");
        text.push_str(&emit::document("channel.v1.json", &[], &to_value(p)));
    }
    let text = format!("{text}\n---\n{targets_text}");
    let ws = load::load_str("imported.yaml", &text);
    let diags = rules::findings(&ws);
    let mine = |d: &&crate::diag::Diagnostic| {
        peers.is_empty() || d.loc.is_none_or(|l| l.span.start <= own.len())
    };
    let diags: Vec<_> = ws
        .diagnostics
        .iter()
        .chain(diags.iter())
        .filter(mine)
        .collect();
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
    // Warnings that ask a person for a decision: import cannot decide.
    let undecided: Vec<String> = diags
        .iter()
        .filter(|d| DECISIONS.contains(&d.rule))
        .map(|d| format!("{}: {}", d.rule, d.message))
        .collect();
    let risks: Vec<String> = diags
        .iter()
        .filter(|d| d.severity == Severity::Warning && !DECISIONS.contains(&d.rule))
        .map(|d| match &d.hint {
            Some(h) => format!("{}: {} (fix: {h})", d.rule, d.message),
            None => format!("{}: {}", d.rule, d.message),
        })
        .collect();
    if !risks.is_empty() {
        comments
            .push("dlqctl lint warns about these risks of the live state as it was found:".into());
        for r in risks {
            comments.push(format!("  {r}"));
        }
    }
    if !undecided.is_empty() {
        comments
            .push("To decide (dlqctl lint warns until the spec says it; import cannot):".into());
        for u in undecided {
            comments.push(format!("  {u}"));
        }
        let block = if channel.spec.invalid.is_some() {
            "`deadLetter.discard` (or `invalid.discard`)"
        } else {
            "`deadLetter.discard`"
        };
        comments.push(format!(
            "  Write `reason:` (and `owner:`) under {block} if dropping them is intended; otherwise keep them longer."
        ));
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
