//! The archive driver (`dlqctl archive`, issue 35): the redrive driver's channel checks,
//! identity and `operations` guards and movers, with the chosen messages going to an
//! archive ([`crate::archive::sink::Sink`]) instead of a queue, and the archive's own report.
//! It names no backend.
//!
//! `older_than` comes from `--older-than`, or from `--due` ([`due`]): the dead-letter queue's
//! retention minus `deadLetter.archive.before`, each message's age then counted from where
//! the backend's retention counts ([`AgeFrom::Retention`]), not from its dead-lettering.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use super::redrive::{self as redrive_driver, Purpose, RedriveError, Session};
use crate::archive::sink::Sink;
use crate::archive::store::Store;
use crate::archive::{MANIFEST_KIND, Manifest, ObjectEntry, Place};
use crate::backend::ConnectOptions;
use crate::printer::Printer;
use crate::redrive::{self, AgeFrom, MovedIds, SelectionRecord, WouldMove};
use crate::spec::duration::Duration;
use crate::spec::model::Target;
use crate::spec::resolve::{DEFAULT_ARCHIVE_BEFORE, Due, Resolved};

/// What `dlqctl archive` was asked, as values.
#[derive(Debug, Clone)]
pub struct Ask {
    pub to: Place,
    pub limit: Option<u64>,
    pub classes: Vec<String>,
    /// `--older-than`, or what `--due` derives from the spec ([`due`]).
    pub older_than: Option<std::time::Duration>,
    /// Where `older_than` counts from: the dead-lettering (`--older-than`), or the
    /// retention's start (`--due`).
    pub age: AgeFrom,
    /// `--due`: the retention and `before` the horizon came from, for the report.
    pub due: Option<DueRecord>,
    pub delete: bool,
    pub dry_run: bool,
    pub rate: Option<f64>,
    pub reason: Option<String>,
    pub gzip: bool,
    /// `--group`, repeatable.
    pub groups: Vec<String>,
    /// `--where`, compiled.
    pub where_: Option<crate::status::selector::Where>,
}

pub const KIND: &str = "dlqctl/archive";

/// What `--due` selected by, in the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DueRecord {
    /// The dead-letter queue's retention, as the spec resolves it.
    pub retention_seconds: f64,
    pub before_seconds: f64,
    /// `deadLetter.archive.before`, or `default` (no `deadLetter.archive`, `--to` given).
    pub before_from: &'static str,
    /// What the age counts from: `retention` (the backend's start of the retention).
    pub age_from: &'static str,
}

/// What `--due` makes of a channel.
#[derive(Debug, Clone, PartialEq)]
pub enum DueAnswer {
    /// Archive what is older than `older_than` (retention − before), aged by the retention.
    Select {
        older_than: std::time::Duration,
        record: DueRecord,
    },
    /// Nothing is ever due: the sentence that says why.
    Never(String),
    /// What is due cannot be told: the error that says why and what to write.
    Unknown(String),
}

/// `--due` for a channel: its dead-letter queue's retention (`deadLetter.retention` or
/// `discard.after`, else the backend's default as `plan` writes it) minus `before`
/// (`deadLetter.archive.before`, else [`DEFAULT_ARCHIVE_BEFORE`]).
pub fn due(r: &Resolved) -> DueAnswer {
    let (before, before_from) = match &r.archive {
        Some(a) => (a.before, "deadLetter.archive.before"),
        None => (DEFAULT_ARCHIVE_BEFORE, "default"),
    };
    match r.due(DEFAULT_ARCHIVE_BEFORE) {
        Due::OlderThan(horizon) => DueAnswer::Select {
            older_than: std::time::Duration::from_millis(horizon.as_millis()),
            record: DueRecord {
                retention_seconds: r
                    .dead_letter_retention
                    .map_or(0.0, |d| d.as_millis() as f64 / 1000.0),
                before_seconds: before.as_millis() as f64 / 1000.0,
                before_from,
                age_from: "retention",
            },
        },
        Due::Never => DueAnswer::Never(format!(
            "Nothing is due: `{}` (channel `{}`) keeps its dead letters until they are consumed (no retention), so none ever expires.",
            r.dead_letter, r.channel
        )),
        Due::Unknown => DueAnswer::Unknown(format!(
            "--due: channel `{}` writes no retention for `{}`, so the broker's default (`log.retention.ms`) decides when its dead letters go, and dlqctl does not read it; write it as `deadLetter.retention` (or `discard.after`), or archive by age with --older-than",
            r.channel, r.dead_letter
        )),
    }
}

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
    /// `--due`: the retention and `before` behind `selection.olderThanSeconds`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due: Option<DueRecord>,
    pub examined: u64,
    pub archived: u64,
    pub not_selected: u64,
    /// `--where` could not be evaluated on these (not selected).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub where_failures: Option<crate::status::WhereFailures>,
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
        age: ask.age,
        from: "dead-letter".into(),
        to: "source".into(),
        native: false,
        dry_run: ask.dry_run,
        rate: ask.rate,
        samples: 3,
        scan: crate::status::MAX_SCAN,
        reason: ask.reason.clone(),
        allow_unowned: false,
        allow_fanout: false,
        gates: super::gate::Gates::default(),
        batches: redrive_driver::Batches::default(),
        verify: None,
        purpose: Purpose::Archive,
        groups: ask.groups.clone(),
        where_: ask.where_.clone(),
        transform: None,
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

