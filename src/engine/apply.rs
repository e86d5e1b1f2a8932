//! Executes a plan: guards first, then each change in order, one at a time.
//!
//! Nothing is written unless every guard passes. Each finished step is reported as it
//! finishes; on the first failure apply stops and reports what was done and what was not, so
//! that a fresh plan lists exactly the remainder. Ctrl-C lets the current step finish, then
//! stops the same way.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::backend::{Reader, Writer};
use crate::plan::{Action, Change, Plan};
use crate::printer::{Printer, Style};
use crate::resource::ResourceId;

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
    /// The step that failed, with the error.
    pub failed: Option<(usize, String)>,
    pub interrupted: bool,
    /// Changes the backend had not reflected when apply gave up waiting.
    pub unsettled: Vec<String>,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.failed.is_none() && !self.interrupted && self.done == self.total
    }
}

fn describe(c: &Change) -> String {
    format!(
        "{} {} on {}",
        c.action.as_str(),
        c.resource,
        c.resource.target
    )
}

/// Optimistic concurrency: re-reads the resource a step is about to write and says how it
/// changed since planning (`None`: as planned, or nothing to compare with).
async fn moved(
    c: &Change,
    readers: &BTreeMap<String, Reader>,
    baseline: &BTreeMap<ResourceId, Option<String>>,
) -> Option<String> {
    let (Some(r), Some(then)) = (readers.get(&c.resource.target), baseline.get(&c.resource)) else {
        return None;
    };
    let what = format!("{} on target `{}`", c.resource, c.resource.target);
    let live = match r.read_one(&c.resource).await {
        Ok(live) => live,
        Err(e) => return Some(format!("{what}: could not re-check it before writing: {e}")),
    };
    let now = crate::engine::plan::step_fingerprint(live.as_ref());
    let how = crate::engine::plan::how_changed(then, &now)?;
    Some(format!(
        "{what} {how} since planning (another apply, or a hand change); not written"
    ))
}

/// Applies the plan's changes in order. Call only after [`refusals`] came back empty.
/// Before each step, the resource it writes is re-read through `readers` and compared with
/// `baseline` (what the plan read); a resource that moved stops apply before it is written.
pub async fn run(
    plan: &Plan,
    writers: &BTreeMap<String, Writer>,
    (readers, baseline): (
        &BTreeMap<String, Reader>,
        &BTreeMap<ResourceId, Option<String>>,
    ),
    g: &Guards,
    printer: &Printer,
    stop: &AtomicBool,
) -> Report {
    let steps: Vec<&Change> = plan
        .changes
        .iter()
        .filter(|c| c.action != Action::Impossible)
        .collect();
    let mut report = Report {
        total: steps.len(),
        ..Report::default()
    };
    let width = steps.len().to_string().len();
    for (i, c) in steps.iter().enumerate() {
        if stop.load(Ordering::SeqCst) {
            report.interrupted = true;
            break;
        }
        let Some(w) = writers.get(&c.resource.target) else {
            report.failed = Some((
                i,
                format!("no connection for target `{}`", c.resource.target),
            ));
            break;
        };
        let started = Instant::now();
        let prefix = format!("[{:>width$}/{}]", i + 1, steps.len());
        if let Some(why) = moved(c, readers, baseline).await {
            printer.err(&format!(
                "{prefix} {} {}",
                describe(c),
                printer.paint_err("FAILED", Style::Error)
            ));
            report.failed = Some((i, why));
            break;
        }
        match w.apply(c, g.allow_message_loss).await {
            Ok(()) => {
                report.done += 1;
                printer.err(&format!(
                    "{prefix} {} {} ({} ms)",
                    describe(c),
                    printer.paint_err("done", Style::Good),
                    started.elapsed().as_millis()
                ));
            }
            Err(e) => {
                printer.err(&format!(
                    "{prefix} {} {}",
                    describe(c),
                    printer.paint_err("FAILED", Style::Error)
                ));
                report.failed = Some((i, e.to_string()));
                break;
            }
        }
    }
    // Wait for the backends to show what was written, so the next plan sees it.
    for (name, w) in writers {
        let applied: Vec<&Change> = steps
            .iter()
            .take(report.done)
            .copied()
            .filter(|c| &c.resource.target == name)
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
        if let Some((i, e)) = &report.failed {
            lines.push(format!("  failed:   {}: {e}", describe(steps[*i])));
        }
        // The failed step was reported above; everything after it was not attempted.
        for c in steps
            .iter()
            .skip(report.done + usize::from(report.failed.is_some()))
        {
            lines.push(format!("  not done: {}", describe(c)));
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
}
