//! Share-group dead-letter queues (KIP-1191, Apache Kafka 4.4): the group configs dlqctl owns
//! on each group of `kafka.shareGroups`, read by DescribeConfigs and written by
//! IncrementalAlterConfigs on the GROUP config resource ([`super::ffi`]).
//!
//! What Kafka 4.4.0 does (read in its jars and asked of the stack's broker; docs/kafka.md
//! "Share groups"): a record a share consumer REJECTs, or one whose delivery count reaches
//! `share.delivery.count.limit`, is archived and, when the group names a dead-letter topic in
//! `errors.deadletterqueue.topic.name`, written there by the broker with `__dlq.errors.*`
//! headers (and the record itself with `errors.deadletterqueue.copy.record.enable`). The
//! broker checks the topic only when it writes: the name must start with the cluster's
//! `errors.deadletterqueue.topic.name.prefix` (default `dlq.`, [`DLQ_PREFIX`]) and the topic
//! must have `errors.deadletterqueue.group.enable=true` ([`TOPIC_ENABLE`]); otherwise the
//! broker logs "Failed to write to DLQ, proceeding to ARCHIVED regardless" and the record is
//! gone. So dlqctl sets [`TOPIC_ENABLE`] on the DLT of every channel with share groups, and
//! lint checks the prefix.
//!
//! A group's configs can be set before it has a member and outlive its members: a group
//! always reads as present, so a plan only ever updates one; prune never deletes one.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use std::sync::Arc;

use super::ffi::{self, Admin, ConfigOp};
use super::*;
use crate::plan::Change;
use crate::resource::{Desired, Live, Props};
use crate::spec::resolve::Resolved;

/// The group config naming the group's dead-letter topic.
pub const TOPIC_NAME: &str = "errors.deadletterqueue.topic.name";
/// The group config: the dead letter carries the record (else only the context headers).
pub const COPY_RECORD: &str = "errors.deadletterqueue.copy.record.enable";
/// The group config: deliveries of a record before it is archived (dead-lettered).
pub const DELIVERY_LIMIT: &str = "share.delivery.count.limit";
/// The topic config without which the broker refuses to write dead letters to a topic.
pub const TOPIC_ENABLE: &str = "errors.deadletterqueue.group.enable";
/// Kafka 4.4's default `errors.deadletterqueue.topic.name.prefix` (a cluster setting).
pub use crate::spec::model::SHARE_DLQ_PREFIX as DLQ_PREFIX;

/// A share group's configs as a resource.
pub fn group_id(target: &str, group: &str) -> ResourceId {
    ResourceId {
        target: target.to_owned(),
        backend: crate::spec::model::Backend::Kafka,
        kind: Kind::ShareGroup,
        scope: String::new(),
        name: group.to_owned(),
    }
}

/// The desired configs of the channel's share groups (pure): each names the channel's DLT,
/// copies the record as written, and takes `retry.maxAttempts` as its delivery limit when
/// the spec writes one.
pub fn desired(r: &Resolved) -> Vec<Desired> {
    let Some(k) = &r.kafka else { return Vec::new() };
    k.share_groups
        .iter()
        .map(|(group, copy)| {
            let mut props = Props::new();
            props.insert(format!("config.{TOPIC_NAME}"), json!(r.dead_letter));
            props.insert(format!("config.{COPY_RECORD}"), json!(copy.to_string()));
            if let Some(n) = k.share_delivery_limit {
                props.insert(format!("config.{DELIVERY_LIMIT}"), json!(n));
            }
            Desired {
                id: group_id(&r.target, group),
                channel: r.channel.clone(),
                role: Role::ShareGroup,
                props,
                immutable: false,
                present: true,
            }
        })
        .collect()
}

/// Whether the channel has share groups (its DLT then gets [`TOPIC_ENABLE`]).
pub fn has_share_groups(r: &Resolved) -> bool {
    r.kafka.as_ref().is_some_and(|k| !k.share_groups.is_empty())
}

/// A group's live properties: every group config the broker reports, as `config.<key>`; those
/// the group does not set itself (the broker's defaults and synonyms) listed under
/// `@defaults`, as for topics.
pub fn live_group(entries: &[ffi::Entry]) -> Live {
    let mut props = Props::new();
    let mut defaults = Vec::new();
    for e in entries {
        let Some(value) = &e.value else { continue };
        if e.is_sensitive {
            continue;
        }
        let key = format!("config.{}", e.name);
        // librdkafka 2.12 has no name for DYNAMIC_GROUP_CONFIG: it reads as `Other`.
        if !matches!(e.source, ffi::Source::Other | ffi::Source::Unknown) {
            defaults.push(json!(key));
        }
        props.insert(key, normalise_value(value));
    }
    if !defaults.is_empty() {
        props.insert(DEFAULTS_KEY.into(), Value::Array(defaults));
    }
    Live {
        props,
        messages: None,
    }
}

