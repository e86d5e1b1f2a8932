//! `dlqctl apply`: from specs (plan, show, ask) or from a saved plan (re-check, then apply).

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context as _, bail};

use crate::backend::wire::http::Stats;
use crate::backend::{Reader, Writer};
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
    let rt = super::runtime()?;
    let guards = Guards {
        allow_replace: args.allow_replace,
        allow_delete: args.allow_delete,
        allow_message_loss: args.allow_message_loss,
    };
    let Some(ToApply {
        plan,
        readers,
        reviewed,
    }) = to_apply(args, printer, &rt)?
    else {
        return Ok(1);
    };
    if !plan.summary.has_changes() {
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
    let writers: BTreeMap<String, Writer> = readers
        .into_iter()
        .map(|(k, r)| (k, r.into_writer()))
        .collect();
    let report = rt.block_on(interruptible(&plan, &writers, &guards, printer));
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

/// The plan to apply, with a reader per target and whether it was already reviewed.
struct ToApply {
    plan: Plan,
    readers: BTreeMap<String, Reader>,
    /// A saved plan was reviewed when it was made (`plan --out`); it applies without a prompt.
    reviewed: bool,
}

/// The plan to apply: a saved plan whose live state has not changed since, or one made from
/// the specs now (and shown). `None`: nothing can be applied (the reason was printed).
fn to_apply(
    args: &ApplyArgs,
    printer: &Printer,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<Option<ToApply>> {
    let opts = super::connect_options(&args.spec, printer);
    match saved_plan(&args.paths)? {
        Some(_) if args.scope.prune || args.scope.adopt => {
            bail!(
                "--prune and --adopt belong to the plan: pass them to `dlqctl plan --out`, which saves what they add; a saved plan is applied as it is"
            );
        }
        Some(plan) => {
            let path = args.paths[0].display();
            let stats = Arc::new(Stats::default());
            let readers =
                engine::connect(plan.targets.keys().cloned(), &plan.targets, opts, &stats)?;
            let changed = rt.block_on(engine::stale(&plan, &readers))?;
            if !changed.is_empty() {
                printer.err(&format!(
                    "{} the live state changed since {path} was planned; nothing was applied:\n{}\nPlan again.",
                    printer.paint_err("refused:", Style::Error),
                    changed.iter().map(|c| format!("  - {c}")).collect::<Vec<_>>().join("\n")
                ));
                return Ok(None);
            }
            printer.err(&format!("{path}: live state unchanged since planning."));
            Ok(Some(ToApply {
                plan,
                readers,
                reviewed: true,
            }))
        }
        None => {
            let Some(loaded) = super::load_checked(&args.paths, &args.spec, printer)? else {
                return Ok(None);
            };
            let planned = rt.block_on(engine::plan(
                &loaded.channels,
                &loaded.targets,
                opts,
                super::plan_options(&args.scope),
            ))?;
            printer.out(&render::human(&planned.plan, printer));
            Ok(Some(ToApply {
                plan: planned.plan,
                readers: planned.readers,
                reviewed: false,
            }))
        }
    }
}

/// Applies the plan; Ctrl-C lets the current step finish, then stops.
async fn interruptible(
    plan: &Plan,
    writers: &BTreeMap<String, Writer>,
    guards: &Guards,
    printer: &Printer,
) -> apply::Report {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let printer2 = *printer;
    let watcher = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            flag.store(true, Ordering::SeqCst);
            printer2.err("Interrupted: finishing the current step, then stopping.");
        }
    });
    let report = apply::run(plan, writers, guards, printer, &stop).await;
    watcher.abort();
    report
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
