//! A picture of each channel: main → retry stages (with their delays) → dead-letter queue (its
//! retention, or the written decision to discard) → alarms or alert rules, and main → the
//! invalid-message queue (`spec.invalid`) where poison messages go at once.
//!
//! `dlqctl graph` prints it for every channel of a spec set, and the markdown plan opens each
//! channel's section with it, its nodes coloured by what the plan changes. Both read a channel
//! through the same two views as `apply`: the resolved channel ([`Resolved`]) for the flow
//! between the objects, and each backend's desired door ([`crate::backend::desired`]) for the
//! objects themselves, so every node is a queue, topic, exchange or alarm that apply would
//! create under exactly that name. Pure: no connection is needed, as for `lint`.
//!
//! The value ([`ChannelGraph`]) is separate from its two texts ([`mermaid`], [`dot`]), so the
//! shape is tested once and each format only escapes and lays out.

pub mod dot;
pub mod mermaid;

use crate::backend::kit::draw::Retries;
use crate::backend::kit::draw::Watch;
use crate::engine::alerts::{AGE_ALERT, DEPTH_ALERT, RATE_ALERT};
use crate::plan::{Action, Plan};
use crate::resource::{Desired, Kind, ResourceId, Role};
use crate::spec::duration::Duration;
use crate::spec::model::Backend;
use crate::spec::resolve::Resolved;

/// One channel's objects and the way a failing message travels between them.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelGraph {
    pub channel: String,
    pub target: String,
    pub backend: Backend,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

/// What a node stands for; each format draws each kind with its own shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A queue or topic.
    Queue,
    /// A RabbitMQ exchange.
    Exchange,
    /// A CloudWatch alarm or a Prometheus alert rule.
    Alarm,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub shape: Shape,
    /// The lines of its label: the object's name first, then what it is and does.
    pub lines: Vec<String>,
    /// The live objects a plan change to which highlights this node (the queue and its
    /// policy; an exchange and its bindings).
    pub resources: Vec<ResourceId>,
    /// What the plan does to it (`None`: nothing, or no plan).
    pub action: Option<Action>,
}

/// A message's way from one node to another.
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    pub from: usize,
    pub to: usize,
    pub label: String,
    /// Not a message's way but a watch (an alarm on the DLQ): drawn dotted.
    pub watch: bool,
}

