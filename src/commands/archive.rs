//! `dlqctl archive CHANNEL --to DIR|s3://…`: dead letters written to an archive, and with
//! `--delete` removed from the queue once their object is durable and listed. It parses the
//! flags (with `--due`, the place and the horizon from `deadLetter.archive`), asks before
//! `--delete` on a terminal, and prints the report; the driver (`engine/archive.rs`) does the
//! rest.

use std::io::{BufRead, IsTerminal};

use crate::archive::Place;
use crate::cli::{ArchiveArgs, ArchiveFormat, Compression};
use crate::engine::archive::{self as driver, Ask, DueAnswer, Report};
use crate::printer::{Printer, Style};
use crate::redrive::AgeFrom;

pub fn run(args: &ArchiveArgs, printer: &Printer) -> anyhow::Result<u8> {
    let (groups, where_) = super::shared::selectors(&args.select)?;
    // What the operator wrote, as the report and the journal keep it (hx4 G).
    let reason = args.reason.as_deref().map(crate::secrets::said);
    let given = args
        .to
        .as_deref()
        .map(|t| Place::parse(t).map_err(|e| anyhow::anyhow!("--to {e}")))
        .transpose()?;
    let Some(loaded) =
        super::shared::load_checked(&args.paths, args.spec.targets.as_deref(), printer)?
    else {
        return Ok(1);
    };
    let r = super::shared::select_one(loaded.channels, &args.channel, args.target.as_deref())?;
    let (older_than, age, due) = if args.due {
        match driver::due(&r) {
            DueAnswer::Select { older_than, record } => {
                (Some(older_than), AgeFrom::Retention, Some(record))
            }
            DueAnswer::Never(line) => {
                match args.format {
                    ArchiveFormat::Text => printer.out(&format!("{line}\n")),
                    ArchiveFormat::Json => printer.err(&line),
                }
                return Ok(0);
            }
            DueAnswer::Unknown(why) => anyhow::bail!(why),
        }
    } else {
        (args.older_than, AgeFrom::DeadLettered, None)
    };
    let to = match (given, &r.archive) {
        (Some(to), _) => to,
        (None, Some(a)) => Place::parse(&a.to).map_err(|e| {
            anyhow::anyhow!("deadLetter.archive.to of channel `{}`: {e}", r.channel)
        })?,
        (None, None) => {
            let file = loaded
                .spec_files
                .get(&(r.target.clone(), r.channel.clone()))
                .map_or_else(|| "its spec".to_owned(), |p| p.display().to_string());
            anyhow::bail!(
                "--due: channel `{}` ({file}) declares no `deadLetter.archive`, so there is nowhere to archive to; add `deadLetter: {{archive: {{to: DIR | s3://bucket/prefix, before: 2d}}}}` to its spec (or its Defaults), or give --to",
                r.channel
            )
        }
    };
    let ask = Ask {
        to,
        limit: args.limit,
        classes: args.classes.clone(),
        older_than,
        age,
        due,
        delete: args.delete,
        dry_run: args.dry_run,
        rate: args.rate,
        reason: reason.clone(),
        gzip: args.compress == Some(Compression::Gzip),
        groups,
        where_,
    };
    let redrive_ask = driver::redrive_ask(&ask);
    let opts = super::shared::connect_options(&args.spec, printer);
    let audit = super::shared::Audit {
        audit_log: args.audit_log.as_deref(),
        target: loaded.targets.get(&r.target),
        r: &r,
        started_ms: crate::status::now_ms(),
        opts,
        verb: crate::engine::redrive::Purpose::Archive.verb(),
        dry_run: args.dry_run,
        reason: reason.as_deref(),
    };
    let mut session = super::shared::journal_refused(
        driver::connect(&r, &loaded.targets, &redrive_ask, opts),
        &audit,
        None,
        printer,
    )?;
    let rt = super::shared::runtime()?;
    let authorized = rt.block_on(session.authorize());
    let identity = session.report().identity.clone();
    super::shared::journal_refused(authorized, &audit, identity.clone(), printer)?;
    if args.due {
        super::shared::journal_refused(
            rt.block_on(driver::due_drift(&r, &loaded.targets, opts)),
            &audit,
            identity,
            printer,
        )?;
    }

    if args.dry_run {
        let report = rt.block_on(driver::dry_run(session, &ask))?;
        let journaled = journal(&report, &audit, &rt, printer);
        print(&report, args.format, printer);
        return Ok(if journaled { 0 } else { 1 });
    }

    let depth = rt.block_on(session.depth());
    if args.delete && !args.yes {
        if !std::io::stdin().is_terminal() {
            anyhow::bail!(
                "refusing to remove messages without confirmation: stdin is not a terminal; pass --yes (and see first with --dry-run)"
            );
        }
        printer.err(&format!(
            "Archive {} message(s) from `{}` (target {}) to {} and delete them from the queue? Only `yes` is accepted: ",
            match (args.limit, depth) {
                (Some(l), Some(d)) => l.min(d).to_string(),
                (Some(l), None) => format!("up to {l}"),
                (None, Some(d)) => format!("up to {d}"),
                (None, None) => "every selected".to_owned(),
            },
            session.dead_letter(),
            session.target(),
            ask.to
        ));
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if answer.trim() != "yes" {
            printer.err("Archive cancelled; nothing was archived or removed.");
            return Ok(1);
        }
    }
    let identity = session.report().identity.clone();
    // Before the first message is taken: a run killed on the way leaves this record at least.
    let started = crate::redrive::Started::of(
        session.report(),
        crate::engine::redrive::Purpose::Archive.verb(),
    );
    if !super::shared::record(
        &rt,
        &audit,
        "started",
        &started,
        "an archive run about to start: nothing archived or removed",
        printer,
    ) {
        printer.err(
            "Archive not started: its start could not be recorded; nothing was archived or removed.",
        );
        return Ok(1);
    }
    let report = super::shared::journal_refused(
        rt.block_on(driver::run(session, &ask, depth, printer)),
        &audit,
        identity,
        printer,
    )?;
    if let Some(e) = &report.error {
        printer.err(&format!(
            "{} {e}",
            printer.paint_err("error:", Style::Error)
        ));
    }
    let journaled = journal(&report, &audit, &rt, printer);
    print(&report, args.format, printer);
    Ok(if journaled && driver::complete(&report) {
        0
    } else {
        1
    })
}

/// The report to wherever the run's audit records go ([`super::shared::record`]), with what
/// was archived: `false` when it did not land in one of them.
fn journal(
    report: &Report,
    audit: &super::shared::Audit<'_>,
    rt: &tokio::runtime::Runtime,
    printer: &Printer,
) -> bool {
    let what = format!(
        "{} archived from {} to {}, {} deleted{}",
        report.archived,
        report.dead_letter,
        report.to,
        report.deleted,
        if report.dry_run { ", a dry run" } else { "" }
    );
    super::shared::record(rt, audit, "archive", report, &what, printer)
}

fn print(report: &Report, format: ArchiveFormat, printer: &Printer) {
    match format {
        ArchiveFormat::Text => printer.out(&driver::human(report)),
        ArchiveFormat::Json => printer.out(&driver::json(report)),
    }
    if !report.dry_run {
        printer.report_out_failure(&format!(
            "; the archive report is lost: {} archived from {} to {}, {} deleted, manifest {}",
            report.archived,
            report.dead_letter,
            report.to,
            report.deleted,
            report.manifest.as_deref().unwrap_or("none")
        ));
    }
}
