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
    /// What it watches, with its threshold.
    pub watch: Watch,
}

/// What an alarm watches, and above what it fires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Watch {
    /// Messages waiting.
    Depth(u64),
    /// The oldest message's age, in seconds.
    Age(u64),
    /// The dead-letter rate, as a fraction of the source's messages.
    Rate(f64),
}

impl Watch {
    /// The label's second half: `more than 5 waiting`, `oldest older than 30m`, `more than
    /// 0.1% dead-lettered`.
    pub fn above(self) -> String {
        match self {
            Watch::Depth(n) => format!("more than {n} waiting"),
            Watch::Age(s) => format!(
                "oldest older than {}",
                crate::spec::duration::Duration::from_secs(s)
            ),
            Watch::Rate(f) => format!("more than {}% dead-lettered", percent(f)),
        }
    }
}

/// A fraction in percent, without the float noise of `× 100` (`0.001` → `0.1`).
pub fn percent(fraction: f64) -> String {
    let text = format!("{:.10}", fraction * 100.0);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_owned()
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
    /// The alarms it provisions (`None`: none; the graph draws the spec's alerts as
    /// `dlqctl alerts` writes them).
    pub alarms: Option<Vec<DrawnAlarm>>,
    /// What `dlqctl alerts` writes for the spec's alarms when `alarms` is `None`, for the
    /// label: `alert rule` (Prometheus), `Cloud Monitoring policy`.
    pub alerts_as: &'static str,
}

/// The draw door. Pure.
pub trait Draw {
    /// How to draw channel `r`, whose present desired resources are `desired`; `attempts`
    /// is the graph's `after N attempts`.
    fn drawing(r: &Resolved, desired: &[Desired], attempts: &str) -> Drawing;
}
