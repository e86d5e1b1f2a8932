//! The draw door: what `crate::graph` needs to know of a backend to draw a channel, said as
//! data ([`Drawing`]), so the graph names no backend. Pure.

use crate::resource::{Desired, ResourceId};
use crate::spec::resolve::Resolved;

/// How a failed message is retried before it is dead-lettered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retries {
    /// Each failure moves the message one retry topic on (Spring's non-blocking retries).
    Chain,
    /// A failure waits in a retry queue and comes back to the main queue.
    Loop,
    /// The broker redelivers by itself: no retry queue is drawn.
    Redeliver,
}

/// An alarm the backend provisions on a channel's queue, as the graph draws it.
#[derive(Debug, Clone)]
pub struct DrawnAlarm {
    pub id: ResourceId,
    /// The queue it watches (`None`: the dead-letter queue).
    pub watches: Option<String>,
    /// What it is, for its label (`CloudWatch alarm`).
    pub system: &'static str,
    /// Whether it watches the oldest message's age (otherwise the depth).
    pub age: bool,
    /// Its threshold: messages, or seconds for an age.
    pub threshold: u64,
}

/// What a backend tells the graph of one channel.
#[derive(Debug, Clone)]
pub struct Drawing {
    /// What the backend calls a queue: `queue` or `topic`.
    pub noun: &'static str,
    /// How long a queue keeps a message when the spec says nothing (`until consumed`).
    pub default_keep: &'static str,
    pub retries: Retries,
    /// The label of the last failure's way into the dead-letter queue.
    pub last_failure: String,
    /// The alarms it provisions (`None`: none; the graph draws the spec's alert rules).
    pub alarms: Option<Vec<DrawnAlarm>>,
}

/// The draw door. Pure.
pub trait Draw {
    /// How to draw channel `r`, whose present desired resources are `desired`; `attempts`
    /// is the graph's `after N attempts`.
    fn drawing(r: &Resolved, desired: &[Desired], attempts: &str) -> Drawing;
}
