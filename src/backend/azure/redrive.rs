//! Azure Service Bus redrive and replay: not built in this version. Both doors refuse before
//! anything is read, so no message moves (docs/azure.md says what the data plane would need:
//! peek-lock from `$DeadLetterQueue`, send to the entity, complete only after the send).

use super::read::Reader;
use crate::backend::kit::errors::BackendError;
use crate::redrive::Run;
use crate::spec::resolve::Resolved;

fn not_built(target: &str, what: &str) -> BackendError {
    BackendError::Config {
        target: target.to_owned(),
        message: format!(
            "`{what}` is not built for Azure Service Bus in this version: nothing was read or moved (docs/azure.md)"
        ),
    }
}

/// The redrive capability (refuses, see the module doc).
#[derive(Debug, Clone)]
pub struct Mover {
    reader: Reader,
}

impl Mover {
    pub fn new(reader: Reader) -> Self {
        Mover { reader }
    }
}

impl crate::backend::kit::doors::Connected for Mover {
    type Error = BackendError;

    fn target(&self) -> &str {
        &self.reader.target
    }
}

impl crate::backend::kit::doors::Redrive for Mover {
    async fn redrive(&self, _r: &Resolved, _run: &Run) -> Result<(), Self::Error> {
        Err(not_built(&self.reader.target, "redrive"))
    }
}

/// The replay capability (refuses, see the module doc).
#[derive(Debug, Clone)]
pub struct Replayer {
    reader: Reader,
}

impl Replayer {
    pub fn new(reader: Reader) -> Self {
        Replayer { reader }
    }
}

impl crate::backend::kit::doors::Connected for Replayer {
    type Error = BackendError;

    fn target(&self) -> &str {
        &self.reader.target
    }
}

impl crate::backend::kit::doors::Replay for Replayer {
    async fn replay(
        &self,
        _r: &Resolved,
        _job: &crate::redrive::replay::Job,
    ) -> Result<(), Self::Error> {
        Err(not_built(&self.reader.target, "redrive --from-archive"))
    }
}
