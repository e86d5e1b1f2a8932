//! The raw message every backend's status door and mover hands up, in a room of its own: the
//! envelope reads it and the summary counts it, and neither may need the other to name it.

/// One message as a backend read it, before any interpretation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Message {
    /// The backend's id (SQS MessageId; RabbitMQ message_id or position; Kafka
    /// `partition/offset`).
    pub id: String,
    /// Headers (SQS: message attributes), values as text (nested values as JSON), in the
    /// order the backend gave them.
    pub headers: Vec<(String, String)>,
    /// The message's properties beside its headers, by the names `deadLetter.envelope` may
    /// give as `property:` (`spec::resolve::envelope::properties`), values as the broker
    /// has them, as text (RabbitMQ `timestamp` in seconds, Kafka's in milliseconds).
    pub properties: Vec<(String, String)>,
    /// The first `max_body` bytes of the body at most.
    pub body: Vec<u8>,
    /// The whole body's length.
    pub body_len: u64,
    /// When it was first published, in milliseconds since the Unix epoch, if known.
    pub published_ms: Option<i64>,
    /// When the broker dead-lettered it (RabbitMQ `x-death[0].time`), if the broker says.
    pub dead_lettered_ms: Option<i64>,
    /// When the retention of the queue it was read from started counting for it, as far as
    /// the backend tells (never later): what `archive --due` measures ages from. SQS: its
    /// SentTimestamp (a standard DLQ keeps the original enqueue time; a FIFO one resets it
    /// on the move, so this is earlier than needed, never later); Kafka: the record's
    /// timestamp; Pub/Sub: its publish time on the dead-letter topic; RabbitMQ: no enqueue
    /// time is exposed, so `x-death[0].time`, else the `timestamp` property. `None`: unknown.
    pub retained_since_ms: Option<i64>,
    /// Deliveries the broker counted (RabbitMQ `x-death` counts), if it says.
    pub attempts: Option<u64>,
    /// Where it came from, as the broker says (SQS DeadLetterQueueSourceArn, RabbitMQ
    /// `x-death[0].queue`, Spring's `kafka_dlt-original-topic`).
    pub source: Option<String>,
    /// The broker's own reason, the fallback class (RabbitMQ `x-death` reason; SQS
    /// `transient_exhausted` for a message moved by a redrive policy).
    pub native_class: Option<String>,
}

impl Message {
    /// What the message carries, hashed: its headers in the order read, the body as read and
    /// its whole length; not its id (for RabbitMQ without `message_id`, its position). How
    /// `dlqctl exporter` knows a message again from one reading to the next
    /// (`status::first_seen`). Stable within one process, which is as long as that memory lives.
    pub fn fingerprint(&self) -> u64 {
        use std::hash::{Hash as _, Hasher as _};
        let mut h = std::hash::DefaultHasher::new();
        self.headers.hash(&mut h);
        self.body.hash(&mut h);
        self.body_len.hash(&mut h);
        h.finish()
    }
}
