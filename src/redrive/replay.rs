//! What `redrive --from-archive` hands a backend and what it reports, whatever the backend:
//! the archived messages chosen (deduplicated, selected, limited), where they go, and the
//! pace; the backend's replay door (`backend/*/replay.rs`) publishes them, confirmed, and
//! counts what the destination confirmed in the [`Tally`].
//!
//! A replay takes nothing out of a queue: the archive is read, never changed. So it cannot
//! be idempotent on the broker's side — a second replay of the same archive publishes every
//! message again; the audit journal (`--audit-log`) holds the ids each run published.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::{Decision, Destination, Pace, Tally, redrive_count};
use crate::archive::{Record, parse_rfc3339};
use crate::spec::resolve::headers::HeaderRules;
use crate::status::{Message, selector};

/// One replay, for a backend's replay door.
pub struct Job {
    pub to: Destination,
    /// The messages to publish, in order, as they were archived (their own headers and
    /// properties: each backend adds `dlq-redrive-count` and sheds its attempt history, as
    /// its mover does).
    pub messages: Vec<Message>,
    /// `--rate`, messages per second at most.
    pub rate: Option<f64>,
    /// Ctrl-C: publish nothing more after the batch in flight.
    pub stop: Arc<AtomicBool>,
    /// `moved`: published and confirmed; `duplicated`: published, not confirmed (it may have
    /// landed); `moved_ids`.
    pub tally: Arc<Tally>,
    /// `--allow-unowned-destination`.
    pub allow_unowned: bool,
    /// Publish the messages as they are given: no `dlq-redrive-count`, no header shed (an
    /// audit record for `operations.auditTo`, which is no dead letter coming back).
    pub as_is: bool,
}

impl Job {
    /// The headers a published copy of `m` carries: its own as given ([`Job::as_is`]), or as
    /// a message brought back ([`super::moved_headers`]: `drop` and what `rules` say shed,
    /// the counter raised).
    pub fn headers_of(
        as_is: bool,
        m: &Message,
        drop: &[&str],
        rules: &HeaderRules,
    ) -> Vec<(String, String)> {
        if as_is {
            m.headers.clone()
        } else {
            super::moved_headers(&m.headers, drop, rules)
        }
    }

    /// Refuses a `--to` the target does not own (`why`: how it is not), unless allowed; the
    /// channel's own main queue or topic is never asked about.
    pub fn check_owned(&self, why: Option<String>) -> Result<(), String> {
        match why {
            Some(why) if !self.to.source && !self.allow_unowned => Err(format!(
                "not replaying into `{}`: {why}; dlqctl publishes only into what the target owns. Pass --allow-unowned-destination to publish there anyway",
                self.to.name
            )),
            _ => Ok(()),
        }
    }

    /// How many messages from `at` go in the next batch (at most `max`): the first waits its
    /// turn under `--rate`, the others join only while their turn has come too. 0: nothing
    /// left, or a stop was asked for.
    pub async fn take(&self, pace: &mut Pace, at: usize, max: usize) -> usize {
        let mut n = 0;
        while at + n < self.messages.len() && n < max {
            if n > 0 && pace.next_after(tokio::time::Instant::now()) {
                break;
            }
            if !pace.wait_or_stop(&self.stop).await {
                break;
            }
            n += 1;
        }
        n
    }
}

/// Decides about one archived record (pure): its class as the envelope read it when it
/// was archived, its age from when it was dead-lettered (else first failed, else
/// published), the `dlq-redrive-count` of the archived copy against `maxRedrives`.
pub fn decide(sel: &super::Selection, r: &Record, m: &Message, now_ms: i64) -> Decision {
    if !sel.classes.is_empty() && !sel.classes.contains(&r.envelope.class) {
        return Decision::NotSelected;
    }
    if let Some(min) = sel.older_than_ms {
        let since = m
            .dead_lettered_ms
            .or_else(|| {
                r.envelope
                    .first_failure_at
                    .as_deref()
                    .and_then(parse_rfc3339)
            })
            .or(m.published_ms);
        if since.is_none_or(|t| now_ms - t < min) {
            return Decision::NotSelected;
        }
    }
    if !sel.groups.is_empty() || sel.where_.is_some() {
        // The envelope as it was read when the message was archived.
        let e = crate::status::envelope::Read {
            class: r.envelope.class.clone(),
            raw_class: r.envelope.raw_class.clone(),
            message: r.envelope.message.clone(),
            source: r.envelope.source.clone(),
            attempts: r.envelope.attempts,
            dead_lettered_ms: r
                .envelope
                .dead_lettered_at
                .as_deref()
                .and_then(parse_rfc3339),
            first_failure_ms: r
                .envelope
                .first_failure_at
                .as_deref()
                .and_then(parse_rfc3339),
        };
        let since = e.dead_lettered_ms.or(e.first_failure_ms).or(m.published_ms);
        let age = since.map(|t| (now_ms - t).max(0) as f64 / 1000.0);
        if !selector::chosen(&sel.groups, sel.where_.as_ref(), m, &e, age) {
            return Decision::NotSelected;
        }
    }
    if redrive_count(m).is_none_or(|n| n >= sel.max_redrives) {
        return Decision::AtLimit;
    }
    Decision::Move
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::{Origin, Record};
    use crate::status::envelope::Read;

    fn rec(class: &str, count: Option<&str>, dead_ms: Option<i64>) -> Record {
        let mut headers = Vec::new();
        if let Some(c) = count {
            headers.push(("dlq-redrive-count".to_owned(), c.to_owned()));
        }
        let m = Message {
            id: "m".into(),
            headers,
            ..Message::default()
        };
        let e = Read {
            class: class.into(),
            raw_class: None,
            message: None,
            source: None,
            attempts: None,
            dead_lettered_ms: dead_ms,
            first_failure_ms: None,
        };
        let o = Origin {
            channel: "c",
            target: "t",
            backend: "sqs",
            from: "q",
            role: "dead-letter",
        };
        Record::of(&m, &e, &o, 0)
    }

    #[test]
    fn archived_records_are_selected_by_their_archived_class_age_and_count() {
        let sel = super::super::Selection {
            classes: vec!["poison".into()],
            older_than_ms: Some(60_000),
            max_redrives: 2,
            ..Default::default()
        };
        let now = 10_000_000;
        let check = |r: Record| {
            let m = r.message().expect("body");
            decide(&sel, &r, &m, now)
        };
        assert_eq!(
            check(rec("poison", Some("1"), Some(now - 61_000))),
            Decision::Move
        );
        assert_eq!(
            check(rec("transient", None, Some(now - 61_000))),
            Decision::NotSelected
        );
        assert_eq!(
            check(rec("poison", None, Some(now - 1_000))),
            Decision::NotSelected
        );
        assert_eq!(
            check(rec("poison", Some("2"), Some(now - 61_000))),
            Decision::AtLimit
        );
    }
}
