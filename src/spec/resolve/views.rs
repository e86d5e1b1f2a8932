//! Every destination a channel dead-letters to, as a view of the channel: the dead-letter
//! queue itself, the invalid-message queue (`spec.invalid`) and each of Kafka's
//! exception-based dead-letter topics (`kafka.exceptionBasedDlts`).
//!
//! A view is the channel's [`Resolved`] with `dead_letter` set to that destination and
//! `dead_letter_role` saying which it is, so that the backends' status doors and redrive
//! movers, which read `r.dead_letter`, read any of them unchanged. What else a door reads is
//! made right for the destination here, once: an invalid queue's retention, discard decision
//! and alarms are its own; neither it nor an exception DLT is read through the DLQ's consumer
//! group (`deadLetter.consumerGroup` names the DLT's consumer only); and a view carries no
//! retry stages (the main and retry depths are the DLQ view's to show, not repeated).

use super::channel::Resolved;
use super::common::DeadLetterRole;

impl Resolved {
    /// The dead-letter queue first (this channel as resolved), then the invalid-message
    /// queue, then the exception-based DLTs in the spec's order.
    pub fn dead_letter_views(&self) -> Vec<Resolved> {
        let mut out = vec![self.clone()];
        if let Some(inv) = &self.invalid {
            let mut v = self.other_view(inv.name.clone(), DeadLetterRole::Invalid);
            v.dead_letter_retention = inv.retention;
            v.discard = inv.discard.clone();
            v.alarms = inv.alarms.clone();
            out.push(v);
        }
        if let Some(k) = &self.kafka {
            for name in &k.exception_dead_letters {
                out.push(self.other_view(name.clone(), DeadLetterRole::Exception));
            }
        }
        out
    }

    /// The view `from` names (`redrive --from`): a role (`dead-letter`, `invalid`,
    /// `exception` when the channel has exactly one exception DLT) or the name of one of the
    /// channel's destinations. The error says what the channel has.
    pub fn dead_letter_view(&self, from: &str) -> Result<Resolved, String> {
        let views = self.dead_letter_views();
        let by_role: Vec<&Resolved> = views
            .iter()
            .filter(|v| v.dead_letter_role.as_str() == from)
            .collect();
        let listed = || {
            views
                .iter()
                .map(|v| format!("{} ({})", v.dead_letter, v.dead_letter_role))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match by_role.as_slice() {
            [one] => return Ok((*one).clone()),
            [] => {}
            many => {
                return Err(format!(
                    "channel `{}` has {} exception-based dead-letter topics ({}): name one, e.g. `--from {}`",
                    self.channel,
                    many.len(),
                    many.iter()
                        .map(|v| v.dead_letter.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    many[0].dead_letter
                ));
            }
        }
        if let Some(v) = views.iter().find(|v| v.dead_letter == from) {
            return Ok(v.clone());
        }
        let why = match from {
            "invalid" => "no invalid-message queue (`spec.invalid`)".to_owned(),
            "exception" => {
                "no exception-based dead-letter topics (`kafka.exceptionBasedDlts`)".to_owned()
            }
            _ => format!("no dead-letter destination `{from}`"),
        };
        Err(format!(
            "channel `{}` has {why}; it dead-letters to {}",
            self.channel,
            listed()
        ))
    }

    fn other_view(&self, name: String, role: DeadLetterRole) -> Resolved {
        Resolved {
            dead_letter: name,
            dead_letter_role: role,
            dead_letter_group: None,
            retry_stages: Vec::new(),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{kafka_channel, resolved_on};
    use crate::spec::model::Backend;

    #[test]
    fn a_channel_dead_letters_to_its_dlq_its_invalid_queue_and_each_exception_dlt() {
        let r = kafka_channel(
            "orders",
            "  retry: {maxAttempts: 2}\n  deadLetter: {consumerGroup: dlt-reader}\n  invalid: {discard: {after: 3d, reason: replayed}, alarms: {depth: {above: 0}}}\n  kafka: {exceptionBasedDlts: [-poison, -late]}\n",
        );
        let views = r.dead_letter_views();
        let seen: Vec<(&str, &str, Option<&str>, usize)> = views
            .iter()
            .map(|v| {
                (
                    v.dead_letter.as_str(),
                    v.dead_letter_role.as_str(),
                    v.dead_letter_group.as_deref(),
                    v.retry_stages.len(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("orders-dlt", "dead-letter", Some("dlt-reader"), 1),
                ("orders-invalid-dlt", "invalid", None, 0),
                ("orders-poison-dlt", "exception", None, 0),
                ("orders-late-dlt", "exception", None, 0),
            ]
        );
        assert_eq!(views[0], r, "the DLQ's view is the channel itself");
        let inv = &views[1];
        assert_eq!(
            inv.discard.as_ref().map(|d| d.after.to_string()).as_deref(),
            Some("3d")
        );
        assert!(inv.alarms.depth.is_some() && r.alarms.depth.is_none());
        assert_eq!(
            views[2].alarms, r.alarms,
            "an exception DLT has the channel's alarms"
        );
        assert_eq!(inv.main, "orders", "redriven to the main topic");
    }

    #[test]
    fn redrive_from_names_a_role_or_a_destination() {
        let r = kafka_channel(
            "orders",
            "  retry: {maxAttempts: 2}\n  kafka: {exceptionBasedDlts: [-poison, -late]}\n",
        );
        let from = |s: &str| r.dead_letter_view(s).map(|v| v.dead_letter);
        assert_eq!(from("dead-letter").as_deref(), Ok("orders-dlt"));
        assert_eq!(from("orders-late-dlt").as_deref(), Ok("orders-late-dlt"));
        let many = from("exception").unwrap_err();
        assert!(
            many.contains("2 exception-based") && many.contains("--from orders-poison-dlt"),
            "{many}"
        );
        let none = from("invalid").unwrap_err();
        assert_eq!(
            none,
            "channel `orders` has no invalid-message queue (`spec.invalid`); it dead-letters to orders-dlt (dead-letter), orders-poison-dlt (exception), orders-late-dlt (exception)"
        );
        let sqs = resolved_on(
            Backend::Sqs,
            "pay",
            "  retry: {maxAttempts: 2}\n  invalid: {}\n",
        );
        assert_eq!(
            sqs.dead_letter_view("invalid")
                .map(|v| v.dead_letter)
                .as_deref(),
            Ok("pay-invalid")
        );
        assert!(
            sqs.dead_letter_view("exception")
                .unwrap_err()
                .contains("no exception-based")
        );
        assert!(
            sqs.dead_letter_view("nope")
                .unwrap_err()
                .contains("no dead-letter destination `nope`")
        );
    }
}
