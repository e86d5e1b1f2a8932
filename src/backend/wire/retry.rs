//! The one retry budget for reads, shared by every backend, and documented in the README.
//!
//! Reads (never writes) that were throttled or lost their connection are tried again, up to
//! [`READ_ATTEMPTS`] times in all, waiting 100 ms, then twice as long each time, at most
//! [`MAX_BACKOFF`]. At a 20% fault rate a read then fails with odds of 0.2^10 ≈ 1e-7, so a
//! plan of 5,000 reads still completes; a dead server is reported after about 15 s.

use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Attempts per read, the first included.
pub const READ_ATTEMPTS: u32 = 10;
/// The wait before the second attempt.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3);

/// How long, in all, one target's reads may spend on attempts that got no answer (timeouts,
/// refused or dropped connections) and the waits after them, unless the user sets another
/// (`--read-timeout`, `DLQCTL_READ_TIMEOUT`). Throttled answers and successful reads do not
/// count: a large, healthy plan is never cut short, while a stalled server is given up on after
/// this long instead of 10 attempts × the request timeout for every read.
pub const DEFAULT_READ_BUDGET: Duration = Duration::from_secs(30);

/// One target's budget for reads that get no answer (see [`DEFAULT_READ_BUDGET`]); shared by
/// every read of the target, concurrent ones included. It is a budget per *reading*: a command
/// that reads once (plan, status) spends it once; the exporter, which reads every interval
/// with the same clients, starts each reading with [`renew`](Self::renew), so a target that
/// stalled once is read again in full once it answers (issue 31).
#[derive(Debug, Clone)]
pub struct ReadBudget {
    limit: Duration,
    spent: Arc<Mutex<Duration>>,
}

impl Default for ReadBudget {
    fn default() -> Self {
        ReadBudget::new(DEFAULT_READ_BUDGET)
    }
}

impl ReadBudget {
    pub fn new(limit: Duration) -> Self {
        ReadBudget {
            limit,
            spent: Arc::new(Mutex::new(Duration::ZERO)),
        }
    }

    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// What is left; zero when the budget is spent.
    pub fn remaining(&self) -> Duration {
        let spent = self.spent.lock().map(|s| *s).unwrap_or(self.limit);
        self.limit.saturating_sub(spent)
    }

    /// Counts time lost to an attempt that got no answer (and the wait after it).
    pub fn spend(&self, d: Duration) {
        if let Ok(mut s) = self.spent.lock() {
            *s += d;
        }
    }

    pub fn exhausted(&self) -> bool {
        self.remaining().is_zero()
    }

    /// Starts a new reading: what earlier readings spent is forgotten (for every clone).
    pub fn renew(&self) {
        if let Ok(mut s) = self.spent.lock() {
            *s = Duration::ZERO;
        }
    }
}

/// The wait after `delay`: doubled, capped.
pub fn next(delay: Duration) -> Duration {
    (delay * 2).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let mut d = FIRST_BACKOFF;
        let mut total = Duration::ZERO;
        for _ in 1..READ_ATTEMPTS {
            total += d;
            d = next(d);
        }
        assert_eq!(d, MAX_BACKOFF);
        assert!(total < Duration::from_secs(20), "{total:?}");
    }

    #[test]
    fn the_read_budget_is_shared_and_runs_out() {
        let b = ReadBudget::new(Duration::from_secs(10));
        let c = b.clone();
        b.spend(Duration::from_secs(4));
        c.spend(Duration::from_secs(4));
        assert_eq!(b.remaining(), Duration::from_secs(2));
        assert!(!b.exhausted());
        c.spend(Duration::from_secs(5));
        assert!(b.exhausted());
        assert_eq!(b.remaining(), Duration::ZERO);
    }

    #[test]
    fn a_new_reading_has_the_whole_budget_again() {
        let b = ReadBudget::new(Duration::from_secs(10));
        let c = b.clone();
        c.spend(Duration::from_secs(12));
        assert!(b.exhausted());
        b.renew();
        assert_eq!(c.remaining(), Duration::from_secs(10));
    }
}