impl ChannelGraph {
    /// The channel's picture as apply would build it (pure).
    pub fn build(r: &Resolved) -> Self {
        let desired: Vec<Desired> = crate::backend::desired(r)
            .into_iter()
            .filter(|d| d.present)
            .collect();
        let mut g = ChannelGraph {
            channel: r.channel.clone(),
            target: r.target.clone(),
            backend: r.backend,
            nodes: Vec::new(),
            edges: Vec::new(),
        };
        let ids = |name: &str, roles: &[Role]| -> Vec<ResourceId> {
            desired
                .iter()
                .filter(|d| d.id.name == name && roles.contains(&d.role))
                .map(|d| d.id.clone())
                .collect()
        };
        let attempts = format!(
            "after {} {}",
            r.max_attempts,
            if r.max_attempts == 1 {
                "attempt"
            } else {
                "attempts"
            }
        );
        // What the backend says of its own shapes, words and alarms (its draw door).
        let drawing = crate::backend::drawing(r, &desired, &attempts);
        let noun = drawing.noun;

        // The channel's exchange and its bindings to the main queue (RabbitMQ).
        let exchange = desired.iter().find(|d| d.role == Role::Exchange).map(|x| {
            let mut resources = vec![x.id.clone()];
            resources.extend(
                desired
                    .iter()
                    .filter(|d| d.role == Role::Binding)
                    .map(|d| d.id.clone()),
            );
            g.node(
                Shape::Exchange,
                vec![
                    x.id.name.clone(),
                    format!("{} exchange", prop_str(x, "type").unwrap_or("direct")),
                ],
                resources,
            )
        });

        let mut main_lines = vec![r.main.clone(), format!("main {noun}")];
        if let Some(t) = r.retention {
            main_lines.push(format!("keeps messages {t}"));
        }
        // Pub/Sub: the consumer's subscription is drawn with its topic.
        let mut main_ids = ids(&r.main, &[Role::Main, Role::MainPolicy]);
        let mut dlq_ids = ids(&r.dead_letter, &[Role::DeadLetter, Role::DeadLetterPolicy]);
        if let Some(p) = &r.pubsub {
            main_lines.push(format!("subscription {}", p.subscription));
            main_ids.extend(ids(&p.subscription, &[Role::Subscription]));
            dlq_ids.extend(ids(
                &p.dead_letter_subscription,
                &[Role::DeadLetterSubscription],
            ));
        }
        let main = g.node(Shape::Queue, main_lines, main_ids);
        if let Some(x) = exchange {
            let keys: Vec<String> = desired
                .iter()
                .filter(|d| d.role == Role::Binding)
                .filter_map(|d| prop_str(d, "routing_key").map(str::to_owned))
                .collect();
            let label = match keys.as_slice() {
                [] => String::new(),
                [k] => format!("key {k}"),
                _ => format!("keys {}", keys.join(", ")),
            };
            g.edge(x, main, label, false);
        }

        // Retry stages, one node per distinct queue or topic, in the order a message meets
        // them (Kafka's singleTopic reuse sends several attempts through one topic).
        let mut stages: Vec<(String, Vec<Duration>)> = Vec::new();
        for s in &r.retry_stages {
            match stages.iter_mut().find(|(n, _)| *n == s.name) {
                Some((_, delays)) => {
                    if !delays.contains(&s.delay) {
                        delays.push(s.delay);
                    }
                }
                None => stages.push((s.name.clone(), vec![s.delay])),
            }
        }
        let retries: Vec<(usize, String)> = stages
            .iter()
            .map(|(name, delays)| {
                let delays: Vec<String> = delays.iter().map(ToString::to_string).collect();
                let delays = delays.join(", ");
                let n = g.node(
                    Shape::Queue,
                    vec![
                        name.clone(),
                        format!("retry {noun}"),
                        format!("waits {delays}"),
                    ],
                    ids(name, &[Role::Retry, Role::RetryPolicy]),
                );
                (n, delays)
            })
            .collect();

        // The dead-letter queue, with how long it keeps a dead letter.
        let mut dlq_lines = vec![r.dead_letter.clone(), format!("dead-letter {noun}")];
        if let Some(p) = &r.pubsub {
            dlq_lines.push(format!("subscription {}", p.dead_letter_subscription));
        }
        dlq_lines.extend(match (&r.discard, r.dead_letter_retention) {
            (Some(d), _) => vec![d.to_string()],
            (None, Some(t)) => vec![format!("keeps dead letters {t}")],
            (None, None) => vec![format!("keeps dead letters {}", drawing.default_keep)],
        });
        let dlq = g.node(Shape::Queue, dlq_lines, dlq_ids);

        // Where the last failure goes: through a named dead-letter exchange, or straight in.
        let into_dlq = match desired.iter().find(|d| d.role == Role::DeadLetterExchange) {
            Some(x) => {
                let binding: Vec<&Desired> = desired
                    .iter()
                    .filter(|d| d.role == Role::DeadLetterBinding)
                    .collect();
                let mut resources = vec![x.id.clone()];
                resources.extend(binding.iter().map(|d| d.id.clone()));
                let dlx = g.node(
                    Shape::Exchange,
                    vec![
                        x.id.name.clone(),
                        format!(
                            "dead-letter exchange ({})",
                            prop_str(x, "type").unwrap_or("direct")
                        ),
                    ],
                    resources,
                );
                let key = binding
                    .iter()
                    .find_map(|d| prop_str(d, "routing_key"))
                    .map(|k| format!("key {k}"))
                    .unwrap_or_default();
                g.edge(dlx, dlq, key, false);
                dlx
            }
            None => dlq,
        };

        match drawing.retries {
            // A chain: each failure moves the record one topic on (Spring's non-blocking retries).
            Retries::Chain => {
                let mut from = main;
                for (stage, _) in &retries {
                    g.edge(from, *stage, "fails".into(), false);
                    from = *stage;
                }
                g.edge(from, into_dlq, drawing.last_failure.clone(), false);
            }
            // A loop: a failure waits in a retry queue and comes back to the main queue.
            Retries::Loop => {
                for (stage, delays) in &retries {
                    g.edge(main, *stage, "fails".into(), false);
                    g.edge(*stage, main, format!("back after {delays}"), false);
                }
                g.edge(main, into_dlq, drawing.last_failure.clone(), false);
            }
            // The broker redelivers by itself (SQS's visibility timeout, Pub/Sub's backoff).
            Retries::Redeliver => {
                g.edge(main, into_dlq, drawing.last_failure.clone(), false);
            }
        }

        // Spring's exception-based dead-letter topics.
        for d in desired
            .iter()
            .filter(|d| d.role == Role::DeadLetter && d.id.name != r.dead_letter)
        {
            let x = g.node(
                Shape::Queue,
                vec![
                    d.id.name.clone(),
                    "exception-based dead-letter topic".into(),
                ],
                vec![d.id.clone()],
            );
            g.edge(main, x, "fails with its exception".into(), false);
        }

        // The invalid-message queue: a poison message goes there at once, with its class.
        let invalid = r.invalid.as_ref().map(|i| {
            let keeps = match (&i.discard, i.retention) {
                (Some(d), _) => d.to_string(),
                (None, Some(t)) => format!("keeps invalid messages {t}"),
                (None, None) => format!("keeps invalid messages {}", drawing.default_keep),
            };
            let n = g.node(
                Shape::Queue,
                vec![i.name.clone(), format!("invalid-message {noun}"), keeps],
                ids(&i.name, &[Role::Invalid, Role::InvalidPolicy]),
            );
            g.edge(main, n, "poison: at once, with its class".into(), false);
            (i.name.as_str(), n)
        });

        // What watches the dead letters (and the invalid messages).
        match &drawing.alarms {
            Some(provisioned) => {
                for a in provisioned {
                    let from = match invalid {
                        Some((name, n)) if a.watches.as_deref() == Some(name) => n,
                        _ => dlq,
                    };
                    let lines = vec![
                        a.id.name.clone(),
                        format!("{}: {}", a.system, a.watch.above()),
                    ];
                    let n = g.node(Shape::Alarm, lines, vec![a.id.clone()]);
                    g.edge(from, n, String::new(), true);
                }
            }
            None => {
                let alarms = &r.alarms;
                let mut rules: Vec<(&str, String, Watch)> = Vec::new();
                for (alert, alarm, what) in [
                    (
                        DEPTH_ALERT,
                        alarms.depth.as_ref(),
                        Watch::Depth as fn(u64) -> Watch,
                    ),
                    (AGE_ALERT, alarms.oldest_message_age.as_ref(), Watch::Age),
                ] {
                    for t in alarm.map(|a| a.tiers.as_slice()).unwrap_or_default() {
                        rules.push((alert, t.severity().to_string(), what(t.threshold)));
                    }
                }
                for t in alarms
                    .dead_letter_rate
                    .as_ref()
                    .map(|a| a.tiers.as_slice())
                    .unwrap_or_default()
                {
                    rules.push((
                        RATE_ALERT,
                        t.severity().to_string(),
                        Watch::Rate(t.fraction()),
                    ));
                }
                for (alert, severity, watch) in rules {
                    let lines = vec![
                        format!("{alert} ({severity})"),
                        format!("{}: {}", drawing.alerts_as, watch.above()),
                    ];
                    let n = g.node(Shape::Alarm, lines, Vec::new());
                    g.edge(dlq, n, String::new(), true);
                }
            }
        }
        g
    }

