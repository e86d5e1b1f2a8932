//! Pub/Sub apply: the only module that writes to Pub/Sub. Every write to an existing object
//! re-checks its ownership labels first; an update PATCHes exactly the owned fields that
//! differ (the update mask names nothing else); a subscription is only dropped when the user
//! allowed message loss, since its backlog cannot be counted over REST.
//!
//! With `grantServiceAgent: true` (and not on an emulator, which has no IAM), writing a
//! subscription's dead-letter policy also adds the Pub/Sub service agent to the dead-letter
//! topic's `roles/pubsub.publisher` and the subscription's `roles/pubsub.subscriber`
//! (getIamPolicy, then setIamPolicy with the policy's etag; nothing else in it changes).

use reqwest::Method;
use serde_json::{Map, Value, json};

use super::read::Reader;
use super::*;
use crate::backend::wire::http::{HttpError, WriteHttp};
use crate::plan::{Action, Change};
use crate::resource::Role;

/// Read-write access to one Pub/Sub project, for apply.
#[derive(Debug, Clone)]
pub struct Writer {
    pub reader: Reader,
    http: WriteHttp,
}

impl Writer {
    pub fn new(reader: Reader) -> Self {
        let http = reader.http.clone().into_writer();
        Writer { reader, http }
    }

    pub fn target(&self) -> &str {
        &self.reader.target
    }

    /// Pub/Sub's admin API is strongly consistent: what was written is what the next read
    /// sees.
    pub async fn settle(&self, _applied: &[&Change]) -> Result<Vec<String>, HttpError> {
        Ok(Vec::new())
    }

    /// Applies one change (see the module doc for the guards).
    pub async fn apply(&self, change: &Change, allow_loss: bool) -> Result<(), HttpError> {
        let r = &change.resource;
        if change.action == Action::Impossible {
            return Ok(());
        }
        if !matches!(r.kind, Kind::Topic | Kind::Subscription) {
            return Ok(());
        }
        self.check_prefixes(change)?;
        match change.action {
            Action::Create => self.create(change).await?,
            Action::Update => {
                let adopting = change
                    .fields
                    .iter()
                    .any(|f| f.key.starts_with(LABEL_FIELD_PREFIX));
                if adopting {
                    self.adopt(change).await?;
                } else {
                    self.ensure_owned(change).await?;
                }
                let fields: Vec<String> = change
                    .fields
                    .iter()
                    .filter(|f| !f.key.starts_with(LABEL_FIELD_PREFIX))
                    .map(|f| mask_field(&f.key).to_owned())
                    .collect();
                if !fields.is_empty() {
                    self.patch(change, &fields).await?;
                }
            }
            Action::Replace => {
                self.ensure_owned(change).await?;
                self.delete(change, allow_loss).await?;
                self.create(change).await?;
            }
            Action::Delete => {
                self.ensure_owned(change).await?;
                self.delete(change, allow_loss).await?;
            }
            Action::Impossible => {}
        }
        if change.role == Role::Subscription && change.action != Action::Delete {
            self.grant(change).await?;
        }
        Ok(())
    }

    fn refused(change: &Change, reason: String) -> HttpError {
        HttpError::Refused {
            what: format!("{} {}", change.resource.kind.as_str(), change.resource.name),
            reason,
        }
    }

    /// Refuses a name outside the target's ownership prefixes, when it declares them.
    fn check_prefixes(&self, change: &Change) -> Result<(), HttpError> {
        if crate::backend::kit::ownership::in_prefixes(&self.reader.prefixes, &change.resource.name)
        {
            return Ok(());
        }
        Err(Self::refused(
            change,
            format!(
                "refusing to change it: it is outside the target's ownership prefixes ({})",
                self.reader.prefixes.join(", ")
            ),
        ))
    }

