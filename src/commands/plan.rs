//! `dlqctl plan`: read-only. Specs → desired → live → diff → printed or saved plan.

use crate::cli::{PlanArgs, PlanFormat};
use crate::engine;
use crate::plan::{PLAN_KIND, Source, markdown, render};
use crate::printer::Printer;

/// Exit codes: 0 success (with `--detailed-exitcode`: 0 no changes, 2 changes), 1 error.
pub fn run(args: &PlanArgs, printer: &Printer) -> anyhow::Result<u8> {
    if let Some(out) = &args.out {
        refuse_overwrite(out)?;
    }
    let Some(loaded) =
        super::shared::load_checked(&args.paths, args.spec.targets.as_deref(), printer)?
    else {
        return Ok(1);
    };
    let opts = super::shared::connect_options(&args.spec, printer);
    let rt = super::shared::runtime()?;
    let planned = rt.block_on(engine::plan(
        &loaded.channels,
        &loaded.targets,
        opts,
        super::shared::plan_options(&args.scope),
    ))?;
    let plan = &planned.plan;
    if let Some(out) = &args.out {
        let identities = rt.block_on(engine::plan::identities(&planned.readers))?;
        let mut saved = plan.clone();
        saved.source = Some(Source {
            paths: args.paths.clone(),
            targets_file: args.spec.targets.clone(),
            files: loaded.files.clone(),
            prune: args.scope.prune,
            adopt: args.scope.adopt,
            identities,
        });
        refuse_overwrite(out)?;
        fs_err::write(out, render::json(&saved))?;
    }
    let text = match args.format {
        PlanFormat::Human => render::human(plan, printer),
        PlanFormat::Json => render::json(plan),
        PlanFormat::Markdown => {
            let charts = engine::plan::charts(&crate::graph::build(&loaded.channels), plan);
            markdown::markdown_with(
                plan,
                &charts,
                &loaded.warnings,
                &crate::backend::duration_unit,
            )
        }
    };
    printer.out(&text);
    if let Some(out) = &args.out {
        printer.err(&format!(
            "Saved the plan to {}; apply it with `dlqctl apply {}`.",
            out.display(),
            out.display()
        ));
    }
    if args.stats {
        super::shared::print_stats(&planned.stats, printer);
    }
    Ok(if args.detailed_exitcode && plan.summary.has_changes() {
        2
    } else {
        0
    })
}

/// `--out` replaces only a saved plan (JSON whose `kind` is `dlqctl/plan`), never a spec, the
/// targets file or anything else.
fn refuse_overwrite(out: &std::path::Path) -> anyhow::Result<()> {
    if !out.exists() {
        return Ok(());
    }
    let is_plan = out.is_file()
        && fs_err::read_to_string(out)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|v| v.get("kind").and_then(|k| k.as_str()) == Some(PLAN_KIND));
    if !is_plan {
        anyhow::bail!(
            "not overwriting {}: it is not a saved plan (a JSON file with `kind: {PLAN_KIND}`); nothing was written; choose another --out",
            out.display()
        );
    }
    Ok(())
}
