//! Executes a plan: guards first, then the changes, independent ones concurrently.
//!
//! Nothing is written unless every guard passes. Changes run up to `--parallelism` at a time
//! per target, in the order [`super::schedule`] allows (every ordering rule of the plan kept as
//! a dependency); Kafka's go several to a request. Before they are written, the ready changes
//! of a target are re-checked in groups: one backend read of the objects a group writes
//! (`Reader::recheck`), compared with what the plan read, so that an object someone else
//! changed since planning stops apply before it is overwritten, at a listing's cost rather
//! than a read per change. Each finished step is reported as it finishes; on the first
//! failure no new step starts, the steps in flight finish, and apply reports what was done and
//! what was not, so that a fresh plan lists exactly the remainder. Ctrl-C stops the same way.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use crate::backend::{Reader, Writer};
use crate::plan::{Action, Change, Plan};
use crate::printer::{Printer, Style};
use crate::resource::ResourceId;

use super::schedule::Schedule;

/// What the user explicitly allowed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Guards {
    pub allow_replace: bool,
    pub allow_delete: bool,
    pub allow_message_loss: bool,
}

/// Every reason the plan may not be applied as it is (empty: go ahead).
pub fn refusals(plan: &Plan, g: &Guards) -> Vec<String> {
    let mut out = Vec::new();
    for c in &plan.changes {
        let what = format!("{} on target `{}`", c.resource, c.resource.target);
        match c.action {
            Action::Impossible => out.push(format!(
                "{what}: {}",
                c.reason
                    .as_deref()
                    .unwrap_or("this change cannot be made in place")
            )),
            Action::Replace if !g.allow_replace => out.push(format!(
                "{what} would be replaced (deleted and created again); pass --allow-replace"
            )),
            Action::Delete if !g.allow_delete => {
                out.push(format!("{what} would be deleted; pass --allow-delete"))
            }
            _ => {}
        }
        if let Some(how) = &c.destructive
            && !g.allow_message_loss
        {
            out.push(format!("{what}: {how}; pass --allow-message-loss"));
        } else if c.may_lose_messages() && !g.allow_message_loss {
            let count = c
                .messages
                .map_or("an unknown number of".to_owned(), |n| n.to_string());
            out.push(format!(
                "{what} holds {count} messages that the {} would drop; move them first, or pass --allow-message-loss",
                c.action.as_str()
            ));
        }
    }
    out
}

/// How an apply ended.
#[derive(Debug, Default)]
pub struct Report {
    pub done: usize,
    pub total: usize,
    /// The steps that failed (index into the applied steps), with the error: the first
    /// failure, and any of the steps that were in flight beside it.
    pub failed: Vec<(usize, String)>,
    pub interrupted: bool,
    /// Changes the backend had not reflected when apply gave up waiting.
    pub unsettled: Vec<String>,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.failed.is_empty() && !self.interrupted && self.done == self.total
    }
}

/// How often a long apply says how far it is.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// A step's FAILED line, under the progress counter's column.
fn failed_line(printer: &Printer, c: &Change, width: usize) -> String {
    format!(
        "{:>pad$} {} {}",
        "",
        describe(c),
        printer.paint_err("FAILED", Style::Error),
        pad = 2 * width + 2
    )
}

/// Empties every target's cleared steps (a stop: they are not written) and says how many.
fn drop_cleared(cleared: &mut [VecDeque<usize>]) -> usize {
    cleared.iter_mut().map(|c| c.drain(..).count()).sum()
}

fn describe(c: &Change) -> String {
    format!(
        "{} {} on {}",
        c.action.as_str(),
        c.resource,
        c.resource.target
    )
}

