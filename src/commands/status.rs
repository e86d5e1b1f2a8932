//! `dlqctl status`: read-only. Specs → each channel's dead-letter queue read through its
//! backend's status door → one report, printed in the format asked.

use std::sync::Arc;

use crate::backend::wire::Stats;
use crate::cli::{StatusArgs, StatusFormat};
use crate::engine;
use crate::printer::{Printer, Style};
use crate::status::{ReadOptions, render};

/// Exit codes: 0 success (with `--detailed-exitcode`: 0 every DLQ empty, 2 one holds
/// messages), 1 a channel could not be read, or an error.
pub fn run(args: &StatusArgs, printer: &Printer) -> anyhow::Result<u8> {
    let Some(loaded) =
        super::shared::load_checked(&args.paths, args.spec.targets.as_deref(), printer)?
    else {
        return Ok(1);
    };
    let channels = super::shared::select(loaded.channels, &args.read)?;
    let opts = super::shared::connect_options(&args.spec, printer);
    let read = ReadOptions {
        samples: usize::from(args.samples),
        scan: usize::from(args.read.scan.max(args.samples)),
        max_body: args.max_body as usize,
        peek: !args.no_peek,
        redrive_view: false,
    };
    let stats = Arc::new(Stats::default());
    let readers = engine::status::connect(&channels, &loaded.targets, opts, &stats);
    let rt = super::shared::runtime()?;
    let report = rt.block_on(engine::status::read(&channels, &readers, read));
    let text = match args.format {
        StatusFormat::Human => render::human(&report, printer),
        StatusFormat::Json => render::json(&report),
        StatusFormat::Markdown => render::markdown(&report),
        StatusFormat::Openmetrics => render::openmetrics(&report),
    };
    printer.out(&text);
    if args.stats {
        super::shared::print_stats(&stats, printer);
    }
    let failed = report.channels.iter().filter(|c| c.error.is_some()).count();
    if failed > 0 {
        printer.err(&format!(
            "{} {failed} of {} channel{} could not be read (each says why above)",
            printer.paint_err("error:", Style::Error),
            report.channels.len(),
            if report.channels.len() == 1 { "" } else { "s" }
        ));
        return Ok(1);
    }
    Ok(if args.detailed_exitcode && report.has_dead_letters() {
        2
    } else {
        0
    })
}