/// The configs of the share groups `ids` name (other kinds are skipped), in one
/// DescribeConfigs request (none when there are none); `target` names the resources.
pub async fn read_groups(
    admin: &Arc<Admin>,
    target: &str,
    ids: &[&ResourceId],
) -> Result<BTreeMap<ResourceId, Live>, KafkaError> {
    let names: Vec<String> = ids
        .iter()
        .filter(|i| i.kind == Kind::ShareGroup)
        .map(|i| i.name.clone())
        .collect();
    let mut out = BTreeMap::new();
    if names.is_empty() {
        return Ok(out);
    }
    for (group, answer) in ffi::describe_group_configs(admin, &names, TIMEOUT).await? {
        let entries = answer.map_err(|e| group_error(&group, "DescribeConfigs", e))?;
        out.insert(group_id(target, &group), live_group(&entries));
    }
    Ok(out)
}

/// Applies the planned config changes of share groups, all in one IncrementalAlterConfigs
/// request; one result per change, in order.
pub async fn alter_groups(admin: &Arc<Admin>, changes: &[&Change]) -> Vec<Result<(), KafkaError>> {
    let mut request = Vec::new();
    let mut out: Vec<Option<Result<(), KafkaError>>> = Vec::with_capacity(changes.len());
    for c in changes {
        match group_ops(c) {
            Ok(ops) if ops.is_empty() => out.push(Some(Ok(()))),
            Ok(ops) => {
                request.push((c.resource.name.clone(), ops));
                out.push(None);
            }
            Err(m) => out.push(Some(Err(group_error(&c.resource.name, "update", m)))),
        }
    }
    if !request.is_empty() {
        match ffi::incremental_alter_group_configs(admin, &request, TIMEOUT).await {
            Ok(answers) => {
                let answers: BTreeMap<String, _> = answers.into_iter().collect();
                for (c, slot) in changes.iter().zip(out.iter_mut()) {
                    if slot.is_some() {
                        continue;
                    }
                    let group = &c.resource.name;
                    *slot = Some(match answers.get(group) {
                        Some(Ok(())) => Ok(()),
                        Some(Err(e)) => Err(group_error(group, "IncrementalAlterConfigs", e)),
                        None => Err(group_error(
                            group,
                            "IncrementalAlterConfigs",
                            "the broker's answer does not name this group",
                        )),
                    });
                }
            }
            Err(e) => {
                for (c, slot) in changes.iter().zip(out.iter_mut()) {
                    if slot.is_none() {
                        *slot = Some(Err(group_error(
                            &c.resource.name,
                            "IncrementalAlterConfigs",
                            e.detail(),
                        )));
                    }
                }
            }
        }
    }
    out.into_iter().map(|r| r.unwrap_or(Ok(()))).collect()
}

/// The SET operations a planned change of a group takes (pure): only `config.` keys change in
/// place; a group is never created or deleted.
pub fn group_ops(change: &Change) -> Result<Vec<ConfigOp>, String> {
    if matches!(change.action, crate::plan::Action::Delete) {
        return Err("dlqctl never deletes a share group".to_owned());
    }
    change
        .fields
        .iter()
        .map(|f| {
            let key = f
                .key
                .strip_prefix("config.")
                .ok_or_else(|| format!("`{}` cannot be changed on a share group", f.key))?;
            Ok(match &f.new {
                Some(v) => ConfigOp::Set {
                    key: key.to_owned(),
                    value: config_text(v),
                },
                None => ConfigOp::Delete {
                    key: key.to_owned(),
                },
            })
        })
        .collect()
}

