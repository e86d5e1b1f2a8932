//! The values dlqctl fills in when a spec says nothing: each backend's own defaults where
//! dlqctl keeps them (SQS's 4-day retention, Pub/Sub's 10 s ack deadline), and dlqctl's own
//! where it chooses (dead letters kept as long as SQS allows, three redrives, a minute's
//! alarm period).
//!
//! Constants only, below every other file of `resolve`: a reader looking for "what if I leave
//! this out" opens one file.

use crate::spec::duration::Duration;

/// How many times `redrive` brings one message back unless `deadLetter.maxRedrives` says.
pub const DEFAULT_MAX_REDRIVES: u32 = 3;

/// How long before its expiry `archive --due` archives a dead letter unless
/// `deadLetter.archive.before` says: two days, so a daily run has one to spare.
pub const DEFAULT_ARCHIVE_BEFORE: Duration = Duration::from_secs(2 * 86_400);

/// SQS's own default retention, which dlqctl keeps for the main queue.
pub const SQS_DEFAULT_RETENTION: Duration = Duration::from_secs(4 * 86_400);
/// SQS's maximum, dlqctl's default for dead-letter queues: dead letters wait for people.
pub const SQS_DEFAULT_DLQ_RETENTION: Duration = Duration::from_secs(14 * 86_400);
pub const SQS_DEFAULT_VISIBILITY: Duration = Duration::from_secs(30);
/// Spring Kafka's default back-off (FixedBackOff, 1000 ms).
pub const KAFKA_DEFAULT_DELAY: Duration = Duration::from_secs(1);
/// The invalid-message topic's default suffix on the main topic: `<main>-invalid-dlt`.
pub const KAFKA_INVALID_SUFFIX: &str = "-invalid-dlt";
pub const DEFAULT_POLICY_PRIORITY: i32 = 10;
/// CloudWatch alarm defaults: one period of a minute (SQS publishes metrics per minute).
pub const DEFAULT_ALARM_PERIOD: Duration = Duration::from_secs(60);
pub const DEFAULT_ALARM_EVALUATION_PERIODS: u32 = 1;
/// `alarms.deadLetterRate` defaults: the rate over 5 minutes (enough messages for a share of
/// 0.1% to mean something), above the threshold for 10 minutes before anyone is told.
pub const DEFAULT_RATE_PERIOD: Duration = Duration::from_secs(300);
pub const DEFAULT_RATE_FOR: Duration = Duration::from_secs(600);
/// Pub/Sub's own defaults, which dlqctl keeps when the spec says nothing: a subscription keeps
/// messages 7 days (also its maximum), waits 10 s for an ack, and backs off at most 600 s.
pub const PUBSUB_DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 86_400);
pub const PUBSUB_DEFAULT_ACK_DEADLINE: Duration = Duration::from_secs(10);
pub const PUBSUB_DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(600);
/// Azure Service Bus's own defaults, which dlqctl keeps when the spec says nothing: a peek-lock
/// of 1 minute (the ARM reference's `lockDuration`: "the default value is 1 minute").
pub const AZURE_DEFAULT_LOCK_DURATION: Duration = Duration::from_secs(60);
/// The path of an entity's built-in dead-letter subqueue, after the entity's own path.
pub const AZURE_DEAD_LETTER_SUBQUEUE: &str = "$DeadLetterQueue";
