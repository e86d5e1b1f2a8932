//! The status driver: one reader per target the channels use (read-only clients, as plan's),
//! each target read concurrently through its backend's status door, every channel summarised
//! the same way. It names no backend.
//!
//! A target that cannot be reached fails its own channels, one error each; the others are
//! still read. The exporter keeps the [`Readers`] and calls [`read`] once per interval.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::future::join_all;

use crate::backend::wire::Stats;
use crate::backend::{ConnectOptions, Reader};
use crate::spec::model::Target;
use crate::spec::resolve::{DeadLetterRole, Resolved};
use crate::status::selector::Choice;
use crate::status::{self, ChannelStatus, ReadOptions, Report, safe};

/// A reader per target, or why it could not be made (a missing credential variable, a bad
/// setting): the channels of such a target fail with that reason.
pub type Readers = BTreeMap<String, Result<Reader, String>>;

/// Makes a reader for each target the channels use.
pub fn connect(
    channels: &[Resolved],
    targets: &BTreeMap<String, Target>,
    opts: ConnectOptions,
    stats: &Arc<Stats>,
) -> Readers {
    let mut out = Readers::new();
    for c in channels {
        if out.contains_key(&c.target) {
            continue;
        }
        let reader = match targets.get(&c.target) {
            Some(t) => {
                Reader::connect(&c.target, t, opts, Arc::clone(stats)).map_err(|e| e.to_string())
            }
            None => Err(format!(
                "target `{}`: not defined in the targets file",
                c.target
            )),
        };
        out.insert(c.target.clone(), reader);
    }
    out
}

/// Reads every channel, targets side by side; the report lists the channels in the order given,
/// each as one entry per destination of its dead letters (the DLQ first, then the invalid
/// queue and the exception DLTs: [`Resolved::dead_letter_views`]).
///
/// `choice` (`status --group`, `--where`) keeps of each channel's messages read those it
/// chooses, before they are counted: the report says how many of how many.
pub async fn read(
    channels: &[Resolved],
    readers: &Readers,
    opts: ReadOptions,
    choice: &Choice,
) -> Report {
    let views: Vec<Resolved> = channels
        .iter()
        .flat_map(Resolved::dead_letter_views)
        .collect();
    let channels = views.as_slice();
    let mut by_target: BTreeMap<&str, Vec<&Resolved>> = BTreeMap::new();
    for c in channels {
        by_target.entry(&c.target).or_default().push(c);
    }
    // `--where` sees each body whole, as a mover would; the samples are still cut at
    // `opts.max_body` when summarised.
    let read = if choice.where_.is_some() {
        ReadOptions {
            max_body: status::selector::MAX_BODY.max(opts.max_body),
            ..opts
        }
    } else {
        opts
    };
    let reads = by_target.iter().map(|(target, chs)| async move {
        let results: Vec<Result<status::Observed, String>> = match readers.get(*target) {
            Some(Ok(reader)) => match reader.status(chs, read).await {
                Ok(each) => each
                    .into_iter()
                    .map(|r| r.map_err(|e| e.to_string()))
                    .collect(),
                Err(e) => vec![Err(e.to_string()); chs.len()],
            },
            Some(Err(why)) => vec![Err(why.clone()); chs.len()],
            None => vec![Err(format!("target `{target}`: no reader")); chs.len()],
        };
        (*target, results)
    });
    let now = status::now_ms();
    let mut answers: BTreeMap<(&str, &str, &str), Result<status::Observed, String>> =
        BTreeMap::new();
    for (target, results) in join_all(reads).await {
        for (c, r) in by_target[target].iter().zip(results) {
            answers.insert((target, c.channel.as_str(), c.dead_letter.as_str()), r);
        }
    }
    let channels = channels
        .iter()
        .map(|c| {
            let base = ChannelStatus {
                channel: c.channel.clone(),
                target: c.target.clone(),
                backend: c.backend,
                role: c.dead_letter_role,
                dead_letter_name: c.dead_letter.clone(),
                discard: c.discard.clone(),
                dead_letter: None,
                queues: Vec::new(),
                error: None,
                resolution: None,
            };
            let key = (
                c.target.as_str(),
                c.channel.as_str(),
                c.dead_letter.as_str(),
            );
            match answers.remove(&key) {
                Some(Ok(mut observed)) => {
                    // The main and retry depths are shown once, with the DLQ.
                    if c.dead_letter_role != DeadLetterRole::DeadLetter {
                        observed.others.clear();
                    }
                    let selected = (!choice.is_everything())
                        .then(|| choice.keep(&c.envelope, &mut observed.messages, now));
                    let (mut report, queues) = status::summarise(
                        &c.dead_letter,
                        &c.envelope,
                        &c.redact,
                        opts,
                        observed,
                        now,
                    );
                    report.selected = selected;
                    shared_sources(c, &mut report);
                    ChannelStatus {
                        dead_letter: Some(report),
                        queues,
                        ..base
                    }
                }
                Some(Err(e)) => ChannelStatus {
                    error: Some(safe(&e)),
                    ..base
                },
                None => ChannelStatus {
                    error: Some("not read".into()),
                    ..base
                },
            }
        })
        .collect();
    Report {
        channels,
        generated_at_ms: now,
    }
}

/// The per-source counts of a shared dead-letter destination (`deadLetter.of`), each source
/// by its short name (an SQS ARN's queue, a Pub/Sub subscription path's last part); none for
/// a destination one channel has to itself.
fn shared_sources(c: &Resolved, report: &mut status::DeadLetterReport) {
    if !c.shares_dead_letter() || c.dead_letter_role != DeadLetterRole::DeadLetter {
        report.by_source.clear();
        return;
    }
    let short = |s: &str| -> String {
        match c.backend {
            crate::spec::model::Backend::Sqs => s.rsplit(':').next().unwrap_or(s).to_owned(),
            crate::spec::model::Backend::Pubsub => s.rsplit('/').next().unwrap_or(s).to_owned(),
            _ => s.to_owned(),
        }
    };
    let mut by: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for (s, n) in std::mem::take(&mut report.by_source) {
        *by.entry(short(&s)).or_default() += n;
    }
    report.by_source = by;
}
