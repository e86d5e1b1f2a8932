//! `dlqctl redrive CHANNEL`: the one command that takes messages out of a dead-letter queue.
//! It parses the flags, asks the person at the terminal, and prints the report; the driver
//! (`engine/redrive.rs`) does the rest: the channel → a dry run (the status door) or, after
//! confirmation, the backend's mover → the report (for people, or the JSON audit record).

use std::io::{BufRead, IsTerminal};

use crate::cli::{RedriveArgs, RedriveFormat};
use crate::engine::gate::{EXIT_UNHEALTHY, Gates};
use crate::engine::redrive::{self as driver, Ask, Batches, Session, Verify};
use crate::engine::replay;
use crate::printer::{Printer, Style};
use crate::redrive::{self, Report};

pub fn run(args: &RedriveArgs, printer: &Printer) -> anyhow::Result<u8> {
    let (groups, where_) = super::shared::selectors(&args.select)?;
    // What the operator wrote, as the report and the journal keep it (hx4 G).
    let reason = args.reason.as_deref().map(crate::secrets::said);
    let transform = args
        .transform
        .as_deref()
        .map(redrive::transform::Transform::compile)
        .transpose()
        .map_err(|e| anyhow::Error::new(crate::cli::UsageError(e)))?;
    let Some(loaded) =
        super::shared::load_checked(&args.paths, args.spec.targets.as_deref(), printer)?
    else {
        return Ok(1);
    };
    let r = super::shared::select_one(loaded.channels, &args.channel, args.target.as_deref())?;
    let ask = Ask {
        limit: args.limit,
        classes: args.classes.clone(),
        older_than: args.older_than,
        age: crate::redrive::AgeFrom::DeadLettered,
        from: args.from.clone(),
        to: args.to.clone(),
        native: args.native,
        dry_run: args.dry_run,
        rate: args.rate,
        samples: usize::from(args.samples),
        scan: usize::from(args.scan),
        reason: reason.clone(),
        allow_unowned: args.allow_unowned_destination,
        allow_fanout: args.allow_fanout,
        gates: Gates::new(
            args.health_checks.clone(),
            args.health_queries
                .iter()
                .map(|q| (q.clone(), args.prometheus.clone().unwrap_or_default()))
                .collect(),
        ),
        batches: Batches {
            size: args.batch,
            until_empty: args.until_empty,
            pause: args.pause,
            max_duration: args.max_duration,
        },
        verify: args.verify_for.map(|d| Verify {
            for_: d,
            max_redead_percent: args.max_redead,
        }),
        purpose: driver::Purpose::Redrive,
        groups,
        where_,
        transform,
    };
    let audit = super::shared::Audit {
        audit_log: args.audit_log.as_deref(),
        target: loaded.targets.get(&r.target),
        r: &r,
        started_ms: crate::status::now_ms(),
        opts: super::shared::connect_options(&args.spec, printer),
        verb: driver::Purpose::Redrive.verb(),
        dry_run: args.dry_run,
        reason: reason.as_deref(),
    };
    let checked = super::shared::journal_refused(
        driver::check(&r, &loaded.targets, &ask),
        &audit,
        None,
        printer,
    )?;
    let opts = audit.opts;
    let mut session = checked.connect(opts)?;
    let rt = super::shared::runtime()?;
    let authorized = rt.block_on(session.authorize());
    let identity = session.report().identity.clone();
    super::shared::journal_refused(authorized, &audit, identity.clone(), printer)?;
    if args.from_archive.is_some() && args.to == redrive::FAILED_CONSUMER {
        let refused: Result<(), driver::RedriveError> = Err(driver::RedriveError::Refused(
            format!(
                "--from-archive with --to {}: an archive replay publishes to one destination, and choosing each message's failed consumer from the archive is not built yet. Replay with --to source or --to NAME; nothing was published",
                redrive::FAILED_CONSUMER
            ),
        ));
        super::shared::journal_refused(refused, &audit, identity.clone(), printer)?;
    }
    if args.from_archive.is_some() && args.transform.is_some() {
        let refused: Result<(), driver::RedriveError> = Err(driver::RedriveError::Refused(
            "--from-archive with --transform: a replay publishes the archived messages as they were written; repairing them on the way is not built yet. Replay without --transform, or redrive from the queue; nothing was published".into(),
        ));
        super::shared::journal_refused(refused, &audit, identity.clone(), printer)?;
    }
    let fanout = rt.block_on(session.check_fanout());
    super::shared::journal_refused(fanout, &audit, identity, printer)?;
    if let Some(place) = &args.from_archive {
        return from_archive(session, place, args, &audit, &rt, printer);
    }

    if args.dry_run {
        let report = rt.block_on(session.dry_run())?;
        let journaled = journal(&report, &audit, &rt, printer);
        print(&report, args.format, printer);
        return Ok(if journaled { 0 } else { 1 });
    }

    let depth = rt.block_on(session.depth());
    if !args.yes && !confirm(&session, args.limit, depth, printer)? {
        printer.err("Redrive cancelled; nothing was moved.");
        return Ok(1);
    }
    // Before the first move: a run killed on the way leaves this record at least.
    let started = redrive::Started::of(session.report(), driver::Purpose::Redrive.verb());
    if !super::shared::record(
        &rt,
        &audit,
        "started",
        &started,
        "a redrive about to start: nothing moved",
        printer,
    ) {
        printer.err("Redrive not started: its start could not be recorded; nothing was moved.");
        return Ok(1);
    }
    let report = rt.block_on(session.run(depth, printer))?;
    if let Some(e) = &report.error {
        printer.err(&format!(
            "{} {e}",
            printer.paint_err("error:", Style::Error)
        ));
    }
    let journaled = journal(&report, &audit, &rt, printer);
    print(&report, args.format, printer);
    Ok(if !journaled {
        1
    } else if report.error.is_none() && report.unhealthy.is_some() {
        EXIT_UNHEALTHY
    } else if driver::complete(&report) {
        0
    } else {
        1
    })
}

