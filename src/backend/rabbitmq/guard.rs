//! The redrive's destination guard: would the queue a redrive publishes to drop what it is
//! given? Asked before the first message moves and again before every batch is acknowledged
//! in the DLQ, so a length cap or a displaced dead-letter policy that lands during a run stops
//! it with the unacknowledged messages still in the DLQ.
//!
//! Why not the queue's `effective_policy_definition`: that is a statistics field, up to 5 s
//! old (shared/BACKENDS.md), and a hostile run lost 280 of 300 messages to a `max-length`
//! policy put in place 1 s into a redrive. The policy and operator-policy listings are read
//! from the broker's own records, current at once; the winning policy is worked out here
//! the way RabbitMQ picks it (pattern, `apply-to`, highest priority; a tie at the top counts
//! every tied policy, since RabbitMQ's choice between them is arbitrary).
//!
//! What the guard cannot see: a change that lands between its last read and the broker's
//! confirm of a batch already acknowledged (one batch: at most [`super::redrive`]'s batch, or
//! a second of moves), and messages the new limit drops from those already moved.

use serde_json::Value;

use super::read::{Reader, list};
use crate::backend::wire::http::{HttpError, seg};

/// What governs a destination's capacity and dead-lettering, as read now.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Governing {
    /// `max-length` / `max-length-bytes` settings and where each comes from.
    pub limits: Vec<String>,
    /// The overflow behaviour (`drop-head` when nothing sets one: RabbitMQ's default).
    pub overflow: String,
    /// Where the queue's dead-letter exchange comes from, if it has one.
    pub dead_letter_exchange: Option<String>,
    /// That exchange's name (`""`: the default exchange).
    pub dead_letter_exchange_name: Option<String>,
    /// The policies that apply (the winner, or every policy tied at the top).
    pub policies: Vec<String>,
}

impl Governing {
    /// Why a publish confirmed by the broker could still be dropped, if it could.
    pub fn drops(&self) -> Option<String> {
        if self.limits.is_empty()
            || matches!(
                self.overflow.as_str(),
                "reject-publish" | "reject-publish-dlx"
            )
        {
            return None;
        }
        Some(format!(
            "it has {} with overflow `{}`",
            self.limits.join(" and "),
            self.overflow
        ))
    }
}

/// A queue's x-arguments and type, and the vhost's policies and operator policies, all read
/// now (none is a statistics field).
pub async fn read(
    reader: &Reader,
    vhost: &str,
    queue: &str,
) -> Result<Option<Governing>, HttpError> {
    let qpath = format!(
        "/api/queues/{}/{}?columns=name,type,arguments&disable_stats=true",
        seg(vhost),
        seg(queue)
    );
    let Some(q) = reader
        .http
        .get("GET /api/queues/{vhost}/{name}", &qpath)
        .await?
    else {
        return Ok(None);
    };
    let policies = listing(
        reader,
        "GET /api/policies/{vhost}",
        &format!("/api/policies/{}", seg(vhost)),
    )
    .await?;
    let operator = listing(
        reader,
        "GET /api/operator-policies/{vhost}",
        &format!("/api/operator-policies/{}", seg(vhost)),
    )
    .await?;
    Ok(Some(governing(&q, queue, &policies, &operator)))
}

async fn listing(reader: &Reader, api: &str, path: &str) -> Result<Vec<Value>, HttpError> {
    let Some(body) = reader.http.get(api, path).await? else {
        return Ok(Vec::new());
    };
    Ok(list(api, path, &body)?.to_vec())
}

/// Works out what governs queue `name` (its object `q`: `type`, `arguments`) from the
/// vhost's policies and operator policies (pure).
pub fn governing(q: &Value, name: &str, policies: &[Value], operator: &[Value]) -> Governing {
    let kind = q.get("type").and_then(Value::as_str).unwrap_or("classic");
    let args = q.get("arguments");
    let arg = |k: &str| args.and_then(|a| a.get(k)).filter(|v| !v.is_null());
    let user = winners(policies, name, kind);
    let ops = winners(operator, name, kind);
    let mut out = Governing {
        policies: user
            .iter()
            .map(|p| format!("policy `{}`", text(p.get("name"))))
            .chain(
                ops.iter()
                    .map(|p| format!("operator policy `{}`", text(p.get("name")))),
            )
            .collect(),
        ..Governing::default()
    };
    for (a, k) in [
        ("x-max-length", "max-length"),
        ("x-max-length-bytes", "max-length-bytes"),
    ] {
        if let Some(v) = arg(a) {
            out.limits.push(format!("{k} {v} (argument)"));
        }
        for (p, what) in user
            .iter()
            .map(|p| (p, "policy"))
            .chain(ops.iter().map(|p| (p, "operator policy")))
        {
            if let Some(v) = definition(p).and_then(|d| d.get(k)) {
                out.limits
                    .push(format!("{k} {v} ({what} `{}`)", text(p.get("name"))));
            }
        }
    }
    // The x-argument wins over a policy for `overflow`; between tied policies, the least
    // safe one is assumed.
    let from_policies: Vec<String> = user
        .iter()
        .chain(ops.iter())
        .filter_map(|p| {
            definition(p)
                .and_then(|d| d.get("overflow"))
                .map(|v| text(Some(v)))
        })
        .collect();
    out.overflow = match arg("x-overflow") {
        Some(v) => text(Some(v)),
        None if from_policies.is_empty() => "drop-head".into(),
        None => from_policies
            .iter()
            .find(|o| !matches!(o.as_str(), "reject-publish" | "reject-publish-dlx"))
            .unwrap_or(&from_policies[0])
            .clone(),
    };
    out.dead_letter_exchange_name = arg("x-dead-letter-exchange")
        .map(|v| text(Some(v)))
        .or_else(|| {
            user.first()
                .and_then(|p| definition(p))
                .and_then(|d| d.get("dead-letter-exchange"))
                .map(|v| text(Some(v)))
        });
    out.dead_letter_exchange = match arg("x-dead-letter-exchange") {
        Some(_) => Some("argument".into()),
        None => {
            // Every tied winner must set it, or the broker may pick one that does not.
            let setting: Vec<&Value> = user
                .iter()
                .filter(|p| definition(p).is_some_and(|d| d.get("dead-letter-exchange").is_some()))
                .copied()
                .collect();
            (!user.is_empty() && setting.len() == user.len())
                .then(|| format!("policy `{}`", text(user[0].get("name"))))
        }
    };
    out
}

