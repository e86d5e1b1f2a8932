//! The replay driver (`redrive --from-archive`): the archive read and checked whole
//! (`archive::read`: manifests, object checksums, record checksums, duplicates across runs),
//! the records selected as a redrive selects dead letters (`--class`, `--older-than`,
//! `maxRedrives` on the archived copy's `dlq-redrive-count`, `--limit`), then a dry run that
//! says what would be published, or the backend's replay door publishing them, confirmed,
//! with Ctrl-C watched, all written into the redrive [`Report`] (`from: archive`). It names
//! no backend: the publishing is asked of `crate::backend`.
//!
//! The channel, the guards (requireReason, allowedOperators) and the report come from the
//! redrive driver ([`super::redrive`]): a replay is a redrive whose source is an archive.
//! Nothing is taken out of any queue, and no archived object changes: the replay adds its
//! ledger (`<channel>/replays/`, [`crate::archive::replayed`]), before it publishes and once
//! it ended, and skips what an earlier replay's ledger says was published (issue 52, M10).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::redrive::{RedriveError, Session, now_text};
use crate::archive::read::{ArchiveRead, MAX_UNLISTED};
use crate::archive::replayed::{self, Ledger};
use crate::archive::store::Store;
use crate::archive::{Place, parse_rfc3339};
use crate::backend::Replayer;
use crate::printer::Printer;
use crate::redrive::replay::{Job, decide};
use crate::redrive::{Decision, MovedIds, Report, Tally, WouldMove};
use crate::status::Message;

/// A replay read and selected, nothing published yet.
pub struct Prepared<'a> {
    session: Session<'a>,
    messages: Vec<Message>,
    /// Each message's [`replayed::reference`], in the same order.
    refs: Vec<String>,
    /// Each message: whether an earlier replay to this destination published it or may
    /// have, and whether it comes from a copy run (F2, F5).
    marks: Vec<(bool, bool)>,
    store: Store,
    /// The unfinished ledgers read before this replay wrote its own (F1).
    known: std::collections::HashSet<String>,
}

/// What a replay was asked besides the redrive's selection.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    /// `--read-unlisted`: read the objects no manifest lists too (else such an archive is
    /// refused).
    pub read_unlisted: bool,
    /// `--replay-again`: publish what an earlier replay published, or may have.
    pub again: bool,
    /// `--audit-log FILE`: the journal the archive runs wrote too; every manifest is checked
    /// against what they recorded (F6).
    pub journal: Option<&'a std::path::Path>,
}