    fn node(&mut self, shape: Shape, lines: Vec<String>, resources: Vec<ResourceId>) -> usize {
        self.nodes.push(Node {
            shape,
            lines,
            resources,
            action: None,
        });
        self.nodes.len() - 1
    }

    fn edge(&mut self, from: usize, to: usize, label: String, watch: bool) {
        self.edges.push(Edge {
            from,
            to,
            label,
            watch,
        });
    }

    /// Marks each node with what `plan` does to its objects (the strongest action of any of
    /// them), and adds a node for each object of this channel that the plan deletes, since
    /// no spec draws it any more.
    pub fn mark(&mut self, plan: &Plan) {
        let (channel, target) = (self.channel.clone(), self.target.clone());
        for ch in plan
            .changes
            .iter()
            .filter(|ch| ch.channel == channel && ch.resource.target == target)
        {
            match self
                .nodes
                .iter()
                .position(|n| n.resources.contains(&ch.resource))
            {
                Some(i) => self.nodes[i].action = self.nodes[i].action.max(Some(ch.action)),
                // A policy, binding or share group's configs or connector without its own node counts for
                // nothing else.
                None if matches!(
                    ch.resource.kind,
                    Kind::Policy | Kind::Binding | Kind::Acl | Kind::ShareGroup | Kind::Connector
                ) => {}
                None => {
                    let shape = match ch.resource.kind {
                        Kind::Alarm => Shape::Alarm,
                        Kind::Exchange => Shape::Exchange,
                        _ => Shape::Queue,
                    };
                    let what = serde_json::to_value(ch.role)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default();
                    let n = self.node(
                        shape,
                        vec![
                            ch.resource.name.clone(),
                            format!("{what} (no longer in the spec)"),
                        ],
                        vec![ch.resource.clone()],
                    );
                    self.nodes[n].action = Some(ch.action);
                }
            }
        }
    }
}