/// Optimistic concurrency: how each of `changes` (one target's) moved since planning, from
/// one re-check of the objects they write, asked of the backend for the whole group
/// ([`Reader::recheck`]: a listing or a multi-name read per kind, not a read per object).
/// `None`: as planned, or nothing to compare with.
async fn moved(
    changes: &[&Change],
    readers: &BTreeMap<String, Reader>,
    baseline: &BTreeMap<ResourceId, Option<String>>,
) -> Vec<Option<String>> {
    let what = |c: &Change| format!("{} on target `{}`", c.resource, c.resource.target);
    let Some(r) = changes
        .first()
        .and_then(|c| readers.get(&c.resource.target))
    else {
        return changes.iter().map(|_| None).collect();
    };
    let ids: Vec<&ResourceId> = changes
        .iter()
        .filter(|c| baseline.contains_key(&c.resource))
        .map(|c| &c.resource)
        .collect();
    if ids.is_empty() {
        return changes.iter().map(|_| None).collect();
    }
    let live = r.recheck(&ids).await;
    changes
        .iter()
        .map(|c| {
            let then = baseline.get(&c.resource)?;
            let live = match &live {
                Ok(live) => live.get(&c.resource),
                Err(e) => {
                    return Some(format!(
                        "{}: could not re-check it before writing: {e}",
                        what(c)
                    ));
                }
            };
            let now = crate::engine::plan::step_fingerprint(live);
            let how = crate::engine::plan::how_changed(then, &now)?;
            Some(format!(
                "{} {how} since planning (another apply, or a hand change); not written",
                what(c)
            ))
        })
        .collect()
}

/// How one step ended.
enum Outcome {
    Done,
    Failed(String),
    /// Handed out, but a failure or Ctrl-C came first: nothing was written.
    NotStarted,
}

/// One request's worth of work: the steps (indexes) it writes, and how each ended.
struct Finished {
    target: usize,
    results: Vec<(usize, Outcome)>,
    elapsed: Duration,
}

/// What apply compares each object with before writing it: the object re-read through its
/// target's reader, and its fingerprint as the plan read it (`None`: absent then).
#[derive(Clone, Copy)]
pub struct Recheck<'a> {
    pub readers: &'a BTreeMap<String, Reader>,
    pub baseline: &'a BTreeMap<ResourceId, Option<String>>,
}

/// A group of ready steps of one target re-checked together: indexes into the steps, and for
/// each whether it is compared with the plan's read (not for an object an earlier step of this
/// apply wrote).
struct Group {
    steps: Vec<usize>,
    recheck: Vec<bool>,
}

/// How a group's re-check ended, per step: `None`, cleared to be written; `Some`, why not
/// (moved since planning, or the re-check failed). Empty verdicts: a failure or Ctrl-C came
/// first, nothing was read, and nothing of the group is written.
struct Checked {
    target: usize,
    steps: Vec<usize>,
    verdicts: Vec<Option<String>>,
}

/// What a piece of apply's work came back with: a group re-checked, or a request written.
enum Event {
    Checked(Checked),
    Written(Finished),
}

/// Re-checks a group of one target's ready steps in one backend call (see [`moved`]), unless
/// `halt` is set (a failure, Ctrl-C).
async fn check(
    Group {
        steps: group,
        recheck,
    }: Group,
    target: usize,
    steps: &[&Change],
    check: Recheck<'_>,
    halt: &AtomicBool,
) -> Checked {
    if halt.load(Ordering::SeqCst) {
        return Checked {
            target,
            steps: group,
            verdicts: Vec::new(),
        };
    }
    let compared: Vec<&Change> = group
        .iter()
        .zip(&recheck)
        .filter(|(_, r)| **r)
        .map(|(i, _)| steps[*i])
        .collect();
    let mut moved = moved(&compared, check.readers, check.baseline)
        .await
        .into_iter();
    let verdicts = recheck
        .iter()
        .map(|r| if *r { moved.next().flatten() } else { None })
        .collect();
    Checked {
        target,
        steps: group,
        verdicts,
    }
}

/// Writes a batch of independent, re-checked steps of one target, in one request where the
/// backend allows. Once `halt` is set (a failure, Ctrl-C), nothing more is written: the batch
/// ends [`Outcome::NotStarted`].
async fn write(
    batch: Vec<usize>,
    target: usize,
    steps: &[&Change],
    writer: &Writer,
    allow_loss: bool,
    halt: &AtomicBool,
) -> Finished {
    let started = Instant::now();
    let results = if halt.load(Ordering::SeqCst) {
        batch.iter().map(|i| (*i, Outcome::NotStarted)).collect()
    } else if let [i] = batch.as_slice() {
        vec![(*i, outcome(writer.apply(steps[*i], allow_loss).await))]
    } else {
        let cs: Vec<&Change> = batch.iter().map(|i| steps[*i]).collect();
        let answers = writer.apply_many(&cs, allow_loss).await;
        batch
            .iter()
            .copied()
            .zip(answers.into_iter().map(outcome))
            .collect()
    };
    Finished {
        target,
        results,
        elapsed: started.elapsed(),
    }
}