fn group_error(group: &str, api: &'static str, message: impl std::fmt::Display) -> KafkaError {
    KafkaError::Topic {
        topic: format!("share group {group}"),
        api,
        message: message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    //! The desired group configs, what a DescribeConfigs answer reads as, and the requests a
    //! planned change takes.

    use super::*;
    use crate::plan::{Action, FieldChange};

    fn resolved(kafka: &str) -> Resolved {
        let ws = crate::spec::load::load_str(
            "c.yaml",
            &format!(
                "apiVersion: dlqctl/v1\nkind: Channel\nmetadata: {{name: orders}}\nspec:\n  target: k\n  deadLetter: {{name: dlq.orders}}\n{kafka}"
            ),
        );
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
        let target = serde_json::from_value(
            json!({"backend": "kafka", "bootstrapServers": "127.0.0.1:9092"}),
        )
        .expect("target");
        crate::spec::resolve::resolve(&ws.channels[0].value, "k", &target).expect("resolves")
    }

    #[test]
    fn each_group_names_the_dlt_copies_as_written_and_takes_max_attempts() {
        let r = resolved(
            "  retry: {maxAttempts: 4}\n  kafka:\n    shareGroups: [{name: workers}, {name: audit, copyRecord: false}]\n",
        );
        let ds = desired(&r);
        let got: Vec<(&str, &Props)> = ds.iter().map(|d| (d.id.name.as_str(), &d.props)).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, "workers");
        assert_eq!(
            serde_json::to_value(got[0].1).expect("json"),
            json!({
                "config.errors.deadletterqueue.topic.name": "dlq.orders",
                "config.errors.deadletterqueue.copy.record.enable": "true",
                "config.share.delivery.count.limit": 4
            })
        );
        assert_eq!(
            got[1]
                .1
                .get("config.errors.deadletterqueue.copy.record.enable"),
            Some(&json!("false"))
        );
        assert!(
            ds.iter()
                .all(|d| d.id.kind == Kind::ShareGroup && d.channel == "orders")
        );
        // The DLT is enabled for share groups; the other topics are not.
        let topics = super::super::desired::desired(&r);
        for d in topics.iter().filter(|d| d.id.kind == Kind::Topic) {
            let enable = d.props.get(&format!("config.{TOPIC_ENABLE}"));
            if d.role == Role::DeadLetter {
                assert_eq!(enable, Some(&json!("true")), "{}", d.id.name);
            } else {
                assert_eq!(enable, None, "{}", d.id.name);
            }
        }
    }

    #[test]
    fn without_max_attempts_the_delivery_limit_is_the_brokers() {
        let r = resolved("  kafka:\n    shareGroups: [{name: workers}]\n");
        let ds = desired(&r);
        assert!(
            !ds[0]
                .props
                .contains_key(&format!("config.{DELIVERY_LIMIT}"))
        );
        // Without share groups: nothing, and the DLT keeps the broker's default.
        let r = resolved("  kafka: {partitions: 2}\n");
        assert!(desired(&r).is_empty());
        assert!(
            super::super::desired::desired(&r)
                .iter()
                .all(|d| !d.props.contains_key(&format!("config.{TOPIC_ENABLE}")))
        );
    }

    #[test]
    fn set_group_configs_are_settings_and_the_rest_defaults() {
        let entry = |name: &str, value: &str, source| ffi::Entry {
            name: name.into(),
            value: Some(value.into()),
            source,
            is_default: false,
            is_sensitive: false,
        };
        let live = live_group(&[
            entry(TOPIC_NAME, "dlq.orders", ffi::Source::Other),
            entry(DELIVERY_LIMIT, "5", ffi::Source::DynamicDefaultBroker),
            entry(COPY_RECORD, "false", ffi::Source::Default),
        ]);
        assert_eq!(
            serde_json::to_value(&live.props).expect("json"),
            json!({
                "config.errors.deadletterqueue.topic.name": "dlq.orders",
                "config.share.delivery.count.limit": 5,
                "config.errors.deadletterqueue.copy.record.enable": "false",
                "@defaults": ["config.share.delivery.count.limit", "config.errors.deadletterqueue.copy.record.enable"]
            })
        );
    }

    #[test]
    fn a_planned_change_is_sets_of_its_keys_and_never_a_delete() {
        let mut c = Change {
            resource: group_id("k", "workers"),
            channel: "orders".into(),
            role: Role::ShareGroup,
            action: Action::Update,
            fields: vec![FieldChange {
                key: format!("config.{TOPIC_NAME}"),
                old: Some(json!("")),
                new: Some(json!("dlq.orders")),
            }],
            desired: Props::new(),
            messages: None,
            reason: None,
            destructive: None,
            pruned: false,
            discard: None,
        };
        assert_eq!(
            group_ops(&c),
            Ok(vec![ConfigOp::Set {
                key: TOPIC_NAME.into(),
                value: "dlq.orders".into()
            }])
        );
        c.fields[0].key = "partitions".into();
        assert!(group_ops(&c).is_err());
        c.action = Action::Delete;
        assert_eq!(
            group_ops(&c),
            Err("dlqctl never deletes a share group".to_owned())
        );
    }
}
