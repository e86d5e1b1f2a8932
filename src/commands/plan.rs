//! `dlqctl plan`: read-only. Specs → desired → live → diff → printed or saved plan.

use crate::cli::{PlanArgs, PlanFormat};
use crate::engine;
use crate::plan::render;
use crate::printer::Printer;

/// Exit codes: 0 success (with `--detailed-exitcode`: 0 no changes, 2 changes), 1 error.
pub fn run(args: &PlanArgs, printer: &Printer) -> anyhow::Result<u8> {
    let Some(loaded) = super::load_checked(&args.paths, &args.spec, printer)? else {
        return Ok(1);
    };
    let opts = super::connect_options(&args.spec, printer);
    let planned = super::runtime()?.block_on(engine::plan(
        &loaded.channels,
        &loaded.targets,
        opts,
        super::plan_options(&args.scope),
    ))?;
    let plan = &planned.plan;
    if let Some(out) = &args.out {
        fs_err::write(out, render::json(plan))?;
    }
    let text = match args.format {
        PlanFormat::Human => render::human(plan, printer),
        PlanFormat::Json => render::json(plan),
        PlanFormat::Markdown => render::markdown(plan),
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
        super::print_stats(&planned.stats, printer);
    }
    Ok(if args.detailed_exitcode && plan.summary.has_changes() {
        2
    } else {
        0
    })
}