fn outcome(r: Result<(), crate::backend::BackendError>) -> Outcome {
    match r {
        Ok(()) => Outcome::Done,
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

/// Whether a change may share a request with others: creates and updates. A delete goes alone
/// (each re-counts what it would drop, and must not follow a failure in the same request).
fn batchable(c: &Change) -> bool {
    matches!(c.action, Action::Create | Action::Update)
}

/// One request's steps, taken from the front of `cleared` (re-checked steps of one target,
/// lowest first): the first and, while it and the next are creates or updates, the next ones,
/// up to `limit`. A replace or a delete goes alone.
fn batch_from(cleared: &mut VecDeque<usize>, steps: &[&Change], limit: usize) -> Vec<usize> {
    let Some(first) = cleared.pop_front() else {
        return Vec::new();
    };
    let mut batch = vec![first];
    while batchable(steps[first])
        && batch.len() < limit
        && let Some(&i) = cleared.front()
        && batchable(steps[i])
    {
        cleared.pop_front();
        batch.push(i);
    }
    batch
}

/// How many ready steps of a target one re-check covers at most: four rounds of writes at
/// full parallelism (`limit`: steps a request), at most [`MAX_GROUP`]. Larger groups save
/// reads; smaller ones shorten the time between an object's re-check and its write.
fn group_limit(parallelism: usize, limit: usize) -> usize {
    (4 * parallelism * limit).clamp(1, MAX_GROUP)
}

/// The largest re-check group (the most names one re-check reads).
const MAX_GROUP: usize = 1000;

/// "2 min 5 s", "40 s": for the ETA.
fn human_secs(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs} s"),
        _ => format!("{} min {} s", secs / 60, secs % 60),
    }
}

