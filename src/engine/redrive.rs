//! The redrive driver: which channel and destination, a dry run through the status door
//! (what would move, moving nothing), or a run through the backend's mover with Ctrl-C and
//! progress watched, then the DLQ read again for what is left, all written into the
//! [`Report`]. It names no backend: what differs per backend is asked of `crate::backend`.
//!
//! `commands/redrive.rs` parses the flags into an [`Ask`], confirms with the person at the
//! terminal ([`Session::depth`] gives the count) and prints the report.

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::gate::Gates;
use crate::backend::wire::Stats;
use crate::backend::{self, BackendError, ConnectOptions, Mover, Reader};
use crate::printer::Printer;
use crate::redrive::{
    self, AgeFrom, BatchRecord, Decision, Destination, Report, Run, Selection, SelectionRecord,
    Tally, WouldMove, stop,
};
use crate::spec::model::Target;
use crate::spec::resolve::{DeadLetterRole, Resolved};
use crate::status::envelope::UNKNOWN;
use crate::status::{self, Observed, ReadOptions};

/// What `dlqctl redrive` was asked, as values: the command's flags, parsed.
#[derive(Debug, Clone)]
pub struct Ask {
    /// `--limit`.
    pub limit: Option<u64>,
    /// `--class`, repeatable; empty: every class.
    pub classes: Vec<String>,
    /// `--older-than` (or `archive --due`'s horizon).
    pub older_than: Option<std::time::Duration>,
    /// Where `older_than` counts a message's age from.
    pub age: AgeFrom,
    /// `--from`: which of the channel's destinations the messages come from: `dead-letter`
    /// (the DLQ), `invalid`, `exception`, or one's name.
    pub from: String,
    /// `--to`: `source` (the channel's main queue or topic) or another name.
    pub to: String,
    /// `--native`: the broker's own move.
    pub native: bool,
    pub dry_run: bool,
    /// `--rate`, messages per second at most.
    pub rate: Option<f64>,
    /// `--samples` and `--scan` of a dry run.
    pub samples: usize,
    pub scan: usize,
    /// `--reason`, for the audit record.
    pub reason: Option<String>,
    /// `--allow-unowned-destination`.
    pub allow_unowned: bool,
    /// `--allow-fanout`: a redrive of a Pub/Sub channel or a Service Bus topic channel
    /// publishes to the main topic, which reaches every subscription of it.
    pub allow_fanout: bool,
    /// `--health-check`, `--health-query`: asked before the first batch and between batches.
    pub gates: Gates,
    /// `--batch`, `--until-empty`, `--pause`, `--max-duration`.
    pub batches: Batches,
    /// `--verify-for`, `--max-redead`.
    pub verify: Option<Verify>,
    /// Redrive, or `dlqctl archive` (which reuses this driver).
    pub purpose: Purpose,
    /// `--group`, repeatable; empty: every failure group.
    pub groups: Vec<String>,
    /// `--where`, compiled.
    pub where_: Option<status::selector::Where>,
    /// `--transform`, compiled.
    pub transform: Option<redrive::transform::Transform>,
}

/// What the run is for: the messages of refusals name it, and an archive takes messages at
/// `maxRedrives` too (the ping-pong guard is about bringing messages back, not keeping them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Purpose {
    #[default]
    Redrive,
    Archive,
}

impl Purpose {
    /// The verb, as refusals say it.
    pub fn verb(self) -> &'static str {
        match self {
            Purpose::Redrive => "redrive",
            Purpose::Archive => "archive",
        }
    }
}

/// After each batch, watch the dead-letter queue `for_` for the moved messages coming back
/// (the downstream dead-letters them again); more than `max_redead_percent` of the batch
/// back stops the run: the downstream is not fixed, and the loop must not ping-pong.
#[derive(Debug, Clone, Copy)]
pub struct Verify {
    pub for_: std::time::Duration,
    pub max_redead_percent: f64,
}

/// How a run is cut into batches: `size` at a time, until the DLQ has nothing more to move
/// when `until_empty`, with `pause` between, for `max_duration` at most (checked between
/// batches: a batch in flight always finishes; [`DEFAULT_MAX_DURATION`] for an
/// `until_empty` run that names none).
#[derive(Debug, Clone, Default)]
pub struct Batches {
    pub size: Option<u64>,
    pub until_empty: bool,
    pub pause: Option<std::time::Duration>,
    pub max_duration: Option<std::time::Duration>,
}

/// How long an `--until-empty` run without `--max-duration` starts batches for (issue 52,
/// L11: a producer filling the DLQ as fast as the run empties it would keep it going for
/// ever; each scheduled run is bounded).
pub const DEFAULT_MAX_DURATION: std::time::Duration = std::time::Duration::from_secs(3600);

impl Batches {
    /// `max_duration`, or [`DEFAULT_MAX_DURATION`] for an `until_empty` run without one.
    pub fn bound(&self) -> Option<std::time::Duration> {
        self.max_duration
            .or(self.until_empty.then_some(DEFAULT_MAX_DURATION))
    }
}

/// Why a redrive stops before it moves anything, or fails to start.
#[derive(Debug, thiserror::Error)]
pub enum RedriveError {
    /// The request cannot be carried out as asked (said whole, for the person who asked).
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// A checked request: the channel, its target, where the messages go and which move. Nothing
/// is connected yet.
pub struct Checked<'a> {
    /// The channel as seen from the destination the messages come from (`--from`).
    pub(super) r: Resolved,
    pub(super) target: Target,
    pub(super) ask: &'a Ask,
    pub(super) to: Destination,
    pub(super) select: Selection,
}

/// `--to failed-consumer`: where each backend can send a message back to the one consumer it
/// failed in. Pub/Sub and a Service Bus topic channel send to the main topic (every
/// subscription receives it: the subscriptions are listed and `--allow-fanout` asked for
/// once connected, see [`Session::check_fanout`]); RabbitMQ's mover publishes each message to
/// the queue its x-death names, SQS's sends each to the queue its `DeadLetterQueueSourceArn`
/// names; Kafka and a Service Bus queue channel are refused here, before anything is read.
fn failed_consumer(r: &Resolved) -> Result<Destination, RedriveError> {
    let refused = |why: String| {
        RedriveError::Refused(format!(
            "--to {}: {why}; nothing was read or moved",
            redrive::FAILED_CONSUMER
        ))
    };
    match backend::failed_consumer(r) {
        backend::FailedConsumer::Fanout => Ok(Destination {
            name: r.main.clone(),
            source: true,
            failed_consumer: true,
            fanout: Vec::new(),
            ..Destination::default()
        }),
        backend::FailedConsumer::PerMessage(name) | backend::FailedConsumer::BySource(name) => {
            Ok(Destination {
                name: name.to_owned(),
                source: false,
                failed_consumer: true,
                ..Destination::default()
            })
        }
        backend::FailedConsumer::Refused(why) => Err(refused(why)),
    }
}

