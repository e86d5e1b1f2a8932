//! Puts the commit into `dlqctl --version` (`0.1.0 (1a2b3c4)`, `0.1.0 (1a2b3c4-dirty)` with
//! uncommitted changes to tracked files) when building from a git checkout of this repository.
//! Anywhere else — a crate tarball (`cargo install dlqctl`), a copy without `.git`, no `git`
//! on PATH — the version is the bare package version: no commit is ever guessed, and the build
//! never fails for want of git.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let shown = match commit(&dir) {
        Some(c) => format!("{version} ({c})"),
        None => version,
    };
    println!("cargo:rustc-env=DLQCTL_VERSION={shown}");
}

/// `git` in `dir`, its trimmed stdout when it succeeds.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        // `git status` would otherwise refresh the index, which would rerun this script on
        // every build (it watches the index).
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn commit(dir: &Path) -> Option<String> {
    // Only this package's own checkout: a crate unpacked inside some other repository (a
    // vendor folder) must not take that repository's commit.
    let top = git(dir, &["rev-parse", "--show-toplevel"])?;
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same(Path::new(&top), dir) {
        return None;
    }
    // Rebuild when HEAD moves (checkout, commit) and when the index changes (the dirty
    // marker). In a worktree these live under .git/worktrees/NAME; git says where.
    let mut watch = vec![
        "HEAD".to_owned(),
        "index".to_owned(),
        "packed-refs".to_owned(),
    ];
    if let Some(reference) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        watch.push(reference);
    }
    for name in watch {
        if let Some(path) = git(dir, &["rev-parse", "--git-path", &name]) {
            let path = dir.join(path);
            // A path that does not exist would make cargo rerun this script on every build.
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    let hash = git(dir, &["rev-parse", "--short", "HEAD"])?;
    let dirty =
        git(dir, &["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{hash}-dirty") } else { hash })
}