/// Applies the plan's changes, up to `parallelism` at a time on each target (targets side by
/// side), never starting a change before what it depends on ([`super::schedule`]). Call only
/// after [`refusals`] came back empty. Before they are written, the ready steps of a target
/// are re-checked in groups ([`group_limit`]): the objects they write re-read in one backend
/// call and compared with what the plan read ([`Recheck`]); an object that moved fails its
/// step, and nothing of its group is written. The next group is re-checked while the last
/// writes of the previous one run. On the first failure, or Ctrl-C (`stop`), no new step
/// starts; the steps in flight finish, and the report says exactly what was done and what was
/// not.
pub async fn run(
    plan: &Plan,
    writers: &BTreeMap<String, Writer>,
    check: Recheck<'_>,
    g: &Guards,
    parallelism: usize,
    printer: &Printer,
    stop: &AtomicBool,
) -> Report {
    let steps: Vec<&Change> = plan
        .changes
        .iter()
        .filter(|c| c.action != Action::Impossible)
        .collect();
    let first = crate::backend::goes_first(&plan.changes);
    let mut schedule = Schedule::new(&steps, &first);
    let parallelism = parallelism.max(1);
    let mut report = Report {
        total: steps.len(),
        ..Report::default()
    };
    let mut done = vec![false; steps.len()];
    let width = steps.len().to_string().len();
    let targets: Vec<String> = schedule.targets().to_vec();
    // Per target: write requests in flight, whether a re-check is, and the steps it cleared
    // that wait for a request (lowest first).
    let mut requests = vec![0usize; targets.len()];
    let mut checking = vec![false; targets.len()];
    let mut cleared: Vec<VecDeque<usize>> = vec![VecDeque::new(); targets.len()];
    let mut in_flight = 0usize;
    // Set on the first failure or Ctrl-C: no step starts writing after it.
    let halt = AtomicBool::new(false);
    let mut running: FuturesUnordered<Pin<Box<dyn Future<Output = Event> + '_>>> =
        FuturesUnordered::new();
    let began = Instant::now();
    let mut progress =
        tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
    let mut written: HashSet<&ResourceId> = HashSet::new();
    let mut stopping = false;
    let mut interrupted = false;
    let steps = &steps;
    let halt = &halt;
    loop {
        if !stopping && stop.load(Ordering::SeqCst) {
            stopping = true;
            interrupted = true;
            halt.store(true, Ordering::SeqCst);
        }
        for (t, name) in targets.iter().enumerate() {
            if stopping {
                break;
            }
            let Some(w) = writers.get(name) else {
                if let Some(i) = schedule.next(t) {
                    report
                        .failed
                        .push((i, format!("no connection for target `{name}`")));
                    stopping = true;
                }
                continue;
            };
            // One at a time means one change a request, too.
            let limit = if parallelism == 1 {
                1
            } else {
                w.batch_limit().max(1)
            };
            while requests[t] < parallelism && !cleared[t].is_empty() {
                let batch = batch_from(&mut cleared[t], steps, limit);
                requests[t] += 1;
                running.push(Box::pin(async move {
                    Event::Written(write(batch, t, steps, w, g.allow_message_loss, halt).await)
                }));
            }
            // The next group is re-checked while the last requests of the previous one write,
            // once a round of writes is ready; fewer wait for the writes in flight, which
            // release the next steps of their channels, so that one read covers them all.
            let round = parallelism * limit;
            if !checking[t]
                && cleared[t].len() < round
                && (requests[t] == 0 || schedule.ready_len(t) >= round)
            {
                let most = group_limit(parallelism, limit);
                let mut group = Vec::new();
                while group.len() < most
                    && let Some(i) = schedule.next(t)
                {
                    group.push(i);
                }
                if !group.is_empty() {
                    // An object an earlier step of this apply wrote (a shared exchange two
                    // channels declare) moved since planning by our own hand: not re-checked.
                    let recheck = group
                        .iter()
                        .map(|i| !written.contains(&steps[*i].resource))
                        .collect();
                    checking[t] = true;
                    in_flight += group.len();
                    running.push(Box::pin(async move {
                        let group = Group {
                            steps: group,
                            recheck,
                        };
                        Event::Checked(self::check(group, t, steps, check, halt).await)
                    }));
                }
            }
        }
        if running.is_empty() {
            break;
        }
        tokio::select! {
            Some(event) = running.next() => match event {
                Event::Checked(Checked { target, steps: group, verdicts }) => {
                    checking[target] = false;
                    // Empty verdicts: halted before the re-check; nothing of the group is
                    // written.
                    in_flight -= group.len() - verdicts.len();
                    for (i, verdict) in group.into_iter().zip(verdicts) {
                        match verdict {
                            None if !stopping => cleared[target].push_back(i),
                            None => in_flight -= 1,
                            Some(why) => {
                                in_flight -= 1;
                                printer.err(&failed_line(printer, steps[i], width));
                                report.failed.push((i, why));
                                stopping = true;
                                halt.store(true, Ordering::SeqCst);
                            }
                        }
                    }
                    if stopping {
                        // What this or an earlier group cleared is not written now.
                        in_flight -= drop_cleared(&mut cleared);
                    }
                }
                Event::Written(f) => {
                    requests[f.target] -= 1;
                    let n = f.results.len();
                    for (i, r) in f.results {
                        in_flight -= 1;
                        let c = steps[i];
                        let batch = if n > 1 { format!(", one request for {n}") } else { String::new() };
                        match r {
                            Outcome::NotStarted => {}
                            Outcome::Done => {
                                report.done += 1;
                                done[i] = true;
                                written.insert(&c.resource);
                                schedule.finish(i);
                                printer.err(&format!(
                                    "[{:>width$}/{}] {} {} ({} ms{batch})",
                                    report.done,
                                    steps.len(),
                                    describe(c),
                                    printer.paint_err("done", Style::Good),
                                    f.elapsed.as_millis()
                                ));
                            }
                            Outcome::Failed(e) => {
                                printer.err(&failed_line(printer, c, width));
                                report.failed.push((i, e));
                                stopping = true;
                                halt.store(true, Ordering::SeqCst);
                            }
                        }
                    }
                    if stopping {
                        in_flight -= drop_cleared(&mut cleared);
                    }
                }
            },
            _ = progress.tick() => {
                let secs = began.elapsed().as_secs_f64();
                let rate = report.done as f64 / secs.max(0.001);
                let left = steps.len().saturating_sub(report.done);
                let eta = if rate > 0.0 && !stopping {
                    format!(", about {} left", human_secs((left as f64 / rate).ceil() as u64))
                } else {
                    String::new()
                };
                printer.err(&format!(
                    "Applying: {}/{} done, {in_flight} in flight, {rate:.0}/s{eta}{}",
                    report.done,
                    steps.len(),
                    if stopping { " (stopping: waiting for the changes in flight)" } else { "" }
                ));
            }
        }
    }
    // An interruption that came after the last step started stopped nothing.
    report.interrupted = interrupted && report.done + report.failed.len() < report.total;
    // Wait for the backends to show what was written, so the next plan sees it.
    for (name, w) in writers {
        let applied: Vec<&Change> = steps
            .iter()
            .zip(&done)
            .filter(|(c, d)| **d && &c.resource.target == name)
            .map(|(c, _)| *c)
            .collect();
        if applied.is_empty() {
            continue;
        }
        match w.settle(&applied).await {
            Ok(pending) => report.unsettled.extend(pending),
            Err(e) => report
                .unsettled
                .push(format!("target `{name}`: could not check: {e}")),
        }
    }
    if !report.ok() {
        report.failed.sort_by_key(|(i, _)| *i);
        let mut lines = vec![format!(
            "Apply stopped after {} of {} changes{}.",
            report.done,
            report.total,
            if report.interrupted {
                " (interrupted)"
            } else {
                ""
            }
        )];
        for (i, e) in &report.failed {
            lines.push(format!("  failed:   {}: {e}", describe(steps[*i])));
        }
        for (i, c) in steps.iter().enumerate() {
            if !done[i] && !report.failed.iter().any(|(f, _)| *f == i) {
                lines.push(format!("  not done: {}", describe(c)));
            }
        }
        lines.push("Run `dlqctl plan` to see what remains; `dlqctl apply` completes it.".into());
        printer.err(&lines.join("\n"));
    }
    report
}

