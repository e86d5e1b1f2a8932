//! How long ago, in words (`1h 2m`): one wording for the status reports, the redrive report
//! and redrive's progress line, so a value never has to borrow it from a renderer.

/// `1h 2m`, `3d 4h`, `45s`.
pub fn age(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        3600..86_400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    }
}
