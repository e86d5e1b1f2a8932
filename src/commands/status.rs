//! `dlqctl status`: read-only. Specs → each channel's dead-letter queue read through its
//! backend's status door → one report, printed in the format asked.

use std::sync::Arc;

use crate::backend::wire::Stats;
use crate::cli::{GroupBy, StatusArgs, StatusFormat};
use crate::engine;
use crate::printer::{Printer, Style};
use crate::status::{ReadOptions, render};

/// Adds each channel's time to resolution from the journal at `path`. A journal that cannot
/// be read is said in one line on stderr, and the status goes on without it.
fn resolutions(
    report: &mut crate::status::Report,
    path: &std::path::Path,
    window: std::time::Duration,
    printer: &Printer,
) {
    use crate::status::resolution::{Journal, from_journal};
    // Bytes, decoded line by line as far as they go: one torn character (a full disk cut a
    // line) costs that line, not the journal.
    let text = match fs_err::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            printer.err(&format!(
                "{} audit log {}: cannot read it ({e}); no time to resolution is shown",
                printer.paint_err("warning:", Style::Warning),
                path.display()
            ));
            return;
        }
    };
    let window_ms = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
    let journal = Journal::parse(&text);
    for c in &mut report.channels {
        c.resolution = from_journal(
            &journal,
            &c.channel,
            &c.target,
            &c.dead_letter_name,
            report.generated_at_ms,
            window_ms,
        );
    }
    let unreadable = journal.unreadable;
    if unreadable > 0 {
        printer.err(&format!(
            "{} audit log {}: {} line{} not JSON records, left out",
            printer.paint_err("warning:", Style::Warning),
            path.display(),
            unreadable,
            if unreadable == 1 { " is" } else { "s are" }
        ));
    }
}

/// Exit codes: 0 success (with `--detailed-exitcode`: 0 every DLQ empty, 2 one holds
/// messages), 1 a channel could not be read, or an error.
pub fn run(args: &StatusArgs, printer: &Printer) -> anyhow::Result<u8> {
    let (groups, where_) = super::shared::selectors(&args.select)?;
    let choice = crate::status::selector::Choice { groups, where_ };
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
        rate_window: Some(args.rate_window),
        count_by_reading: false,
        groups: args.group_by == GroupBy::Fingerprint,
        hide_for: args.hide_for,
    };
    let stats = Arc::new(Stats::default());
    let readers = engine::status::connect(&channels, &loaded.targets, opts, &stats);
    let rt = super::shared::runtime()?;
    let mut report = rt.block_on(engine::status::read(&channels, &readers, read, &choice));
    if let Some(path) = &args.audit_log {
        resolutions(&mut report, path, args.resolution_window, printer);
    }
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