/// `--due` counts from the spec's retention: refused when the live dead-letter queue keeps
/// its messages otherwise — `plan` would change its retention (a hand edit, a policy of
/// dlqctl's changed by hand, a key deleted so the broker's default applies), or it does not
/// exist yet — since the broker drops dead letters by its own clock, not the spec's. Reads
/// what `plan` reads for this one channel; changes nothing.
pub async fn due_drift(
    r: &Resolved,
    targets: &BTreeMap<String, Target>,
    opts: ConnectOptions,
) -> Result<(), RedriveError> {
    use crate::resource::Role;
    let planned = super::plan::plan(
        std::slice::from_ref(r),
        targets,
        opts,
        super::PlanOptions::default(),
    )
    .await?;
    for c in &planned.plan.changes {
        if !matches!(
            c.role,
            Role::DeadLetter | Role::DeadLetterPolicy | Role::DeadLetterSubscription
        ) {
            continue;
        }
        let Some(f) = c
            .fields
            .iter()
            .find(|f| crate::backend::is_retention(c, &f.key))
        else {
            continue;
        };
        let shown = |v: &Option<serde_json::Value>| {
            v.as_ref().map_or_else(
                || "(absent)".to_owned(),
                |v| crate::status::safe(&v.to_string()),
            )
        };
        return Err(RedriveError::Refused(format!(
            "--due: the live {} `{}` has {} {} where the spec has {}, so it drops dead letters on another clock than the one --due counts; run `dlqctl apply` first (`dlqctl plan` shows it), or archive with --older-than; nothing was read or moved",
            c.resource.kind.as_str(),
            c.resource.name,
            f.key,
            shown(&f.old),
            shown(&f.new)
        )));
    }
    Ok(())
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
    // The target's HMAC key, read before anything is read or moved (issue 52, L4).
    let key = crate::integrity::key(&r.target, &session.checked.target)
        .map_err(|e| RedriveError::Refused(format!("{e}; nothing was read or moved")))?;
    // Temporaries a writer killed part-way left (issue 52, L2); a writer at work renames
    // its own within seconds.
    store.clean_temporaries(&r.channel, std::time::Duration::from_secs(600));
    let started_ms = crate::status::now_ms();
    let manifest = Manifest {
        format_version: crate::archive::FORMAT_VERSION,
        kind: MANIFEST_KIND.to_owned(),
        channel: r.channel.clone(),
        target: r.target.clone(),
        backend: r.backend.as_str().to_owned(),
        from: r.dead_letter.clone(),
        role: r.dead_letter_role.as_str().to_owned(),
        run: crate::archive::run_name(started_ms, std::process::id(), crate::archive::nonce()),
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
        hmac_sha256: None,
    };
    let sink_store = store.clone();
    let sink = Arc::new(
        Sink::new(store, manifest, r.envelope.clone(), ask.delete, ask.gzip).with_key(key),
    );
    let channel = r.channel.clone();
    let backend = r.backend.as_str();
    let mut done = session
        .run_with(depth, printer, Some(Arc::clone(&sink)))
        .await?;
    // Runs of this channel that did not end shortly before this one started: what they
    // read may still be held by them, unseen by this run (issue 52, second review: a
    // rerun after a killed Pub/Sub run said "complete" while its leases ran).
    let hold_ms = sink.hold_ms();
    let own = sink.manifest().await.run;
    let unfinished = if hold_ms > 0 {
        crate::archive::read::unfinished_within(&sink_store, &channel, hold_ms, started_ms)
            .await
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    for (run, at) in unfinished.into_iter().filter(|(run, _)| *run != own) {
        done.incomplete.push(format!(
            "archive run `{run}` of this channel did not end complete (killed, stopped, or still running) and last wrote its manifest at {}, less than {} s before this run started: messages it read may still be {}, and this run did not see them; how many is not known ({}). Run again after {}",
            crate::archive::rfc3339(at),
            hold_ms / 1000,
            held_what(backend),
            if backend == "pubsub" {
                "Pub/Sub's API counts no leased messages"
            } else {
                "SQS counts messages in flight, not whose they are"
            },
            crate::archive::rfc3339(at + hold_ms),
        ));
    }
    if let Err(e) = sink.finish(redrive_driver::complete(&done)).await {
        done.error.get_or_insert(format!(
            "the manifest could not be marked complete: {e} (what it lists is archived all the same)"
        ));
    }
    let written = sink.manifest().await;
    Ok(report(&done, ask, Some(&sink), Some(&written)))
}

/// What holds a message a run read, by backend (the movers that say how long:
/// [`Sink::held_for`]).
fn held_what(backend: &str) -> &'static str {
    match backend {
        "pubsub" => "leased to it until the dead-letter subscription's ack deadline",
        _ => "invisible until the redrive hold's visibility timeout",
    }
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
        due: ask.due.clone(),
        examined: r.examined,
        archived: r.moved,
        not_selected: r.not_selected,
        where_failures: r.where_failures.clone(),
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
        out.push_str(&due_line(r));
        if !w.by_error_class.is_empty() {
            let classes: Vec<String> = w
                .by_error_class
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            out.push_str(&format!("  classes   {}\n", classes.join(", ")));
        }
        if let Some(f) = &r.where_failures {
            out.push_str(&redrive::where_failures_line(f));
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
    out.push_str(&due_line(r));
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
    if let Some(f) = &r.where_failures {
        out.push_str(&redrive::where_failures_line(f));
    }
    out
}

/// `  due       older than 13d (retention 14d − before 1d, aged from the retention's start)`.
fn due_line(r: &Report) -> String {
    let Some(d) = &r.due else {
        return String::new();
    };
    let shown = |s: f64| Duration::from_millis((s * 1000.0).round() as u64).to_string();
    format!(
        "  due       older than {} (retention {} − before {}{}, aged from the retention's start)\n",
        shown(r.selection.older_than_seconds.unwrap_or(0.0)),
        shown(d.retention_seconds),
        shown(d.before_seconds),
        if d.before_from == "default" {
            ", dlqctl's default"
        } else {
            ""
        }
    )
}

/// The audit record.
pub fn json(r: &Report) -> String {
    let mut t = serde_json::to_string_pretty(r).unwrap_or_else(|_| "{}".into());
    t.push('\n');
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(backend: &str, dead_letter: &str) -> Resolved {
        crate::backend::resolved_example(
            &format!(
                "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: app.orders}}\nspec:\n  target: t\n  retry: {{maxAttempts: 5}}\n  deadLetter: {dead_letter}\n"
            ),
            "t",
            serde_json::json!({"backend": backend, "region": "us-east-1", "project": "p"}),
        )
    }

    /// Issue 35: what `--due` asks of the movers, per backend: the horizon as a duration
    /// and the age from the retention's start; nothing on a queue that never expires; a
    /// refusal where the retention is the broker's.
    #[test]
    fn due_selects_by_the_retention_minus_before() {
        let r = resolved("sqs", "{archive: {to: s3://b/p, before: 1d}}");
        assert_eq!(
            due(&r),
            DueAnswer::Select {
                older_than: std::time::Duration::from_secs(13 * 86_400),
                record: DueRecord {
                    retention_seconds: 14.0 * 86_400.0,
                    before_seconds: 86_400.0,
                    before_from: "deadLetter.archive.before",
                    age_from: "retention",
                },
            }
        );
        // `--due --to` without a declared archive: the default `before`.
        let DueAnswer::Select { older_than, record } = due(&resolved("pubsub", "{}")) else {
            panic!("pubsub has a retention");
        };
        assert_eq!(older_than, std::time::Duration::from_secs(5 * 86_400));
        assert_eq!(record.before_from, "default");
        let DueAnswer::Never(line) = due(&resolved("rabbitmq", "{archive: {to: a}}")) else {
            panic!("a RabbitMQ DLQ without a TTL never expires");
        };
        assert_eq!(
            line,
            "Nothing is due: `app.orders.dlq` (channel `app.orders`) keeps its dead letters until they are consumed (no retention), so none ever expires."
        );
        assert!(matches!(
            due(&resolved("kafka", "{archive: {to: a}}")),
            DueAnswer::Unknown(why) if why.contains("log.retention.ms")
        ));
    }
}
