//! Ctrl-C and SIGTERM, as the drivers that stop part-way (apply, redrive) listen for them:
//! one place, so both stop on the same signals.

/// Waits for Ctrl-C or SIGTERM; false if neither can be listened for.
pub async fn interrupted() -> bool {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            return tokio::signal::ctrl_c().await.is_ok();
        };
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.is_ok(),
            r = term.recv() => r.is_some(),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.is_ok()
    }
}
