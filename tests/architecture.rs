//! The house rules of `src/`, checked on the source (issue 32): every import points down.
//!
//! Each file of `src/` is one room. A room *uses* another when a path in it (a `use`, a call,
//! a type, a path inside a macro such as `matches!` or inside an attribute) resolves into the
//! other's module. Code under `#[cfg(test)]` is left out: unit tests may reach anywhere. The
//! rules:
//!
//! - no cycle of uses between files, of any length;
//! - no backend uses another (`src/backend/<a>/` never reaches `src/backend/<b>/`);
//! - no file of a backend uses the dispatcher `src/backend/mod.rs` (what backends share lives
//!   in the kit, `src/backend/kit/` and `src/backend/wire/`);
//! - the printer uses no CLI type; `cli.rs` uses no driver (`engine/`, `commands/`);
//! - `graph/`, `engine/`, `plan/`, `status/`, `redrive/` name no backend: no use of a backend's
//!   folder and no `Backend::<variant>`.
//!
//! Run it alone with `cargo test --test architecture`; a failure lists every broken rule with
//! the file and line of the path that breaks it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// Folders of `src/backend/` that are the backends' shared kit, not a backend.
const KIT_FOLDERS: [&str; 2] = ["kit", "wire"];

/// Top-level rooms that must not name a backend.
const BACKEND_BLIND: [&str; 5] = ["graph", "engine", "plan", "status", "redrive"];

/// One resolved use: from which line, to which module path.
struct Use {
    line: usize,
    target: Vec<String>,
    /// The path as written, for messages.
    written: String,
}

/// Every module of the crate that has a file, by module path.
struct Crate {
    files: BTreeMap<Vec<String>, PathBuf>,
    /// Modules declared inline (`mod x { … }`), by module path: they resolve to their file.
    inline: BTreeMap<Vec<String>, Vec<String>>,
    /// Files only compiled under `#[cfg(test)]` (`#[cfg(test)] mod tests;`).
    test_only: BTreeSet<Vec<String>>,
    /// The variants of `spec::model::targets::Backend`.
    variants: BTreeSet<String>,
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().trim() == "test")
    })
}

fn parse(path: &Path) -> syn::File {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

impl Crate {
    fn read() -> Crate {
        let root = src();
        let mut paths = Vec::new();
        rust_files(&root, &mut paths);
        let mut files = BTreeMap::new();
        for path in paths {
            let rel = path.strip_prefix(&root).unwrap_or(&path).to_path_buf();
            if rel == Path::new("main.rs") {
                // The binary is another crate: it reaches the library as `dlqctl::`.
                continue;
            }
            files.insert(module_of(&rel), path);
        }
        let mut krate = Crate {
            files,
            inline: BTreeMap::new(),
            test_only: BTreeSet::new(),
            variants: BTreeSet::new(),
        };
        let modules: Vec<(Vec<String>, PathBuf)> = krate
            .files
            .iter()
            .map(|(m, p)| (m.clone(), p.clone()))
            .collect();
        for (module, path) in modules {
            let file = parse(&path);
            krate.declarations(&module, &module, &file.items);
        }
        krate
    }

    /// Records `mod` declarations: test-only files, inline modules, and Backend's variants.
    fn declarations(&mut self, file: &[String], at: &[String], items: &[syn::Item]) {
        for item in items {
            match item {
                syn::Item::Mod(m) => {
                    let mut child = at.to_vec();
                    child.push(m.ident.to_string());
                    if is_cfg_test(&m.attrs) {
                        self.test_only.insert(child.clone());
                    }
                    if let Some((_, inner)) = &m.content {
                        self.inline.insert(child.clone(), file.to_vec());
                        self.declarations(file, &child, inner);
                    }
                }
                syn::Item::Enum(e) if e.ident == "Backend" => {
                    self.variants
                        .extend(e.variants.iter().map(|v| v.ident.to_string()));
                }
                _ => {}
            }
        }
    }

    fn is_module(&self, path: &[String]) -> bool {
        self.files.contains_key(path) || self.inline.contains_key(path)
    }

    /// The file a module path lands in: the longest prefix that is a module.
    fn file_of(&self, target: &[String]) -> Option<Vec<String>> {
        (0..=target.len()).rev().find_map(|n| {
            let prefix = &target[..n];
            if self.files.contains_key(prefix) {
                Some(prefix.to_vec())
            } else {
                self.inline.get(prefix).cloned()
            }
        })
    }
}

/// Collects the uses of one file.
struct Collector<'a> {
    krate: &'a Crate,
    /// The module the code being visited is in (the file's, or an inline module's).
    at: Vec<String>,
    uses: Vec<Use>,
    /// Paths naming `Backend::<variant>`, with their line.
    variants: Vec<(usize, String)>,
}