    /// Refuses to touch a live object that is not provably this channel's (the plan checked,
    /// but labels may have changed since).
    async fn ensure_owned(&self, change: &Change) -> Result<(), HttpError> {
        let live = self.live_now(change).await?;
        match ownership_problem(&labels(&live), &change.channel) {
            None => Ok(()),
            Some(p) => Err(Self::refused(
                change,
                format!("refusing to change it: it {p}"),
            )),
        }
    }

    /// PUT a topic or subscription with the ownership labels. An object that already exists
    /// (an earlier, interrupted apply) is fine when it is this channel's and, for a
    /// subscription, holds what was asked; anything else is refused.
    async fn create(&self, change: &Change) -> Result<(), HttpError> {
        let r = &change.resource;
        let mut body = match r.kind {
            Kind::Subscription => subscription_body(&self.reader.project, &change.desired, None).0,
            _ => json!({}),
        };
        if let Some(o) = body.as_object_mut() {
            o.insert(
                "labels".into(),
                Value::Object(ownership_labels(&change.channel)),
            );
        }
        let api = Reader::api("PUT", r.kind);
        let res = self
            .http
            .call(
                Method::PUT,
                &api,
                &self.reader.path(r.kind, &r.name),
                Some(&body),
            )
            .await;
        match res {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(409) => {
                let live = self.reader.read_one(r).await?;
                let owned = live
                    .as_ref()
                    .is_some_and(|l| ownership_problem(&labels(l), &change.channel).is_none());
                let same = live.as_ref().is_some_and(|l| {
                    change
                        .desired
                        .iter()
                        .all(|(k, v)| crate::resource::same(v, l.props.get(k)))
                });
                if owned && same {
                    Ok(())
                } else {
                    Err(Self::refused(
                        change,
                        "it was created by someone else since the plan; run `dlqctl plan` again"
                            .into(),
                    ))
                }
            }
            Err(e) => Err(e),
        }
    }

    /// PATCH exactly `fields` (top-level names, from the plan's differing keys).
    async fn patch(&self, change: &Change, fields: &[String]) -> Result<(), HttpError> {
        let r = &change.resource;
        if r.kind != Kind::Subscription {
            return Ok(());
        }
        let (sub, mask) = subscription_body(&self.reader.project, &change.desired, Some(fields));
        self.send_patch(
            change,
            &json!({"subscription": sub, "updateMask": mask.join(",")}),
        )
        .await
    }

    /// One PATCH of the change's object.
    async fn send_patch(&self, change: &Change, body: &Value) -> Result<(), HttpError> {
        let r = &change.resource;
        self.http
            .call(
                Method::PATCH,
                &Reader::api("PATCH", r.kind),
                &self.reader.path(r.kind, &r.name),
                Some(body),
            )
            .await
            .map(|_| ())
    }

    /// The object as it is now; refused when it is gone since the plan.
    async fn live_now(&self, change: &Change) -> Result<Live, HttpError> {
        self.reader
            .read_one(&change.resource)
            .await?
            .ok_or_else(|| {
                Self::refused(
                    change,
                    "it no longer exists; run `dlqctl plan` again".into(),
                )
            })
    }

    /// Adds the ownership labels to an unclaimed object (`--adopt`), keeping its other labels.
    /// Refuses when, since the plan, another tool or channel has claimed it.
    async fn adopt(&self, change: &Change) -> Result<(), HttpError> {
        let r = &change.resource;
        let live = self.live_now(change).await?;
        let current = labels(&live);
        if ownership_problem(&current, &change.channel).is_none() {
            return Ok(());
        }
        if !crate::backend::kit::ownership::adoptable(&current) {
            let p = ownership_problem(&current, &change.channel).unwrap_or_default();
            return Err(Self::refused(
                change,
                format!("refusing to adopt it: it {p}"),
            ));
        }
        let mut all: Map<String, Value> = current.into_iter().map(|(k, v)| (k, json!(v))).collect();
        all.extend(ownership_labels(&change.channel));
        let field = if r.kind == Kind::Subscription {
            "subscription"
        } else {
            "topic"
        };
        self.send_patch(
            change,
            &json!({ field: {"labels": all}, "updateMask": "labels" }),
        )
        .await
    }

