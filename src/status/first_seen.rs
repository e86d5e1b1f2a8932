//! An age for dead letters that carry no time at all, so that an age alarm is never silently
//! blind (issue 34).
//!
//! RabbitMQ keeps no enqueue time: a message published without a `timestamp` property,
//! dead-lettered by a consumer that republishes it (no `x-death`), with no time field declared
//! in its envelope, has no age anywhere. `dlqctl exporter` reads the head of the queue every
//! interval; this module remembers when it first saw each message there. The earliest of those
//! moments among the messages of the latest reading is a lower bound of the oldest's age (that
//! message has waited at least since then), published with `basis="first-seen"`.
//!
//! How a message is recognised from one reading to the next: by a fingerprint of what it
//! carries ([`super::Message::fingerprint`]: headers, the body as read, the body's length; not
//! the backend's id, which for a RabbitMQ message without `message_id` is its position) and by
//! its position among the messages of the reading with the same fingerprint (the n-th copy).
//! An absolute position
//! would not do: when the head is consumed every message behind it moves up one, and each
//! would be seen as new, its age reset. Copies are told apart by their order: a queue is first
//! in, first out, so when fewer copies remain than were seen, those that left are the earliest
//! (their times are dropped, the later ones kept), and the estimate stays a lower bound.
//!
//! Bounded: at most [`CAP`] messages per channel are remembered (the first of the reading: the
//! head, where the oldest is), and only those of the latest reading; a message gone from it is
//! forgotten. Pure: the exporter holds one [`FirstSeen`] per channel and feeds it each reading.

use std::collections::HashMap;

use super::{AgeBasis, DeadLetterReport};

/// Messages remembered per channel, at most (as many as one reading may hold:
/// `MAX_ASKED_SCAN`, the largest `--scan`).
pub const CAP: usize = super::MAX_ASKED_SCAN;

/// Bytes of a body the exporter reads, for the fingerprint (it shows no body).
pub const FINGERPRINT_BODY: usize = 256;

/// When each message of one channel was first seen at the head of its queue.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FirstSeen {
    /// Per fingerprint, when each copy was first seen (ms since the epoch), earliest first.
    seen: HashMap<u64, Vec<i64>>,
}

impl FirstSeen {
    /// Takes one reading (the fingerprints of the messages read, head first) made at `now_ms`:
    /// messages not seen before are first seen now, messages no longer read are forgotten.
    /// Returns when the earliest of the reading's messages was first seen (`None`: no message).
    pub fn observe(&mut self, fingerprints: &[u64], now_ms: i64) -> Option<i64> {
        let mut copies: HashMap<u64, usize> = HashMap::new();
        for f in fingerprints.iter().take(CAP) {
            *copies.entry(*f).or_default() += 1;
        }
        self.seen.retain(|f, _| copies.contains_key(f));
        for (f, n) in copies {
            let times = self.seen.entry(f).or_default();
            // Fewer copies than before: the earliest left (first in, first out).
            if times.len() > n {
                times.drain(..times.len() - n);
            }
            times.resize(n, now_ms);
        }
        self.seen.values().filter_map(|t| t.first()).min().copied()
    }