impl Collector<'_> {
    fn resolve(&self, segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        let mut at = self.at.clone();
        let mut rest = segments;
        match first.as_str() {
            "crate" => {
                at.clear();
                rest = &segments[1..];
            }
            "self" => rest = &segments[1..],
            "super" => {
                while rest.first().is_some_and(|s| s == "super") {
                    at.pop()?;
                    rest = &rest[1..];
                }
            }
            _ => {
                let mut child = at.clone();
                child.push(first.clone());
                if !self.krate.is_module(&child) {
                    return None;
                }
            }
        }
        at.extend(rest.iter().cloned());
        Some(at)
    }

    fn record(&mut self, line: usize, segments: Vec<String>) {
        if let Some(pos) = segments.iter().position(|s| s == "Backend")
            && let Some(next) = segments.get(pos + 1)
            && self.krate.variants.contains(next)
        {
            self.variants.push((line, segments.join("::")));
        }
        if let Some(target) = self.resolve(&segments) {
            self.uses.push(Use {
                line,
                target,
                written: segments.join("::"),
            });
        }
    }

    fn use_tree(&mut self, line: usize, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(line, prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut path = prefix.clone();
                if n.ident != "self" {
                    path.push(n.ident.to_string());
                }
                self.record(line, path);
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                self.record(line, path);
            }
            syn::UseTree::Glob(_) => self.record(line, prefix.clone()),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(line, prefix, tree);
                }
            }
        }
    }

    /// Paths inside macro bodies are tokens to syn: `a::b::c` sequences are read off them.
    fn tokens(&mut self, tokens: TokenStream) {
        let mut run: Vec<String> = Vec::new();
        let mut line = 0;
        let mut colons = 0;
        let flush = |me: &mut Self, run: &mut Vec<String>, line: usize| {
            if run.len() > 1 {
                me.record(line, std::mem::take(run));
            }
            run.clear();
        };
        for tree in tokens {
            match tree {
                TokenTree::Ident(ident) => {
                    if run.is_empty() || colons == 2 {
                        if run.is_empty() {
                            line = ident.span().start().line;
                        }
                        run.push(ident.to_string());
                    } else {
                        flush(self, &mut run, line);
                        line = ident.span().start().line;
                        run.push(ident.to_string());
                    }
                    colons = 0;
                }
                TokenTree::Punct(p) if p.as_char() == ':' && !run.is_empty() => {
                    colons += 1;
                    if colons > 2 {
                        flush(self, &mut run, line);
                        colons = 0;
                    }
                }
                TokenTree::Group(g) => {
                    flush(self, &mut run, line);
                    colons = 0;
                    self.tokens(g.stream());
                }
                _ => {
                    flush(self, &mut run, line);
                    colons = 0;
                }
            }
        }
        flush(self, &mut run, line);
    }
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if is_cfg_test(item_attrs(item)) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        if let syn::ImplItem::Fn(f) = item
            && is_cfg_test(&f.attrs)
        {
            return;
        }
        syn::visit::visit_impl_item(self, item);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if let Some((_, items)) = &m.content {
            self.at.push(m.ident.to_string());
            for item in items {
                self.visit_item(item);
            }
            self.at.pop();
        }
    }

    /// `pub(crate)`, `pub(super)` say who may see an item, not what it uses.
    fn visit_vis_restricted(&mut self, _: &'ast syn::VisRestricted) {}

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let line = u.use_token.span.start().line;
        self.use_tree(line, &mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        let line = path
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        self.record(line, segments);
        syn::visit::visit_path(self, path);
    }

    /// Paths inside attributes (`#[arg(default_value_t = crate::x::Y)]`) are tokens too.
    fn visit_meta_list(&mut self, list: &'ast syn::MetaList) {
        self.visit_path(&list.path);
        self.tokens(list.tokens.clone());
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.tokens(mac.tokens.clone());
    }
}

