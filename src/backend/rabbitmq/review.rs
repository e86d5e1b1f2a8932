//! The review door: a plan's changes on this target checked against what only further reads
//! can tell (see [`Reader::review`], which it calls).

use std::collections::BTreeMap;

use super::read::Reader;
use crate::plan::{Change, Note};
use crate::resource::{Desired, Live, ResourceId};

impl crate::backend::kit::doors::Review for Reader {
    async fn review(
        &self,
        desired: &[Desired],
        live: &BTreeMap<ResourceId, Live>,
        changes: &mut Vec<Change>,
        notes: &mut Vec<Note>,
        adopt: bool,
    ) -> Result<(), Self::Error> {
        Reader::review(self, desired, live, changes, notes, adopt).await
    }
}
