//! The version dlqctl reports, on the ground floor: `--version` (the CLI) and the SARIF log
//! (`diag`) both name it, and neither may reach up into the crate root that dispatches them.

/// What `dlqctl --version` prints: the package version, and the commit when built from a git
/// checkout (`0.1.0 (1a2b3c4)`; `-dirty` with uncommitted changes); see build.rs.
pub const VERSION: &str = env!("DLQCTL_VERSION");
