//! What loading produces and passes between its stages: the typed documents with their
//! positions ([`Doc`]), everything one run read ([`Workspace`]), a document between the YAML
//! layer and the schema ([`RawDoc`]), and the one error that stops a run ([`LoadError`]).
//!
//! Below every stage of `load`, so the stages share these types without importing each other
//! or `mod.rs`.

use std::path::PathBuf;

use serde_json::Value;

use crate::diag::{Diagnostic, Loc, Sources};
use crate::spec::locate::Locations;
use crate::spec::model::{Channel, Defaults, Targets};
use crate::spec::schema::DocKind;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{}: no such file or directory", .0.display())]
    NotFound(PathBuf),
    #[error("{}: {}", .0.display(), .1)]
    Io(PathBuf, #[source] std::io::Error),
}

/// A typed document and where it came from.
#[derive(Debug, Clone)]
pub struct Doc<T> {
    pub value: T,
    pub locs: Locations,
    /// The document's start (for findings about it as a whole).
    pub loc: Loc,
}

/// Everything read in one run.
#[derive(Debug, Default)]
pub struct Workspace {
    pub sources: Sources,
    pub channels: Vec<Doc<Channel>>,
    pub targets: Vec<Doc<Targets>>,
    pub defaults: Option<Doc<Defaults>>,
    pub diagnostics: Vec<Diagnostic>,
    /// YAML documents that were not dlqctl documents.
    pub skipped: usize,
    /// Target fields whose `${VAR}` could not be expanded (file, JSON pointer): reported where
    /// they were loaded, and left out of the checks of their value (nothing else is).
    pub unexpanded: std::collections::BTreeSet<(crate::diag::FileId, String)>,
    /// Targets named in Targets documents that failed validation, with that document's file:
    /// a channel naming one is not checked against it, and is not told that no Targets
    /// document exists (the document's own errors say what is wrong).
    pub unread_targets: std::collections::BTreeMap<String, PathBuf>,
}

/// A document that passed the YAML layer, before schema validation.
pub(super) struct RawDoc {
    pub kind: DocKind,
    pub json: Value,
    pub locs: Locations,
    pub loc: Loc,
}