/// Checks `ask` for channel `r` before anything is read: `--from` names one of the channel's
/// destinations, the target is known, `--native` is the backend's to give (and only from a
/// DLQ), and the destination is not the queue the messages come from.
pub fn check<'a>(
    r: &Resolved,
    targets: &BTreeMap<String, Target>,
    ask: &'a Ask,
) -> Result<Checked<'a>, RedriveError> {
    let r = r
        .dead_letter_view(&ask.from)
        .map_err(RedriveError::Refused)?;
    let target = targets
        .get(&r.target)
        .ok_or_else(|| {
            RedriveError::Refused(format!("target `{}` is not in the targets file", r.target))
        })?
        .clone();
    let declared = r.envelope.classes.names();
    if let Some(c) = ask
        .classes
        .iter()
        .find(|c| !declared.is_empty() && !declared.contains(&c.as_str()) && *c != UNKNOWN)
    {
        return Err(RedriveError::Refused(format!(
            "--class {c}: channel `{}` declares the classes {} (deadLetter.classes), and `{UNKNOWN}` for what none of them matches",
            r.channel,
            declared
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let select = Selection {
        limit: ask.limit,
        classes: ask.classes.clone(),
        older_than_ms: ask
            .older_than
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        age: ask.age,
        max_redrives: match ask.purpose {
            Purpose::Redrive => r.max_redrives,
            Purpose::Archive => u32::MAX,
        },
        envelope: r.envelope.clone(),
        groups: ask.groups.clone(),
        where_: ask.where_.clone(),
        transform: ask.transform.clone(),
    };
    let to = if ask.to == redrive::FAILED_CONSUMER {
        failed_consumer(&r)?
    } else if ask.to == "source"
        && r.shares_dead_letter()
        && matches!(
            backend::failed_consumer(&r),
            backend::FailedConsumer::PerMessage(_) | backend::FailedConsumer::BySource(_)
        )
    {
        // A shared destination (`deadLetter.of`): each message goes back to the source the
        // broker recorded on it, never to a channel it did not come from.
        failed_consumer(&r)?
    } else if ask.to == "source" {
        Destination {
            name: r.main.clone(),
            source: true,
            failed_consumer: false,
            fanout: Vec::new(),
            ..Destination::default()
        }
    } else {
        Destination {
            name: ask.to.clone(),
            source: false,
            failed_consumer: false,
            fanout: Vec::new(),
            ..Destination::default()
        }
    };
    if ask.native && !backend::native_move(r.backend) {
        return Err(RedriveError::Refused(format!(
            "--native is SQS's own move task; channel `{}` is on {}",
            r.channel,
            r.backend.display_name()
        )));
    }
    if ask.native && ask.transform.is_some() {
        return Err(RedriveError::Refused(
            "--native with --transform: SQS's move task moves messages as they are; leave out --native (dlqctl's own mover makes the copies the program says); nothing was moved".into(),
        ));
    }
    if ask.native && r.dead_letter_role != DeadLetterRole::DeadLetter {
        return Err(RedriveError::Refused(format!(
            "--native: SQS's move task (StartMessageMoveTask) moves messages only out of a dead-letter queue, one that a source queue's redrive policy names; `{}` is channel `{}`'s {} queue, which no queue dead-letters into (its RedriveAllowPolicy is denyAll). Leave out --native: dlqctl's own mover redrives it; nothing was moved",
            r.dead_letter, r.channel, r.dead_letter_role
        )));
    }
    let ops = target.operations.clone().unwrap_or_default();
    if !ask.dry_run
        && ops.require_reason == Some(true)
        && ask.reason.as_deref().is_none_or(|w| w.trim().is_empty())
    {
        return Err(RedriveError::Refused(format!(
            "target `{}` requires a reason for a{} {} (operations.requireReason): pass --reason TEXT (e.g. the incident); nothing was read or moved",
            r.target,
            if ask.purpose == Purpose::Archive {
                "n"
            } else {
                ""
            },
            ask.purpose.verb()
        )));
    }
    if !to.source && to.name == r.dead_letter {
        return Err(RedriveError::Refused(format!(
            "--to {}: that is the {} itself",
            to.name,
            if r.dead_letter_role == DeadLetterRole::DeadLetter {
                "dead-letter queue".to_owned()
            } else {
                format!("queue the messages come from (--from {})", ask.from)
            }
        )));
    }
    Ok(Checked {
        r,
        target,
        ask,
        to,
        select,
    })
}

impl<'a> Checked<'a> {
    /// Connects to the channel's target (a reader: nothing moves yet) and opens the report.
    pub fn connect(self, opts: ConnectOptions) -> Result<Session<'a>, RedriveError> {
        let stats = Arc::new(Stats::default());
        let reader = Reader::connect(&self.r.target, &self.target, opts, Arc::clone(&stats))?;
        let report = self.report();
        Ok(Session {
            checked: self,
            reader,
            report,
        })
    }

    /// The report as it starts: what was asked, nothing counted yet.
    fn report(&self) -> Report {
        let (r, ask) = (&self.r, self.ask);
        Report {
            format_version: 1,
            kind: redrive::KIND,
            channel: r.channel.clone(),
            target: r.target.clone(),
            backend: r.backend.as_str(),
            dead_letter: r.dead_letter.clone(),
            role: r.dead_letter_role.as_str(),
            destination: self.to.clone(),
            dry_run: ask.dry_run,
            selection: SelectionRecord {
                limit: ask.limit,
                classes: ask.classes.clone(),
                older_than_seconds: ask.older_than.map(|d| d.as_secs_f64()),
                max_redrives: r.max_redrives,
                rate: ask.rate,
                groups: ask.groups.clone(),
                where_: ask.where_.as_ref().map(|w| w.code().to_owned()),
            },
            examined: 0,
            moved: 0,
            not_selected: 0,
            skipped_at_max_redrives: 0,
            possibly_duplicated: 0,
            came_back: None,
            stopped_by: None,
            held_elsewhere: None,
            left_in_dead_letter: None,
            left_basis: None,
            interrupted: false,
            error: None,
            incomplete: Vec::new(),
            started_at: now_text(),
            ended_at: String::new(),
            operator: redrive::holder(),
            identity: None,
            identity_unknown: None,
            reason: ask.reason.clone(),
            would_move: None,
            moved_by: None,
            moved_ids: None,
            time_in_dead_letter: None,
            batches: None,
            where_failures: None,
            transform: ask.transform.as_ref().map(redrive::TransformRecord::of),
            unhealthy: None,
            health: None,
            redead: None,
            from: None,
            archive: None,
        }
    }
}

/// A connected redrive: the reader of the channel's target and the report being written.
pub struct Session<'a> {
    pub(super) checked: Checked<'a>,
    pub(super) reader: Reader,
    pub(super) report: Report,
}

impl Session<'_> {
    /// The channel's dead-letter queue, where the messages come from.
    pub fn dead_letter(&self) -> &str {
        &self.checked.r.dead_letter
    }

    /// Where the messages go.
    pub fn destination(&self) -> &Destination {
        &self.checked.to
    }

    /// The channel's target.
    pub fn target(&self) -> &str {
        &self.checked.r.target
    }

    /// The channel, as seen from the queue the messages come from.
    pub fn resolved(&self) -> &Resolved {
        &self.checked.r
    }

    /// The report as it stands (before a run: what was asked, who asks).
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// Asks the backend who the target's credentials are, for the report, and refuses a run
    /// that would move messages when the target's `operations.allowedOperators` does not
    /// list that identity (nothing is read or moved before). A backend that cannot be asked
    /// leaves the identity unknown: refused when the target lists operators, else recorded.
    pub async fn authorize(&mut self) -> Result<(), RedriveError> {
        let asked = self.reader.operator().await;
        let allowed = self
            .checked
            .target
            .operations
            .as_ref()
            .and_then(|o| o.allowed_operators.clone());
        let target = &self.checked.r.target;
        match asked {
            Ok(who) => self.report.identity = Some(who),
            Err(e) => {
                let why = crate::status::safe(&e.to_string());
                if allowed.is_some() && !self.checked.ask.dry_run {
                    return Err(RedriveError::Refused(format!(
                        "target `{target}` lists the operators who may {} (operations.allowedOperators), and who these credentials are could not be asked: {why}; nothing was read or moved",
                        self.checked.ask.purpose.verb()
                    )));
                }
                self.report.identity_unknown = Some(why);
            }
        }
        if let (Some(list), Some(who), false) =
            (&allowed, &self.report.identity, self.checked.ask.dry_run)
            && !redrive::allowed(list, who)
        {
            return Err(RedriveError::Refused(format!(
                "`{who}` may not {} on target `{target}`: its operations.allowedOperators are {}; nothing was read or moved",
                self.checked.ask.purpose.verb(),
                list.iter()
                    .map(|p| format!("`{p}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(())
    }

    /// A redrive to a topic that every subscription of it receives: `--to source` or `--to
    /// failed-consumer` of a Pub/Sub channel or a Service Bus topic channel. Lists the
    /// subscriptions of the main topic, refuses without `--allow-fanout` naming them when
    /// there is another than the channel's own (sent to a topic with one subscription, the
    /// copy reaches just the failed consumer), refuses when the channel's own subscription
    /// might not take the copy back (a Service Bus rule), and
    /// with it records them in the report (the dry run's plan says the fan-out). Nothing to
    /// do for any other destination.
    pub async fn check_fanout(&mut self) -> Result<(), RedriveError> {
        let r = &self.checked.r;
        let to = &self.checked.to;
        // `--to` naming the main topic is `--to source` under another name.
        let fans = (to.failed_consumer
            && backend::failed_consumer(r) == backend::FailedConsumer::Fanout)
            || ((to.source || to.name == r.main) && backend::source_fans_out(r));
        if !fans {
            return Ok(());
        }
        let topic = r.main.clone();
        let own = backend::own_subscription(r).map(str::to_owned);
        if let Some(sub) = &own
            && let Some(why) = self.reader.subscription_refuses(&topic, sub).await?
        {
            return Err(RedriveError::Refused(format!(
                "{why}; nothing was read or moved"
            )));
        }
        let subs = self.reader.subscriptions_of(&topic).await?;
        // Not even `--allow-fanout` sends where the failed consumer would not get the copy
        // back: the originals would be gone and their copies with nobody, or only with others.
        let same = |a: &String, b: &String| backend::same_name(r, a, b);
        let listed = subs
            .iter()
            .map(|s| format!("`{s}`"))
            .collect::<Vec<_>>()
            .join(", ");
        if let Some(sub) = &own
            && !subs.iter().any(|s| same(s, sub))
        {
            return Err(RedriveError::Refused(format!(
                "--to {}: the channel's subscription `{sub}` is not a subscription of topic `{topic}` ({}), so a copy sent to the topic would not reach the consumer it failed in; recreate the subscription (dlqctl apply), or redrive --to another queue or topic its consumer reads; nothing was read or moved",
                self.checked.ask.to,
                if subs.is_empty() {
                    "it has none".to_owned()
                } else {
                    format!("it has {listed}")
                }
            )));
        }
        if let Some(sub) = &own
            && subs.iter().all(|s| same(s, sub))
        {
            return Ok(());
        }
        if !self.checked.ask.allow_fanout {
            return Err(RedriveError::Refused(format!(
                "--to {}: {} cannot send to one subscription; sending to topic `{topic}` reaches every subscription of it, so the copies would go to {}. Pass --allow-fanout to send to the topic anyway{}; nothing was read or moved",
                self.checked.ask.to,
                r.backend.display_name(),
                if subs.is_empty() {
                    "no subscription (the topic has none now)".to_owned()
                } else {
                    format!("all {}: {listed}", subs.len())
                },
                backend::fanout_alternative(r)
            )));
        }
        self.checked.to.fanout = subs.clone();
        self.report.destination.fanout = subs;
        Ok(())
    }

    /// Messages in the DLQ now, as `status` reads depth, where the backend can tell.
    pub async fn depth(&self) -> Option<u64> {
        left(&self.checked.r, &self.reader).await
    }

    /// The dry run: what would move, moving nothing.
    pub async fn dry_run(mut self) -> Result<Report, BackendError> {
        let (r, ask) = (&self.checked.r, self.checked.ask);
        let by_source = self.checked.to.failed_consumer
            && matches!(
                backend::failed_consumer(r),
                backend::FailedConsumer::BySource(_)
            );
        let per_message = self.checked.to.failed_consumer
            && matches!(
                backend::failed_consumer(r),
                backend::FailedConsumer::PerMessage(_)
            );
        let look = Look {
            samples: ask.samples,
            scan: ask.scan,
            by_source,
            per_message: per_message.then_some(ask.allow_unowned),
        };
        let dry = dry_run(r, &self.reader, &self.checked.select, look).await?;
        let report = &mut self.report;
        if by_source {
            report.destination.sources = dry.sources;
            report.destination.without_source = Some(dry.without_source).filter(|n| *n > 0);
        }
        report.examined = dry.examined;
        report.not_selected = dry.not_selected;
        report.skipped_at_max_redrives = dry.at_limit;
        // The depth the dry run read its messages by (issue 52, L8: a second read of the
        // listing, 5 s behind, said "about 10 left" beside 20 that would move).
        report.left_in_dead_letter = match dry.total {
            Some(n) => Some(n),
            None => left(r, &self.reader).await,
        };
        report.left_basis = report.left_in_dead_letter.map(|_| redrive::STATISTICS);
        report.would_move = Some(dry.would);
        report.incomplete.extend(dry.stays);
        if dry.undecided > 0 {
            report.incomplete.push(format!(
                "{} message{} with a body longer than {} MiB {} not judged by the dry run (the selection reads bodies, and a dry run reads at most that much of each); the run reads {} whole and may move {}",
                dry.undecided,
                if dry.undecided == 1 { "" } else { "s" },
                status::selector::MAX_BODY >> 20,
                if dry.undecided == 1 { "was" } else { "were" },
                if dry.undecided == 1 { "it" } else { "them" },
                if dry.undecided == 1 { "it" } else { "them" },
            ));
        }
        report.where_failures = ask.where_.as_ref().and_then(|w| w.failures());
        if let Some(t) = report.transform.as_mut() {
            t.failed = ask.transform.as_ref().and_then(|t| t.failures());
            t.diffs = dry.diffs;
        }
        if !ask.gates.is_empty() {
            // Asked as a run would ask them first; said, never failing the dry run.
            let why = ask.gates.check().await;
            report.health = Some(redrive::Health {
                healthy: why.is_none(),
                answer: why.unwrap_or_else(|| "every gate answered healthy".to_owned()),
            });
        }
        report.ended_at = now_text();
        Ok(self.report)
    }

    /// Moves the messages through the backend's mover. Ctrl-C or SIGTERM finishes what is in
    /// flight, then stops; a second one exits at once (130). On a terminal, the count, rate
    /// and ETA go to stderr every second. `depth` is the DLQ's depth at the start (for the
    /// ETA). A failure once moving started is in the report, not an `Err`.
    pub async fn run(self, depth: Option<u64>, printer: &Printer) -> Result<Report, RedriveError> {
        self.run_with(depth, printer, None).await
    }

    /// [`Session::run`], with the chosen messages going to `archive` instead of the
    /// destination when it is given (`dlqctl archive`, `engine/archive.rs`).
    pub async fn run_with(
        mut self,
        depth: Option<u64>,
        printer: &Printer,
        archive: Option<Arc<crate::archive::sink::Sink>>,
    ) -> Result<Report, RedriveError> {
        let r = &self.checked.r;
        let ask = self.checked.ask;
        let started = std::time::Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let shown = Arc::new(Shown::default());
        let watcher = watch(Arc::clone(&stop), Arc::clone(&shown), *printer);
        let mover = Mover::connect(self.reader.clone(), &self.checked.target)?;
        let batched = ask.batches.size.is_some();
        let mut record = BatchRecord {
            size: ask.batches.size,
            until_empty: ask.batches.until_empty,
            max_duration_seconds: ask.batches.bound().map(|d| d.as_secs()),
            count: 0,
            stopped_by: "",
        };
        let mut result = Ok(());
        // Every batch's copies, known when they come back: never moved twice by one run.
        let copies = Arc::new(redrive::Copies::new(&self.report.operator));
        // More batches may follow: the DLQ's lock is kept from the first batch to the end of
        // the run, held between batches by a lease (issue 52, M4).
        let keep_lock = batched && ask.batches.until_empty;
        let mut lease: Option<crate::backend::kit::doors::Lease> = None;
        let mut last_run: Option<Run> = None;
        let mut last: Option<Arc<Tally>> = None;
        let mut ids = Vec::new();
        let (mut waited, mut unknown) = (Vec::new(), 0);
        // Whether the run went on after the last batch counted what it left (a watch, a
        // pause, a gate asked): that count is then out of date (issue 52, L8), and the DLQ's
        // depth as last read by the watch (`watched`) or the backend's statistics stand in.
        let mut went_on = false;
        let mut watched: Option<u64> = None;
        loop {
            // Ctrl-C or SIGTERM while a gate is asked: stopped, not unhealthy (issue 52).
            let verdict = ask.gates.check_unless(&stop).await;
            went_on |= last.is_some() && !ask.gates.is_empty();
            if stop.load(Ordering::SeqCst) {
                record.stopped_by = stop::INTERRUPTED;
                break;
            }
            if let Some(why) = verdict {
                self.report.unhealthy = Some(why);
                record.stopped_by = stop::UNHEALTHY;
                break;
            }
            let remaining = ask.limit.map(|l| l.saturating_sub(self.report.moved));
            let limit = match (ask.batches.size, remaining) {
                (Some(b), Some(left)) => Some(b.min(left)),
                (b, left) => b.or(left),
            };
            let tally = Arc::new(Tally::keeping_prints(ask.verify.is_some()));
            shown.start(&tally);
            let run = Run {
                to: self.checked.to.clone(),
                select: Selection {
                    limit,
                    ..self.checked.select.clone()
                },
                rate: ask.rate,
                stop: Arc::clone(&stop),
                tally: Arc::clone(&tally),
                holder: self.report.operator.clone(),
                service_task: ask.native,
                allow_unowned: ask.allow_unowned,
                archive: archive.clone(),
                copies: Arc::clone(&copies),
                keep_lock,
            };
            // The lease lets go just before the batch takes the lock itself.
            if let Some(l) = lease.take() {
                l.release().await;
            }
            // `--verify-for`: the DLQ as it was before the batch, so that what was there
            // already is never taken for a message come back.
            let held = match ask.verify {
                Some(_) => dlq_prints(r, &self.reader, &copies)
                    .await
                    .unwrap_or_default(),
                None => Seen::default(),
            };
            let first = copies.made();
            let before = depth.map(|d| d.saturating_sub(self.report.moved));
            let progress = progress(Arc::clone(&tally), before, *printer);
            result = mover.redrive(r, &run).await;
            (went_on, watched) = (false, None);
            if let Some(p) = progress {
                p.abort();
            }
            record.count += 1;
            let moved = tally.moved();
            add(&mut self.report, &tally);
            ids.extend(tally.moved_id_list());
            let (w, u) = tally.waited();
            waited.extend(w);
            unknown += u;
            shown.finish(moved);
            last = Some(Arc::clone(&tally));
            last_run = Some(run.clone());
            if result.is_err() {
                record.stopped_by = stop::ERROR;
                break;
            }
            if stop.load(Ordering::SeqCst) {
                record.stopped_by = stop::INTERRUPTED;
                break;
            }
            // Messages another consumer holds are said at the end; they stop no batch (issue
            // 52: `--until-empty` used to stop after one batch while one message was held).
            if !self.report.incomplete.is_empty() {
                record.stopped_by = stop::INCOMPLETE;
                break;
            }
            // Held from now until the next batch: the watch, the pause, the gates.
            if keep_lock {
                match mover.hold(r, &run).await {
                    Ok(l) => lease = Some(l),
                    Err(e) => {
                        result = Err(e);
                        record.stopped_by = stop::ERROR;
                        break;
                    }
                }
            }
            if let Some(v) = ask.verify
                && moved > 0
            {
                let back = watch_for_return(
                    r,
                    &self.reader,
                    &copies,
                    (&held, &tally.prints(), first),
                    v,
                    &stop,
                )
                .await;
                went_on = true;
                watched = back.total;
                // The copies the watch saw back are came back, as a batch that meets them
                // counts them (each once): F3, `cameBack` was short of the redead ones.
                let counted = tally.came_back.load(Ordering::Relaxed);
                for key in back.keys {
                    copies.came_back(key, &tally);
                }
                let seen = tally.came_back.load(Ordering::Relaxed) - counted;
                if seen > 0 {
                    *self.report.came_back.get_or_insert(0) += seen;
                }
                let percent = back.ids.len() as f64 * 100.0 / moved as f64;
                if percent > v.max_redead_percent {
                    self.report.redead = Some(redrive::Redead {
                        count: back.ids.len() as u64,
                        of: moved,
                        percent: (percent * 10.0).round() / 10.0,
                        allowed_percent: v.max_redead_percent,
                        ids: back.ids.into_iter().take(100).collect(),
                    });
                    record.stopped_by = stop::REDEAD;
                    break;
                }
            }
            // Fewer than it could take (or none): nothing more to move.
            if limit.is_some_and(|l| moved < l) || (batched && moved == 0) {
                record.stopped_by = stop::EMPTY;
                break;
            }
            if !batched {
                record.stopped_by = if ask.limit.is_some() {
                    stop::LIMIT
                } else {
                    stop::EMPTY
                };
                break;
            }
            if !ask.batches.until_empty {
                record.stopped_by = stop::ONE_BATCH;
                break;
            }
            if ask.limit.is_some_and(|l| self.report.moved >= l) {
                record.stopped_by = stop::LIMIT;
                break;
            }
            if let Some(pause) = ask.batches.pause {
                pause_unless_stopped(pause, &stop).await;
                went_on = true;
                if stop.load(Ordering::SeqCst) {
                    self.report.interrupted = true;
                    record.stopped_by = stop::INTERRUPTED;
                    break;
                }
            }
            if ask.batches.bound().is_some_and(|m| started.elapsed() >= m) {
                record.stopped_by = stop::MAX_DURATION;
                break;
            }
        }
        if let Some(l) = lease.take() {
            l.release().await;
        }
        if keep_lock
            && let Some(run) = &last_run
            && let Err(e) = mover.release(r, run).await
            && result.is_ok()
        {
            result = Err(e);
        }
        watcher.abort();
        let report = &mut self.report;
        report.interrupted |= stop.load(Ordering::SeqCst);
        if batched || !ask.gates.is_empty() || ask.verify.is_some() {
            report.batches = Some(record.clone());
        }
        if report.moved_by.is_none() {
            report.moved_ids = Some(redrive::MovedIds::of(ids));
            // Not all of these left for good: some were confirmed but not removed (they are
            // in both queues), or came back while `--verify-for` watched.
            let exact = report.possibly_duplicated == 0 && report.redead.is_none();
            report.time_in_dead_letter = redrive::Waited::of(waited, unknown, exact);
        }
        report.error = result
            .as_ref()
            .err()
            .map(|e| crate::status::safe(&e.to_string()));
        let statistics = last
            .as_ref()
            .is_some_and(|t| t.left_statistics.load(Ordering::Relaxed));
        // Refused or failed before it examined anything (another run holds the DLQ, ...):
        // it counted nothing, and a statistic read now is no figure of this run's (issue 52,
        // L8: "leftInDeadLetter 300" with 30 there while the other run moved them).
        let never_looked = report.error.is_some() && report.examined == 0 && report.moved == 0;
        (report.left_in_dead_letter, report.left_basis) = match last.as_ref().and_then(|t| t.left())
        {
            // What the last batch counted, when nothing came after it.
            Some(n) if !went_on => (
                Some(n),
                Some(if statistics {
                    redrive::STATISTICS
                } else {
                    redrive::EXACT
                }),
            ),
            _ if never_looked && !went_on => (None, None),
            // The DLQ as the watch last read it, after the batch.
            _ if watched.is_some() => (watched, Some(redrive::STATISTICS)),
            // A pause or a gate came after the count: said as the last batch's (the
            // backend's statistics may lag more than that, RabbitMQ's by 5 s).
            Some(n) => (
                Some(n),
                Some(if statistics {
                    redrive::STATISTICS
                } else {
                    redrive::LAST_BATCH
                }),
            ),
            None => {
                let n = left(r, &self.reader).await;
                (n, n.map(|_| redrive::STATISTICS))
            }
        };
        // Stopped at --limit or after one batch with nothing left: it did all there was.
        if matches!(record.stopped_by, stop::LIMIT | stop::ONE_BATCH)
            && report.left_in_dead_letter == Some(0)
            && report.left_basis == Some(redrive::EXACT)
        {
            record.stopped_by = stop::EMPTY;
        }
        if let Some(b) = report.batches.as_mut() {
            b.stopped_by = record.stopped_by;
        }
        report.stopped_by = Some(record.stopped_by).filter(|s| !s.is_empty());
        // Every batched or verified run says what came back, 0 too (F3); others when any did.
        if batched || ask.verify.is_some() {
            report.came_back.get_or_insert(0);
        }
        let held = last
            .as_ref()
            .map_or(0, |t| t.held_elsewhere.load(Ordering::Relaxed));
        if held > 0 {
            report.held_elsewhere = Some(held);
            let (s, are, were) = if held == 1 {
                ("", "is", "was")
            } else {
                ("s", "are", "were")
            };
            report.incomplete.push(format!(
                "{held} message{s} of `{}` {are} held unacknowledged by another consumer (the management API's messages_unacknowledged) and {were} not examined; what that consumer does not acknowledge goes back to the queue when it rejects or closes: run it again then",
                report.dead_letter
            ));
        }
        report.where_failures = ask.where_.as_ref().and_then(|w| w.failures());
        // Not chosen because the expression could not finish (a budget ran out), or finished
        // undecided (cut at 1,000 outputs without a `true`): the run is not "complete".
        if let Some(w) = ask.where_.as_ref() {
            for (n, did, why, see) in [
                (
                    w.over_budget(),
                    "did not run to its end on",
                    "a budget ran out: not selected",
                    "docs/redrive.md, \"Budgets\"",
                ),
                (
                    w.undecided(),
                    "yielded 1000 outputs without a true on",
                    "not looked at further: not selected",
                    "write any(generator; condition)",
                ),
            ] {
                if n == 0 {
                    continue;
                }
                let (s, they, stay) = if n == 1 {
                    ("", "it", "stays")
                } else {
                    ("s", "they", "stay")
                };
                report.incomplete.push(format!(
                    "--where {did} {n} message{s} ({why}; {they} {stay} in `{}`; {see})",
                    report.dead_letter,
                ));
            }
        }
        if let Some(t) = report.transform.as_mut() {
            t.failed = ask.transform.as_ref().and_then(|t| t.failures());
            if let Some(f) = &t.failed {
                // Asked to move and not moved: the run is not "complete" (exit 1).
                report.incomplete.push(format!(
                    "--transform failed on {} message{}; {} stay{} in `{}` (the first, {}: {}; every id, up to {}: transform.failed in --format json)",
                    f.count,
                    if f.count == 1 { "" } else { "s" },
                    if f.count == 1 { "it" } else { "they" },
                    if f.count == 1 { "s" } else { "" },
                    report.dead_letter,
                    f.ids.first().map_or("?", String::as_str),
                    f.first_error,
                    redrive::transform::MAX_FAILED_IDS
                ));
            }
        }
        report.ended_at = now_text();
        Ok(self.report)
    }
}

/// Adds one batch's counts to the report: what moved and may be duplicated summed; what
/// was left behind (not selected, at maxRedrives) as the latest batch found it, since each
/// batch examines again what the one before left.
fn add(report: &mut Report, t: &Tally) {
    report.examined += t.examined.load(Ordering::Relaxed);
    report.moved += t.moved();
    report.not_selected = t.not_selected.load(Ordering::Relaxed);
    report.skipped_at_max_redrives = t.at_limit.load(Ordering::Relaxed);
    if let Some(record) = report.transform.as_mut() {
        record.add(t.transformed());
    }
    report.possibly_duplicated += t.duplicated.load(Ordering::Relaxed);
    let back = t.came_back.load(Ordering::Relaxed);
    if back > 0 {
        *report.came_back.get_or_insert(0) += back;
    }
    if t.by_service.load(Ordering::Relaxed) {
        report.moved_by = Some(redrive::SQS_MOVE_TASK);
    }
    for why in t.incomplete_reasons() {
        if !report.incomplete.contains(&why) {
            report.incomplete.push(why);
        }
    }
    let d = &mut report.destination;
    for s in t.sources() {
        redrive::count_source(&mut d.sources, &s.source, &s.queue, s.count);
    }
    let without = t.without_source.load(Ordering::Relaxed);
    if without > 0 {
        d.without_source = Some(d.without_source.unwrap_or(0) + without);
    }
}

/// What the Ctrl-C handler says was moved: the batches done, and the one in flight.
#[derive(Default)]
struct Shown {
    before: std::sync::atomic::AtomicU64,
    current: std::sync::Mutex<Option<Arc<Tally>>>,
}

impl Shown {
    fn start(&self, t: &Arc<Tally>) {
        if let Ok(mut c) = self.current.lock() {
            *c = Some(Arc::clone(t));
        }
    }

    fn finish(&self, moved: u64) {
        self.before.fetch_add(moved, Ordering::Relaxed);
        if let Ok(mut c) = self.current.lock() {
            *c = None;
        }
    }

    fn moved(&self) -> u64 {
        let now = self
            .current
            .lock()
            .ok()
            .and_then(|c| c.as_ref().map(|t| t.moved()))
            .unwrap_or(0);
        self.before.load(Ordering::Relaxed) + now
    }
}

/// The DLQ as `--verify-for` compares it: each message a status read sees (up to
/// [`status::MAX_SCAN`] from the head; SQS: 10) as its [`redrive::body_print`], its id, and
/// its key when it is a copy this run made ([`redrive::Copies::ours_message`]); and the
/// depth, when the read saw only part of the DLQ.
/// One message as [`Seen`] has it: its print, its id, and for a copy this run made its key
/// and number ([`redrive::Copies::number`]).
type SeenMessage = (u64, String, Option<(String, u64)>);

#[derive(Debug, Clone, Default)]
struct Seen {
    items: Vec<SeenMessage>,
    /// The DLQ's depth, when the read did not see every message of it.
    partial_total: Option<u64>,
    /// The DLQ's depth as the read found it.
    total: Option<u64>,
}

async fn dlq_prints(r: &Resolved, reader: &Reader, copies: &redrive::Copies) -> Option<Seen> {
    let opts = ReadOptions {
        samples: 0,
        scan: status::MAX_SCAN,
        max_body: redrive::PRINT_BODY,
        peek: true,
        redrive_view: true,
        rate_window: None,
        count_by_reading: false,
        groups: false,
        hide_for: None,
    };
    let mut each = reader.status(&[r], opts).await.ok()?;
    let observed = each.pop()?.ok()?;
    let total = observed.dead_letter.total;
    let partial = total.is_some_and(|t| t > observed.messages.len() as u64);
    Some(Seen {
        items: observed
            .messages
            .iter()
            .map(|m| {
                (
                    redrive::body_print(&m.body, m.body_len),
                    status::safe(&m.id),
                    copies
                        .ours_message(m)
                        .map(|k| (k.clone(), copies.number(&k).unwrap_or(0))),
                )
            })
            .collect(),
        partial_total: if partial { total } else { None },
        total,
    })
}

/// The keys ([`redrive::Copies::ours`]) of this batch's copies (numbered from `first`) that
/// `now` holds and `before` did not: back, exactly, as [`came_back`] counts them.
fn copies_back(before: &Seen, now: &Seen, first: u64) -> Vec<String> {
    let had: std::collections::HashSet<&str> = before
        .items
        .iter()
        .filter_map(|(_, _, k)| k.as_ref().map(|(k, _)| k.as_str()))
        .collect();
    now.items
        .iter()
        .filter_map(|(_, _, k)| k.as_ref())
        .filter(|(k, n)| *n >= first && !had.contains(k.as_str()))
        .map(|(k, _)| k.clone())
        .collect()
}

/// What `--verify-for` saw: the ids back ([`came_back`]), the keys of this run's copies
/// among them ([`copies_back`]), and the DLQ's depth at its last read.
#[derive(Debug, Default)]
struct Watched {
    ids: Vec<String>,
    keys: Vec<String>,
    total: Option<u64>,
}

/// Which of a batch's moved messages are back (issue 52, M1: only what was not in the DLQ
/// before the batch can have come back):
/// - a copy this run made ([`redrive::Copies`]: its stamp, or on SQS its id) that the DLQ
///   holds now and did not before the batch: back, exactly;
/// - a message without such a mark (a consumer that dead-letters only the body) by its
///   [`redrive::body_print`]: per body, the messages the DLQ holds now beyond those it held
///   before the batch and kept (held before, less what moved), at most as many as moved;
///   when a read saw only part of the DLQ (SQS reads 10), no more than its depth grew beyond
///   what it held before less what moved. Others with the same body that stayed are never
///   counted.
///
/// The ids are those the DLQ has now.
fn came_back(before: &Seen, moved: &[u64], now: &Seen, first: u64) -> Vec<String> {
    use std::collections::{HashMap, HashSet};
    let keys: HashSet<&str> = before
        .items
        .iter()
        .filter_map(|(_, _, k)| k.as_ref().map(|(k, _)| k.as_str()))
        .collect();
    // This batch's copies only (numbered from `first`): an earlier batch's, back only now,
    // are not this batch's to count.
    let mut back: Vec<String> = now
        .items
        .iter()
        .filter(|(_, _, k)| {
            k.as_ref()
                .is_some_and(|(k, n)| *n >= first && !keys.contains(k.as_str()))
        })
        .map(|(_, id, _)| id.clone())
        .take(moved.len())
        .collect();
    let marked = back.len() as i64;
    let mut sent: HashMap<u64, i64> = HashMap::new();
    for p in moved {
        *sent.entry(*p).or_default() += 1;
    }
    let mut count: HashMap<u64, i64> = sent.clone();
    for (p, _, k) in &before.items {
        if k.is_none() {
            *count.entry(*p).or_default() -= 1;
        }
    }
    for (p, _, k) in &now.items {
        if k.is_none() {
            *count.entry(*p).or_default() += 1;
        }
    }
    let mut room = match (before.partial_total, now.partial_total) {
        (Some(b), Some(n)) => (n as i64 - (b as i64 - moved.len() as i64)).max(0) - marked,
        _ => i64::MAX,
    };
    let mut left: HashMap<u64, i64> = sent
        .iter()
        .map(|(p, n)| (*p, count.get(p).copied().unwrap_or(0).clamp(0, *n)))
        .collect();
    let old: HashSet<&str> = before.items.iter().map(|(_, id, _)| id.as_str()).collect();
    // New ids first, then the others (equal bodies may share an id: RabbitMQ's digest).
    for fresh in [true, false] {
        for (p, id, k) in &now.items {
            if k.is_some() || old.contains(id.as_str()) == fresh {
                continue;
            }
            if room > 0
                && let Some(n) = left.get_mut(p)
                && *n > 0
            {
                *n -= 1;
                room -= 1;
                back.push(id.clone());
            }
        }
    }
    back
}

/// Reads the dead-letter queue once a second for `v.for_`, and returns the ids of the
/// moved messages back ([`came_back`]: `before` is the DLQ as read before the batch,
/// `moved` the prints of what the batch moved). Stops early once more than allowed are
/// back, or on Ctrl-C.
async fn watch_for_return(
    r: &Resolved,
    reader: &Reader,
    copies: &redrive::Copies,
    (before, moved, first): (&Seen, &[u64], u64),
    v: Verify,
    stop: &AtomicBool,
) -> Watched {
    let until = tokio::time::Instant::now() + v.for_;
    let mut back = Watched::default();
    loop {
        if let Some(now) = dlq_prints(r, reader, copies).await {
            back = Watched {
                ids: came_back(before, moved, &now, first),
                keys: copies_back(before, &now, first),
                total: now.total,
            };
        }
        let too_many =
            back.ids.len() as f64 * 100.0 / moved.len().max(1) as f64 > v.max_redead_percent;
        if too_many || stop.load(Ordering::SeqCst) || tokio::time::Instant::now() >= until {
            return back;
        }
        pause_unless_stopped(std::time::Duration::from_secs(1), stop).await;
    }
}

/// Waits `pause`, or less when a stop is asked for.
async fn pause_unless_stopped(pause: std::time::Duration, stop: &AtomicBool) {
    let until = tokio::time::Instant::now() + pause;
    while tokio::time::Instant::now() < until && !stop.load(Ordering::SeqCst) {
        let step = until
            .saturating_duration_since(tokio::time::Instant::now())
            .min(std::time::Duration::from_millis(100));
        tokio::time::sleep(step).await;
    }
}

/// Whether a finished run did all it set out to: no error, no interrupt, nothing left
/// unexamined (else `dlqctl redrive` exits 1).
pub fn complete(report: &Report) -> bool {
    report.error.is_none()
        && !report.interrupted
        && report.incomplete.is_empty()
        && report.redead.is_none()
}

pub(super) fn now_text() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Sets `stop` on Ctrl-C or SIGTERM; exits the process on a second one.
fn watch(
    stop: Arc<AtomicBool>,
    tally: Arc<Shown>,
    printer: Printer,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if super::interrupt::interrupted().await {
            stop.store(true, Ordering::SeqCst);
            printer.err(
                "Interrupted: finishing what is in flight, then stopping (interrupt again to stop at once).",
            );
            // A second interrupt: out now. Nothing is lost: what was not acknowledged goes
            // back to the dead-letter queue when the connection closes; what was confirmed
            // by the destination but not yet removed may be delivered twice.
            if super::interrupt::interrupted().await {
                printer.err(&format!(
                    "Interrupted again: stopped at once after {} moved. Messages not acknowledged go back to the dead-letter queue; those in flight may be delivered twice. No report was written.",
                    tally.moved()
                ));
                std::process::exit(130);
            }
        }
    })
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
                        status::age::age(d.saturating_sub(moved) as f64 / rate)
                    )
                })
                .unwrap_or_default();
            printer.err(&format!("moved {moved} ({rate:.0}/s{eta})"));
        }
    }))
}

