//! The one retry budget for reads, shared by every backend, and documented in the README.
//!
//! Reads (never writes) that were throttled or lost their connection are tried again, up to
//! [`READ_ATTEMPTS`] times in all, waiting 100 ms, then twice as long each time, at most
//! [`MAX_BACKOFF`]. At a 20% fault rate a read then fails with odds of 0.2^10 ≈ 1e-7, so a
//! plan of 5,000 reads still completes; a dead server is reported after about 15 s.

use std::time::Duration;

/// Attempts per read, the first included.
pub const READ_ATTEMPTS: u32 = 10;
/// The wait before the second attempt.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3);

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
}
