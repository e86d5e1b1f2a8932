//! What the backends share, below all of them: a backend folder may import the kit (and
//! `wire/`), never another backend and never the dispatcher `backend/mod.rs` above it.
//!
//! - [`errors`]: the target-level [`errors::BackendError`], a mover's [`errors::MoveError`],
//!   and [`errors::AtTarget`], the one place a backend's own error learns its target;
//! - [`connect`]: the command line's [`connect::ConnectOptions`], credentials from the
//!   environment, the ownership prefixes of a target;
//! - [`ownership`]: ownership by tag or label (`managed-by: dlqctl`, `dlqctl-channel`), the
//!   rule SQS and Pub/Sub both keep;
//! - [`import`]: what the import and prune doors share ([`import::Candidate`],
//!   [`import::Found`], [`import::Prunable`]) and the helpers that turn live values back into
//!   spec values;
//! - [`draw`] and [`alerts`]: what the graph and the alert rules need to know of a backend,
//!   said as data ([`draw::Drawing`], [`alerts::AlertHome`]);
//! - [`doors`]: one trait per capability, each method's contract on it; every backend
//!   implements every door, and the dispatcher calls through them, so a missing door is a
//!   compile error.

pub mod alerts;
pub mod connect;
pub mod doors;
pub mod draw;

pub mod errors;
pub mod import;
pub mod ownership;