/// `--from-archive`: the archive read and selected, a dry run or (confirmed) the replay.
fn from_archive(
    session: Session<'_>,
    place: &crate::archive::Place,
    args: &RedriveArgs,
    audit: &super::shared::Audit<'_>,
    rt: &tokio::runtime::Runtime,
    printer: &Printer,
) -> anyhow::Result<u8> {
    let identity = session.report().identity.clone();
    let prepared = super::shared::journal_refused(
        rt.block_on(replay::prepare(
            session,
            place,
            replay::Options {
                read_unlisted: args.read_unlisted,
                again: args.replay_again,
                journal: args.audit_log.as_deref(),
            },
        )),
        audit,
        identity,
        printer,
    )?;
    if args.dry_run {
        let report = prepared.dry_run();
        let journaled = journal(&report, audit, rt, printer);
        print(&report, args.format, printer);
        return Ok(if journaled { 0 } else { 1 });
    }
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            anyhow::bail!(
                "refusing to publish messages without confirmation: stdin is not a terminal; pass --yes (and see first with --dry-run)"
            );
        }
        printer.err(&format!(
            "Publish {} archived message(s) from {} to `{}` (target {})? Only `yes` is accepted: ",
            prepared.count(),
            prepared.place(),
            prepared.destination(),
            prepared.target()
        ));
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if answer.trim() != "yes" {
            printer.err("Replay cancelled; nothing was published.");
            return Ok(1);
        }
    }
    // Before the first publish: a replay killed on the way leaves this record at least.
    let started = redrive::Started::of(prepared.report(), driver::Purpose::Redrive.verb());
    if !super::shared::record(
        rt,
        audit,
        "started",
        &started,
        "a replay about to start: nothing published",
        printer,
    ) {
        printer.err("Replay not started: its start could not be recorded; nothing was published.");
        return Ok(1);
    }
    let report = rt.block_on(prepared.run(printer))?;
    if let Some(e) = &report.error {
        printer.err(&format!(
            "{} {e}",
            printer.paint_err("error:", Style::Error)
        ));
    }
    let journaled = journal(&report, audit, rt, printer);
    print(&report, args.format, printer);
    Ok(if journaled && replay::complete(&report) {
        0
    } else {
        1
    })
}

/// The report to wherever the run's audit records go ([`super::shared::record`]), with what
/// moved: `false` when it did not land in one of them.
fn journal(
    report: &Report,
    audit: &super::shared::Audit<'_>,
    rt: &tokio::runtime::Runtime,
    printer: &Printer,
) -> bool {
    let what = format!(
        "{} moved from {} to {}{}",
        report.moved,
        report.dead_letter,
        report.destination.name,
        if report.dry_run { ", a dry run" } else { "" }
    );
    super::shared::record(rt, audit, "redrive", report, &what, printer)
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

/// On a terminal: the count and the destination, and `yes` to go on. Without one: refused.
fn confirm(
    session: &Session<'_>,
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
        session.dead_letter(),
        session.destination().name,
        session.target()
    ));
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(answer.trim() == "yes")
}
