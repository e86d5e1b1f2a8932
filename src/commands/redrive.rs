//! `dlqctl redrive CHANNEL`: the one command that takes messages out of a dead-letter queue.
//! Specs → the channel → a dry run (the status door) or, after confirmation, the backend's
//! mover → the report (for people, or the JSON audit record).

use std::io::{BufRead, IsTerminal};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::backend::wire::Stats;
use crate::backend::{Mover, Reader};
use crate::cli::{RedriveArgs, RedriveFormat};
use crate::engine;
use crate::printer::{Printer, Style};
use crate::redrive::{self, Destination, Report, Run, Selection, SelectionRecord, Tally};
use crate::spec::resolve::Resolved;

pub fn run(args: &RedriveArgs, printer: &Printer) -> anyhow::Result<u8> {
    let Some(loaded) =
        super::shared::load_checked(&args.paths, args.spec.targets.as_deref(), printer)?
    else {
        return Ok(1);
    };
    let read = crate::cli::ReadArgs {
        channels: vec![args.channel.clone()],
        scan: 0,
    };
    let Some(r) = super::shared::select(loaded.channels, &read)?
        .into_iter()
        .next()
    else {
        anyhow::bail!("channel `{}` not found", args.channel);
    };
    let target = loaded
        .targets
        .get(&r.target)
        .ok_or_else(|| anyhow::anyhow!("target `{}` is not in the targets file", r.target))?
        .clone();
    let select = Selection {
        limit: args.limit,
        classes: args.classes.clone(),
        older_than_ms: args
            .older_than
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        max_redrives: r.max_redrives,
        envelope: r.envelope,
    };
    let to = if args.to == "source" {
        Destination {
            name: r.main.clone(),
            source: true,
        }
    } else {
        Destination {
            name: args.to.clone(),
            source: false,
        }
    };
    if args.native && r.backend != crate::spec::model::Backend::Sqs {
        anyhow::bail!(
            "--native is SQS's own move task; channel `{}` is on {}",
            r.channel,
            r.backend.display_name()
        );
    }
    if !to.source && to.name == r.dead_letter {
        anyhow::bail!("--to {}: that is the dead-letter queue itself", to.name);
    }
    let opts = super::shared::connect_options(&args.spec, printer);
    let stats = Arc::new(Stats::default());
    let reader = Reader::connect(&r.target, &target, opts, Arc::clone(&stats))?;
    let rt = super::shared::runtime()?;
    let started = now_text();
    let mut report = Report {
        format_version: 1,
        kind: redrive::KIND,
        channel: r.channel.clone(),
        target: r.target.clone(),
        backend: r.backend.as_str(),
        dead_letter: r.dead_letter.clone(),
        destination: to.clone(),
        dry_run: args.dry_run,
        selection: SelectionRecord {
            limit: args.limit,
            classes: args.classes.clone(),
            older_than_seconds: args.older_than.map(|d| d.as_secs_f64()),
            max_redrives: r.max_redrives,
            rate: args.rate,
        },
        examined: 0,
        moved: 0,
        not_selected: 0,
        skipped_at_max_redrives: 0,
        possibly_duplicated: 0,
        left_in_dead_letter: None,
        left_basis: None,
        interrupted: false,
        error: None,
        incomplete: Vec::new(),
        started_at: started,
        ended_at: String::new(),
        operator: redrive::holder(),
        reason: args.reason.clone(),
        would_move: None,
        moved_by: None,
    };

    if args.dry_run {
        let dry = rt.block_on(engine::redrive::dry_run(
            &r,
            &reader,
            &select,
            usize::from(args.samples),
            usize::from(args.scan),
        ))?;
        report.examined = dry.examined;
        report.not_selected = dry.not_selected;
        report.skipped_at_max_redrives = dry.at_limit;
        report.left_in_dead_letter = rt.block_on(engine::redrive::left(&r, &reader));
        report.left_basis = report.left_in_dead_letter.map(|_| redrive::STATISTICS);
        report.would_move = Some(dry.would);
        report.ended_at = now_text();
        print(&report, args.format, printer);
        return Ok(0);
    }

    let depth = rt.block_on(engine::redrive::left(&r, &reader));
    if !args.yes && !confirm(&r, &to, args.limit, depth, printer)? {
        printer.err("Redrive cancelled; nothing was moved.");
        return Ok(1);
    }
    let mover = Mover::connect(reader.clone(), &target)?;
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let run = Run {
        to,
        select,
        rate: args.rate,
        stop: Arc::clone(&stop),
        tally: Arc::clone(&tally),
        holder: report.operator.clone(),
        service_task: args.native,
        allow_unowned: args.allow_unowned_destination,
    };
    let result = rt.block_on(async {
        let flag = Arc::clone(&stop);
        let printer2 = *printer;
        let tally2 = Arc::clone(&tally);
        let watcher = tokio::spawn(async move {
            if super::shared::interrupted().await {
                flag.store(true, Ordering::SeqCst);
                printer2.err(
                    "Interrupted: finishing what is in flight, then stopping (interrupt again to stop at once).",
                );
                // A second interrupt: out now. Nothing is lost: what was not acknowledged goes
                // back to the dead-letter queue when the connection closes; what was confirmed
                // by the destination but not yet removed may be delivered twice.
                if super::shared::interrupted().await {
                    printer2.err(&format!(
                        "Interrupted again: stopped at once after {} moved. Messages not acknowledged go back to the dead-letter queue; those in flight may be delivered twice. No report was written.",
                        tally2.moved()
                    ));
                    std::process::exit(130);
                }
            }
        });
        let progress = progress(Arc::clone(&tally), depth, *printer);
        let result = engine::redrive::run(&r, &mover, &run).await;
        watcher.abort();
        if let Some(p) = progress {
            p.abort();
        }
        result
    });
    report.examined = tally.examined.load(Ordering::Relaxed);
    report.moved = tally.moved();
    report.not_selected = tally.not_selected.load(Ordering::Relaxed);
    report.skipped_at_max_redrives = tally.at_limit.load(Ordering::Relaxed);
    report.possibly_duplicated = tally.duplicated.load(Ordering::Relaxed);
    report.interrupted = stop.load(Ordering::SeqCst);
    report.moved_by = tally
        .by_service
        .load(Ordering::Relaxed)
        .then_some(redrive::SQS_MOVE_TASK);
    report.error = result
        .as_ref()
        .err()
        .map(|e| crate::status::safe(&e.to_string()));
    (report.left_in_dead_letter, report.left_basis) = match tally.left() {
        Some(n) => (Some(n), Some(redrive::EXACT)),
        None => {
            let n = rt.block_on(engine::redrive::left(&r, &reader));
            (n, n.map(|_| redrive::STATISTICS))
        }
    };
    report.incomplete = tally.incomplete_reasons();
    report.ended_at = now_text();
    if let Some(e) = &report.error {
        printer.err(&format!(
            "{} {e}",
            printer.paint_err("error:", Style::Error)
        ));
    }
    print(&report, args.format, printer);
    Ok(
        if report.error.is_some() || report.interrupted || !report.incomplete.is_empty() {
            1
        } else {
            0
        },
    )
}