    /// Messages remembered.
    pub fn len(&self) -> usize {
        self.seen.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// Gives a reading with no age its first-seen age: where messages were read and none carries
/// a time (`oldest_age_basis` [`AgeBasis::Unknown`] with fingerprints), the age since the
/// earliest first sight, basis [`AgeBasis::FirstSeen`]. Any other reading (an age known, an
/// empty queue, no message read) leaves the report as it is, and `memory` forgets everything:
/// there is nothing to estimate, or nothing seen to estimate from.
pub fn estimate(memory: &mut FirstSeen, report: &mut DeadLetterReport, now_ms: i64) {
    if report.oldest_age_basis != Some(AgeBasis::Unknown) || report.fingerprints.is_empty() {
        *memory = FirstSeen::default();
        return;
    }
    if let Some(first) = memory.observe(&report.fingerprints, now_ms) {
        report.oldest_age_seconds = Some((now_ms - first).max(0) as f64 / 1000.0);
        report.oldest_age_since = Some("first-seen");
        report.oldest_age_basis = Some(AgeBasis::FirstSeen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Message;

    fn fingerprint(m: &Message) -> u64 {
        m.fingerprint()
    }

    fn message(headers: &[(&str, &str)], body: &str) -> Message {
        Message {
            id: "#1".into(),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            body: body.as_bytes().to_vec(),
            body_len: body.len() as u64,
            ..Message::default()
        }
    }

    #[test]
    fn a_fingerprint_is_what_a_message_carries_not_its_id() {
        let a = message(&[("x-failure-reason", "boom")], "{\"order\":1}");
        let moved = Message {
            id: "#7".into(),
            ..a.clone()
        };
        assert_eq!(fingerprint(&a), fingerprint(&moved));
        let other_body = message(&[("x-failure-reason", "boom")], "{\"order\":2}");
        let other_header = message(&[("x-failure-reason", "bang")], "{\"order\":1}");
        assert_ne!(fingerprint(&a), fingerprint(&other_body));
        assert_ne!(fingerprint(&a), fingerprint(&other_header));
        // The same prefix read, but a longer message.
        let longer = Message {
            body_len: 4096,
            ..a.clone()
        };
        assert_ne!(fingerprint(&a), fingerprint(&longer));
    }

    #[test]
    fn each_message_keeps_the_time_it_was_first_seen_as_the_queue_moves_up() {
        let mut m = FirstSeen::default();
        assert_eq!(m.observe(&[1, 2], 1_000), Some(1_000));
        assert_eq!(m.observe(&[1, 2, 3], 5_000), Some(1_000));
        // The head (1) consumed: 2 and 3 move up a place and keep their times.
        assert_eq!(m.observe(&[2, 3], 9_000), Some(1_000));
        assert_eq!(m.observe(&[3], 12_000), Some(5_000));
        assert_eq!(m.len(), 1);
        assert_eq!(m.observe(&[], 13_000), None);
        assert!(m.is_empty());
    }

    #[test]
    fn a_message_gone_from_the_reading_is_forgotten() {
        let mut m = FirstSeen::default();
        m.observe(&[1, 2], 1_000);
        m.observe(&[2], 2_000);
        assert_eq!(m.len(), 1);
        // It comes back (redriven, dead-lettered again): seen anew.
        assert_eq!(m.observe(&[1, 2], 3_000), Some(1_000));
        assert_eq!(m.observe(&[1], 4_000), Some(3_000));
    }

    #[test]
    fn identical_copies_are_told_apart_by_their_place_and_the_earliest_leave_first() {
        let mut m = FirstSeen::default();
        m.observe(&[7], 1_000);
        m.observe(&[7, 7], 2_000);
        m.observe(&[7, 7, 7], 3_000);
        assert_eq!(m.len(), 3);
        // One copy left: the first in (seen at 1 s); the estimate stays a lower bound.
        assert_eq!(m.observe(&[7, 7], 4_000), Some(2_000));
        assert_eq!(m.observe(&[7], 5_000), Some(3_000));
    }

    #[test]
    fn memory_is_bounded_by_the_cap_whatever_the_reading() {
        let mut m = FirstSeen::default();
        let many: Vec<u64> = (0..(CAP as u64 * 3)).collect();
        m.observe(&many, 1_000);
        assert_eq!(m.len(), CAP);
        let copies = vec![9u64; CAP * 2];
        m.observe(&copies, 2_000);
        assert_eq!(m.len(), CAP);
    }

    fn unknown(fingerprints: Vec<u64>) -> DeadLetterReport {
        DeadLetterReport {
            by_source: Default::default(),
            name: "q".into(),
            depth: super::super::Depth::total(
                fingerprints.len() as u64,
                super::super::Measure::Waiting,
            ),
            oldest_age_seconds: None,
            oldest_age_since: None,
            oldest_age_basis: Some(AgeBasis::Unknown),
            by_error_class: Default::default(),
            by_class_label: Default::default(),
            sampled: fingerprints.len() as u64,
            exact: true,
            samples: Vec::new(),
            notes: Vec::new(),
            fingerprints,
            flow: Default::default(),
            by_class_in_window: Default::default(),
            groups: None,
            selected: None,
        }
    }

    #[test]
    fn a_reading_with_no_time_gets_a_first_seen_age_that_grows() {
        let mut m = FirstSeen::default();
        let mut r = unknown(vec![1, 2]);
        estimate(&mut m, &mut r, 10_000);
        assert_eq!(r.oldest_age_basis, Some(AgeBasis::FirstSeen));
        assert_eq!(r.oldest_age_seconds, Some(0.0));
        let mut r = unknown(vec![1, 2]);
        estimate(&mut m, &mut r, 70_500);
        assert_eq!(r.oldest_age_seconds, Some(60.5));
        // An age known from the messages: left as it is, and the memory forgets.
        let mut known = unknown(vec![1, 2]);
        known.oldest_age_basis = Some(AgeBasis::Head);
        known.oldest_age_seconds = Some(5.0);
        estimate(&mut m, &mut known, 80_000);
        assert_eq!(
            (known.oldest_age_basis, known.oldest_age_seconds),
            (Some(AgeBasis::Head), Some(5.0))
        );
        assert!(m.is_empty());
        // Messages wait but none was read (no peek): still unknown, nothing remembered.
        let mut blind = unknown(Vec::new());
        blind.depth = super::super::Depth::total(3, super::super::Measure::Waiting);
        estimate(&mut m, &mut blind, 90_000);
        assert_eq!(blind.oldest_age_basis, Some(AgeBasis::Unknown));
        assert_eq!(blind.oldest_age_seconds, None);
    }
}
