//! `dlqctl apply`: from specs (plan, show, ask) or from a saved plan (re-check, then apply).

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context as _, bail};

use crate::cli::ApplyArgs;
use crate::engine;
use crate::engine::apply::{self, Guards};
use crate::plan::{FORMAT_VERSION, PLAN_KIND, Plan, render};
use crate::printer::{Printer, Style};

/// A saved plan is JSON whose `kind` is `dlqctl/plan`; specs are YAML documents.
fn saved_plan(paths: &[std::path::PathBuf]) -> anyhow::Result<Option<Plan>> {
    let [path] = paths else { return Ok(None) };
    if !path.is_file() {
        return Ok(None);
    }
    let text = fs_err::read_to_string(path)?;
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Ok(None);
    };
    if value.get("kind").and_then(|k| k.as_str()) != Some(PLAN_KIND) {
        return Ok(None);
    }
    let version = value
        .get("format_version")
        .and_then(serde_json::Value::as_u64);
    if version != Some(u64::from(FORMAT_VERSION)) {
        bail!(
            "{}: plan format_version {version:?} is not {FORMAT_VERSION}; plan again with this dlqctl",
            path.display()
        );
    }
    let plan = serde_json::from_value(value)
        .with_context(|| format!("{}: not a valid saved plan", path.display()))?;
    Ok(Some(plan))
}

pub fn run(args: &ApplyArgs, printer: &Printer) -> anyhow::Result<u8> {
    let rt = super::shared::runtime()?;
    let opts = super::shared::connect_options(&args.spec, printer);
    let guards = Guards {
        allow_replace: args.allow_replace,
        allow_delete: args.allow_delete,
        allow_message_loss: args.allow_message_loss,
    };
    // A saved plan was reviewed when it was made (`plan --out`); it applies without a prompt.
    let (plan, readers, baseline, reviewed, stats) = match saved_plan(&args.paths)? {
        Some(_) if args.scope.prune || args.scope.adopt => {
            bail!(
                "--prune and --adopt belong to the plan: pass them to `dlqctl plan --out`, which saves what they add; a saved plan is applied as it is"
            );
        }
        Some(saved) => {
            let Some(fresh) = replan(&saved, args, opts, &rt, printer)? else {
                return Ok(1);
            };
            (fresh.plan, fresh.readers, fresh.baseline, true, fresh.stats)
        }
        None => {
            let Some(loaded) =
                super::shared::load_checked(&args.paths, args.spec.targets.as_deref(), printer)?
            else {
                return Ok(1);
            };
            let planned = rt.block_on(engine::plan(
                &loaded.channels,
                &loaded.targets,
                opts,
                super::shared::plan_options(&args.scope),
            ))?;
            printer.out(&render::human(&planned.plan, printer));
            (
                planned.plan,
                planned.readers,
                planned.baseline,
                false,
                planned.stats,
            )
        }
    };
    if !plan.summary.has_changes() {
        if args.stats {
            super::shared::print_stats(&stats, printer);
        }
        return Ok(0);
    }
    let refused = apply::refusals(&plan, &guards);
    if !refused.is_empty() {
        printer.err(&format!(
            "{} nothing was applied:\n{}",
            printer.paint_err("refused:", Style::Error),
            refused
                .iter()
                .map(|r| format!("  - {r}"))
                .collect::<Vec<_>>()
                .join("\n")
        ));
        return Ok(1);
    }
    if !args.auto_approve && !reviewed && !confirm(printer)? {
        printer.err("Apply cancelled; nothing was changed.");
        return Ok(1);
    }
    let writers: BTreeMap<String, _> = readers
        .iter()
        .map(|(k, r)| (k.clone(), r.clone().into_writer()))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let report = rt.block_on(async {
        let flag = Arc::clone(&stop);
        let printer2 = *printer;
        // Ctrl-C, or SIGTERM (a CI cancel): finish the steps in flight, then stop and report.
        let watcher = tokio::spawn(async move {
            if crate::engine::interrupt::interrupted().await {
                flag.store(true, Ordering::SeqCst);
                printer2.err("Interrupted: finishing the changes in flight, then stopping.");
            }
        });
        let report = apply::run(
            &plan,
            &writers,
            apply::Recheck {
                readers: &readers,
                baseline: &baseline,
            },
            &guards,
            args.parallelism,
            printer,
            &stop,
        )
        .await;
        watcher.abort();
        report
    });
    if args.stats {
        super::shared::print_stats(&stats, printer);
    }
    for u in &report.unsettled {
        printer.err(&format!(
            "{} {u}: not yet visible on the server",
            printer.paint_err("warning:", Style::Warning)
        ));
    }
    if report.ok() {
        let noun = if report.done == 1 {
            "change"
        } else {
            "changes"
        };
        printer.err(&format!("Apply complete: {} {noun} applied.", report.done));
        Ok(0)
    } else {
        Ok(1)
    }
}