/// What a dry run found: what would move, and how many it would skip at `maxRedrives`.
struct DryRun {
    would: WouldMove,
    /// `--transform`: the diffs of the first `samples` copies.
    diffs: Vec<redrive::CopyDiff>,
    at_limit: u64,
    not_selected: u64,
    examined: u64,
    /// `--to failed-consumer` by source: what would move, per source.
    sources: Vec<redrive::SourceCount>,
    /// The same: chosen messages that name no source (they would stay, not counted as
    /// moving).
    without_source: u64,
    /// Messages whose body was longer than a dry run reads ([`status::selector::MAX_BODY`])
    /// while the selection reads bodies: not judged (the run reads them whole).
    undecided: u64,
    /// `--to failed-consumer` per message: what would stay and why, as the run says it
    /// (`incomplete` lines).
    stays: Vec<String>,
    /// The DLQ's depth as the read found it.
    total: Option<u64>,
}

/// What a dry run reads and how it counts.
#[derive(Debug, Clone, Copy)]
struct Look {
    samples: usize,
    scan: usize,
    /// `--to failed-consumer` where the backend sends each message to the source the broker
    /// recorded on it ([`backend::FailedConsumer::BySource`]): counted per source.
    by_source: bool,
    /// `--to failed-consumer` where the mover sends each message to the queue it names
    /// ([`backend::FailedConsumer::PerMessage`]): each message's queue resolved and checked
    /// as the run does, nothing published, `Some(allow_unowned)` (issue 52, F1: the dry run
    /// counted 21 where the run moved 6).
    per_message: Option<bool>,
}