/// Reads the archive at `place` for the session's channel and selects what would be
/// published. An archive that does not check is refused whole, naming what failed.
pub async fn prepare<'a>(
    mut session: Session<'a>,
    place: &Place,
    opts: Options<'_>,
) -> Result<Prepared<'a>, RedriveError> {
    if let Place::Dir(p) = place
        && !p.is_dir()
    {
        return Err(RedriveError::Refused(format!(
            "--from-archive {}: no such directory; nothing was published",
            p.display()
        )));
    }
    let refused = |e: String| RedriveError::Refused(format!("{e}; nothing was published"));
    let store = Store::open(place)
        .await
        .map_err(|e| refused(e.to_string()))?;
    let r = &session.checked.r;
    // With the target's HMAC key, only an archive whose HMACs verify is read (issue 52, L4).
    let key = crate::integrity::key(&r.target, &session.checked.target).map_err(refused)?;
    let archived =
        crate::archive::read::read_keyed(&store, &r.channel, opts.read_unlisted, key.as_ref())
            .await
            .map_err(refused)?;
    if !archived.unlisted.is_empty() && !opts.read_unlisted {
        let n = archived.unlisted.len();
        let mut names: Vec<&str> = archived
            .unlisted
            .iter()
            .take(MAX_UNLISTED)
            .map(String::as_str)
            .collect();
        if n > MAX_UNLISTED {
            names.push("…");
        }
        return Err(refused(format!(
            "{place}: {n} object{s} of channel `{}` {are} listed by no manifest: {}. A manifest missing, emptied or replaced would leave archived dead letters there that are in no queue any more; restore the manifest, or pass --read-unlisted to replay their records too (checked against their own sha256 only)",
            r.channel,
            names.join(", "),
            s = if n == 1 { "" } else { "s" },
            are = if n == 1 { "is" } else { "are" },
        )));
    }
    // Every manifest against what the archive runs journaled (F6): a manifest put back from
    // an older copy lists fewer objects than its run wrote.
    if let Some(path) = opts.journal
        && let Ok(text) = std::fs::read_to_string(path)
    {
        let wrong = crate::archive::read::against_journal(
            &archived,
            &text,
            &path.display().to_string(),
            &place.to_string(),
            &r.channel,
            &r.target,
        );
        if !wrong.is_empty() {
            return Err(refused(format!(
                "the archive does not hold what the journal says was archived into it: {}. Archived dead letters that are in no queue any more would not be replayed; restore the manifest (or the run's folder) first",
                wrong.join("; ")
            )));
        }
    }
    let ledgers = replayed::read(
        &store,
        &r.channel,
        &r.target,
        &session.checked.to.name,
        key.as_ref(),
    )
    .await
    .map_err(refused)?;
    let select = &session.checked.select;
    let role = r.dead_letter_role.as_str();
    let now = crate::status::now_ms();
    let mut account = ArchiveRead {
        place: place.to_string(),
        runs: archived.runs,
        objects: archived.objects,
        read: archived.read,
        duplicates: archived.duplicates,
        differing: archived.differing,
        possibly_duplicated: archived.possibly_duplicated,
        unlisted: archived.unlisted.len() as u64,
        unlisted_read: archived.unlisted_read,
        unlisted_objects: archived
            .unlisted
            .iter()
            .take(MAX_UNLISTED)
            .cloned()
            .collect(),
        pending: archived.pending.len() as u64,
        already_replayed: 0,
        ledger: None,
        elsewhere: 0,
        replayed_elsewhere: 0,
        replayed_again: 0,
        from_copy: 0,
        known_duplicates: 0,
    };
    // Records an earlier replay may or may not have published, by the ledger saying so.
    let mut unsure: BTreeMap<String, u64> = BTreeMap::new();
    let mut refs = Vec::new();
    // Each selected record: (replayed or unsure by an earlier replay here, from a copy run).
    let mut marks = Vec::new();
    let report = &mut session.report;
    let (mut messages, mut classes, mut ages) = (Vec::new(), BTreeMap::new(), Vec::new());
    for rec in &archived.records {
        if rec.target != r.target || rec.role != role {
            account.elsewhere += 1;
            continue;
        }
        let m = rec.message().map_err(refused)?;
        report.examined += 1;
        let reference = replayed::reference(rec);
        // The names of the record in a ledger: its own, and its byte copies' (F7).
        let names = replayed::references(rec);
        let replayed_before = names.iter().any(|n| ledgers.replayed.contains(n));
        let unsure_by = names.iter().find_map(|n| ledgers.unsure.get(n));
        if !opts.again && replayed_before {
            account.already_replayed += 1;
            continue;
        }
        match decide(select, rec, &m, now) {
            Decision::Move if select.limit.is_none_or(|l| (messages.len() as u64) < l) => {
                *classes.entry(rec.envelope.class.clone()).or_insert(0) += 1;
                let since = m
                    .dead_lettered_ms
                    .or_else(|| {
                        rec.envelope
                            .first_failure_at
                            .as_deref()
                            .and_then(parse_rfc3339)
                    })
                    .or(m.published_ms);
                ages.extend(since.map(|t| (now - t).max(0) as f64 / 1000.0));
                if !opts.again
                    && let Some(at) = unsure_by
                {
                    *unsure.entry(at.clone()).or_insert(0) += 1;
                }
                let before = replayed_before || unsure_by.is_some();
                if !before && names.iter().any(|n| ledgers.elsewhere.contains(n)) {
                    account.replayed_elsewhere += 1;
                }
                marks.push((before, archived.copy_runs.contains(&rec.run)));
                messages.push(m);
                refs.push(reference);
            }
            Decision::Move => {}
            Decision::NotSelected => report.not_selected += 1,
            Decision::AtLimit => report.skipped_at_max_redrives += 1,
            // A replay runs no `--transform` (refused before it starts).
            Decision::TransformFailed => report.not_selected += 1,
        }
    }
    if !unsure.is_empty() {
        let n: u64 = unsure.values().sum();
        let by: Vec<String> = unsure
            .iter()
            .map(|(at, n)| format!("{n} by {at}"))
            .collect();
        return Err(refused(format!(
            "{n} of the records to replay may or may not have been published by a replay before this one, which was killed, lost an answer, or may still be running ({}): look in `{}` first (and wait for a replay still running to end), then pass --replay-again to publish every selected record again (those replayed before included)",
            by.join(", "),
            session.checked.to.name
        )));
    }
    report.from = Some("archive");
    report.dead_letter = place.to_string();
    report.archive = Some(account);
    if report.dry_run {
        report.would_move = Some(WouldMove {
            count: messages.len() as u64,
            exact: true,
            by_error_class: classes,
            oldest_age_seconds: ages.iter().copied().reduce(f64::max),
            newest_age_seconds: ages.iter().copied().reduce(f64::min),
            groups: Vec::new(),
            samples: Vec::new(),
        });
    }
    report.where_failures = select.where_.as_ref().and_then(|w| w.failures());
    Ok(Prepared {
        session,
        messages,
        refs,
        marks,
        store,
        known: ledgers.unfinished,
    })
}