#[cfg(test)]
mod tests {
    //! The guards, offline: each refusal, and that each flag lifts exactly its own.
    use super::*;
    use crate::resource::{Desired, Kind, Role};
    use crate::spec::model::Backend;
    use serde_json::json;

    fn change(kind: Kind, action: Action, messages: Option<u64>) -> Change {
        let d = Desired {
            id: ResourceId {
                target: "t".into(),
                backend: Backend::Rabbitmq,
                kind,
                scope: "/".into(),
                name: "orders.dlq".into(),
            },
            channel: "orders".into(),
            role: Role::DeadLetter,
            props: [("a".to_owned(), json!(1))].into_iter().collect(),
            immutable: false,
            present: true,
        };
        let mut c = crate::plan::diff(&d, None).expect("a create");
        c.action = action;
        c.messages = messages;
        c
    }

    fn plan(changes: Vec<Change>) -> Plan {
        Plan::new(
            changes,
            Vec::new(),
            0,
            BTreeMap::new(),
            Vec::new(),
            &Default::default(),
        )
    }

    fn all() -> Guards {
        Guards {
            allow_replace: true,
            allow_delete: true,
            allow_message_loss: true,
        }
    }

    #[test]
    fn creates_and_updates_share_a_request_a_replace_or_delete_goes_alone() {
        // One target, a channel per step, so every step of a phase is ready at once.
        let steps: Vec<Change> = [
            Action::Create,
            Action::Update,
            Action::Replace,
            Action::Create,
            Action::Create,
            Action::Create,
            Action::Delete,
            Action::Delete,
        ]
        .into_iter()
        .enumerate()
        .map(|(i, action)| {
            let mut c = change(Kind::Queue, action, None);
            c.channel = format!("c{i}");
            c.resource.name = format!("q{i}");
            c
        })
        .collect();
        let steps: Vec<&Change> = steps.iter().collect();
        let batches = |limit: usize| {
            let mut schedule = Schedule::new(&steps, &HashSet::new());
            let mut out = Vec::new();
            // Each re-check group: every ready step; then the requests it makes.
            let mut cleared: VecDeque<usize> = VecDeque::new();
            while schedule.has_ready(0) {
                while let Some(i) = schedule.next(0) {
                    cleared.push_back(i);
                }
                while !cleared.is_empty() {
                    assert!(out.len() < steps.len(), "more requests than steps: {out:?}");
                    let batch = batch_from(&mut cleared, &steps, limit);
                    for i in &batch {
                        schedule.finish(*i);
                    }
                    out.push(batch);
                }
            }
            out
        };
        assert_eq!(
            batches(2),
            [vec![0, 1], vec![2], vec![3, 4], vec![5], vec![6], vec![7]]
        );
        assert_eq!(
            batches(100),
            [vec![0, 1], vec![2], vec![3, 4, 5], vec![6], vec![7]]
        );
        assert_eq!(batches(1), (0..8).map(|i| vec![i]).collect::<Vec<_>>());
    }

