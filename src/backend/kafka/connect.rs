//! Kafka Connect connectors (`kafka.connectors`): dlqctl owns only their error-handling keys
//! (`spec::resolve::ConnectorResolved`: derived from the channel), read and written through the
//! worker's REST API at the target's `connectUrl`, with the HTTP client every HTTP backend uses
//! (no redirect followed, answers bounded in size; plan holds a read-only one).
//!
//! - desired (pure): one `connector` resource per listed connector, after the channel's topics,
//!   whose properties are its `type` (`sink`) and the seven owned `errors.*` keys as text.
//! - read: `GET /connectors/{name}`: its `type`, and of its config only the owned keys (every
//!   other key is the operator's, so the plan never shows them). A connector the worker does
//!   not know is an error naming it: dlqctl never creates one.
//! - plan: a key-level diff of the owned keys; a connector whose type differs from the spec's
//!   (a source connector: Connect writes dead letters for sinks only) is `impossible`.
//! - apply: `GET /connectors/{name}/config` again, the planned keys set on it (a key planned
//!   absent removed), every other key kept as read, then `PUT /connectors/{name}/config`.
//!   Nothing else is ever written; `--prune` never lists a connector, so none is deleted.
//! - import: `GET /connectors?expand=info`: the sink connectors reading an imported channel's
//!   main topic join its `kafka.connectors`, with the owned keys whose live values differ from
//!   the derived ones as `config` overrides.

use std::collections::BTreeMap;
use std::sync::Arc;

use reqwest::Method;
use serde_json::{Value, json};

use super::*;
use crate::backend::kit::errors::BackendError;
use crate::backend::wire::http::{HttpConfig, ReadHttp, Stats, WriteHttp, seg};
use crate::backend::wire::retry::ReadBudget;
use crate::plan::{Action, Change};
use crate::resource::{Desired, Live, Props};
use crate::spec::model::{CONNECTOR_OWNED_KEYS, Target};
use crate::spec::resolve::Resolved;

/// The property that holds the connector's type (`sink`, `source`), beside the owned keys.
pub const TYPE_KEY: &str = "type";

pub fn connector_id(target: &str, name: &str) -> ResourceId {
    ResourceId {
        target: target.to_owned(),
        backend: Backend::Kafka,
        kind: Kind::Connector,
        scope: String::new(),
        name: name.to_owned(),
    }
}

/// The desired connectors of one channel (pure).
pub fn desired(r: &Resolved) -> Vec<Desired> {
    let Some(k) = &r.kafka else { return Vec::new() };
    k.connectors
        .iter()
        .map(|c| {
            let mut props = Props::new();
            props.insert(TYPE_KEY.into(), json!(c.kind.as_str()));
            for (key, value) in &c.config {
                props.insert(key.clone(), json!(value));
            }
            Desired {
                id: connector_id(&r.target, &c.name),
                channel: r.channel.clone(),
                role: Role::Connector,
                props,
                immutable: false,
                present: true,
            }
        })
        .collect()
}

/// A connector's live properties: its type and the owned keys it has (pure).
pub fn live(kind: &str, config: &BTreeMap<String, String>) -> Live {
    let mut props = Props::new();
    props.insert(TYPE_KEY.into(), json!(kind));
    for key in CONNECTOR_OWNED_KEYS {
        if let Some(v) = config.get(key) {
            props.insert(key.to_owned(), json!(v));
        }
    }
    Live {
        props,
        messages: None,
    }
}

/// Connect's rules for a planned connector update (pure): its type is never dlqctl's to
/// change, and a source connector has no dead-letter queue at all.
pub fn refine(change: &mut Change) {
    if change.action != Action::Update {
        return;
    }
    let Some(f) = change.fields.iter().find(|f| f.key == TYPE_KEY) else {
        return;
    };
    let old = f.old.as_ref().and_then(Value::as_str).unwrap_or("unknown");
    let new = f.new.as_ref().and_then(Value::as_str).unwrap_or("unknown");
    change.action = Action::Impossible;
    change.reason = Some(if old == "source" {
        format!(
            "connector `{}` is a source connector on the worker: Kafka Connect writes dead letters for sink connectors only (errors.deadletterqueue.*); remove it from kafka.connectors",
            change.resource.name
        )
    } else {
        format!(
            "connector `{}` is a {old} connector on the worker and a {new} connector in the spec: dlqctl never changes a connector's type; correct `kind` in the spec",
            change.resource.name
        )
    });
}

