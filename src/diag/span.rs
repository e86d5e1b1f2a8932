//! Where something is in a source file: the one type both the YAML reader (`spec::yaml`)
//! and the findings (`diag`) need.
//!
//! It lives here, under `diag`, and depends on nothing, so that `diag` never imports `spec`:
//! `spec` depends on `diag` (to report findings), never the other way round.

/// A byte range of the source, with the 1-based line and column of its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    pub line: usize,
    pub col: usize,
}
