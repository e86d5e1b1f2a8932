//! The error envelope read: what one dead letter says of why it died, where it came from, how
//! often it was tried and when it was dead-lettered (docs/envelope.md, version 1), by the
//! channel's resolved envelope (`spec::resolve::envelope`: its profile, or the mapping the
//! spec declares), then its class by the channel's `deadLetter.classes` rules.
//!
//! The declared set is read first; when it finds no class, the sets of the other known
//! profiles follow, then the broker's own reason (the backend puts it in
//! [`Message::native_class`]), then `unknown`. Each other field comes from the set that named
//! the class, else the declared one, else the broker. dlqctl's header names carry no `x-` on
//! purpose: RabbitMQ treats `x-` headers as the broker's (4.0 no longer interprets an
//! `x-death` a client publishes). On RabbitMQ, [`ATTEMPTS`] is also the consumer's own running
//! count round the TTL retry loop (docs/rabbitmq.md, consumer contract).

use serde_json::Value;

use super::message::Message;
use crate::spec::model::Format;
use crate::spec::resolve::EnvelopeResolved;
pub use crate::spec::resolve::envelope::{
    ATTEMPTS, DEAD_LETTERED_AT, ERROR_CLASS, ERROR_MESSAGE, SOURCE, TRANSIENT_EXHAUSTED, UNKNOWN,
};
use crate::spec::resolve::envelope::{FieldSet, Location, Source};

/// The version of the envelope documented in docs/envelope.md.
pub const VERSION: u32 = 1;

/// Written by `dlqctl redrive` on every message it moves back.
pub const REDRIVE_COUNT: &str = "dlq-redrive-count";

/// Written by `dlqctl redrive` on every copy it makes (but on SQS, whose 10 message
/// attributes a copy could overflow: there the copy's message id serves): the run that made
/// it, so that the run knows its own copies when they fail again and come back
/// ([`crate::redrive::Copies`]).
pub const REDRIVE_RUN: &str = "dlq-redrive-run";

/// What the envelope says of one message.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    /// The class: the channel's rule that matched; without rules, what the message says.
    pub class: String,
    /// What the message (or the broker) says the class is, when the rules made it another
    /// name (or `unknown`): shown beside the class.
    pub raw_class: Option<String>,
    pub message: Option<String>,
    pub source: Option<String>,
    pub attempts: Option<u64>,
    pub dead_lettered_ms: Option<i64>,
    pub first_failure_ms: Option<i64>,
}

fn header<'a>(m: &'a Message, name: &str) -> Option<&'a str> {
    m.headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The body as JSON, parsed once per message and only when a pointer asks.
struct Body<'a> {
    bytes: &'a [u8],
    parsed: Option<Option<Value>>,
}

impl Body<'_> {
    fn pointer(&mut self, p: &str) -> Option<String> {
        let bytes = self.bytes;
        let v = self
            .parsed
            .get_or_insert_with(|| serde_json::from_slice(bytes).ok())
            .as_ref()?
            .pointer(p)?;
        Some(match v {
            Value::String(s) => s.clone(),
            Value::Null => return None,
            other => other.to_string(),
        })
    }
}

fn value(m: &Message, body: &mut Body<'_>, s: &Source) -> Option<String> {
    let v = match &s.at {
        Location::Header(h) => header(m, h).map(str::to_owned),
        Location::Property(p) => m
            .properties
            .iter()
            .find(|(k, _)| k == p)
            .map(|(_, v)| v.clone()),
        Location::Pointer(p) => body.pointer(p),
    }?;
    let v = v.trim();
    (!v.is_empty()).then(|| v.to_owned())
}

/// The first of `sets`' sources for a field that gives a value.
fn first<'s>(
    m: &Message,
    body: &mut Body<'_>,
    sets: &[&'s FieldSet],
    field: impl Fn(&'s FieldSet) -> Option<&'s Source>,
) -> Option<(String, Format)> {
    sets.iter()
        .filter_map(|s| field(s))
        .find_map(|s| value(m, body, s).map(|v| (v, s.format)))
}

/// Reads the envelope of `m`.
pub fn read(envelope: &EnvelopeResolved, m: &Message) -> Read {
    let mut body = Body {
        bytes: &m.body,
        parsed: None,
    };
    let found = envelope.sets.iter().find_map(|set| {
        set.class
            .iter()
            .find_map(|s| value(m, &mut body, s))
            .map(|class| (set, class))
    });
    // The fields come from the set that named the class, else the declared one.
    let mut sets: Vec<&FieldSet> = Vec::with_capacity(2);
    if let Some((set, _)) = &found {
        sets.push(set);
    }
    if let Some(declared) = envelope.sets.first()
        && !sets.contains(&declared)
    {
        sets.push(declared);
    }
    let text = |body: &mut Body<'_>, f: fn(&FieldSet) -> Option<&Source>| {
        first(m, body, &sets, f).map(|(v, _)| v)
    };
    let message = text(&mut body, |s| s.message.as_ref());
    let source = text(&mut body, |s| s.source.as_ref()).or_else(|| m.source.clone());
    let attempts = first(m, &mut body, &sets, |s| s.attempts.as_ref())
        .and_then(|(v, _)| v.parse().ok())
        .or(m.attempts);
    let time = |body: &mut Body<'_>, f: fn(&FieldSet) -> Option<&Source>| {
        first(m, body, &sets, f).and_then(|(v, fmt)| parse_time(&v, fmt))
    };
    let dead_lettered_ms = time(&mut body, |s| s.dead_lettered_at.as_ref()).or(m.dead_lettered_ms);
    let first_failure_ms = time(&mut body, |s| s.first_failure_at.as_ref());
    let raw = found.map(|(_, c)| c).or_else(|| m.native_class.clone());
    let (class, raw_class) = if envelope.classes.is_empty() {
        (raw.unwrap_or_else(|| UNKNOWN.to_owned()), None)
    } else {
        let named = envelope
            .classes
            .classify(raw.as_deref(), message.as_deref())
            .unwrap_or(UNKNOWN)
            .to_owned();
        let raw = raw.filter(|r| *r != named);
        (named, raw)
    };
    Read {
        class,
        raw_class,
        message,
        source,
        attempts,
        dead_lettered_ms,
        first_failure_ms,
    }
}