/// Reads up to `scan` messages of the DLQ as `status` does and applies the selection to them.
async fn dry_run(
    r: &Resolved,
    reader: &Reader,
    select: &Selection,
    look: Look,
) -> Result<DryRun, BackendError> {
    let Look {
        samples,
        scan,
        by_source,
        per_message,
    } = look;
    // `--class`, `--older-than` and `--group` read the envelope, which may point into the
    // body; `--where` and `--transform` read it.
    let body_matters = select.where_.is_some()
        || select.transform.is_some()
        || !select.classes.is_empty()
        || !select.groups.is_empty()
        || select.older_than_ms.is_some();
    let mut undecided = 0;
    let read = ReadOptions {
        samples: 0,
        scan,
        // A selection that may read the body reads it as the movers do: whole (up to
        // SQS's largest message; a longer one is not judged, see `undecided`).
        max_body: if body_matters {
            status::selector::MAX_BODY
        } else {
            status::DEFAULT_MAX_BODY
        },
        peek: true,
        redrive_view: true,
        rate_window: None,
        count_by_reading: false,
        groups: false,
        hide_for: None,
    };
    let observed = one(reader.status(&[r], read).await?)?;
    let now = status::now_ms();
    let total = observed.dead_letter.total;
    let read_all = total == Some(observed.messages.len() as u64);
    let (mut chosen, mut at_limit, mut not_selected) = (Vec::new(), 0, 0);
    let mut diffs = Vec::new();
    let (mut sources, mut without_source) = (Vec::new(), 0);
    // `--to failed-consumer` per message: the queues that would receive, those refused (why,
    // and the ids that would stay), and the ids naming none.
    let mut usable: BTreeSet<String> = BTreeSet::new();
    let mut refused: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    let mut stays = Vec::new();
    for m in &observed.messages {
        if body_matters && (m.body.len() as u64) < m.body_len {
            // Cut: judged on part of its body, it could be taken for what it is not
            // (issue 52, L7: "5 would move, exact", and the run moved 10).
            undecided += 1;
            continue;
        }
        let room = select.limit.is_none_or(|l| (chosen.len() as u64) < l);
        if !room && select.transform.is_some() {
            // Beyond --limit nothing would move: the program is not run on it.
            continue;
        }
        match redrive::decide_copy(select, m, now) {
            // Names no source: stays, as the run leaves it (not counted against --limit).
            (Decision::Move, _)
                if by_source && backend::failed_consumer_source(r.backend, m).is_none() =>
            {
                without_source += 1;
            }
            (Decision::Move, edit) if room => {
                if let Some(allow_unowned) = per_message {
                    // As the run: resolved and checked after the selection and the transform,
                    // not counted against --limit when it stays.
                    let id = backend::failed_consumer_id(r, m);
                    let Some(q) = backend::failed_consumer_queue(r, m) else {
                        stays.push(redrive::without_death_line(&id, &r.dead_letter, true));
                        continue;
                    };
                    if !usable.contains(&q) && !refused.contains_key(&q) {
                        match reader.failed_consumer_check(r, &q, allow_unowned).await {
                            Ok(()) => {
                                usable.insert(q.clone());
                            }
                            Err(why) => {
                                refused.insert(q.clone(), (why, Vec::new()));
                            }
                        }
                    }
                    if let Some((_, ids)) = refused.get_mut(&q) {
                        ids.push(id);
                        continue;
                    }
                }
                if let Some((source, queue)) = by_source
                    .then(|| backend::failed_consumer_source(r.backend, m))
                    .flatten()
                {
                    redrive::count_source(&mut sources, &source, &queue, 1);
                }
                if edit.prints.is_some() && diffs.len() < samples {
                    diffs.push(redrive::CopyDiff {
                        id: status::safe(&crate::secrets::text(&m.id)),
                        diff: redrive::transform::diff(m, &edit, &r.redact),
                    });
                }
                chosen.push(m.clone());
            }
            (Decision::Move, _) => {}
            (Decision::AtLimit, _) => at_limit += 1,
            // Counted by the program (the report's `transform.failed`): they would stay.
            (Decision::TransformFailed, _) => {}
            (Decision::NotSelected, _) => not_selected += 1,
        }
    }
    for (q, (why, ids)) in &refused {
        stays.push(redrive::refused_queue_line(
            q,
            why,
            ids,
            &r.dead_letter,
            true,
        ));
    }
    let examined = observed.messages.len() as u64;
    let exact =
        (read_all && undecided == 0) || select.limit.is_some_and(|l| chosen.len() as u64 == l);
    let only_chosen = Observed {
        messages: chosen,
        ..observed
    };
    let opts = ReadOptions {
        samples,
        max_body: status::DEFAULT_MAX_BODY,
        groups: true,
        ..read
    };
    let (report, _) = status::summarise(
        &r.dead_letter,
        &r.envelope,
        &r.redact,
        opts,
        only_chosen.clone(),
        now,
    );
    let ages: Vec<f64> = only_chosen
        .messages
        .iter()
        .filter_map(|m| {
            let e = status::envelope::read(&r.envelope, m);
            redrive::age_ms(select.age, m, &e, now).map(|a| a.max(0) as f64 / 1000.0)
        })
        .collect();
    Ok(DryRun {
        would: WouldMove {
            count: only_chosen.messages.len() as u64,
            exact,
            by_error_class: report.by_error_class,
            oldest_age_seconds: ages.iter().copied().reduce(f64::max),
            newest_age_seconds: ages.iter().copied().reduce(f64::min),
            groups: report.groups.unwrap_or_default(),
            samples: report.samples,
        },
        diffs,
        at_limit,
        not_selected,
        examined,
        sources,
        without_source,
        undecided,
        stays,
        total,
    })
}

