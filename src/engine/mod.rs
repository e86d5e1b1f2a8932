//! The verbs, backend-neutral: the plan, apply, import, status, redrive and archive drivers, the alert rules and the dashboards. Each calls the backends
//! only through `crate::backend`'s doors and names no backend itself; what differs per
//! backend (ordering hints, notes, reviews, grouping into channels) comes back as data.
//!
//! Adding an operation to every backend is one driver here plus one file per backend folder.

pub mod alerts;
pub mod apply;
pub mod archive;
pub mod audit;
pub mod dashboards;
pub mod emit;
pub mod gate;
pub mod import;
pub mod interrupt;
pub mod plan;
pub mod redrive;
pub mod replay;
pub mod schedule;
pub mod status;

pub use plan::{PlanOptions, Planned, connect, plan};
