//! The error envelope: which headers of a dead letter say why it died, where it came from,
//! how often it was tried and when it was dead-lettered (docs/envelope.md, version 1).
//!
//! The spec's `deadLetter.envelope` names the set read first; the other known sets follow, then
//! the broker's own reason (the backend puts it in [`Message::native_class`]), then `unknown`.
//! Header names carry no `x-` on purpose: RabbitMQ treats `x-` headers as the broker's (4.0
//! no longer interprets an `x-death` a client publishes). On RabbitMQ, [`ATTEMPTS`] is also
//! the consumer's own running count round the TTL retry loop (docs/rabbitmq.md, consumer
//! contract).

use super::message::Message;
use crate::spec::model::Envelope;

/// The version of the envelope documented in docs/envelope.md.
pub const VERSION: u32 = 1;

pub const ERROR_CLASS: &str = "dlq-error-class";
pub const ERROR_MESSAGE: &str = "dlq-error-message";
pub const SOURCE: &str = "dlq-source";
pub const ATTEMPTS: &str = "dlq-attempts";
pub const DEAD_LETTERED_AT: &str = "dlq-dead-lettered-at";
/// Written by `dlqctl redrive` on every message it moves back.
pub const REDRIVE_COUNT: &str = "dlq-redrive-count";

/// The class of a message whose headers say nothing the envelope or broker knows.
pub const UNKNOWN: &str = "unknown";
/// The class of a message that used up its retries (what a redrive policy moves).
pub const TRANSIENT_EXHAUSTED: &str = "transient_exhausted";

/// Headers of one envelope: class (in order of preference), message, source.
struct Names {
    class: &'static [&'static str],
    message: &'static str,
    source: &'static str,
}

const DLQCTL: Names = Names {
    class: &[ERROR_CLASS],
    message: ERROR_MESSAGE,
    source: SOURCE,
};
/// Spring Kafka's DeadLetterPublishingRecoverer: the cause first (the outer class is usually
/// a wrapper such as ListenerExecutionFailedException).
const SPRING: Names = Names {
    class: &["kafka_dlt-exception-cause-fqcn", "kafka_dlt-exception-fqcn"],
    message: "kafka_dlt-exception-message",
    source: "kafka_dlt-original-topic",
};
/// Spring Kafka 3's DeadLetterPublishingRecoverer (3.3 with Spring Boot 3.5, measured against
/// Apache Kafka in tests/spring_kafka.rs) writes these; `KafkaHeaders.DLT_*` above are older
/// names, still written by older applications.
const SPRING3: Names = Names {
    class: &["kafka_exception-cause-fqcn", "kafka_exception-fqcn"],
    message: "kafka_exception-message",
    source: "kafka_original-topic",
};
/// Kafka Connect's dead-letter queue with `errors.deadletterqueue.context.headers.enable`.
const CONNECT: Names = Names {
    class: &["__connect.errors.exception.class.name"],
    message: "__connect.errors.exception.message",
    source: "__connect.errors.topic",
};

/// What the envelope says of one message.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub class: String,
    pub message: Option<String>,
    pub source: Option<String>,
    pub attempts: Option<u64>,
    pub dead_lettered_ms: Option<i64>,
}

fn header<'a>(m: &'a Message, name: &str) -> Option<&'a str> {
    m.headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// The sets to try, the declared one first.
fn order(envelope: Envelope) -> Vec<&'static Names> {
    match envelope {
        Envelope::None => Vec::new(),
        Envelope::Dlqctl => vec![&DLQCTL, &SPRING, &SPRING3, &CONNECT],
        Envelope::Spring => vec![&SPRING, &SPRING3, &DLQCTL, &CONNECT],
        Envelope::Connect => vec![&CONNECT, &DLQCTL, &SPRING, &SPRING3],
    }
}

/// Reads the envelope of `m`.
pub fn read(envelope: Envelope, m: &Message) -> Read {
    let sets = order(envelope);
    let found = sets.iter().find_map(|n| {
        n.class
            .iter()
            .find_map(|h| header(m, h))
            .map(|class| (*n, class))
    });
    let class = found
        .map(|(_, c)| c.to_owned())
        .or_else(|| m.native_class.clone())
        .unwrap_or_else(|| UNKNOWN.to_owned());
    let message = found.and_then(|(n, _)| header(m, n.message).map(str::to_owned));
    let source = found
        .and_then(|(n, _)| header(m, n.source).map(str::to_owned))
        .or_else(|| {
            (envelope != Envelope::None)
                .then(|| header(m, SOURCE).map(str::to_owned))
                .flatten()
        })
        .or_else(|| m.source.clone());
    let own = envelope != Envelope::None;
    let attempts = own
        .then(|| header(m, ATTEMPTS).and_then(|v| v.parse().ok()))
        .flatten()
        .or(m.attempts);
    let dead_lettered_ms = own
        .then(|| header(m, DEAD_LETTERED_AT).and_then(parse_instant))
        .flatten()
        .or(m.dead_lettered_ms);
    Read {
        class,
        message,
        source,
        attempts,
        dead_lettered_ms,
    }
}

/// `dlq-dead-lettered-at`: RFC 3339 (`2026-12-01T10:00:00Z`) or milliseconds since the epoch.
pub fn parse_instant(v: &str) -> Option<i64> {
    if let Ok(ms) = v.parse::<i64>() {
        return Some(ms);
    }
    let t = time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(read(Envelope::Dlqctl, &both).class, "poison");
        assert_eq!(read(Envelope::Spring, &both).class, "com.acme.BadOrder");
        let spring_outer_only = with(&[("kafka_dlt-exception-fqcn", "java.lang.Outer")], None);
        assert_eq!(
            read(Envelope::Dlqctl, &spring_outer_only).class,
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
            read(Envelope::Connect, &connect).class,
            "org.apache.kafka.connect.errors.DataException"
        );
        let rabbit = with(&[], Some("rejected"));
        assert_eq!(read(Envelope::Dlqctl, &rabbit).class, "rejected");
        assert_eq!(read(Envelope::Dlqctl, &with(&[], None)).class, UNKNOWN);
        // `none`: the producers' headers are not trusted, only the broker's reason.
        assert_eq!(read(Envelope::None, &both).class, UNKNOWN);
        assert_eq!(read(Envelope::None, &rabbit).class, "rejected");
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
        for envelope in [Envelope::Spring, Envelope::Dlqctl] {
            let r = read(envelope, &m);
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
        let r = read(Envelope::Dlqctl, &m);
        assert_eq!(r.attempts, Some(5));
        assert_eq!(r.source.as_deref(), Some("orders"));
        assert_eq!(r.dead_lettered_ms, Some(1_796_119_200_000));
        let r = read(Envelope::None, &m);
        assert_eq!(
            (r.attempts, r.source.as_deref()),
            (Some(9), Some("broker-said"))
        );
        assert_eq!(parse_instant("1796119200000"), Some(1_796_119_200_000));
        assert_eq!(parse_instant("yesterday"), None);
    }
}