/// Messages left in the DLQ, read as `status` reads depth (no message read).
async fn left(r: &Resolved, reader: &Reader) -> Option<u64> {
    let read = ReadOptions {
        samples: 0,
        scan: 0,
        max_body: 0,
        peek: false,
        redrive_view: true,
        rate_window: None,
        count_by_reading: false,
        groups: false,
        hide_for: None,
    };
    let observed = reader
        .status(&[r], read)
        .await
        .ok()
        .and_then(|v| one(v).ok())?;
    observed.dead_letter.total
}

fn one(mut v: Vec<Result<Observed, BackendError>>) -> Result<Observed, BackendError> {
    v.pop().unwrap_or_else(|| {
        Err(BackendError::Config {
            target: String::new(),
            message: "the status door returned no channel".into(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(from: &str, native: bool) -> Ask {
        Ask {
            limit: None,
            classes: Vec::new(),
            older_than: None,
            age: AgeFrom::DeadLettered,
            from: from.to_owned(),
            to: "source".into(),
            native,
            dry_run: true,
            rate: None,
            samples: 3,
            scan: 100,
            reason: None,
            allow_unowned: false,
            allow_fanout: false,
            gates: Gates::default(),
            batches: Batches::default(),
            verify: None,
            purpose: Purpose::Redrive,
            groups: Vec::new(),
            where_: None,
            transform: None,
        }
    }

    /// Issue 34: `--from` picks the destination the messages come from, named in the report
    /// with its role; `--native` only from the DLQ (SQS's move task moves only out of one).
    #[test]
    fn from_picks_the_source_and_native_is_only_for_the_dlq() {
        let target = serde_json::json!({"backend": "sqs", "region": "us-east-1"});
        let r = crate::backend::resolved_example(
            include_str!("../../examples/chargebacks-sqs-tiers.yaml"),
            "local-sqs",
            target.clone(),
        );
        let targets = BTreeMap::from([(
            "local-sqs".to_owned(),
            serde_json::from_value::<Target>(target).expect("target"),
        )]);
        let invalid = r
            .invalid
            .as_ref()
            .expect("the example has spec.invalid")
            .name
            .clone();
        let plain = ask("invalid", false);
        let checked = check(&r, &targets, &plain)
            .map_err(|e| e.to_string())
            .expect("checked");
        let report = checked.report();
        assert_eq!(
            (report.dead_letter.as_str(), report.role),
            (invalid.as_str(), "invalid")
        );
        assert_eq!(report.destination.name, r.main, "back to the main queue");

        let dlq = ask("dead-letter", true);
        assert!(check(&r, &targets, &dlq).is_ok(), "--native from the DLQ");
        let native = ask("invalid", true);
        let refused = check(&r, &targets, &native).err().map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains("StartMessageMoveTask") && e.contains(&invalid)),
            "{refused:?}"
        );
        let none = ask("exception", false);
        let refused = check(&r, &targets, &none).err().map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains("no exception-based")),
            "{refused:?}"
        );
    }

    /// Issue 52, M1: only messages that were not in the DLQ before the batch can have come
    /// back; others with the same body that stayed are never counted.
    #[test]
    fn what_was_in_the_dlq_before_the_batch_never_came_back() {
        let p = |b: &str| redrive::body_print(b.as_bytes(), b.len() as u64);
        let at = |b: &str, id: &str| (p(b), id.to_owned(), None);
        let seen = |items: Vec<SeenMessage>| Seen {
            items,
            partial_total: None,
            total: None,
        };
        // 5 moved (body X), 20 others with body X stay; none came back.
        let before = seen((0..25).map(|i| at("X", &format!("o-{i}"))).collect());
        let moved = vec![p("X"); 5];
        let now = seen(before.items[5..].to_vec());
        assert!(super::came_back(&before, &moved, &now, 0).is_empty());
        // Two of them came back (new ids): those two, no more.
        let mut now2 = now.clone();
        now2.items.push(at("X", "c-1"));
        now2.items.push(at("X", "c-2"));
        assert_eq!(super::came_back(&before, &moved, &now2, 0), ["c-1", "c-2"]);
        // Ids shared by equal bodies (RabbitMQ's digest): counted by the bodies.
        let before = seen((0..25).map(|_| at("X", "sha256:x")).collect());
        let mut now3 = seen((0..20).map(|_| at("X", "sha256:x")).collect());
        assert!(super::came_back(&before, &moved, &now3, 0).is_empty());
        now3.items.extend((0..7).map(|_| at("X", "sha256:x")));
        assert_eq!(
            super::came_back(&before, &moved, &now3, 0).len(),
            5,
            "at most what moved"
        );
        // Other bodies newly in the DLQ are not the batch's.
        assert!(super::came_back(&before, &moved, &seen(vec![at("Y", "y-1")]), 0).is_empty());
        // A partial read (SQS's 10 of 25, another 10 now): the depth did not grow beyond
        // what stayed, so nothing came back, whatever the samples.
        let part = |ids: std::ops::Range<usize>, total| Seen {
            items: ids.map(|i| at("X", &format!("o-{i}"))).collect(),
            partial_total: Some(total),
            total: Some(total),
        };
        assert!(super::came_back(&part(0..10, 25), &moved, &part(10..20, 20), 0).is_empty());
        assert_eq!(
            super::came_back(&part(0..10, 25), &moved, &part(10..20, 22), 0).len(),
            2
        );
        // A copy this run made (its stamp, or SQS's id), new since the batch: back exactly,
        // whatever its body; one that was there before is not.
        let mine = |id: &str, n: u64| (p("Z"), id.to_owned(), Some((format!("run/{n}"), n)));
        let before = seen(vec![mine("a", 1)]);
        let now = seen(vec![mine("a", 1), mine("b", 7), mine("c", 3)]);
        assert_eq!(super::came_back(&before, &moved, &now, 0), ["b", "c"]);
        // Only this batch's copies (numbered from 5): an earlier batch's, back only now, are
        // not counted against this one.
        assert_eq!(super::came_back(&before, &moved, &now, 5), ["b"]);
        // Their keys, for `cameBack`: this batch's copies back, each by its key.
        assert_eq!(super::copies_back(&before, &now, 0), ["run/7", "run/3"]);
        assert_eq!(super::copies_back(&before, &now, 5), ["run/7"]);
    }
}
