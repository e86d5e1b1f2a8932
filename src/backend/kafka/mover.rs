//! The redrive door of Kafka's [`Mover`]: kept beside `redrive.rs` rather than in it while
//! the run loop there is being reworked; it only calls [`Mover::redrive`].

use super::redrive::Mover;
use crate::backend::kit::errors::MoveError;
use crate::redrive::Run;
use crate::spec::resolve::Resolved;

impl crate::backend::kit::doors::Connected for Mover {
    type Error = MoveError;

    fn target(&self) -> &str {
        Mover::target(self)
    }
}

impl crate::backend::kit::doors::Redrive for Mover {
    async fn redrive(&self, r: &Resolved, run: &Run) -> Result<(), MoveError> {
        Mover::redrive(self, r, run).await
    }
}