impl Prepared<'_> {
    /// How many messages a run would publish.
    pub fn count(&self) -> u64 {
        self.messages.len() as u64
    }

    /// Where they would go.
    pub fn destination(&self) -> &str {
        &self.session.checked.to.name
    }

    /// The archive they come from.
    pub fn place(&self) -> &str {
        &self.session.report.dead_letter
    }

    /// The channel's target.
    pub fn target(&self) -> &str {
        &self.session.checked.r.target
    }

    /// The report as it stands before anything is published (for the journal's `started`
    /// record).
    pub fn report(&self) -> &Report {
        &self.session.report
    }

    /// The dry run's report: what would be published; nothing is.
    pub fn dry_run(mut self) -> Report {
        self.session.report.ended_at = now_text();
        self.session.report
    }

    /// Publishes the selected messages through the backend's replay door. Ctrl-C or
    /// SIGTERM: nothing more after the batch in flight; a second one exits at once (130). A
    /// failure once publishing started is in the report, not an `Err`.
    pub async fn run(self, printer: &Printer) -> Result<Report, RedriveError> {
        let Prepared {
            mut session,
            messages,
            refs,
            marks,
            store,
            known,
        } = self;
        let checked = &session.checked;
        let replayer = Replayer::connect(session.reader.clone(), &checked.target)?;
        // The ledger first: a replay killed from here on leaves every record it set out to
        // publish named as unsure, for the next one to stop at.
        let started_ms = crate::status::now_ms();
        let mut ledger = Ledger {
            format_version: crate::archive::FORMAT_VERSION,
            kind: replayed::KIND.to_owned(),
            channel: checked.r.channel.clone(),
            target: checked.r.target.clone(),
            to: checked.to.name.clone(),
            run: crate::archive::run_name(started_ms, std::process::id(), crate::archive::nonce()),
            started_at: crate::archive::rfc3339(started_ms),
            ended_at: None,
            operator: session.report.operator.clone(),
            complete: false,
            replayed: Vec::new(),
            unsure: refs.clone(),
            hmac_sha256: None,
        };
        // Signed with the target's key, when it names one (the reading checked it is set).
        let key = crate::integrity::key(&checked.r.target, &checked.target)
            .map_err(RedriveError::Refused)?;
        if !messages.is_empty() {
            let at = ledger.write(&store, key.as_ref()).await.map_err(|e| {
                RedriveError::Refused(format!(
                    "the replay's ledger could not be written into the archive: {e}; nothing was published"
                ))
            })?;
            // Another replay of the channel started meanwhile (it read the ledgers before
            // this one's was written): refused, this ledger closed empty (issue 52 fixes,
            // F1). Of two started together at least one sees the other's ledger.
            let others = replayed::started_meanwhile(
                &store,
                &ledger.channel,
                &ledger.target,
                &ledger.key(),
                &known,
            )
            .await
            .map_err(|e| {
                RedriveError::Refused(format!(
                    "the replay ledgers could not be read again: {e}; nothing was published"
                ))
            })?;
            if !others.is_empty() {
                ledger.complete = true;
                ledger.unsure = Vec::new();
                ledger.ended_at = Some(crate::archive::rfc3339(crate::status::now_ms()));
                let closed = ledger.write(&store, key.as_ref()).await.err().map_or(String::new(), |e| {
                    format!(
                        " (this replay's own ledger {at} could not be closed: {e}; it names records as unsure that were not published)"
                    )
                });
                return Err(RedriveError::Refused(format!(
                    "another replay of this archive to `{}` started while this one did and has not finished: {}. It may still be running; nothing was published by this one{closed}. Run again once it ended: a replay continues where the last one stopped",
                    ledger.target,
                    others.join(", ")
                )));
            }
            if let Some(a) = session.report.archive.as_mut() {
                a.ledger = Some(at);
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Tally::default());
        let watcher = watch(Arc::clone(&stop), Arc::clone(&tally), *printer);
        let job = Job {
            to: checked.to.clone(),
            messages,
            rate: checked.ask.rate,
            stop: Arc::clone(&stop),
            tally: Arc::clone(&tally),
            allow_unowned: checked.ask.allow_unowned,
            as_is: false,
        };
        let result = replayer.replay(&checked.r, &job).await;
        watcher.abort();
        let report = &mut session.report;
        report.moved = tally.moved();
        report.possibly_duplicated = tally.duplicated.load(Ordering::Relaxed);
        report.moved_ids = Some(MovedIds::of(tally.moved_id_list()));
        report.interrupted = stop.load(Ordering::SeqCst);
        report.error = result
            .as_ref()
            .err()
            .map(|e| crate::status::safe(&e.to_string()));
        report.ended_at = now_text();
        if !job.messages.is_empty() {
            // What the destination confirmed, by id, matched to the records in order (an id
            // may repeat on RabbitMQ; each backend confirms in the order it publishes).
            let mut confirmed: BTreeMap<String, u64> = BTreeMap::new();
            for id in tally.moved_id_list() {
                *confirmed.entry(id).or_insert(0) += 1;
            }
            let (mut done, mut not) = (Vec::new(), Vec::new());
            let (mut again, mut copy, mut known) = (0, 0, 0);
            for ((m, r), (before, from_copy)) in job.messages.iter().zip(refs).zip(marks) {
                match confirmed.get_mut(&m.id) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        done.push(r);
                        again += u64::from(before);
                        copy += u64::from(from_copy);
                        known += u64::from(before || from_copy);
                    }
                    _ => not.push(r),
                }
            }
            // Published and possibly there already: replayed again (F2), from a copy run
            // whose message may still be in the DLQ (F5), the archive's own (identical to
            // a killed run's record): in the report's figure, which is then no lost answer.
            if let Some(a) = report.archive.as_mut() {
                a.replayed_again = again;
                a.from_copy = copy;
                a.known_duplicates = known + a.possibly_duplicated.min(report.moved);
                report.possibly_duplicated += a.known_duplicates;
            }
            ledger.replayed = done;
            // Not confirmed: published for sure only when an answer was lost.
            ledger.unsure = if tally.duplicated.load(Ordering::Relaxed) > 0 {
                not
            } else {
                Vec::new()
            };
            ledger.complete = true;
            ledger.ended_at = Some(crate::archive::rfc3339(crate::status::now_ms()));
            if let Err(e) = ledger.write(&store, key.as_ref()).await {
                report.error.get_or_insert(format!(
                    "the replay's ledger could not be written into the archive at the end: {e}; the next replay will stop at every record this one set out to publish"
                ));
            }
        }
        Ok(session.report)
    }
}

/// Sets `stop` on Ctrl-C or SIGTERM; exits the process on a second one.
fn watch(
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
    printer: Printer,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if super::interrupt::interrupted().await {
            stop.store(true, Ordering::SeqCst);
            printer.err(
                "Interrupted: finishing the batch in flight, then stopping (interrupt again to stop at once).",
            );
            if super::interrupt::interrupted().await {
                printer.err(&format!(
                    "Interrupted again: stopped at once after {} published; those in flight may or may not have landed. No report was written.",
                    tally.moved()
                ));
                std::process::exit(130);
            }
        }
    })
}

/// Whether a finished replay did all it set out to (else `dlqctl redrive` exits 1).
pub fn complete(report: &Report) -> bool {
    // What the replay knew was possibly there already is said, not a failure.
    super::redrive::complete(report)
        && report.possibly_duplicated == report.archive.as_ref().map_or(0, |a| a.known_duplicates)
}
