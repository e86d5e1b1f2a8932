//! The time to resolution (MTTR) of a channel's dead letters, read from the audit journal
//! (`--audit-log FILE` of `redrive` and `archive`): how long the messages that left the
//! dead-letter queue had waited there, median and p90, over the last days. A dead letter is
//! resolved when it leaves the queue — redriven, or archived with `--delete`; the journal
//! is the only place that knows, since the queue forgets a message once it is gone.
//!
//! Pure: the journal's text in, the figures out. Each run's record carries its messages'
//! times (`timeInDeadLetter`, [`crate::redrive::Waited`]): all of them, or evenly spaced
//! ranks standing for the rest, so runs of any size combine by weight.

use serde::Serialize;

/// The most [`Waited::seconds`] a record keeps (beyond: evenly spaced ranks of them).
pub const MAX_WAITED: usize = 1000;

/// How long the messages that left the dead-letter queue in one run had waited there: from
/// `redrive::since` to when the destination confirmed them. `status` reads it back from the journal for the
/// channel's time to resolution (docs/status.md, "Time to resolution").
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Waited {
    /// Messages with a known time.
    pub count: u64,
    /// Messages chosen with no time to count from (no dead-lettered, failure or publish
    /// time): not in `seconds`.
    pub unknown: u64,
    /// `false` when some of these did not leave for good: confirmed by the destination but
    /// not removed from the queue (`possiblyDuplicated`: the next run counts them again), or
    /// dead-lettered again while `--verify-for` watched (`redead`).
    pub exact: bool,
    pub p50_seconds: u64,
    pub p90_seconds: u64,
    pub max_seconds: u64,
    /// The times, sorted: all of them up to [`MAX_WAITED`]; beyond, that many evenly spaced
    /// by rank (the first and the last included), each standing for `count / len` messages.
    pub seconds: Vec<u64>,
}

impl Waited {
    /// `None` when nothing was chosen.
    pub fn of(mut seconds: Vec<u64>, unknown: u64, exact: bool) -> Option<Self> {
        if seconds.is_empty() && unknown == 0 {
            return None;
        }
        seconds.sort_unstable();
        let count = seconds.len() as u64;
        let q = |p: f64| quantile(&seconds, p);
        let (p50_seconds, p90_seconds) = (q(0.5), q(0.9));
        let max_seconds = seconds.last().copied().unwrap_or(0);
        if seconds.len() > MAX_WAITED {
            let n = seconds.len();
            seconds = (0..MAX_WAITED)
                .map(|i| seconds[i * (n - 1) / (MAX_WAITED - 1)])
                .collect();
        }
        Some(Waited {
            count,
            unknown,
            exact,
            p50_seconds,
            p90_seconds,
            max_seconds,
            seconds,
        })
    }
}

/// The nearest-rank quantile `p` (0 < p ≤ 1) of `sorted`; 0 when empty.
pub fn quantile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// What the journal says of one channel's dead-letter queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resolution {
    /// The window, in seconds back from now.
    pub window_seconds: u64,
    /// Runs in the window that took messages out of this queue.
    pub runs: u64,
    /// Messages they took out with a known dead-lettered time.
    pub messages: u64,
    /// Messages they took out whose time was unknown (not in the figures).
    pub unknown: u64,
    /// `false` when a run counted messages that did not leave after all ([`Waited::exact`]).
    pub exact: bool,
    /// Median and 90th percentile of the time in the queue, in seconds; `None` without a
    /// message of known time.
    pub p50_seconds: Option<u64>,
    pub p90_seconds: Option<u64>,
}

/// The journal's runs that took messages out of a queue, read once for every channel.
#[derive(Debug, Clone, Default)]
pub struct Journal {
    runs: Vec<Run>,
    /// Lines that are not JSON records (a torn last line, another tool's lines).
    pub unreadable: u64,
}

#[derive(Debug, Clone)]
struct Run {
    channel: String,
    target: String,
    dead_letter: String,
    ended_ms: Option<i64>,
    waited: Waited,
}

impl Journal {
    /// Reads the journal's text: the records of `redrive` and `archive` runs that were no
    /// dry run and say how long what they took out had waited.
    pub fn parse(text: &str) -> Self {
        let mut out = Journal::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                out.unreadable += 1;
                continue;
            };
            let kind = v["kind"].as_str().unwrap_or_default();
            if !matches!(kind, "dlqctl/redrive" | "dlqctl/archive") || v["dryRun"] != false {
                continue;
            }
            let Ok(waited) = serde_json::from_value::<Waited>(v["timeInDeadLetter"].clone()) else {
                continue;
            };
            let text = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            out.runs.push(Run {
                channel: text("channel"),
                target: text("target"),
                dead_letter: text("deadLetter"),
                ended_ms: v["endedAt"].as_str().and_then(parse_rfc3339),
                waited,
            });
        }
        out
    }
}