fn confirm(printer: &Printer) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        bail!(
            "refusing to apply without confirmation: stdin is not a terminal; pass --auto-approve, or save a plan with `dlqctl plan --out FILE` and apply that"
        );
    }
    printer.err("Apply these changes? Only `yes` is accepted: ");
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(answer.trim() == "yes")
}

fn refuse(printer: &Printer, what: &str, lines: &[String]) {
    printer.err(&format!(
        "{} {what}; nothing was applied:\n{}\nPlan again.",
        printer.paint_err("refused:", Style::Error),
        lines
            .iter()
            .map(|c| format!("  - {c}"))
            .collect::<Vec<_>>()
            .join("\n")
    ));
}

/// A saved plan is not trusted: its specs are loaded again (and must be the files it was
/// made from, unchanged), targets and credentials come from the current targets file, and a
/// fresh read-only plan must make exactly the saved changes, against the same servers, from
/// the same live state. Returns the fresh plan (what gets applied), or `None` after saying
/// why it was refused (nothing written).
fn replan(
    saved: &Plan,
    args: &ApplyArgs,
    opts: crate::backend::ConnectOptions,
    rt: &tokio::runtime::Runtime,
    printer: &Printer,
) -> anyhow::Result<Option<engine::Planned>> {
    let path = args.paths[0].display();
    let Some(source) = &saved.source else {
        bail!(
            "{path}: the plan does not record the specs it was made from, so it cannot be checked; plan again with `dlqctl plan --out`"
        );
    };
    let targets = args
        .spec
        .targets
        .as_deref()
        .or(source.targets_file.as_deref());
    let Some(loaded) = super::shared::load_checked(&source.paths, targets, printer)? else {
        return Ok(None);
    };
    let mut moved = Vec::new();
    for (file, hash) in &source.files {
        match loaded.files.get(file) {
            None => moved.push(format!(
                "{} was read for the plan, but not now",
                file.display()
            )),
            Some(h) if h != hash => {
                moved.push(format!("{} changed since planning", file.display()))
            }
            Some(_) => {}
        }
    }
    for file in loaded.files.keys() {
        if !source.files.contains_key(file) {
            moved.push(format!(
                "{} is read now, but was not for the plan",
                file.display()
            ));
        }
    }
    if !moved.is_empty() {
        refuse(
            printer,
            &format!("the files {path} was planned from changed"),
            &moved,
        );
        return Ok(None);
    }
    let fresh = rt.block_on(engine::plan(
        &loaded.channels,
        &loaded.targets,
        opts,
        engine::PlanOptions {
            prune: source.prune,
            adopt: source.adopt,
        },
    ))?;
    let now = rt.block_on(engine::plan::identities(&fresh.readers))?;
    let mut other = Vec::new();
    for (target, id) in &now {
        match source.identities.get(target) {
            Some(then) if then == id => {}
            Some(then) => other.push(format!(
                "target `{target}` is {id}; {path} was planned against {then}"
            )),
            None => other.push(format!(
                "target `{target}`: {path} records no server for it"
            )),
        }
    }
    if !other.is_empty() {
        refuse(
            printer,
            &format!("{path} was planned against another server"),
            &other,
        );
        return Ok(None);
    }
    let changed = engine::plan::stale_against(saved, &fresh.plan);
    if !changed.is_empty() {
        refuse(
            printer,
            &format!("the live state changed since {path} was planned"),
            &changed,
        );
        return Ok(None);
    }
    let differ = engine::plan::differences(saved, &fresh.plan);
    if !differ.is_empty() {
        refuse(
            printer,
            &format!("{path} is not what its specs plan now (edited?)"),
            &differ,
        );
        return Ok(None);
    }
    printer.err(&format!("{path}: live state unchanged since planning."));
    Ok(Some(fresh))
}