fn print(report: &Report, format: RedriveFormat, printer: &Printer) {
    match format {
        RedriveFormat::Human => printer.out(&redrive::human(report)),
        RedriveFormat::Json => printer.out(&redrive::json(report)),
    }
    // The report is lost: what the run did goes to stderr, in the same line (issue 31).
    if !report.dry_run {
        printer.report_out_failure(&format!(
            "; the redrive report is lost: {} moved from {} to {}, {} possibly duplicated{}",
            report.moved,
            report.dead_letter,
            report.destination.name,
            report.possibly_duplicated,
            report
                .left_in_dead_letter
                .map_or_else(String::new, |n| format!(
                    ", {n} left in the dead-letter queue"
                ))
        ));
    }
}

fn now_text() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// On a terminal: the count and the destination, and `yes` to go on. Without one: refused.
fn confirm(
    r: &Resolved,
    to: &Destination,
    limit: Option<u64>,
    depth: Option<u64>,
    printer: &Printer,
) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "refusing to move messages without confirmation: stdin is not a terminal; pass --yes (and see first with --dry-run)"
        );
    }
    let count = match (limit, depth) {
        (Some(l), Some(d)) => l.min(d).to_string(),
        (Some(l), None) => format!("up to {l}"),
        (None, Some(d)) => format!("up to {d}"),
        (None, None) => "every selected".to_owned(),
    };
    printer.err(&format!(
        "Move {count} message(s) from `{}` to `{}` (target {})? Only `yes` is accepted: ",
        r.dead_letter, to.name, r.target
    ));
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(answer.trim() == "yes")
}

/// On a terminal: moved, rate and ETA every second on stderr.
fn progress(
    tally: Arc<Tally>,
    depth: Option<u64>,
    printer: Printer,
) -> Option<tokio::task::JoinHandle<()>> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    Some(tokio::spawn(async move {
        let start = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            let moved = tally.moved();
            let secs = start.elapsed().as_secs_f64().max(0.001);
            let rate = moved as f64 / secs;
            let eta = depth
                .filter(|_| rate > 0.0)
                .map(|d| {
                    format!(
                        ", about {} left",
                        crate::status::age::age(d.saturating_sub(moved) as f64 / rate)
                    )
                })
                .unwrap_or_default();
            printer.err(&format!("moved {moved} ({rate:.0}/s{eta})"));
        }
    }))
}