/// The graphs of a set of channels, in the order given.
pub fn build(channels: &[Resolved]) -> Vec<ChannelGraph> {
    channels.iter().map(ChannelGraph::build).collect()
}

fn prop_str<'d>(d: &'d Desired, key: &str) -> Option<&'d str> {
    d.props.get(key).and_then(serde_json::Value::as_str)
}

/// `text` cut into lines of about `width` characters at spaces (a longer word stays whole).
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The picture of one channel on a target of `backend`, from a spec's `spec:` lines.
    fn graph_of(backend: &str, spec: &str) -> ChannelGraph {
        let text = format!(
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: o.pay}}\nspec:\n  target: t\n{spec}"
        );
        let ws = crate::spec::load::load_str("c.yaml", &text);
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let target = serde_json::from_value(json!({
            "backend": backend, "url": "http://x", "bootstrapServers": "x:9092",
            "ownership": {"prefixes": ["o"]}
        }))
        .expect("target");
        let r =
            crate::spec::resolve::resolve(&ws.channels[0].value, "t", &target).expect("resolves");
        ChannelGraph::build(&r)
    }

    /// Each edge as `from -> to: label`, by the nodes' first lines (their names).
    fn edges(g: &ChannelGraph) -> Vec<String> {
        g.edges
            .iter()
            .map(|e| {
                format!(
                    "{} -> {}: {}",
                    g.nodes[e.from].lines[0], g.nodes[e.to].lines[0], e.label
                )
            })
            .collect()
    }

    #[test]
    fn a_named_dead_letter_exchange_sits_between_the_main_queue_and_the_dlq() {
        let g = graph_of(
            "rabbitmq",
            "  retry: {maxAttempts: 3}\n  rabbitmq: {queueType: quorum, retryModel: deliveryLimit, deadLetterExchange: {name: o.dlx, routingKey: o.dead}}\n",
        );
        assert_eq!(
            edges(&g),
            [
                "o.dlx -> o.pay.dlq: key o.dead",
                "o.pay -> o.dlx: dead-lettered after 3 attempts",
            ]
        );
        let dlx = g
            .nodes
            .iter()
            .find(|n| n.lines[0] == "o.dlx")
            .expect("the exchange");
        assert_eq!(dlx.lines[1], "dead-letter exchange (direct)");
        // The exchange and the DLQ's binding both light it up in a plan.
        assert_eq!(dlx.resources.len(), 2);
    }

    #[test]
    fn spring_exception_dlts_hang_off_the_main_topic_and_the_retries_form_a_chain() {
        let g = graph_of(
            "kafka",
            "  retry: {maxAttempts: 3, backoff: {initial: 1s, multiplier: 2}}\n  deadLetter: {discard: {after: 2d, reason: stale}}\n  kafka: {naming: spring, exceptionBasedDlts: [-deserialization]}\n",
        );
        assert_eq!(
            edges(&g),
            [
                "o.pay -> o.pay-retry-1000: fails",
                "o.pay-retry-1000 -> o.pay-retry-2000: fails",
                "o.pay-retry-2000 -> o.pay-dlt: fails, after 3 attempts",
                "o.pay -> o.pay-deserialization-dlt: fails with its exception",
            ]
        );
        let dlt = g
            .nodes
            .iter()
            .find(|n| n.lines[0] == "o.pay-dlt")
            .expect("dlt");
        assert_eq!(dlt.lines[2], "discarded on purpose after 2d: stale");
    }

    /// `spec.invalid`: its own node off the main queue (poison goes there at once), with its
    /// decision, and its policy among the node's resources so a plan lights it up.
    #[test]
    fn the_invalid_message_queue_hangs_off_the_main_queue_with_its_decision() {
        let g = graph_of(
            "rabbitmq",
            "  retry: {maxAttempts: 3, backoff: {initial: 5s}}\n  invalid: {discard: {after: 2d, reason: replayed}}\n",
        );
        assert!(
            edges(&g)
                .contains(&"o.pay -> o.pay.invalid: poison: at once, with its class".to_owned()),
            "{:?}",
            edges(&g)
        );
        let n = g
            .nodes
            .iter()
            .find(|n| n.lines[0] == "o.pay.invalid")
            .expect("the invalid node");
        assert_eq!(
            n.lines[1..],
            [
                "invalid-message queue".to_owned(),
                "discarded on purpose after 2d: replayed".to_owned()
            ]
        );
        assert_eq!(n.resources.len(), 2, "the queue and its policy");
        let g = graph_of("kafka", "  retry: {maxAttempts: 1}\n  invalid: {}\n");
        assert!(
            edges(&g).contains(
                &"o.pay -> o.pay-invalid-dlt: poison: at once, with its class".to_owned()
            ),
            "{:?}",
            edges(&g)
        );
    }

    #[test]
    fn a_plan_lights_up_the_queue_of_a_changed_policy_and_adds_what_it_deletes() {
        let g = graph_of(
            "rabbitmq",
            "  retry: {maxAttempts: 3, backoff: {initial: 5s}}\n",
        );
        let retry = g
            .nodes
            .iter()
            .position(|n| n.lines[0] == "o.pay.retry")
            .expect("retry");
        let policy = g.nodes[retry]
            .resources
            .iter()
            .find(|id| id.kind == Kind::Policy)
            .expect("the retry queue's policy")
            .clone();
        let change = |resource: ResourceId, action| crate::plan::Change {
            resource,
            channel: "o.pay".into(),
            role: Role::Retry,
            action,
            fields: Vec::new(),
            desired: Default::default(),
            messages: None,
            reason: None,
            destructive: None,
            pruned: false,
            discard: None,
        };
        let mut old = policy.clone();
        old.kind = Kind::Queue;
        old.name = "o.pay.retry.10s".into();
        let plan = Plan::new(
            vec![change(policy, Action::Update), change(old, Action::Delete)],
            Vec::new(),
            0,
            Default::default(),
            Vec::new(),
            &Default::default(),
        );
        let mut marked = g.clone();
        marked.mark(&plan);
        assert_eq!(marked.nodes[retry].action, Some(Action::Update));
        let gone = marked.nodes.last().expect("a node");
        assert_eq!(gone.lines[0], "o.pay.retry.10s");
        assert_eq!(gone.action, Some(Action::Delete));
        assert_eq!(marked.nodes.len(), g.nodes.len() + 1);
    }

    #[test]
    fn a_long_reason_wraps_at_spaces_and_keeps_long_words_whole() {
        assert_eq!(
            wrap("discarded on purpose after 3d: quotes expire", 20),
            ["discarded on purpose", "after 3d: quotes", "expire"]
        );
        assert_eq!(
            wrap("averyveryverylongword x", 5),
            ["averyveryverylongword", "x"]
        );
        assert!(wrap("  ", 5).is_empty());
    }
}
