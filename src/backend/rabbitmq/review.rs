//! The review door: a plan's changes on this target checked against what only further reads
//! can tell (replaced objects' bindings, operator policies, permissions). It reads; it never writes.

use std::collections::BTreeMap;

use super::read::Reader;
use crate::backend::wire::http::HttpError;
use crate::plan::{Action, Change, Note};
use crate::resource::{Desired, Live, ResourceId, Role};

impl crate::backend::kit::doors::Review for Reader {
    /// What only further reads can tell, where the plan replaces an object: the bindings a
    /// replace deletes with it (the spec's and everyone else's), listed in the change and
    /// re-created by apply; how a quorum queue is guarded before it is dropped; and, where a
    /// channel has a TTL retry loop, what the broker's version means for its consumer.
    async fn review(
        &self,
        desired: &[Desired],
        live: &BTreeMap<ResourceId, Live>,
        changes: &mut Vec<Change>,
        notes: &mut Vec<Note>,
        _adopt: bool,
    ) -> Result<(), HttpError> {
        for c in changes.iter_mut() {
            if c.resource.target != self.target || c.action != Action::Replace {
                continue;
            }
            let bindings = self
                .bindings_of(c.resource.kind, &c.resource.scope, &c.resource.name)
                .await?;
            super::plan::list_rebinds(c, &bindings);
        }
        // A new or lower dead-letter TTL on a queue that exists: guarded by what it holds.
        for c in changes.iter_mut() {
            if c.resource.target != self.target {
                continue;
            }
            if let Some(queue) = super::plan::ttl_on_existing_queue(c, live) {
                let held = self.message_count(&queue).await?;
                super::plan::guard_ttl(c, held);
            }
        }
        notes.extend(super::plan::quorum_notes(changes, live));
        // One small read, only where a channel of this target has a TTL retry loop: the
        // consumer contract depends on the broker's version.
        if desired
            .iter()
            .any(|d| d.id.target == self.target && d.role == Role::Retry && d.present)
            && let Some(version) = self.version().await?
        {
            notes.extend(super::plan::contract_notes(&self.target, &version, desired));
        }
        let operator = self.operator_policies(desired, live).await?;
        super::plan::add_policy_drift(changes, desired, live, &operator);
        notes.extend(self.permission_notes(desired).await);
        Ok(())
    }
}
