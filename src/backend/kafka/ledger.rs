//! The redrive group's ledger per partition, kept in its commit metadata: what redrive
//! writes after each move and what status reads to say what is left. Its own room, so that
//! `status.rs` and `redrive.rs` both stand on it instead of on each other.

/// The consumer group of redrives of `channel`.
pub fn group(channel: &str) -> String {
    format!("dlqctl-redrive.{channel}")
}

/// The largest ledger kept in a commit's metadata (brokers allow 4,096 bytes by default).
pub const MAX_LEDGER: usize = 3500;
pub const LEDGER_PREFIX: &str = "dlqctl-redrive/1:";

/// What the redrive group has done in one partition: every record before `committed` was
/// moved, and so were the records at the offsets in `moved` (all beyond it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    pub committed: i64,
    pub moved: std::collections::BTreeSet<i64>,
}

impl Ledger {
    /// Advances `committed` over moved records that now follow it.
    pub fn settle(&mut self) {
        while self.moved.remove(&self.committed) {
            self.committed += 1;
        }
        let c = self.committed;
        self.moved.retain(|o| *o > c);
    }

    /// Records of `[committed, high)` not moved yet.
    pub fn waiting(&self, high: i64) -> u64 {
        let span = u64::try_from(high - self.committed).unwrap_or(0);
        let moved = self.moved.range(self.committed..high).count() as u64;
        span.saturating_sub(moved)
    }

    /// `dlqctl-redrive/1:105,107-110`.
    pub fn encode(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut it = self.moved.iter().copied().peekable();
        while let Some(start) = it.next() {
            let mut end = start;
            while it.peek() == Some(&(end + 1)) {
                end += 1;
                it.next();
            }
            parts.push(if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            });
        }
        format!("{LEDGER_PREFIX}{}", parts.join(","))
    }

    /// The ledger of a commit (`committed` and its metadata); metadata that is not a ledger
    /// (another tool's) counts as none.
    pub fn decode(committed: i64, metadata: &str) -> Ledger {
        let mut moved = std::collections::BTreeSet::new();
        if let Some(list) = metadata.strip_prefix(LEDGER_PREFIX) {
            for part in list.split(',').filter(|p| !p.is_empty()) {
                let (a, b) = part.split_once('-').unwrap_or((part, part));
                if let (Ok(a), Ok(b)) = (a.parse::<i64>(), b.parse::<i64>()) {
                    // Bounded: a corrupt range is not expanded beyond the ledger's own size.
                    if b >= a && b - a <= 1_000_000 {
                        moved.extend(a..=b);
                    }
                }
            }
        }
        let mut l = Ledger { committed, moved };
        l.settle();
        l
    }
}

/// The ledger of each partition (`marks`: its low and high watermarks) from the group's
/// commits as [`super::ffi::list_group_offsets`] reads them: from the low watermark where the
/// group committed nothing. Redrive and the status door read the same ledgers through it.
pub fn ledgers_of(commits: &[super::ffi::Committed], marks: &[(i64, i64)]) -> Vec<Ledger> {
    marks
        .iter()
        .enumerate()
        .map(|(p, (low, high))| {
            let c = commits
                .iter()
                .find(|c| usize::try_from(c.partition).is_ok_and(|cp| cp == p));
            match c {
                Some(super::ffi::Committed {
                    offset: Some(n),
                    metadata,
                    ..
                }) => Ledger::decode((*n).clamp(*low, *high), metadata),
                _ => Ledger {
                    committed: *low,
                    ..Ledger::default()
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_keeps_moved_records_beyond_the_commit_and_settles_over_them() {
        let mut l = Ledger {
            committed: 100,
            moved: [101, 102, 103, 105].into_iter().collect(),
        };
        assert_eq!(l.encode(), "dlqctl-redrive/1:101-103,105");
        assert_eq!(l.waiting(110), 6, "100, 104, 106..=109");
        l.moved.insert(100);
        l.settle();
        assert_eq!(
            (l.committed, l.encode()),
            (104, "dlqctl-redrive/1:105".to_owned())
        );
        assert_eq!(Ledger::decode(104, &l.encode()), l);
        assert_eq!(
            Ledger::decode(7, "someone else's"),
            Ledger {
                committed: 7,
                ..Ledger::default()
            }
        );
        assert_eq!(
            Ledger::decode(7, "dlqctl-redrive/1:9-2,x,8").moved,
            [8].into_iter().collect()
        );
    }
}