/// A time as `format` says: RFC 3339 (`2026-12-01T10:00:00Z`), or a number of seconds or
/// milliseconds since the epoch (`auto`: RFC 3339, or milliseconds).
pub fn parse_time(v: &str, format: Format) -> Option<i64> {
    let number = || -> Option<f64> { v.parse::<f64>().ok().filter(|n| n.is_finite()) };
    let rfc3339 = || {
        let t =
            time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc3339).ok()?;
        i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
    };
    match format {
        Format::EpochSeconds => number().map(|s| (s * 1000.0) as i64),
        Format::EpochMillis => number().map(|ms| ms as i64),
        Format::Rfc3339 => rfc3339(),
        Format::Auto | Format::Text | Format::Integer => v.parse::<i64>().ok().or_else(rfc3339),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::model::Profile;

    fn env(p: Profile) -> EnvelopeResolved {
        EnvelopeResolved::profile(p)
    }

    fn with(headers: &[(&str, &str)], native: Option<&str>) -> Message {
        Message {
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            native_class: native.map(str::to_owned),
            ..Message::default()
        }
    }

    #[test]
    fn the_declared_envelope_wins_then_the_others_then_the_broker_then_unknown() {
        let both = with(
            &[
                (
                    "kafka_dlt-exception-fqcn",
                    "org.springframework.ListenerExecutionFailedException",
                ),
                ("kafka_dlt-exception-cause-fqcn", "com.acme.BadOrder"),
                ("dlq-error-class", "poison"),
            ],
            None,
        );
        assert_eq!(read(&env(Profile::Dlqctl), &both).class, "poison");
        assert_eq!(
            read(&env(Profile::Spring), &both).class,
            "com.acme.BadOrder"
        );
        let spring_outer_only = with(&[("kafka_dlt-exception-fqcn", "java.lang.Outer")], None);
        assert_eq!(
            read(&env(Profile::Dlqctl), &spring_outer_only).class,
            "java.lang.Outer"
        );
        let connect = with(
            &[(
                "__connect.errors.exception.class.name",
                "org.apache.kafka.connect.errors.DataException",
            )],
            None,
        );
        assert_eq!(
            read(&env(Profile::Connect), &connect).class,
            "org.apache.kafka.connect.errors.DataException"
        );
        let rabbit = with(&[], Some("rejected"));
        assert_eq!(read(&env(Profile::Dlqctl), &rabbit).class, "rejected");
        assert_eq!(read(&env(Profile::Dlqctl), &with(&[], None)).class, UNKNOWN);
        // `none`: the producers' headers are not trusted, only the broker's reason.
        assert_eq!(read(&env(Profile::None), &both).class, UNKNOWN);
        assert_eq!(read(&env(Profile::None), &rabbit).class, "rejected");
    }

    #[test]
    fn spring_kafka_3s_header_names_give_the_cause_its_message_and_source() {
        // What Spring Kafka 3.3's retry topics wrote on a DLT record (tests/spring_kafka.rs).
        let m = with(
            &[
                ("kafka_original-topic", "orders"),
                (
                    "kafka_exception-fqcn",
                    "org.springframework.kafka.listener.ListenerExecutionFailedException",
                ),
                ("kafka_exception-cause-fqcn", "com.acme.StockRejected"),
                ("kafka_exception-message", "Listener failed; stock rejected"),
            ],
            None,
        );
        for envelope in [Profile::Spring, Profile::Dlqctl] {
            let r = read(&env(envelope), &m);
            assert_eq!(r.class, "com.acme.StockRejected");
            assert_eq!(
                r.message.as_deref(),
                Some("Listener failed; stock rejected")
            );
            assert_eq!(r.source.as_deref(), Some("orders"));
        }
    }

    #[test]
    fn attempts_source_and_dead_letter_time_come_from_the_envelope_first() {
        let m = Message {
            attempts: Some(9),
            source: Some("broker-said".into()),
            ..with(
                &[
                    ("dlq-error-class", "transient_exhausted"),
                    ("dlq-attempts", "5"),
                    ("dlq-source", "orders"),
                    ("dlq-dead-lettered-at", "2026-12-01T10:00:00Z"),
                ],
                None,
            )
        };
        let r = read(&env(Profile::Dlqctl), &m);
        assert_eq!(r.attempts, Some(5));
        assert_eq!(r.source.as_deref(), Some("orders"));
        assert_eq!(r.dead_lettered_ms, Some(1_796_119_200_000));
        let r = read(&env(Profile::None), &m);
        assert_eq!(
            (r.attempts, r.source.as_deref()),
            (Some(9), Some("broker-said"))
        );
        // `dlq-dead-lettered-at` (format `auto`): RFC 3339 or milliseconds since the epoch.
        assert_eq!(
            parse_time("1796119200000", Format::Auto),
            Some(1_796_119_200_000)
        );
        assert_eq!(parse_time("yesterday", Format::Auto), None);
    }

    #[test]
    fn a_declared_mapping_reads_headers_properties_and_the_body_and_the_rules_name_the_class() {
        use crate::spec::model::{Backend, ClassRule, Envelope, EnvelopeMapping, Field, Patterns};
        let field = |h: Option<&str>, p: Option<&str>, ptr: Option<&str>| Field {
            header: h.map(str::to_owned),
            property: p.map(str::to_owned),
            pointer: ptr.map(str::to_owned),
            format: None,
        };
        // The amqplib consumer of the project's source material.
        let mapping = EnvelopeMapping {
            from: Some(Profile::None),
            error_class: Some(field(None, None, Some("/error/type"))),
            error_message: Some(field(Some("x-failure-reason"), None, None)),
            attempts: Some(field(Some("x-retry-count"), None, None)),
            source: Some(field(Some("x-original-queue"), None, None)),
            dead_lettered_at: Some(field(None, Some("timestamp"), None)),
            first_failure_at: None,
        };
        let rules = [
            ClassRule {
                name: "poison".into(),
                error_class: Some(Patterns::One("SyntaxError".into())),
                error_message: None,
            },
            ClassRule {
                name: "transient_exhausted".into(),
                error_class: None,
                error_message: Some(Patterns::One("*unavailable*".into())),
            },
        ];
        let env = crate::spec::resolve::envelope::resolve(
            Backend::Rabbitmq,
            &Envelope::Mapping(Box::new(mapping)),
            &rules,
        );
        let m = Message {
            headers: vec![
                ("x-failure-reason".into(), "downstream unavailable".into()),
                ("x-retry-count".into(), "3".into()),
                ("x-original-queue".into(), "orders.process".into()),
                ("dlq-error-class".into(), "not read: from none".into()),
            ],
            properties: vec![("timestamp".into(), "1796119200".into())],
            body: br#"{"order": 7}"#.to_vec(),
            native_class: Some("rejected".into()),
            ..Message::default()
        };
        let r = read(&env, &m);
        assert_eq!(r.class, "transient_exhausted");
        assert_eq!(
            r.raw_class.as_deref(),
            Some("rejected"),
            "the broker's reason, shown"
        );
        assert_eq!(r.attempts, Some(3));
        assert_eq!(r.source.as_deref(), Some("orders.process"));
        assert_eq!(
            r.dead_lettered_ms,
            Some(1_796_119_200_000),
            "seconds, as RabbitMQ's"
        );
        let poison = Message {
            headers: vec![
                ("x-failure-reason".into(), "Unexpected token".into()),
                ("x-retry-count".into(), "0".into()),
            ],
            body: br#"{"error": {"type": "SyntaxError"}}"#.to_vec(),
            ..Message::default()
        };
        let r = read(&env, &poison);
        assert_eq!((r.class.as_str(), r.attempts), ("poison", Some(0)));
        assert_eq!(r.raw_class.as_deref(), Some("SyntaxError"));
        let neither = Message {
            body: b"not json".to_vec(),
            ..Message::default()
        };
        let r = read(&env, &neither);
        assert_eq!((r.class.as_str(), r.raw_class), (UNKNOWN, None));
        assert_eq!(r.dead_lettered_ms, None);
    }

    #[test]
    fn times_are_read_in_the_declared_format() {
        assert_eq!(
            parse_time("1796119200", Format::EpochSeconds),
            Some(1_796_119_200_000)
        );
        assert_eq!(
            parse_time("1796119200000", Format::EpochMillis),
            Some(1_796_119_200_000)
        );
        assert_eq!(
            parse_time("2026-12-01T10:00:00.5Z", Format::Rfc3339),
            Some(1_796_119_200_500)
        );
        assert_eq!(parse_time("1796119200000", Format::Rfc3339), None);
        assert_eq!(parse_time("NaN", Format::EpochSeconds), None);
    }
}