fn display(module: &[String], krate: &Crate) -> String {
    krate.files.get(module).map_or_else(
        || module.join("::"),
        |p| {
            p.strip_prefix(src().parent().unwrap_or(Path::new(".")))
                .unwrap_or(p)
                .display()
                .to_string()
        },
    )
}

/// Who uses whom, file to file, with the first line of each use.
type Edges = BTreeMap<Vec<String>, BTreeMap<Vec<String>, (usize, String)>>;

struct House {
    krate: Crate,
    edges: Edges,
    variants: BTreeMap<Vec<String>, Vec<(usize, String)>>,
}

fn house() -> House {
    let krate = Crate::read();
    let mut edges: Edges = BTreeMap::new();
    let mut variants = BTreeMap::new();
    for (module, path) in &krate.files {
        if krate
            .test_only
            .iter()
            .any(|t| module.starts_with(t.as_slice()))
        {
            continue;
        }
        let file = parse(path);
        let mut c = Collector {
            krate: &krate,
            at: module.clone(),
            uses: Vec::new(),
            variants: Vec::new(),
        };
        c.visit_file(&file);
        let out = edges.entry(module.clone()).or_default();
        for u in c.uses {
            if let Some(to) = krate.file_of(&u.target)
                && &to != module
            {
                out.entry(to).or_insert((u.line, u.written));
            }
        }
        variants.insert(module.clone(), c.variants);
    }
    House {
        krate,
        edges,
        variants,
    }
}

/// The cycles: strongly connected components of more than one file (Tarjan).
fn cycles(edges: &Edges) -> Vec<Vec<Vec<String>>> {
    struct State<'e> {
        edges: &'e Edges,
        index: BTreeMap<&'e [String], usize>,
        low: BTreeMap<&'e [String], usize>,
        stack: Vec<&'e [String]>,
        on: BTreeSet<&'e [String]>,
        next: usize,
        out: Vec<Vec<Vec<String>>>,
    }
    fn strong<'e>(s: &mut State<'e>, v: &'e [String]) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on.insert(v);
        if let Some(outs) = s.edges.get(v) {
            for w in outs.keys() {
                let w: &[String] = w;
                if !s.index.contains_key(w) {
                    strong(s, w);
                    let lw = s.low[w];
                    let lv = s.low[v];
                    s.low.insert(v, lv.min(lw));
                } else if s.on.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low[v];
                    s.low.insert(v, lv.min(iw));
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                component.push(w.to_vec());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_slice()) {
            strong(&mut s, v);
        }
    }
    s.out
}

/// The backend a module belongs to: the folder of `src/backend/` it is in, unless that
/// folder is the kit. Files directly in `src/backend/` belong to no backend.
fn backend_of(module: &[String]) -> Option<&str> {
    match module {
        [b, x, ..]
            if b == "backend"
                && !KIT_FOLDERS.contains(&x.as_str())
                && src().join("backend").join(x).is_dir() =>
        {
            Some(x)
        }
        _ => None,
    }
}

