//! Every rule id dlqctl can report, with its severity and what it means: the metadata that
//! SARIF output carries (`tool.driver.rules`, for code-scanning UIs that show a rule's help
//! beside each finding).
//!
//! A finding's own message says what is wrong where; this says what the rule is for and how
//! to fix what it reports, in general. A test scans `src/` for rule ids and fails when one is
//! missing here, and another checks that the README's lint table names each of them.

use super::Severity;

/// One rule: a stable id, the severity its findings have, a one-line summary and help text.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub id: &'static str,
    pub severity: Severity,
    pub summary: &'static str,
    pub help: &'static str,
}

const fn rule(
    id: &'static str,
    severity: Severity,
    summary: &'static str,
    help: &'static str,
) -> Rule {
    Rule {
        id,
        severity,
        summary,
        help,
    }
}

use Severity::{Error as E, Info as I, Warning as W};

/// Sorted by id.
#[rustfmt::skip]
pub const RULES: &[Rule] = &[
    rule("alarms/action", E, "An alarm action is not an ARN",
        "SQS alarms notify through CloudWatch actions, which are ARNs (an SNS topic, an auto-scaling policy). Write the full ARN, e.g. `arn:aws:sns:us-east-1:123456789012:ops`."),
    rule("alarms/actions-tier", W, "Actions for a tier no alarm has",
        "`alarms.actions` names a tier (`warning` or `critical`) that none of the channel's alarms defines, so those actions never fire. Add that tier to an alarm or remove its actions."),
    rule("alarms/actions-unused", W, "Alarm actions on a RabbitMQ or Kafka channel",
        "Only SQS channels get CloudWatch alarms with actions. RabbitMQ and Kafka alarms become Prometheus rules (`dlqctl alerts`), routed by Alertmanager on their labels: remove `actions` there."),
    rule("alarms/age-beyond-retention", E, "An age alarm at or beyond the DLQ's retention",
        "A message expires from the dead-letter queue before it grows old enough to fire the alarm, so nobody is told. Lower the `oldestMessageAge` threshold or raise `deadLetter.retention`."),
    rule("alarms/for", E, "A rate alarm's `for` that is not a whole number of its periods on SQS",
        "CloudWatch counts how long an alarm's condition holds in evaluation periods: on SQS `deadLetterRate.for` becomes EvaluationPeriods = for / period, so it must be a whole multiple of `period`, at least one. Write `for` as a multiple of `period`, or change `period`."),
    rule("alarms/missing", W, "A dead-letter queue nobody watches",
        "A DLQ without alarms fills up silently. Add `alarms.depth` (and `oldestMessageAge`); on SQS give them `actions`, or they notify nobody. Silence with `spec.lint.allow: [alarms/missing]` if it is watched elsewhere."),
    rule("alarms/period", E, "An alarm period its backend cannot evaluate",
        "CloudWatch periods are multiples of 60 s, and period times evaluation periods (a rate alarm's `for`) may cover at most one day. A dead-letter rate is measured over some time on every backend: its `period` is not 0s."),
    rule("alarms/rate-scope", E, "`deadLetterRate` on the invalid-message queue",
        "The dead-letter rate is the channel's: what enters every dead-letter destination (the DLQ, the invalid-message queue, exception DLTs) over what enters its source. Write it in `spec.alarms.deadLetterRate`, not in `spec.invalid.alarms`."),
    rule("alarms/runbook", E, "`alarms.runbook` is not an http(s) URL",
        "The runbook link is put into alarm descriptions and alert annotations; it must be an http:// or https:// URL."),
    rule("alarms/threshold", E, "An alarm with no threshold, or with both `above` and tiers",
        "An alarm takes either one `above` threshold or `warning`/`critical` tiers, not both, and at least one of them."),
    rule("alarms/tier-order", E, "A `warning` threshold not below `critical`",
        "Tiers escalate: the warning threshold must be lower than the critical one."),
    rule("alarms/whole-seconds", E, "An SQS alarm duration that is not whole seconds",
        "CloudWatch counts in whole seconds: write periods and ages without milliseconds."),
    rule("azure-servicebus/backoff-unsupported", W, "A backoff on Azure Service Bus, which redelivers at once",
        "Service Bus delivers an abandoned message (or one whose lock expired) again at once; it has no delay between deliveries to provision. A consumer that must wait defers the message or schedules a copy itself."),
    rule("azure-servicebus/forward-to-self", E, "Dead letters forwarded to the entity they came from",
        "`deadLetter.name` becomes the entity's forwardDeadLetteredMessagesTo; naming the channel's own queue or topic would bring every dead letter back as a new message. Name another queue, or leave `deadLetter.name` out to keep them in the built-in `$DeadLetterQueue`."),
    rule("azure-servicebus/lock-duration", E, "A Service Bus lock duration outside 5 s to 5 min",
        "`azure-servicebus.lockDuration` becomes the entity's lockDuration: at most 5 minutes (the ARM reference), at least 5 seconds (the portal's and the administration client's check)."),
    rule("azure-servicebus/max-delivery-count", E, "`maxAttempts` outside Service Bus's 1 to 2000",
        "`retry.maxAttempts` becomes the entity's maxDeliveryCount, 1 to 2000; after that many deliveries Service Bus dead-letters the message with reason `MaxDeliveryCountExceeded`."),
    rule("azure-servicebus/subqueue-retention", E, "A retention on the built-in dead-letter subqueue",
        "The `$DeadLetterQueue` subqueue observes no time-to-live: dead letters stay until received. Remove `deadLetter.retention`/`discard`, or name a dead-letter queue (`deadLetter.name`) for dlqctl to forward them to and keep them in."),
    rule("channel/duplicate", E, "A channel defined twice for one target",
        "Each `metadata.name` may appear once per target: rename one of the channels or remove the copy."),
    rule("classes/empty", E, "A `deadLetter.classes` rule without a pattern",
        "A rule names a class for messages whose error matches its globs; with neither `errorClass` nor `errorMessage` it matches nothing. Give one or both (`errorClass: \"*\"` matches every message with a class)."),
    rule("classes/pattern", E, "A `deadLetter.classes` pattern that is not a glob",
        "Patterns are globs over the whole value: `*` any run of characters, `?` one, `[abc]` one of a set, `{a,b}` either, `\\` escapes. Close the bracket or brace, or escape it."),
    rule("classes/reserved", E, "`unknown` or `other` as a class name",
        "`unknown` is the class of a message no rule matches, `other` the exporter's label for every class not declared; a rule of either name would hide which is which. Name the class for what it is."),
    rule("classes/unreachable", W, "A class rule that can never match",
        "Rules are tried in order and the first match wins; an earlier rule with wider patterns on the same fields takes every message this one would. Put the narrower rule first, or remove it."),
    rule("deadletter/archive-before", E, "`deadLetter.archive.before` that makes every dead letter due at once, or none in time",
        "`archive --due` takes the dead letters older than the DLQ's retention minus `before`. A `before` not less than the retention makes every dead letter due the moment it arrives (each run takes the whole queue); `0s` makes one due only as it expires (too late). Make `before` less than the retention and longer than the time between two scheduled runs (`2d` for a daily run); to archive everything, run `dlqctl archive` without `--due`."),
    rule("deadletter/archive-location", E, "`deadLetter.archive.to` that is neither a directory nor s3://bucket/prefix",
        "An archive is a directory (a relative one is relative to the folder of the file that wrote it) or `s3://bucket/prefix`; no other scheme is known."),
    rule("deadletter/archive-never-due", W, "`deadLetter.archive` on a dead-letter queue with no retention to run ahead of",
        "A RabbitMQ DLQ without a TTL keeps dead letters until they are consumed, so `archive --due` never finds one due; a Kafka DLT without a retention expires them by the broker's `log.retention.ms`, which dlqctl does not read, so `--due` refuses. Remove `archive` (or archive by age with `--older-than`), or write the retention (`deadLetter.retention`)."),
    rule("deadletter/consumer-group", E, "`deadLetter.consumerGroup` on a queue",
        "Only a Kafka dead-letter topic has a consumer group whose lag says what waits; a queue's depth already counts only what waits. Remove it on SQS and RabbitMQ channels."),
    rule("deadletter/discard-and-retention", E, "Both `deadLetter.retention` and `deadLetter.discard`",
        "Both say how long dead letters (or, in `invalid`, invalid messages) are kept. Keep `discard: {after, reason}` when dropping them is a decision, `retention` otherwise. (A channel's own answer replaces the other from Defaults.)"),
    rule("deadletter/discard-before-alarm", E, "Dead letters discarded before the age alarm can fire",
        "An age alarm fires once the oldest dead letter has been older than its threshold for period × evaluationPeriods; a `discard.after` at or before that drops the message before anyone is told. Lower the threshold or discard later."),
    rule("deadletter/discard-undeclared", W, "A dead-letter queue that drops messages with no written reason",
        "A RabbitMQ DLQ with a TTL, a Kafka DLT with a retention, or an SQS DLQ kept less than 14 days drops dead letters. Two answers: if dropping them is intended, write it as `deadLetter.discard: {after, reason, owner}`; if they must outlive the retention, archive them before it, `deadLetter.archive: {to, before}` with `dlqctl archive CHANNEL --due` on a schedule. Or keep them in the queue (RabbitMQ: no retention; SQS: 14d). A warning in dlqctl/v1, an error from v2."),
    rule("deadletter/header-dropped-and-kept", W, "A header both in `deadLetter.redrive.dropHeaders` and in `keepHeaders`",
        "`keepHeaders` wins over `dropHeaders`, so the redriven copy keeps the header. Remove the entry from the list it does not belong to (docs/redrive.md, \"Headers on the copy\")."),
    rule("deadletter/header-pattern", E, "A `deadLetter.redrive` header name that is not a glob",
        "`dropHeaders` and `keepHeaders` entries are globs matched case-insensitively against header names: `*` any run of characters, `?` one, `[abc]` one of a set, `{a,b}` either, `\\` escapes. An unclosed `[` or `{` is the usual mistake."),
    rule("deadletter/retention-implicit", W, "A dead-letter retention left to the broker's default",
        "A Kafka dead-letter topic without a retention keeps the broker's `log.retention.ms` (7 days on stock Kafka) and deletes dead letters after it. Write the decision: `deadLetter.discard: {after, reason}`."),
    rule("deadletter/shared-backend", E, "`deadLetter.of` on a backend that cannot share a destination yet",
        "Shared dead-letter destinations are provisioned, statused and redriven on SQS in this version; RabbitMQ (one DLX for several queues) and Pub/Sub (one dead-letter topic for several subscriptions) come next. Give the channel its own destination meanwhile."),
    rule("deadletter/shared-field", E, "A channel sharing another's dead-letter destination also describes it",
        "With `deadLetter.of: OWNER` the channel dead-letters into the destination channel OWNER declares and owns: its `deadLetter` name, retention, discard, archive, subscription, consumer group and `sqs` block, the alarms and the RabbitMQ `deadLetterExchange` are written once, in OWNER's spec. Move them there."),
    rule("deadletter/shared-owner", E, "`deadLetter.of` that names no owner",
        "`deadLetter.of` names the channel, on the same target, that declares and owns the shared dead-letter destination. A name no spec declares (the destination would have no owner: nothing creates it, and dropping the owner's spec would orphan it), the channel itself, or a channel that shares another's destination in turn is refused. Name the owner, or declare the destination here."),
    rule("deadletter/weaker-encryption", W, "A dead-letter queue encrypted more weakly than its source",
        "Dead letters are the same messages as the source's, often the most sensitive ones (a payment that failed validation), and people read them by hand. `deadLetter.sqs.encryption` gives the DLQ less than `sqs.encryption` (none < SSE-SQS < KMS): remove the override so both are encrypted alike."),
    rule("deadletter/wider-access", W, "A dead-letter queue readable by principals that cannot read its source",
        "`deadLetter.sqs.policy` allows sqs:ReceiveMessage (or sqs:*) to a principal that `sqs.policy` does not. Restrict reading dead letters to operators who may read the source; conditions are not evaluated."),
    rule("envelope/field", E, "An envelope field that names no place, or several",
        "Each field of a declared `deadLetter.envelope` reads one place: `header: NAME` (SQS and Pub/Sub: a message attribute), `property: NAME` (the broker's message property) or `pointer: /json/pointer` into the body."),
    rule("envelope/format", E, "An envelope field read in a format it cannot have",
        "`attempts` is an integer; `deadLetteredAt` and `firstFailureAt` are times (`rfc3339`, `epoch-seconds`, `epoch-millis`, or `auto`: RFC 3339 or milliseconds); the others are text. Leave `format` out for the default."),
    rule("envelope/pointer", E, "An envelope pointer that is not a JSON pointer",
        "A JSON pointer (RFC 6901) starts with `/`, and escapes `~` as `~0` and `/` as `~1`: `/error/class`."),
    rule("envelope/property", E, "An envelope property the backend's messages do not have",
        "`property:` names one of the message properties of the channel's backend (docs/envelope.md lists them: RabbitMQ `timestamp`, `type`, `app_id`, ...; SQS system attributes; Kafka `timestamp`, `key`; Pub/Sub `publishTime`, ...). For a header, write `header:`."),
    rule("envelope/same-place", E, "Two envelope fields read one place as different kinds",
        "One header, property or body field holds one value: it cannot be both the attempts (an integer) and a time or a text. Read each field from where the consumer writes it."),
    rule("file/not-utf8", E, "A file that is not UTF-8",
        "dlqctl reads specs as UTF-8. Re-save the file as UTF-8."),
    rule("file/too-large", E, "A file over 1 MiB",
        "Spec files are read to 1 MiB at most; split the specs into several files."),
    rule("invalid/backend", E, "`spec.invalid` on a Pub/Sub channel",
        "The invalid-message channel is provisioned on SQS, RabbitMQ and Kafka in this version; on Pub/Sub create its topic and subscription by hand, or remove `invalid`."),
    rule("kafka/config-retention", E, "Retention set through `kafka.config`",
        "Set retention with the `retention` fields (main, `deadLetter.retention`), which dlqctl checks against the retries; not with `retention.ms` in `kafka.config`."),
    rule("kafka/connect-url", E, "`kafka.connectors` on a target without `connectUrl`",
        "dlqctl reads and sets a connector's error-handling keys through the Kafka Connect worker's REST API: give the target `connectUrl` (any worker of the Connect cluster), e.g. `http://connect.internal:8083`."),
    rule("kafka/connector-dlt", E, "A connector whose dead letters would go to another topic than the channel's DLT",
        "`status`, `redrive` and the alarms watch the channel's dead-letter topic; dead letters written elsewhere are never seen. Remove the `errors.deadletterqueue.topic.name` override (dlqctl sets the channel's DLT), or name the channel's DLT with `deadLetter.name`."),
    rule("kafka/connector-replication", E, "A connector's dead-letter replication factor above the target's brokers",
        "`errors.deadletterqueue.topic.replication.factor` (the channel's `kafka.replicationFactor`, unless overridden) is the replication Connect creates the dead-letter topic with; a topic cannot have more replicas than the cluster has brokers (the target's `brokers`). Lower it to at most that."),
    rule("kafka/connector-silent-discard", E, "`errors.tolerance: all` without a dead-letter topic",
        "With `errors.tolerance: all` and no `errors.deadletterqueue.topic.name`, Kafka Connect skips every record that fails conversion, a transform or the sink, with only a log line: a silent discard. Keep dlqctl's dead-letter topic (remove the override), or set `errors.tolerance: none` to stop the task at the first bad record."),
    rule("kafka/connector-source", E, "A source connector in `kafka.connectors`",
        "Kafka Connect writes dead letters (`errors.deadletterqueue.*`) for sink connectors only. List the sink connectors that read the channel's main topic; remove source connectors."),
    rule("kafka/dlt-partitions", W, "A dead-letter topic with fewer partitions than its source",
        "Spring Kafka's DeadLetterPublishingRecoverer publishes a failed record to the same partition of the DLT by default; with fewer partitions that publish fails for records of the partitions the DLT lacks. Give the DLT at least as many partitions as the main topic, or use a destination resolver that lets Kafka choose the partition (-1). A warning: estates that work this way can be imported."),
    rule("kafka/naming", E, "`retry.name` and `kafka.naming` disagree",
        "`kafka.naming: custom` needs `retry.name`; with `spring` or `index` naming, retry topics are named as Spring Kafka names them and `retry.name` would be ignored."),
    rule("kafka/retention-range", E, "A Kafka retention under one second",
        "Kafka topics keep records at least 1 s; use a longer retention."),
    rule("kafka/share-delivery-limit", E, "A share group's delivery limit outside what Kafka takes",
        "`retry.maxAttempts` is each share group's `share.delivery.count.limit`, which Kafka 4.4 takes from `group.share.min.delivery.count.limit` to `group.share.max.delivery.count.limit` (2 to 10 by default). Use an attempt count in that range, or leave it out for the broker's default."),
    rule("kafka/share-dlt-prefix", E, "A share groups' dead-letter topic without the `dlq.` prefix",
        "Kafka 4.4 writes a share group's dead letters only to a topic whose name starts with the cluster's `errors.deadletterqueue.topic.name.prefix` (default `dlq.`); it checks when it writes, and archives the record unwritten otherwise. Name the DLT `dlq.{channel}` (`deadLetter.name`)."),
    rule("kafka/suffix", E, "A Spring Kafka topic suffix that cannot be used",
        "`kafka.retryTopicSuffix`, `kafka.dltSuffix` and the `kafka.exceptionBasedDlts` suffixes are appended to the main topic's name as Spring Kafka appends them: they may use only a-z, A-Z, 0-9, `.`, `_` and `-`; the first two must not be blank (Spring would silently use `-retry` or `-dlt`), and are refused where `retry.name` (`naming: custom`) or `deadLetter.name` names the topic instead."),
    rule("lint/unknown-rule", W, "A `spec.lint.allow` entry that names no rule that can be silenced",
        "Only warnings and notes can be silenced, by their exact rule id (the message suggests the closest)."),
    rule("name/collision", E, "Two resources with the same name on one target",
        "Two channels (or a channel's own queues) resolve to the same queue or topic name, or a RabbitMQ dead-letter exchange is also another channel's exchange. Change a `name` template or a channel name; or, to share one dead-letter destination, declare it in one channel and write `deadLetter: {of: THAT_CHANNEL}` in the others."),
    rule("name/invalid", E, "A name the backend does not accept",
        "SQS: at most 80 of `[A-Za-z0-9_-]`, ending in `.fifo` exactly when FIFO; RabbitMQ: at most 255 bytes, not starting with `amq.`; Kafka: at most 249 of `[a-zA-Z0-9._-]`, not `.` or `..`; Pub/Sub: 3 to 255 of letters, digits and `-_.~+%`, starting with a letter, not with `goog`; Azure Service Bus: letters, digits and `-_.`, starting and ending with a letter or digit, at most 260 (subscriptions 50)."),
    rule("name/template", E, "A name template that cannot be expanded",
        "Templates may use `{channel}`, and in retry names `{delay}` and `{index}`; a placeholder that is unknown or unclosed is reported with the template."),
    rule("pubsub/ack-deadline", E, "A Pub/Sub ack deadline outside 10 s to 600 s, or not whole seconds",
        "`pubsub.ackDeadline` becomes the subscription's ackDeadlineSeconds: a whole number of seconds from 10 to 600."),
    rule("pubsub/backoff-range", E, "A Pub/Sub backoff over 600 s",
        "`retry.backoff.initial` and `max` become the subscription's retryPolicy minimumBackoff and maximumBackoff, each 0 to 600 seconds."),
    rule("pubsub/max-attempts", E, "`maxAttempts` outside Pub/Sub's 5 to 100",
        "Pub/Sub's deadLetterPolicy.maxDeliveryAttempts is 5 to 100; Pub/Sub refuses anything else."),
    rule("pubsub/retention-range", E, "A Pub/Sub subscription retention outside 10 min to 7 d",
        "`retention` and the dead-letter retention become the subscriptions' messageRetentionDuration: 10 minutes to 7 days."),
    rule("pubsub/subscription-expires", W, "Subscriptions that Pub/Sub deletes when nobody pulls",
        "`pubsub.expireAfter` keeps the subscriptions' expiration policy (31 days is Pub/Sub's default for subscriptions made without one): a dead-letter subscription nobody reads for that long is deleted with its dead letters. Remove it to let dlqctl set them to never expire."),
    rule("rabbitmq/at-most-once", W, "A delivery limit whose dead letters the broker may drop",
        "`deadLetterStrategy: atMostOnce` leaves a quorum queue's dead-lettering at RabbitMQ's default: a dead letter the DLQ cannot take is dropped. Remove it to dead-letter at least once (`dead-letter-strategy: at-least-once` with `overflow: reject-publish`, which refuses publishes while the queue is full)."),
    rule("rabbitmq/backoff-required", E, "A RabbitMQ TTL retry loop without a delay",
        "The TTL retry model waits in a retry queue for the backoff delay; set `retry.backoff` (or use `retryModel: deliveryLimit` on a quorum queue)."),
    rule("rabbitmq/delivery-limit-quorum", E, "A delivery limit on a classic queue",
        "`retryModel: deliveryLimit` needs `queueType: quorum`: classic queues have no delivery limit."),
    rule("rabbitmq/dlx-consumer-publishes", I, "A dead-letter exchange the broker does not send to",
        "In policy mode with retry queues, a rejected message goes round the retry loop, not through `rabbitmq.deadLetterExchange`: the consumer publishes it there after the last attempt. With `dlx: arguments` a reject goes through the exchange."),
    rule("rabbitmq/dlx-default-exchange", E, "The default exchange as a dead-letter exchange, with what it cannot do",
        "`deadLetterExchange: {name: \"\"}` is RabbitMQ's default exchange: it routes a dead letter to the queue its routing key names, so the key must be the DLQ's name (leave `routingKey` unset); it has no type, no bindings, and cannot keep the message's own key."),
    rule("rabbitmq/dlx-exchange-type", E, "A `headers` dead-letter exchange",
        "`rabbitmq.deadLetterExchange` routes dead letters by their dead-letter routing key, which a `headers` exchange ignores; use `direct`, `topic` or `fanout`."),
    rule("rabbitmq/ttl-range", E, "A RabbitMQ TTL beyond 2^32-1 ms",
        "RabbitMQ message TTLs are 32-bit milliseconds (about 49.7 days); use a shorter retention or delay."),
    rule("retry/exceeds-retention", E, "Retries that do not fit inside the retention",
        "The backoff delays added up are longer than the queue keeps a message, so it expires before its last attempt. Shorten the backoff or raise the retention."),
    rule("retry/excessive", W, "More than 20 attempts, or retries that wait more than a day",
        "A slow dependency becomes a stuck consumer. Fewer attempts and a dead letter are easier to watch and redrive."),
    rule("retry/jitter-consumer", I, "Brokers cannot add jitter",
        "`backoff.jitter` is applied by the consumer, not the broker; the queues and topics dlqctl creates wait exactly the delay."),
    rule("retry/none", W, "`maxAttempts: 1`: no retry at all",
        "Every failure dead-letters at once. If that is meant, silence with `spec.lint.allow: [retry/none]`."),
    rule("schema/duration", E, "A duration that cannot be read",
        "Durations are a number and a unit (`ms`, `s`, `m`, `h`, `d`), possibly combined: `30s`, `1h30m`."),
    rule("schema/enum", E, "A value that is not one of those allowed",
        "The message lists the allowed values (and the closest one)."),
    rule("schema/invalid", E, "A value that does not fit the field",
        "The value has the right type but cannot be read as the field's value; the message says why."),
    rule("schema/key", E, "A map key that is not allowed",
        "The keys of this mapping follow a pattern (e.g. Kafka property names); the message shows it."),
    rule("schema/length", E, "A string or list that is too long or too short",
        "The message gives the limit."),
    rule("schema/pattern", E, "A string that does not match the field's pattern",
        "The message shows the expected form."),
    rule("schema/range", E, "A number outside the field's range",
        "The message gives the minimum and maximum."),
    rule("schema/ratio", E, "A ratio that cannot be read",
        "Ratios are a percentage above 0 and at most 100, written with `%`: `0.1%`, `2.5%`, `100%` (a bare `0.1` would be ambiguous)."),
    rule("schema/required", E, "A required field is missing",
        "Add the field the message names (the JSON schema in `schemas/` lists the required fields)."),
    rule("schema/type", E, "A value of the wrong type",
        "E.g. a string where a number belongs; quote or unquote the value as the message says."),
    rule("schema/unknown-field", E, "A field dlqctl does not know",
        "Usually a typo: the message suggests the closest field. Unknown fields are errors so that a misspelt setting is never silently ignored."),
    rule("spec/api-version", E, "An apiVersion dlqctl does not read",
        "dlqctl documents declare `apiVersion: dlqctl/v1`."),
    rule("spec/defaults-duplicate", E, "More than one Defaults document",
        "One `kind: Defaults` document per run; merge them."),
    rule("spec/kind", E, "A kind dlqctl does not know",
        "dlqctl documents are `Channel`, `Targets` or `Defaults`."),
    rule("spec/required", E, "A channel without `target` or `retry.maxAttempts`",
        "Both are required once Defaults are applied: set them in the channel or in the Defaults document."),
    rule("sqs/backoff-consumer", I, "SQS has no native backoff",
        "SQS redelivers after the visibility timeout; a backoff is applied by the consumer (by changing the message's visibility)."),
    rule("sqs/dlq-retention", W, "A standard SQS DLQ that keeps messages no longer than its source",
        "SQS keeps a message's original enqueue time when it dead-letters it, so dead letters expire early unless the DLQ's retention is longer than the source's: raise it, or archive with `deadLetter.archive`. A warning, so that an estate made this way (terraform-aws-modules/sqs's defaults) can be imported."),
    rule("sqs/encryption", E, "An `encryption` block SQS cannot take",
        "Write one of `kms: KEY` (SSE-KMS, with an optional `dataKeyReuse` of whole seconds from 1m to 24h), `managed: true` (SSE-SQS) or `managed: false` (none)."),
    rule("sqs/fifo-redrive-order", I, "A redriven FIFO message comes back behind newer ones",
        "On FIFO channels a redriven message is queued after the newer messages of its group; consumers that need strict order must allow for it."),
    rule("sqs/max-receive-count", E, "`maxAttempts` over SQS's 1000",
        "SQS's maxReceiveCount is at most 1000."),
    rule("sqs/policy", E, "A queue policy that is not a policy document",
        "`sqs.policy` and `deadLetter.sqs.policy` are IAM policy documents (an object with `Version` and `Statement`), written as a mapping or as JSON text."),
    rule("sqs/retention-range", E, "An SQS retention outside 60 s to 14 d",
        "SQS keeps messages between 60 seconds and 14 days."),
    rule("sqs/visibility-range", E, "An SQS visibility timeout over 12 h",
        "SQS visibility timeouts are at most 12 hours."),
    rule("sqs/whole-seconds", E, "An SQS duration that is not whole seconds",
        "SQS counts in whole seconds: write retention, visibility and delays without milliseconds."),
    rule("target/audit-to", E, "An audit destination dlqctl cannot write to",
        "`operations.auditTo` is `s3://bucket/prefix`, an absolute folder path (a relative folder would depend on where each run starts), or a queue (`queue:NAME`, SQS and RabbitMQ) or topic (`topic:NAME`, Kafka and Pub/Sub) of the target."),
    rule("target/backend-mismatch", E, "A channel block for another backend than its target's",
        "Only the block that matches the target's backend (`sqs`, `rabbitmq`, `kafka`, `pubsub` or `azure-servicebus`) may be present."),
    rule("target/credentials-conflict", E, "More than one way of getting an Azure token",
        "An Azure Service Bus target gets its tokens one way: a ready token (`accessTokenEnv`, with `dataAccessTokenEnv`), client credentials (`tenantId`, `clientId`, `clientSecretEnv`, `tokenUrl`), the machine's managed identity (`managedIdentity: true`, with `clientId` for a user-assigned one, and `identityUrl`), or Kubernetes workload identity (`workloadIdentity: true`, with `tenantId`, `clientId` and `tokenUrl` where the webhook's variables do not serve)."),
    rule("target/credentials-in-url", E, "Credentials in a URL",
        "URLs are shown in errors and saved in plans: remove `user:password@` and name the environment variables that hold the credentials (`usernameEnv`, `passwordEnv`; the AWS credential chain for SQS)."),
    rule("target/duplicate", E, "A target defined twice",
        "Target names are unique across the Targets documents of a run."),
    rule("target/field-not-applicable", E, "A target field that does not apply to its backend",
        "E.g. `bootstrapServers` on an SQS target: remove it."),
    rule("target/missing-field", E, "A target without a field its backend needs",
        "RabbitMQ needs `url`; Kafka `bootstrapServers`; RabbitMQ and Kafka also `ownership.prefixes`; Pub/Sub `project` (and `projectNumber` with `grantServiceAgent: true`); Azure Service Bus `subscriptionId`, `resourceGroup`, `namespace`, `ownership.prefixes` and its credentials (`accessTokenEnv`, or `tenantId`, `clientId` and `clientSecretEnv`)."),
    rule("target/operator-glob", E, "An allowed operator that is not a valid glob",
        "`operations.allowedOperators` entries are identities or globs (`*` matches any run of characters): close every `[` and `{`, and use `*` rather than `**` inside a name."),
    rule("target/outside-ownership", E, "A name outside its target's ownership prefixes",
        "dlqctl changes nothing outside the prefixes a RabbitMQ or Kafka target declares: rename the channel or widen `ownership.prefixes`."),
    rule("target/ownership", E, "An ownership prefix that would claim everything",
        "An empty prefix claims every resource on the target; name the prefixes your channels use."),
    rule("target/secret-in-properties", E, "A secret in a Kafka target's `properties`",
        "A property that holds a secret (`*.password`, `*.secret`, `ssl.key.pem`, `sasl.jaas.config`, ...) goes under `secretProperties`, which names the environment variable that holds it."),
    rule("target/unknown", E, "A channel whose target is not defined",
        "The channel's `target` must name a target of the Targets file (`dlqctl.yaml`, or `--targets FILE`)."),
    rule("target/url", E, "A URL that is not http(s)",
        "`url` and `endpoint` are http:// or https:// URLs."),
    rule("target/variable", E, "An address from an unset variable, or a malformed reference",
        "`${NAME}` needs NAME set and not empty; give a default where it may be unset (a pre-commit hook): `${NAME:-http://127.0.0.1:15672}`. Only `${NAME}` and `${NAME:-default}` are references."),
    rule("target/variable-not-allowed", E, "A `${...}` outside a target's addresses",
        "Variables are expanded only in `url`, `amqpUrl`, `endpoint` and `bootstrapServers`; secrets are named by `usernameEnv`, `passwordEnv` and `secretProperties`, never written."),
    rule("yaml/alias-bomb", E, "YAML aliases that expand too far",
        "Aliases may expand to at most 100,000 values: a larger expansion is refused as hostile."),
    rule("yaml/duplicate-key", E, "A key given twice in one mapping",
        "YAML parsers disagree on which value wins; remove one."),
    rule("yaml/non-string-key", E, "A mapping key that is not a string",
        "dlqctl documents use string keys only."),
    rule("yaml/syntax", E, "YAML that cannot be parsed",
        "The message gives the parser's reason at the position shown."),
    rule("yaml/too-deep", E, "YAML nested deeper than 64 levels",
        "No dlqctl document nests that deep; the file is refused as hostile."),
    rule("yaml/unsupported-tag", E, "A YAML tag in a dlqctl document",
        "dlqctl documents use plain YAML: remove the tag (`!Sub`, `!!binary`, ...)."),
];

