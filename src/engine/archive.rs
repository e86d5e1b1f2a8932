//! The archive driver (`dlqctl archive`, issue 35): the redrive driver's channel checks,
//! identity and `operations` guards and movers, with the chosen messages going to an
//! archive ([`crate::archive::sink::Sink`]) instead of a queue, and the archive's own report.
//! It names no backend.
//!
//! `older_than` comes from the flags only; `--due` (`deadLetter.archive.before`, the
//! retention's horizon) is to set it from the spec, through [`Ask::older_than`].

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use super::redrive::{self as redrive_driver, Purpose, RedriveError, Session};
use crate::archive::sink::Sink;
use crate::archive::store::Store;
use crate::archive::{MANIFEST_KIND, Manifest, ObjectEntry, Place};
use crate::backend::ConnectOptions;
use crate::printer::Printer;
use crate::redrive::{self, MovedIds, SelectionRecord, WouldMove};
use crate::spec::model::Target;
use crate::spec::resolve::Resolved;

/// What `dlqctl archive` was asked, as values.
#[derive(Debug, Clone)]
pub struct Ask {
    pub to: Place,
    pub limit: Option<u64>,
    pub classes: Vec<String>,
    /// `--older-than` (or, later, what `--due` derives from the spec).
    pub older_than: Option<std::time::Duration>,
    pub delete: bool,
    pub dry_run: bool,
    pub rate: Option<f64>,
    pub reason: Option<String>,
    pub gzip: bool,
}

pub const KIND: &str = "dlqctl/archive";

/// One object as the report lists it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReport {
    pub name: String,
    pub records: u64,
    pub sha256: String,
}

/// The final report (and the audit record with `--format json`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    #[serde(rename = "format_version")]
    pub format_version: u32,
    pub kind: &'static str,
    pub channel: String,
    pub target: String,
    pub backend: &'static str,
    pub dead_letter: String,
    pub role: &'static str,
    /// `--to`, as given.
    pub to: String,
    pub dry_run: bool,
    pub delete: bool,
    pub selection: SelectionRecord,
    pub examined: u64,
    pub archived: u64,
    pub not_selected: u64,
    /// Removed from the dead-letter queue (`--delete`), after their object was listed.
    pub deleted: u64,
    /// Archived, and meant to be removed, but still in the queue (a removal that failed): the
    /// next run archives them again.
    pub possibly_duplicated: u64,
    pub left_in_dead_letter: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_basis: Option<&'static str>,
    /// The run's folder in the archive (`<channel>/<run>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The run's manifest, when it wrote any object.
    pub manifest: Option<String>,
    pub objects: Vec<ObjectReport>,
    pub interrupted: bool,
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub incomplete: Vec<String>,
    pub started_at: String,
    pub ended_at: String,
    pub operator: String,
    pub identity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_unknown: Option<String>,
    pub reason: Option<String>,
    /// Dry run: what would be archived.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub would_archive: Option<WouldMove>,
    /// What was archived, by id (a digest always, the ids up to [`redrive::MAX_IDS`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived_ids: Option<MovedIds>,
    /// `--delete`: how long what left the dead-letter queue had waited there (the journal's
    /// time to resolution counts it as resolved: it left the queue for the archive).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_in_dead_letter: Option<redrive::Waited>,
}

/// The redrive driver's request for this archive: from the DLQ, "to" its main queue (which
/// the movers check exists, and never write to: the sink takes the messages instead).
pub fn redrive_ask(ask: &Ask) -> redrive_driver::Ask {
    redrive_driver::Ask {
        limit: ask.limit,
        classes: ask.classes.clone(),
        older_than: ask.older_than,
        from: "dead-letter".into(),
        to: "source".into(),
        native: false,
        dry_run: ask.dry_run,
        rate: ask.rate,
        samples: 3,
        scan: crate::status::MAX_SCAN,
        reason: ask.reason.clone(),
        allow_unowned: false,
        gates: super::gate::Gates::default(),
        batches: redrive_driver::Batches::default(),
        verify: None,
        purpose: Purpose::Archive,
    }
}

/// Checks and connects (nothing read yet), as a redrive does.
pub fn connect<'a>(
    r: &Resolved,
    targets: &BTreeMap<String, Target>,
    ask: &'a redrive_driver::Ask,
    opts: ConnectOptions,
) -> Result<Session<'a>, RedriveError> {
    redrive_driver::check(r, targets, ask)?.connect(opts)
}

/// The dry run: what would be archived; nothing is read out of the queue, nothing written.
pub async fn dry_run(session: Session<'_>, ask: &Ask) -> Result<Report, RedriveError> {
    let r = session.dry_run().await?;
    Ok(report(&r, ask, None, None))
}

/// The run: the store opened, the movers writing into it batch by batch, the manifest
/// finished, the report made.
pub async fn run(
    session: Session<'_>,
    ask: &Ask,
    depth: Option<u64>,
    printer: &Printer,
) -> Result<Report, RedriveError> {
    let store = Store::open(&ask.to)
        .await
        .map_err(|e| RedriveError::Refused(format!("{e}; nothing was read or moved")))?;
    let start = session.report();
    let r = session.resolved();
    let started_ms = crate::status::now_ms();
    let manifest = Manifest {
        format_version: crate::archive::FORMAT_VERSION,
        kind: MANIFEST_KIND.to_owned(),
        channel: r.channel.clone(),
        target: r.target.clone(),
        backend: r.backend.as_str().to_owned(),
        from: r.dead_letter.clone(),
        role: r.dead_letter_role.as_str().to_owned(),
        run: crate::archive::run_name(started_ms, std::process::id()),
        selection: serde_json::to_value(&start.selection).unwrap_or_default(),
        delete: ask.delete,
        complete: false,
        records: 0,
        objects: Vec::new(),
        started_at: crate::archive::rfc3339(started_ms),
        ended_at: None,
        operator: start.operator.clone(),
        identity: start.identity.clone(),
        reason: ask.reason.clone(),
    };
    let sink = Arc::new(Sink::new(
        store,
        manifest,
        r.envelope.clone(),
        ask.delete,
        ask.gzip,
    ));
    let mut done = session
        .run_with(depth, printer, Some(Arc::clone(&sink)))
        .await?;
    if let Err(e) = sink.finish(redrive_driver::complete(&done)).await {
        done.error.get_or_insert(format!(
            "the manifest could not be marked complete: {e} (what it lists is archived all the same)"
        ));
    }
    let written = sink.manifest().await;
    Ok(report(&done, ask, Some(&sink), Some(&written)))
}