fn fail_with(problems: Vec<String>, rule: &str) {
    assert!(
        problems.is_empty(),
        "{rule}: {} place(s)\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn no_use_cycle_between_files() {
    let h = house();
    let mut problems = Vec::new();
    for component in cycles(&h.edges) {
        let members: BTreeSet<_> = component.iter().cloned().collect();
        let mut lines = Vec::new();
        for from in &component {
            for (to, (line, written)) in &h.edges[from] {
                if members.contains(to) {
                    lines.push(format!(
                        "    {}:{line} `{written}` → {}",
                        display(from, &h.krate),
                        display(to, &h.krate)
                    ));
                }
            }
        }
        problems.push(format!(
            "  a cycle of {} files:\n{}",
            component.len(),
            lines.join("\n")
        ));
    }
    fail_with(problems, "use cycles in src/");
}

#[test]
fn no_backend_uses_another_or_the_dispatcher() {
    let h = house();
    let dispatcher = vec!["backend".to_string()];
    let mut problems = Vec::new();
    for (from, outs) in &h.edges {
        let Some(mine) = backend_of(from) else {
            continue;
        };
        for (to, (line, written)) in outs {
            let where_ = format!("  {}:{line} `{written}`", display(from, &h.krate));
            if to == &dispatcher {
                problems.push(format!("{where_} uses the dispatcher src/backend/mod.rs"));
            } else if let Some(other) = backend_of(to)
                && other != mine
            {
                problems.push(format!("{where_} uses backend `{other}`"));
            }
        }
    }
    fail_with(problems, "backends reaching sideways or up");
}

#[test]
fn the_printer_uses_no_cli_type_and_the_cli_no_driver() {
    let h = house();
    let mut problems = Vec::new();
    let rules: [(&str, &[&str]); 2] = [("printer", &["cli"]), ("cli", &["engine", "commands"])];
    for (room, forbidden) in rules {
        let from = vec![room.to_string()];
        for (to, (line, written)) in h.edges.get(&from).into_iter().flatten() {
            if to.first().is_some_and(|t| forbidden.contains(&t.as_str())) {
                problems.push(format!(
                    "  {}:{line} `{written}` → {}",
                    display(&from, &h.krate),
                    display(to, &h.krate)
                ));
            }
        }
    }
    fail_with(
        problems,
        "the face and the printer reaching into the driver",
    );
}

#[test]
fn graph_engine_plan_status_and_redrive_name_no_backend() {
    let h = house();
    let mut problems = Vec::new();
    for (from, outs) in &h.edges {
        if !from
            .first()
            .is_some_and(|f| BACKEND_BLIND.contains(&f.as_str()))
        {
            continue;
        }
        for (to, (line, written)) in outs {
            if let Some(b) = backend_of(to) {
                problems.push(format!(
                    "  {}:{line} `{written}` reaches backend `{b}`",
                    display(from, &h.krate)
                ));
            }
        }
        for (line, written) in &h.variants[from] {
            problems.push(format!(
                "  {}:{line} `{written}` names a backend",
                display(from, &h.krate)
            ));
        }
    }
    fail_with(problems, "backend knowledge outside the backends");
}

/// The checker itself must see what it is meant to see.
#[test]
fn the_checker_finds_the_uses_it_is_meant_to_find() {
    let h = house();
    let lib = Vec::<String>::new();
    let uses = &h.edges[&lib];
    assert!(
        uses.contains_key(&vec!["cli".to_string()]),
        "lib.rs uses cli.rs: {:?}",
        uses.keys().collect::<Vec<_>>()
    );
    assert!(h.krate.variants.contains("Sqs"), "{:?}", h.krate.variants);
    let edges = Edges::from([
        (
            vec!["a".to_string()],
            BTreeMap::from([(vec!["b".to_string()], (1, "b".into()))]),
        ),
        (
            vec!["b".to_string()],
            BTreeMap::from([(vec!["a".to_string()], (1, "a".into()))]),
        ),
    ]);
    assert_eq!(cycles(&edges).len(), 1);
}