/// The runs of `journal` that took messages out of `dead_letter` (of `channel`, on
/// `target`) and ended within `window_ms` before `now_ms`; `None` when there is none.
pub fn from_journal(
    journal: &Journal,
    channel: &str,
    target: &str,
    dead_letter: &str,
    now_ms: i64,
    window_ms: i64,
) -> Option<Resolution> {
    let mut runs = 0;
    let mut unknown = 0;
    let mut exact = true;
    // (seconds, weight): each sample stands for count / len messages of its run.
    let mut weighted: Vec<(u64, f64)> = Vec::new();
    let mut messages = 0;
    for r in &journal.runs {
        if r.channel != channel || r.target != target || r.dead_letter != dead_letter {
            continue;
        }
        if r.ended_ms.is_none_or(|t| now_ms - t > window_ms) {
            continue;
        }
        let w = &r.waited;
        runs += 1;
        unknown += w.unknown;
        exact &= w.exact;
        messages += w.count;
        if !w.seconds.is_empty() {
            let each = w.count as f64 / w.seconds.len() as f64;
            weighted.extend(w.seconds.iter().map(|s| (*s, each)));
        }
    }
    if runs == 0 {
        return None;
    }
    weighted.sort_by_key(|(s, _)| *s);
    let total: f64 = weighted.iter().map(|(_, w)| w).sum();
    let q = |p: f64| {
        let mut acc = 0.0;
        weighted
            .iter()
            .find(|(_, w)| {
                acc += w;
                acc >= p * total - 1e-9
            })
            .or(weighted.last())
            .map(|(s, _)| *s)
    };
    Some(Resolution {
        window_seconds: u64::try_from(window_ms / 1000).unwrap_or(0),
        runs,
        messages,
        unknown,
        exact,
        p50_seconds: q(0.5),
        p90_seconds: q(0.9),
    })
}

/// RFC 3339 text as milliseconds since the Unix epoch.
fn parse_rfc3339(s: &str) -> Option<i64> {
    super::envelope::parse_time(s, crate::spec::model::Format::Rfc3339)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000;

    fn line(kind: &str, dry: bool, channel: &str, ended: &str, seconds: &[u64]) -> String {
        let w = Waited::of(seconds.to_vec(), 1, true).expect("some");
        serde_json::json!({
            "kind": kind, "dryRun": dry, "channel": channel, "target": "t",
            "deadLetter": "orders-dlq", "endedAt": ended, "timeInDeadLetter": w,
        })
        .to_string()
    }

    #[test]
    fn runs_of_the_channel_in_the_window_combine_and_the_rest_is_left_out() {
        let now = parse_rfc3339("2026-12-02T12:00:00Z").expect("time");
        let text = [
            line(
                "dlqctl/redrive",
                false,
                "orders",
                "2026-12-02T11:00:00Z",
                &[10, 20, 30],
            ),
            line(
                "dlqctl/archive",
                false,
                "orders",
                "2026-12-01T11:00:00Z",
                &[40],
            ),
            // A dry run, another channel, a refusal, too old: none counts.
            line(
                "dlqctl/redrive",
                true,
                "orders",
                "2026-12-02T11:00:00Z",
                &[9999],
            ),
            line(
                "dlqctl/redrive",
                false,
                "payments",
                "2026-12-02T11:00:00Z",
                &[9999],
            ),
            line(
                "dlqctl/refused",
                false,
                "orders",
                "2026-12-02T11:00:00Z",
                &[9999],
            ),
            line(
                "dlqctl/redrive",
                false,
                "orders",
                "2026-11-01T11:00:00Z",
                &[9999],
            ),
            "{torn".to_owned(),
        ]
        .join("\n");
        let journal = Journal::parse(&text);
        let r = from_journal(&journal, "orders", "t", "orders-dlq", now, 7 * DAY).expect("runs");
        assert_eq!((r.runs, r.messages, r.unknown), (2, 4, 2));
        assert_eq!((r.p50_seconds, r.p90_seconds), (Some(20), Some(40)));
        assert_eq!(journal.unreadable, 1);
        assert_eq!(
            from_journal(&journal, "orders", "t", "orders-dlq", now, DAY / 48),
            None,
            "nothing in the last half hour"
        );
    }

    #[test]
    fn a_large_run_weighs_by_its_count_not_by_its_samples() {
        // 10,000 messages waited 100 s; 10 waited 5 s: the median is 100 s.
        let big = Waited::of(vec![100; 10_000], 0, true).expect("some");
        assert_eq!(big.seconds.len(), MAX_WAITED);
        let small = Waited::of(vec![5; 10], 0, true).expect("some");
        let text = [big, small]
            .iter()
            .map(|w| {
                serde_json::json!({"kind": "dlqctl/redrive", "dryRun": false, "channel": "c",
                    "target": "t", "deadLetter": "d", "endedAt": "2026-12-02T11:00:00Z",
                    "timeInDeadLetter": w})
                .to_string()
            })
            .collect::<Vec<_>>()
            .join("\n");
        let now = parse_rfc3339("2026-12-02T12:00:00Z").expect("time");
        let r = from_journal(&Journal::parse(&text), "c", "t", "d", now, DAY).expect("runs");
        assert_eq!((r.messages, r.p50_seconds), (10_010, Some(100)));
    }

    #[test]
    fn quantiles_and_downsampling_keep_the_ends() {
        let w = Waited::of((1..=5000).collect(), 0, true).expect("some");
        assert_eq!(
            (w.p50_seconds, w.p90_seconds, w.max_seconds),
            (2500, 4500, 5000)
        );
        assert_eq!(w.seconds.first(), Some(&1));
        assert_eq!(w.seconds.last(), Some(&5000));
        assert_eq!(Waited::of(Vec::new(), 0, true), None);
    }
}
