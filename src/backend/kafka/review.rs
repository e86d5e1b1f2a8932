//! The review door: a plan's changes on this target checked against what only further reads
//! can tell (the cluster's ACLs). It reads; it never writes.

use std::collections::BTreeMap;

use super::read::{Reader, owns_acls};
use super::*;
use crate::plan::{Change, Note};
use crate::resource::{Desired, Live, ResourceId, Role};

impl crate::backend::kit::doors::Review for Reader {
    /// One further read, where the plan has a dead-letter topic on this target: the topics'
    /// ACLs (DescribeAcls), for the note on who may read dead letters but not their source.
    /// Only a note depends on it: an error is said in a note, never fatal; a broker without
    /// an authorizer (SECURITY_DISABLED) lets everyone read everything, which is no wider.
    async fn review(
        &self,
        desired: &[Desired],
        _live: &BTreeMap<ResourceId, Live>,
        changes: &mut Vec<Change>,
        notes: &mut Vec<Note>,
        _adopt: bool,
    ) -> Result<(), KafkaError> {
        let Some(first_dlt) = desired.iter().find(|d| {
            d.id.target == self.target && d.id.kind == Kind::Topic && d.role == Role::DeadLetter
        }) else {
            return Ok(());
        };
        match self.describe_acls().await {
            Ok(bindings) => {
                notes.extend(super::plan::acl_notes(&self.target, desired, &bindings));
                changes.extend(super::plan::revoked(&self.target, desired, &bindings));
            }
            // A channel owns bindings here: without them the deletes it asks for are unknown,
            // and a plan that looked in sync would be wrong.
            Err(e) if owns_acls(&self.target, desired) => return Err(e),
            Err(KafkaError::NoAuthorizer { .. }) => {}
            Err(e) => notes.push(Note {
                resource: first_dlt.id.clone(),
                message: format!("who may read the dead-letter topics was not checked: {e}"),
            }),
        }
        Ok(())
    }
}