fn definition(p: &Value) -> Option<&serde_json::Map<String, Value>> {
    p.get("definition").and_then(Value::as_object)
}

fn text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// The policies of `all` that apply to queue `name` of type `kind`: those matching at the
/// highest priority. A pattern this module cannot compile counts as matching (the guard
/// then errs on the side of stopping, naming the policy).
fn winners<'a>(all: &'a [Value], name: &str, kind: &str) -> Vec<&'a Value> {
    let matching: Vec<(&Value, i64)> = all
        .iter()
        .filter(|p| {
            let to = p.get("apply-to").and_then(Value::as_str).unwrap_or("all");
            let applies = match to {
                "all" | "queues" => true,
                "classic_queues" => kind == "classic",
                "quorum_queues" => kind == "quorum",
                "streams" => kind == "stream",
                _ => false,
            };
            applies
                && p.get("pattern").and_then(Value::as_str).is_none_or(|pat| {
                    regex_lite::Regex::new(pat).map_or(true, |re| re.is_match(name))
                })
        })
        .map(|p| (p, p.get("priority").and_then(Value::as_i64).unwrap_or(0)))
        .collect();
    let top = matching.iter().map(|(_, n)| *n).max();
    matching
        .into_iter()
        .filter(|(_, n)| Some(*n) == top)
        .map(|(p, _)| p)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(name: &str, pattern: &str, priority: i64, def: Value) -> Value {
        json!({"name": name, "pattern": pattern, "apply-to": "queues", "priority": priority, "definition": def})
    }

    #[test]
    fn a_higher_priority_cap_displaces_the_dead_letter_policy_and_drops() {
        let q = json!({"type": "classic", "arguments": {}});
        let ours = policy(
            "dlqctl.orders",
            "^orders$",
            0,
            json!({"dead-letter-exchange": ""}),
        );
        let cap = policy("cap", ".*", 100, json!({"max-length": 20}));
        let g = governing(&q, "orders", std::slice::from_ref(&ours), &[]);
        assert_eq!(g.drops(), None);
        assert_eq!(
            g.dead_letter_exchange.as_deref(),
            Some("policy `dlqctl.orders`")
        );
        let g = governing(&q, "orders", &[ours, cap], &[]);
        assert!(
            g.drops().is_some_and(
                |w| w.contains("max-length 20 (policy `cap`)") && w.contains("drop-head")
            )
        );
        assert_eq!(g.dead_letter_exchange, None, "displaced by the cap");
    }

    #[test]
    fn an_operator_policy_or_an_argument_cap_counts_and_reject_publish_is_safe() {
        let q = json!({"type": "quorum", "arguments": {"x-max-length": 5, "x-overflow": "reject-publish"}});
        assert_eq!(governing(&q, "o", &[], &[]).drops(), None);
        let q = json!({"type": "quorum", "arguments": {}});
        let op = policy("op", "^o", 1, json!({"max-length-bytes": 10}));
        assert!(
            governing(&q, "o", &[], std::slice::from_ref(&op))
                .drops()
                .is_some()
        );
        // A policy for classic queues only does not apply to a quorum queue.
        let mut classic = policy("c", "^o$", 5, json!({"max-length": 1}));
        classic["apply-to"] = json!("classic_queues");
        assert_eq!(governing(&q, "o", &[classic], &[]).drops(), None);
        // Tied at the top: the least safe overflow is assumed.
        let a = policy(
            "a",
            "^o$",
            3,
            json!({"max-length": 1, "overflow": "reject-publish"}),
        );
        let b = policy("b", "^o$", 3, json!({"overflow": "drop-head"}));
        assert!(governing(&q, "o", &[a, b], &[]).drops().is_some());
    }

    #[test]
    fn a_pattern_that_does_not_match_or_applies_to_exchanges_is_left_out() {
        let q = json!({"type": "classic", "arguments": {"x-dead-letter-exchange": "dlx"}});
        let other = policy("p", "^payments", 100, json!({"max-length": 1}));
        let mut exch = policy("e", ".*", 100, json!({"max-length": 1}));
        exch["apply-to"] = json!("exchanges");
        let g = governing(&q, "orders", &[other, exch], &[]);
        assert_eq!(g.drops(), None);
        assert_eq!(g.dead_letter_exchange.as_deref(), Some("argument"));
    }
}
