//! The spec: YAML files in, validated typed channels out.
//!
//! `yaml` parses with positions, `load` turns files into documents (schema layer), `rules`
//! adds the domain checks, `resolve` gives each channel its effective settings on its backend.
//! `load`, `rules` and `resolve` are folders, one file per stage or concern, each with a
//! `common`/`workspace` file below the others; `pointer` (JSON pointers) and `locate`
//! (pointer → position) sit under all of them.

pub mod access;
pub mod duration;
pub mod load;
pub mod locate;
pub mod model;
pub mod pointer;
pub mod ratio;
pub mod resolve;
pub mod rules;
pub mod schema;
pub mod vars;
pub mod yaml;

pub use duration::Duration;
pub use ratio::Ratio;