/// The rule with this id, if dlqctl has one.
pub fn find(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::model::Backend;

    #[test]
    fn the_catalog_is_sorted_and_unique() {
        for pair in RULES.windows(2) {
            assert!(
                pair[0].id < pair[1].id,
                "{} before {}",
                pair[0].id,
                pair[1].id
            );
        }
    }

    /// Rule ids as string literals in the source: `"family/name"`.
    fn ids_in(text: &str) -> Vec<String> {
        // Each backend is a family of its own (`pubsub/max-attempts`): from Backend::ALL.
        const FAMILIES: [&str; 11] = [
            "alarms",
            "channel",
            "deadletter",
            "file",
            "lint",
            "name",
            "retry",
            "schema",
            "spec",
            "target",
            "yaml",
        ];
        let is_family = |f: &str| FAMILIES.contains(&f) || Backend::from_key(f).is_some();
        let mut out = Vec::new();
        // Every piece between quotes, not every other one: a `'"'` or `\"` earlier in a file
        // would shift the parity and hide the rest of it from the scan.
        for piece in text.split('"') {
            let Some((family, name)) = piece.split_once('/') else {
                continue;
            };
            if is_family(family)
                && !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            {
                out.push(piece.to_owned());
            }
        }
        out
    }

    #[test]
    fn every_rule_the_source_reports_is_in_the_catalog() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut missing = Vec::new();
        let mut seen = 0;
        for entry in walkdir::WalkDir::new(&src).into_iter().flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("diag/rules.rs") {
                continue;
            }
            let text = fs_err::read_to_string(path).unwrap_or_default();
            for id in ids_in(&text) {
                seen += 1;
                if find(&id).is_none() {
                    missing.push(format!("{id} ({})", path.display()));
                }
            }
        }
        assert!(seen > 50, "the scan found only {seen} rule ids");
        assert!(missing.is_empty(), "not in src/diag/rules.rs: {missing:?}");
    }

    #[test]
    fn the_backend_mismatch_help_names_every_backend_block() {
        let help = find("target/backend-mismatch")
            .map(|r| r.help)
            .unwrap_or_default();
        for b in Backend::ALL {
            assert!(help.contains(&format!("`{b}`")), "{b} missing from: {help}");
        }
    }

    #[test]
    fn the_readme_names_every_rule() {
        let readme = fs_err::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"),
        )
        .unwrap_or_default();
        let missing: Vec<&str> = RULES
            .iter()
            .map(|r| r.id)
            .filter(|id| {
                // The README lists the schema rules as `schema/*` (`unknown-field`, `type`, ...).
                let short = id.strip_prefix("schema/").map(|s| format!("`{s}`"));
                !readme.contains(&format!("`{id}`")) && short.is_none_or(|s| !readme.contains(&s))
            })
            .collect();
        assert!(
            missing.is_empty(),
            "not in the README's lint table: {missing:?}"
        );
    }
}