/// The config a PUT sends (pure): the live config as read, with each planned key set (or
/// removed where the plan wants it absent). Refuses a change of the type.
pub fn merged(
    live: &BTreeMap<String, String>,
    change: &Change,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = live.clone();
    for f in &change.fields {
        if f.key == TYPE_KEY {
            return Err("dlqctl never changes a connector's type".into());
        }
        if !CONNECTOR_OWNED_KEYS.contains(&f.key.as_str()) {
            return Err(format!("`{}` is not a key dlqctl owns", f.key));
        }
        match &f.new {
            Some(v) => out.insert(f.key.clone(), config_text(v)),
            None => out.remove(&f.key),
        };
    }
    Ok(out)
}

/// A connector as the worker reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveConnector {
    pub name: String,
    /// `sink` or `source` (`unknown` when the worker does not say).
    pub kind: String,
    pub config: BTreeMap<String, String>,
}

/// A config object's entries as text (Connect's values are strings; anything else is shown
/// as JSON).
fn config_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|o| o.iter().map(|(k, v)| (k.clone(), config_text(v))).collect())
        .unwrap_or_default()
}

/// `GET /connectors/{name}`'s answer (pure).
pub fn parse_connector(name: &str, body: &Value) -> LiveConnector {
    LiveConnector {
        name: name.to_owned(),
        kind: body
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_owned(),
        config: config_map(body.get("config")),
    }
}

/// `GET /connectors?expand=info`'s answer: `{name: {info: {name, config, tasks, type}}}` (pure).
pub fn parse_listing(body: &Value) -> Vec<LiveConnector> {
    body.as_object()
        .map(|o| {
            o.iter()
                .map(|(name, v)| parse_connector(name, v.get("info").unwrap_or(&Value::Null)))
                .collect()
        })
        .unwrap_or_default()
}