fn report(
    r: &redrive::Report,
    ask: &Ask,
    sink: Option<&Sink>,
    manifest: Option<&Manifest>,
) -> Report {
    let objects: &[ObjectEntry] = manifest.map_or(&[], |m| &m.objects);
    Report {
        format_version: 1,
        kind: KIND,
        channel: r.channel.clone(),
        target: r.target.clone(),
        backend: r.backend,
        dead_letter: r.dead_letter.clone(),
        role: r.role,
        to: ask.to.to_string(),
        dry_run: r.dry_run,
        delete: ask.delete,
        selection: SelectionRecord {
            max_redrives: 0,
            ..r.selection.clone()
        },
        examined: r.examined,
        archived: r.moved,
        not_selected: r.not_selected,
        deleted: if ask.delete {
            r.moved.saturating_sub(r.possibly_duplicated)
        } else {
            0
        },
        possibly_duplicated: r.possibly_duplicated,
        left_in_dead_letter: r.left_in_dead_letter,
        left_basis: r.left_basis,
        run: sink.map(|s| s.folder().to_owned()),
        manifest: sink
            .filter(|_| !objects.is_empty())
            .map(Sink::manifest_name),
        objects: objects
            .iter()
            .map(|o| ObjectReport {
                name: o.name.clone(),
                records: o.records,
                sha256: o.sha256.clone(),
            })
            .collect(),
        interrupted: r.interrupted,
        error: r.error.clone(),
        incomplete: r.incomplete.clone(),
        started_at: r.started_at.clone(),
        ended_at: r.ended_at.clone(),
        operator: r.operator.clone(),
        identity: r.identity.clone(),
        identity_unknown: r.identity_unknown.clone(),
        reason: r.reason.clone(),
        would_archive: r.would_move.clone(),
        archived_ids: r.moved_ids.clone(),
        time_in_dead_letter: r
            .time_in_dead_letter
            .clone()
            .filter(|_| ask.delete && !r.dry_run)
            .map(|mut w| {
                // Archived but not removed: still waiting, though counted as chosen.
                w.exact &= r.possibly_duplicated == 0;
                w
            }),
    }
}

/// Whether a finished run did all it set out to (else `dlqctl archive` exits 1).
pub fn complete(r: &Report) -> bool {
    r.error.is_none() && !r.interrupted && r.incomplete.is_empty()
}

/// The report for people.
pub fn human(r: &Report) -> String {
    let mut out = String::new();
    let from = if r.role == "dead-letter" {
        r.dead_letter.clone()
    } else {
        format!("{} ({})", r.dead_letter, r.role)
    };
    if let Some(w) = &r.would_archive {
        out.push_str(&format!(
            "Dry run: {} message{} would be archived from {from} to {}{}{}.\n",
            w.count,
            if w.count == 1 { "" } else { "s" },
            r.to,
            if r.delete { " and deleted" } else { "" },
            if w.exact {
                ""
            } else {
                " (among the messages read; more may match)"
            }
        ));
        if !w.by_error_class.is_empty() {
            let classes: Vec<String> = w
                .by_error_class
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            out.push_str(&format!("  classes   {}\n", classes.join(", ")));
        }
        out.push_str("Nothing was archived or removed.\n");
        return out;
    }
    out.push_str(&format!(
        "Archive {}: {} archived from {from} to {}; {} deleted; {} not selected; {} possibly duplicated",
        if r.error.is_some() {
            "stopped"
        } else if r.interrupted {
            "interrupted"
        } else if !r.incomplete.is_empty() {
            "incomplete"
        } else {
            "complete"
        },
        r.archived,
        r.to,
        r.deleted,
        r.not_selected,
        r.possibly_duplicated
    ));
    if let Some(left) = r.left_in_dead_letter {
        if r.left_basis == Some(redrive::STATISTICS) {
            out.push_str(&format!(
                "; about {left} left in the dead-letter queue (the broker's statistics, which may lag)"
            ));
        } else {
            out.push_str(&format!("; {left} left in the dead-letter queue"));
        }
    }
    out.push_str(".\n");
    if let Some(m) = &r.manifest {
        out.push_str(&format!("  manifest  {m}\n"));
    }
    for o in &r.objects {
        out.push_str(&format!(
            "  object    {}  {} record{}  sha256 {}\n",
            o.name,
            o.records,
            if o.records == 1 { "" } else { "s" },
            o.sha256
        ));
    }
    if !r.delete && r.archived > 0 {
        out.push_str("  kept in the dead-letter queue (no --delete)\n");
    }
    for why in &r.incomplete {
        out.push_str(&format!("  not complete: {why}\n"));
    }
    out
}

/// The audit record.
pub fn json(r: &Report) -> String {
    let mut t = serde_json::to_string_pretty(r).unwrap_or_else(|_| "{}".into());
    t.push('\n');
    t
}
