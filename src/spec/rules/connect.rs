//! Rules for a Kafka channel's Kafka Connect connectors (`kafka.connectors`), on the keys
//! dlqctl would set (`spec::resolve::ConnectorResolved`: derived, then the spec's `config`
//! overrides): what would lose records silently or send them where the channel does not look.
//!
//! - `kafka/connector-silent-discard`: `errors.tolerance: all` without a dead-letter topic
//!   (an override of `errors.deadletterqueue.topic.name` to `""`): Connect then skips every
//!   bad record with nothing but a log line.
//! - `kafka/connector-source`: `kind: source`: Connect writes dead letters for sink
//!   connectors only (plan also reads the live connector's type).
//! - `kafka/connector-dlt`: a dead-letter topic other than the channel's: `status`, `redrive`
//!   and the alarms watch the channel's DLT, so those dead letters would go unseen.
//! - `kafka/connector-replication`: a dead-letter replication factor above the target's
//!   `brokers` (when the targets file says how many): Connect could not create the topic.
//! - `kafka/connect-url`: connectors on a target without `connectUrl`.
//!
//! Depends on the resolved channel only.

use crate::diag::Diagnostic;
use crate::spec::load::Doc;
use crate::spec::model::{Channel, ConnectorKind, Target};
use crate::spec::pointer::escape;
use crate::spec::resolve::Resolved;

pub(super) fn check_connectors(
    doc: &Doc<Channel>,
    r: &Resolved,
    target: &Target,
    out: &mut Vec<Diagnostic>,
) {
    let Some(k) = &r.kafka else { return };
    for (i, c) in k.connectors.iter().enumerate() {
        let base = format!("/spec/kafka/connectors/{i}");
        let at_key = |key: &str| {
            if c.overridden.iter().any(|o| o == key) {
                doc.locs.value(&format!("{base}/config/{}", escape(key)))
            } else {
                doc.locs.key(&base)
            }
        };
        if c.kind == ConnectorKind::Source {
            out.push(
                Diagnostic::error(
                    "kafka/connector-source",
                    format!(
                        "connector `{}` is a source connector: Kafka Connect writes dead letters (errors.deadletterqueue.*) for sink connectors only",
                        c.name
                    ),
                )
                .at(doc.locs.value(&format!("{base}/kind")))
                .hint("list only the sink connectors that read the main topic; a source connector's failures are its own to handle"),
            );
        }
        if c.discards_silently() {
            out.push(
                Diagnostic::error(
                    "kafka/connector-silent-discard",
                    format!(
                        "connector `{}` would have `errors.tolerance: all` and no dead-letter topic: every record that fails is skipped, with only a log line",
                        c.name
                    ),
                )
                .at(at_key("errors.deadletterqueue.topic.name"))
                .hint(format!(
                    "remove the override, so bad records go to the channel's dead-letter topic {}; or set `errors.tolerance: none` to stop the task at the first bad record",
                    r.dead_letter
                )),
            );
        }
        if let Some(dlt) = c.get("errors.deadletterqueue.topic.name")
            && !dlt.trim().is_empty()
            && dlt != r.dead_letter
        {
            out.push(
                Diagnostic::error(
                    "kafka/connector-dlt",
                    format!(
                        "connector `{}` would write its dead letters to `{dlt}`, not to the channel's dead-letter topic {}: status, redrive and the alarms watch the channel's",
                        c.name, r.dead_letter
                    ),
                )
                .at(at_key("errors.deadletterqueue.topic.name"))
                .hint("remove the override (dlqctl sets the channel's dead-letter topic), or give the channel that dead-letter topic (`deadLetter.name`)"),
            );
        }
        let factor = c
            .get("errors.deadletterqueue.topic.replication.factor")
            .and_then(|f| f.trim().parse::<i64>().ok());
        if let (Some(factor), Some(brokers)) = (factor, target.brokers)
            && c.has_dead_letter_topic()
            && factor > i64::from(brokers)
        {
            let from = if c
                .overridden
                .iter()
                .any(|o| o == "errors.deadletterqueue.topic.replication.factor")
            {
                at_key("errors.deadletterqueue.topic.replication.factor")
            } else {
                doc.locs.value("/spec/kafka/replicationFactor")
            };
            out.push(
                Diagnostic::error(
                    "kafka/connector-replication",
                    format!(
                        "connector `{}`'s dead-letter topic would have replication factor {factor}, and the target has {brokers} broker(s)",
                        c.name
                    ),
                )
                .at(from)
                .hint(format!("at most {brokers}: a topic cannot have more replicas than the cluster has brokers")),
            );
        }
        if target.connect_url.is_none() {
            out.push(
                Diagnostic::error(
                    "kafka/connect-url",
                    format!(
                        "connector `{}` is listed, and the target `{}` has no `connectUrl` (the Kafka Connect worker's REST API)",
                        c.name, r.target
                    ),
                )
                .at(doc.locs.value(&format!("{base}/name")))
                .hint("add `connectUrl: http://connect.internal:8083` to the target"),
            );
        }
    }
}