/// The topics a sink connector reads, from its `topics` list (a `topics.regex` is not
/// matched: import names only what it can tell).
pub fn topics_of(c: &LiveConnector) -> Vec<String> {
    c.config
        .get("topics")
        .map(|t| {
            t.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Import (pure): each candidate channel gains the sink connectors whose `topics` name its
/// main topic, with an override (`config`) for each owned key whose live value differs from
/// the one dlqctl would derive; an owned key the connector does not have is a finding (apply
/// would set it). Source connectors are never imported. The connectors' live state joins the
/// candidate's, so the check after import compares them too.
pub fn attach(
    candidates: &mut [crate::backend::kit::import::Candidate],
    connectors: &[LiveConnector],
    target_name: &str,
    target: &Target,
) {
    use crate::spec::model::{ConnectorValue, KafkaConnector};
    for c in candidates.iter_mut() {
        let spec = &c.channel.spec;
        let main = spec
            .name
            .clone()
            .unwrap_or_else(|| c.channel.metadata.name.clone());
        let feeding: Vec<&LiveConnector> = connectors
            .iter()
            .filter(|l| l.kind == "sink" && topics_of(l).contains(&main))
            .collect();
        if feeding.is_empty() {
            continue;
        }
        // What dlqctl would derive for a connector of this channel, without overrides.
        let mut probe = c.channel.clone();
        if let Some(k) = probe.spec.kafka.as_mut() {
            k.connectors = Some(vec![KafkaConnector {
                name: "probe".into(),
                kind: None,
                config: None,
            }]);
        }
        let derived = crate::spec::resolve::resolve(&probe, target_name, target)
            .ok()
            .and_then(|r| r.kafka.and_then(|k| k.connectors.into_iter().next()));
        let Some(derived) = derived else { continue };
        let mut listed = Vec::new();
        for l in feeding {
            let mut overrides = BTreeMap::new();
            for key in CONNECTOR_OWNED_KEYS {
                match (l.config.get(key), derived.get(key)) {
                    (Some(live), Some(want)) if live != want => {
                        overrides.insert(key.to_owned(), ConnectorValue::Text(live.clone()));
                    }
                    (None, Some(want)) => c.findings.push(format!(
                        "connector {}: `{key}` is not set on the worker; apply sets it to `{want}`",
                        l.name
                    )),
                    _ => {}
                }
            }
            c.live
                .insert(connector_id(target_name, &l.name), live(&l.kind, &l.config));
            listed.push(KafkaConnector {
                name: l.name.clone(),
                kind: None,
                config: (!overrides.is_empty()).then_some(overrides),
            });
        }
        if let Some(k) = c.channel.spec.kafka.as_mut() {
            k.connectors = Some(listed);
        }
    }
}

/// The read-only REST client of one target's Connect worker.
#[derive(Debug, Clone)]
pub struct Client {
    pub(super) http: ReadHttp,
    pub(super) target: String,
}

impl Client {
    /// The client of `target.connectUrl`, if it names one.
    pub fn of(
        name: &str,
        target: &Target,
        stats: Arc<Stats>,
    ) -> Result<Option<Self>, BackendError> {
        let Some(url) = target.connect_url.as_deref() else {
            return Ok(None);
        };
        let http = ReadHttp::new(
            HttpConfig {
                target: name.to_owned(),
                base: url.to_owned(),
                user: None,
                password: None,
                bearer: None,
                creds_hint: "the Connect worker's settings".into(),
                insecure: false,
                budget: ReadBudget::default(),
            },
            stats,
        )
        .map_err(|e| BackendError::Http {
            target: name.to_owned(),
            error: e,
        })?;
        Ok(Some(Client {
            http,
            target: name.to_owned(),
        }))
    }

    pub fn url(&self) -> &str {
        self.http.base()
    }

    /// One connector (`GET /connectors/{name}`); a connector the worker does not know is an
    /// error that names it.
    pub async fn connector(&self, name: &str) -> Result<LiveConnector, KafkaError> {
        let body = self
            .http
            .get(
                "GET /connectors/{name}",
                &format!("/connectors/{}", seg(name)),
            )
            .await
            .map_err(|e| connector_error(name, e))?;
        match body {
            Some(b) => Ok(parse_connector(name, &b)),
            None => Err(self.missing(name)),
        }
    }

    /// Every connector of the worker, with its config and type.
    pub async fn list(&self) -> Result<Vec<LiveConnector>, KafkaError> {
        let body = self
            .http
            .get("GET /connectors?expand=info", "/connectors?expand=info")
            .await
            .map_err(|e| KafkaError::Connector {
                connector: "*".into(),
                message: e.to_string(),
            })?;
        Ok(body.as_ref().map(parse_listing).unwrap_or_default())
    }

    fn missing(&self, name: &str) -> KafkaError {
        KafkaError::Connector {
            connector: name.to_owned(),
            message: format!(
                "the Connect worker at {} has no connector of this name (target {}); dlqctl sets only the error-handling keys of an existing connector and never creates one: create it (its class, topics, converters), or correct `kafka.connectors`",
                self.url(),
                self.target
            ),
        }
    }

    /// The writer, for apply only.
    pub fn into_writer(self) -> ConnectWriter {
        ConnectWriter {
            http: self.http.clone().into_writer(),
            client: self,
        }
    }
}

fn connector_error(name: &str, e: crate::backend::wire::http::HttpError) -> KafkaError {
    KafkaError::Connector {
        connector: name.to_owned(),
        message: e.to_string(),
    }
}

/// Read-write access to a Connect worker: the one `PUT /connectors/{name}/config` apply makes.
#[derive(Debug, Clone)]
pub struct ConnectWriter {
    client: Client,
    http: WriteHttp,
}

impl ConnectWriter {
    /// Sets the planned owned keys on the connector's config as read now, keeping every
    /// other key, with one PUT.
    pub async fn apply(&self, change: &Change) -> Result<(), KafkaError> {
        let name = change.resource.name.as_str();
        if change.action != Action::Update {
            return Err(KafkaError::Connector {
                connector: name.to_owned(),
                message: "dlqctl never creates, replaces or deletes a connector; it only sets its error-handling keys".into(),
            });
        }
        let path = format!("/connectors/{}/config", seg(name));
        let live = self
            .client
            .http
            .get("GET /connectors/{name}/config", &path)
            .await
            .map_err(|e| connector_error(name, e))?
            .ok_or_else(|| self.client.missing(name))?;
        let config =
            merged(&config_map(Some(&live)), change).map_err(|m| KafkaError::Connector {
                connector: name.to_owned(),
                message: m,
            })?;
        let body = json!(config);
        self.http
            .call(
                Method::PUT,
                "PUT /connectors/{name}/config",
                &path,
                Some(&body),
            )
            .await
            .map_err(|e| connector_error(name, e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::diff;

    fn resolved(spec: &str) -> Resolved {
        crate::backend::resolved_example(
            &format!(
                "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: app.orders}}\nspec:\n  target: k\n{spec}"
            ),
            "k",
            json!({"backend": "kafka", "bootstrapServers": "127.0.0.1:9092", "connectUrl": "http://127.0.0.1:8083"}),
        )
    }

    fn live_config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_listed_connector_is_desired_with_its_type_and_the_owned_keys_only() {
        let r = resolved(
            "  retry: {maxAttempts: 2, backoff: {initial: 2s}}\n  kafka: {connectors: [{name: orders-sink}]}\n",
        );
        let d = desired(&r);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].id, connector_id("k", "orders-sink"));
        assert_eq!(
            (d[0].role, d[0].channel.as_str()),
            (Role::Connector, "app.orders")
        );
        let keys: Vec<&str> = d[0].props.keys().map(String::as_str).collect();
        let mut want: Vec<&str> = CONNECTOR_OWNED_KEYS.to_vec();
        want.push(TYPE_KEY);
        want.sort_unstable();
        assert_eq!(keys, want);
        assert_eq!(d[0].props.get("errors.retry.timeout"), Some(&json!("2000")));
        // The channel's topics do not include it; the Kafka desired state lists it last.
        let all = super::super::desired::desired(&r);
        assert_eq!(all.last().map(|x| x.id.kind), Some(Kind::Connector));
        assert!(desired(&resolved("  kafka: {partitions: 1}\n")).is_empty());
    }

    #[test]
    fn the_plan_is_a_key_level_diff_of_the_owned_keys_and_apply_keeps_every_other_key() {
        let r = resolved("  kafka: {connectors: [{name: s}]}\n");
        let d = &desired(&r)[0];
        let mut config = live_config(&[
            (
                "connector.class",
                "org.apache.kafka.connect.file.FileStreamSinkConnector",
            ),
            ("topics", "app.orders"),
            ("file", "/tmp/out"),
            ("name", "s"),
        ]);
        for (k, v) in &d.props {
            if k != TYPE_KEY {
                config.insert(k.clone(), config_text(v));
            }
        }
        assert_eq!(diff(d, Some(&live("sink", &config))), None, "in sync");
        // A hand change of one owned key is a one-key diff; unowned keys never show.
        let mut changed = config.clone();
        changed.insert("errors.tolerance".into(), "none".into());
        changed.insert("file".into(), "/tmp/elsewhere".into());
        let mut c = diff(d, Some(&live("sink", &changed))).expect("a change");
        refine(&mut c);
        assert_eq!(c.action, Action::Update);
        let fields: Vec<(&str, Option<&Value>, Option<&Value>)> = c
            .fields
            .iter()
            .map(|f| (f.key.as_str(), f.old.as_ref(), f.new.as_ref()))
            .collect();
        assert_eq!(
            fields,
            [(
                "errors.tolerance",
                Some(&json!("none")),
                Some(&json!("all"))
            )]
        );
        // Apply's PUT: the live config, every other key kept (the hand-changed `file` too).
        let put = merged(&changed, &c).expect("merged");
        let mut want = changed.clone();
        want.insert("errors.tolerance".into(), "all".into());
        assert_eq!(put, want);
    }

    #[test]
    fn a_source_connector_or_another_type_is_impossible_and_never_written() {
        let r = resolved("  kafka: {connectors: [{name: src}]}\n");
        let d = &desired(&r)[0];
        let mut c = diff(d, Some(&live("source", &BTreeMap::new()))).expect("a change");
        refine(&mut c);
        assert_eq!(c.action, Action::Impossible);
        let why = c.reason.clone().unwrap_or_default();
        assert!(
            why.contains("`src` is a source connector") && why.contains("sink connectors only"),
            "{why}"
        );
        assert!(merged(&BTreeMap::new(), &c).is_err());
    }

    #[test]
    fn import_lists_the_sinks_of_the_main_topic_with_the_keys_that_differ_as_overrides() {
        let ws = crate::spec::load::load_str(
            "c.yaml",
            "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {name: app.orders}\nspec:\n  target: k\n  kafka: {partitions: 1}\n",
        );
        let target: Target = serde_json::from_value(
            json!({"backend": "kafka", "bootstrapServers": "127.0.0.1:9092", "connectUrl": "http://127.0.0.1:8083"}),
        )
        .expect("target");
        let mut c = vec![crate::backend::kit::import::Candidate {
            channel: ws.channels[0].value.clone(),
            live: BTreeMap::new(),
            findings: Vec::new(),
            to_adopt: Vec::new(),
            unreadable: Vec::new(),
        }];
        let sink = |name: &str, topics: &str, extra: &[(&str, &str)]| LiveConnector {
            name: name.into(),
            kind: "sink".into(),
            config: live_config(&[&[("topics", topics)], extra].concat()),
        };
        let all_owned: Vec<(&str, &str)> = vec![
            ("errors.tolerance", "none"),
            ("errors.deadletterqueue.topic.name", "app.orders-dlt"),
            ("errors.deadletterqueue.topic.replication.factor", "1"),
            ("errors.deadletterqueue.context.headers.enable", "true"),
            ("errors.retry.timeout", "0"),
            ("errors.retry.delay.max.ms", "60000"),
            ("errors.log.enable", "true"),
        ];
        let connectors = [
            sink("wh", "app.orders, other", &all_owned),
            sink("bare", "app.orders", &[]),
            sink("elsewhere", "app.payments", &[]),
            LiveConnector {
                kind: "source".into(),
                ..sink("cdc", "app.orders", &[])
            },
        ];
        attach(&mut c, &connectors, "k", &target);
        let listed = c[0]
            .channel
            .spec
            .kafka
            .as_ref()
            .and_then(|k| k.connectors.clone())
            .expect("connectors");
        let names: Vec<&str> = listed.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["wh", "bare"], "the sinks of the main topic only");
        // `wh` differs from the derived keys in its tolerance only.
        let overrides = listed[0].config.clone().expect("an override");
        assert_eq!(
            overrides.keys().map(String::as_str).collect::<Vec<_>>(),
            ["errors.tolerance"]
        );
        assert_eq!(listed[1].config, None);
        assert_eq!(
            c[0].findings.len(),
            CONNECTOR_OWNED_KEYS.len(),
            "{:?}",
            c[0].findings
        );
        assert!(c[0].live.contains_key(&connector_id("k", "wh")));
    }

    #[test]
    fn the_workers_answers_are_read_as_text() {
        let one = parse_connector(
            "s",
            &json!({"name": "s", "type": "sink", "config": {"topics": "a, b", "tasks.max": "1"}, "tasks": []}),
        );
        assert_eq!(one.kind, "sink");
        assert_eq!(topics_of(&one), ["a", "b"]);
        let all = parse_listing(&json!({
            "s": {"info": {"name": "s", "type": "sink", "config": {"topics": "x"}}},
            "t": {"info": {"name": "t", "type": "source", "config": {}}}
        }));
        assert_eq!(
            all.iter()
                .map(|c| (c.name.as_str(), c.kind.as_str()))
                .collect::<Vec<_>>(),
            [("s", "sink"), ("t", "source")]
        );
        assert_eq!(parse_connector("u", &json!({})).kind, "unknown");
    }
}