    /// DELETE; a subscription only with `allow_loss` (its backlog cannot be counted).
    async fn delete(&self, change: &Change, allow_loss: bool) -> Result<(), HttpError> {
        let r = &change.resource;
        if r.kind == Kind::Subscription && !allow_loss {
            return Err(Self::refused(
                change,
                "refusing to delete it without --allow-message-loss: Pub/Sub's REST API cannot say how many messages it holds".into(),
            ));
        }
        let res = self
            .http
            .call(
                Method::DELETE,
                &Reader::api("DELETE", r.kind),
                &self.reader.path(r.kind, &r.name),
                None,
            )
            .await;
        match res {
            Err(e) if e.status() == Some(404) => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// With `grantServiceAgent: true` on Google Cloud: the two grants dead lettering needs.
    async fn grant(&self, change: &Change) -> Result<(), HttpError> {
        let (Some(number), false) = (&self.reader.grant, self.reader.emulator) else {
            return Ok(());
        };
        let Some(dead_letter) = change
            .desired
            .get(DEAD_LETTER_TOPIC)
            .and_then(Value::as_str)
        else {
            return Ok(());
        };
        let member = format!(
            "serviceAccount:{}",
            super::plan::service_agent(&self.reader.project, Some(number))
        );
        for (kind, name, role) in [
            (Kind::Topic, dead_letter, "roles/pubsub.publisher"),
            (
                Kind::Subscription,
                change.resource.name.as_str(),
                "roles/pubsub.subscriber",
            ),
        ] {
            let path = self.reader.path(kind, name);
            let policy = self
                .reader
                .http
                .get(
                    &Reader::api("GET :getIamPolicy", kind),
                    &format!("{path}:getIamPolicy"),
                )
                .await?
                .unwrap_or_else(|| json!({}));
            if let Some(policy) = with_member(policy, role, &member) {
                self.http
                    .call(
                        Method::POST,
                        &Reader::api("POST :setIamPolicy", kind),
                        &format!("{path}:setIamPolicy"),
                        Some(&json!({ "policy": policy })),
                    )
                    .await?;
            }
        }
        Ok(())
    }
}

/// The IAM policy with `member` in `role`'s binding (the binding added when missing), or
/// `None` when it is there already. The etag and every other binding stay as they were, so
/// a concurrent change makes setIamPolicy fail rather than be overwritten.
pub fn with_member(mut policy: Value, role: &str, member: &str) -> Option<Value> {
    let obj = policy.as_object_mut()?;
    let bindings = obj
        .entry("bindings")
        .or_insert_with(|| json!([]))
        .as_array_mut()?;
    if let Some(b) = bindings.iter_mut().find(|b| {
        b.get("role").and_then(Value::as_str) == Some(role) && b.get("condition").is_none()
    }) {
        let members = b
            .as_object_mut()?
            .entry("members")
            .or_insert_with(|| json!([]))
            .as_array_mut()?;
        if members.iter().any(|m| m.as_str() == Some(member)) {
            return None;
        }
        members.push(json!(member));
    } else {
        bindings.push(json!({"role": role, "members": [member]}));
    }
    Some(policy)
}

/// The only way to a [`Writer`]: from the reader of the same target.
impl Reader {
    pub fn into_writer(self) -> Writer {
        Writer::new(self)
    }
}

impl crate::backend::kit::doors::Connected for Writer {
    type Error = crate::backend::wire::http::HttpError;

    fn target(&self) -> &str {
        Writer::target(self)
    }
}

impl crate::backend::kit::doors::Apply for Writer {
    async fn apply(&self, change: &Change, allow_loss: bool) -> Result<(), Self::Error> {
        Writer::apply(self, change, allow_loss).await
    }

    async fn settle(&self, applied: &[&Change]) -> Result<Vec<String>, Self::Error> {
        Writer::settle(self, applied).await
    }
}
