//! The spec: YAML files in, validated typed channels out.
//!
//! `yaml` parses with positions, `load` turns files into documents (schema layer), `rules`
//! adds the domain checks, `resolve` gives each channel its effective settings on its backend.

pub mod access;
pub mod duration;
pub mod load;
pub mod locate;
pub mod model;
pub mod pointer;
pub mod resolve;
pub mod rules;
pub mod schema;
pub mod vars;
pub mod yaml;

pub use duration::Duration;