    #[test]
    fn replaces_and_deletes_need_their_own_flag() {
        let p = plan(vec![change(Kind::Policy, Action::Replace, None)]);
        let r = refusals(&p, &Guards::default());
        assert!(r.len() == 1 && r[0].contains("--allow-replace"), "{r:?}");
        let only_delete = Guards {
            allow_delete: true,
            ..Guards::default()
        };
        assert_eq!(
            refusals(&p, &only_delete).len(),
            1,
            "--allow-delete is not --allow-replace"
        );
        assert!(refusals(&p, &all()).is_empty());

        let p = plan(vec![change(Kind::Policy, Action::Delete, None)]);
        let r = refusals(&p, &Guards::default());
        assert!(r.len() == 1 && r[0].contains("--allow-delete"), "{r:?}");
        assert!(refusals(&p, &all()).is_empty());
    }

    #[test]
    fn a_drop_of_messages_needs_message_loss_even_when_the_drop_is_allowed() {
        let p = plan(vec![change(Kind::Queue, Action::Replace, Some(2))]);
        let allowed = Guards {
            allow_replace: true,
            allow_delete: true,
            allow_message_loss: false,
        };
        let r = refusals(&p, &allowed);
        assert!(
            r.len() == 1
                && r[0].contains("holds 2 messages")
                && r[0].contains("--allow-message-loss"),
            "{r:?}"
        );
        // A count nobody could read is refused too.
        let p = plan(vec![change(Kind::Queue, Action::Delete, None)]);
        let r = refusals(&p, &allowed);
        assert!(
            r.len() == 1 && r[0].contains("an unknown number of"),
            "{r:?}"
        );
        assert!(refusals(&p, &all()).is_empty());
        // An empty queue goes with the replace flag alone.
        let p = plan(vec![change(Kind::Queue, Action::Replace, Some(0))]);
        assert!(refusals(&p, &allowed).is_empty());
    }

    #[test]
    fn a_destructive_update_is_guarded_like_a_drop() {
        let mut c = change(Kind::Queue, Action::Update, Some(0));
        c.destructive = Some("lowering MessageRetentionPeriod deletes older messages".into());
        let p = plan(vec![c]);
        let r = refusals(&p, &Guards::default());
        assert!(
            r.len() == 1 && r[0].contains("lowering MessageRetentionPeriod"),
            "{r:?}"
        );
        assert!(refusals(&p, &all()).is_empty());
    }

    #[test]
    fn an_impossible_change_is_refused_whatever_is_allowed() {
        let mut c = change(Kind::Topic, Action::Impossible, None);
        c.reason = Some("fewer partitions".into());
        let r = refusals(&plan(vec![c]), &all());
        assert!(r.len() == 1 && r[0].contains("fewer partitions"), "{r:?}");
    }

    #[test]
    fn a_report_is_ok_only_when_every_step_finished_without_failure_or_interruption() {
        let done = |done, total| Report {
            done,
            total,
            ..Report::default()
        };
        assert!(done(3, 3).ok());
        assert!(done(0, 0).ok(), "an empty plan applies");
        assert!(!done(2, 3).ok(), "a step left");
        let failed = Report {
            failed: vec![(2, "refused".into())],
            ..done(3, 3)
        };
        assert!(!failed.ok());
        let interrupted = Report {
            interrupted: true,
            ..done(3, 3)
        };
        assert!(!interrupted.ok());
    }

    #[test]
    fn a_step_is_described_by_action_resource_and_target() {
        let c = change(Kind::Queue, Action::Replace, Some(0));
        assert_eq!(describe(&c), "replace queue orders.dlq (vhost /) on t");
    }

    #[test]
    fn progress_times_read_in_seconds_then_minutes() {
        assert_eq!(human_secs(0), "0 s");
        assert_eq!(human_secs(59), "59 s");
        assert_eq!(human_secs(60), "1 min 0 s");
        assert_eq!(human_secs(754), "12 min 34 s");
    }
}
