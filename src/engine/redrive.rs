//! The redrive driver: a dry run through the status door (what would move, moving nothing),
//! or a run through the backend's mover, then the DLQ read again for what is left. It names
//! no backend.

use crate::backend::{BackendError, Mover, Reader};
use crate::redrive::{self, Decision, Run, Selection, WouldMove};
use crate::spec::resolve::Resolved;
use crate::status::{self, Observed, ReadOptions};

/// What a dry run found: what would move, and how many it would skip at `maxRedrives`.
pub struct DryRun {
    pub would: WouldMove,
    pub at_limit: u64,
    pub not_selected: u64,
    pub examined: u64,
}

/// Reads up to `scan` messages of the DLQ as `status` does and applies the selection to them.
pub async fn dry_run(
    r: &Resolved,
    reader: &Reader,
    select: &Selection,
    samples: usize,
    scan: usize,
) -> Result<DryRun, BackendError> {
    let read = ReadOptions {
        samples: 0,
        scan,
        max_body: status::DEFAULT_MAX_BODY,
        peek: true,
        redrive_view: true,
    };
    let observed = one(reader.status(&[r], read).await?)?;
    let now = status::now_ms();
    let total = observed.dead_letter.total;
    let read_all = total == Some(observed.messages.len() as u64);
    let (mut chosen, mut at_limit, mut not_selected) = (Vec::new(), 0, 0);
    for m in &observed.messages {
        match redrive::decide(select, m, now) {
            Decision::Move if select.limit.is_none_or(|l| (chosen.len() as u64) < l) => {
                chosen.push(m.clone());
            }
            Decision::Move => {}
            Decision::AtLimit => at_limit += 1,
            Decision::NotSelected => not_selected += 1,
        }
    }
    let examined = observed.messages.len() as u64;
    let exact = read_all || select.limit.is_some_and(|l| chosen.len() as u64 == l);
    let only_chosen = Observed {
        messages: chosen,
        ..observed
    };
    let opts = ReadOptions { samples, ..read };
    let (report, _) = status::summarise(
        &r.dead_letter,
        r.envelope,
        &r.redact,
        opts,
        only_chosen.clone(),
        now,
    );
    let ages: Vec<f64> = only_chosen
        .messages
        .iter()
        .filter_map(|m| {
            let e = status::envelope::read(r.envelope, m);
            e.dead_lettered_ms
                .or(m.published_ms)
                .map(|t| (now - t).max(0) as f64 / 1000.0)
        })
        .collect();
    Ok(DryRun {
        would: WouldMove {
            count: only_chosen.messages.len() as u64,
            exact,
            by_error_class: report.by_error_class,
            oldest_age_seconds: ages.iter().copied().reduce(f64::max),
            newest_age_seconds: ages.iter().copied().reduce(f64::min),
            samples: report.samples,
        },
        at_limit,
        not_selected,
        examined,
    })
}

/// Moves through the mover; the tally in `run` says what happened either way.
pub async fn run(r: &Resolved, mover: &Mover, run: &Run) -> Result<(), BackendError> {
    mover.redrive(r, run).await
}

/// Messages left in the DLQ, read as `status` reads depth (no message read).
pub async fn left(r: &Resolved, reader: &Reader) -> Option<u64> {
    let read = ReadOptions {
        samples: 0,
        scan: 0,
        max_body: 0,
        peek: false,
        redrive_view: true,
    };
    let observed = reader
        .status(&[r], read)
        .await
        .ok()
        .and_then(|v| one(v).ok())?;
    observed.dead_letter.total
}

fn one(mut v: Vec<Result<Observed, BackendError>>) -> Result<Observed, BackendError> {
    v.pop().unwrap_or_else(|| {
        Err(BackendError::Config {
            target: String::new(),
            message: "the status door returned no channel".into(),
        })
    })
}
