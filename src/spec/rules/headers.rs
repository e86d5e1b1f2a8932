//! Rules on `deadLetter.redrive` (which headers a redriven copy leaves behind), for every
//! backend: the lists are globs, and one that does not compile would silently drop nothing
//! at redrive time, so lint says where it is.
//!
//! `deadletter/header-pattern` (error): a `dropHeaders` or `keepHeaders` entry that is not
//! a glob. `deadletter/header-dropped-and-kept` (warning): the same entry in both lists,
//! which keeps the header (`keepHeaders` wins) and is probably not what was meant.
//!
//! Depends on the model and the glob compiler of `resolve::headers` only.

use crate::diag::Diagnostic;
use crate::spec::load::Doc;
use crate::spec::model::Channel;
use crate::spec::resolve::headers::glob;

const BASE: &str = "/spec/deadLetter/redrive";

pub(super) fn check_redrive_headers(doc: &Doc<Channel>, out: &mut Vec<Diagnostic>) {
    let Some(h) = doc
        .value
        .spec
        .dead_letter
        .as_ref()
        .and_then(|d| d.redrive.as_ref())
    else {
        return;
    };
    let drop = h.drop_headers.as_deref().unwrap_or_default();
    let keep = h.keep_headers.as_deref().unwrap_or_default();
    for (key, list) in [("dropHeaders", drop), ("keepHeaders", keep)] {
        for (i, g) in list.iter().enumerate() {
            if let Err(e) = glob(g) {
                out.push(
                    Diagnostic::error(
                        "deadletter/header-pattern",
                        format!(
                            "`deadLetter.redrive.{key}[{i}]` `{g}` is not a glob: {}",
                            e.kind()
                        ),
                    )
                    .at(doc.locs.value(&format!("{BASE}/{key}/{i}")))
                    .hint("globs: `*` any run of characters, `?` one, `[abc]` one of a set, `{a,b}` either; `\\` escapes"),
                );
            }
        }
    }
    for (i, g) in keep.iter().enumerate() {
        if let Some(j) = drop.iter().position(|d| d.eq_ignore_ascii_case(g)) {
            out.push(
                Diagnostic::warning(
                    "deadletter/header-dropped-and-kept",
                    format!(
                        "`deadLetter.redrive` both drops and keeps `{g}` (`dropHeaders[{j}]`, `keepHeaders[{i}]`): the copy keeps it"
                    ),
                )
                .at(doc.locs.value(&format!("{BASE}/keepHeaders/{i}")))
                .hint("`keepHeaders` wins over `dropHeaders`; remove the entry from the list it does not belong to"),
            );
        }
    }
}
