//! `dlqctl --version` names the commit it was built from (build.rs), and builds without git
//! name none: build.rs is compiled on its own here and run as cargo would run it, in a git
//! checkout, a dirty one, and a folder without git (what `cargo install` unpacks).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// build.rs compiled once into `dir`.
fn build_script(dir: &Path) -> PathBuf {
    let exe = dir.join("build-script");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc)
        .args(["--edition", "2024", "-o"])
        .arg(&exe)
        .arg(root().join("build.rs"))
        .output()
        .expect("rustc runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// What build.rs tells cargo when the package is in `manifest_dir`: the version, and the
/// files it watches.
fn run_script(exe: &Path, manifest_dir: &Path) -> (String, Vec<String>) {
    let out = Command::new(exe)
        .env("CARGO_PKG_VERSION", "1.2.3")
        .env("CARGO_MANIFEST_DIR", manifest_dir)
        .output()
        .expect("the build script runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("cargo:rustc-env=DLQCTL_VERSION="))
        .expect("DLQCTL_VERSION is set")
        .to_owned();
    let watched = text
        .lines()
        .filter_map(|l| l.strip_prefix("cargo:rerun-if-changed="))
        .map(str::to_owned)
        .collect();
    (version, watched)
}

#[test]
fn the_version_names_the_commit_in_git_and_nothing_without_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let exe = build_script(tmp.path());

    // A folder without git (a crate tarball).
    let plain = tmp.path().join("plain");
    std::fs::create_dir(&plain).expect("mkdir");
    let (version, watched) = run_script(&exe, &plain);
    assert_eq!(version, "1.2.3");
    assert_eq!(watched, ["build.rs"]);

    // A package folder inside someone else's repository takes no commit of theirs.
    let outer = tmp.path().join("outer");
    std::fs::create_dir_all(outer.join("vendor/dlqctl")).expect("mkdir");
    git(&outer, &["init", "-q"]);
    std::fs::write(outer.join("f"), "x").expect("write");
    git(&outer, &["add", "f"]);
    git(&outer, &["commit", "-qm", "outer"]);
    assert_eq!(run_script(&exe, &outer.join("vendor/dlqctl")).0, "1.2.3");

    // A checkout: the short hash; HEAD and the branch's ref are watched.
    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).expect("mkdir");
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("Cargo.toml"), "[package]\n").expect("write");
    git(&repo, &["add", "Cargo.toml"]);
    git(&repo, &["commit", "-qm", "one"]);
    let hash = git(&repo, &["rev-parse", "--short", "HEAD"]);
    let (version, watched) = run_script(&exe, &repo);
    assert_eq!(version, format!("1.2.3 ({hash})"));
    for file in [".git/HEAD", ".git/refs/heads/main"] {
        assert!(
            watched.iter().any(|w| w.ends_with(file)),
            "{file} is watched: {watched:?}"
        );
    }

    // A change to a tracked file: dirty. An untracked file alone is not.
    std::fs::write(repo.join("new.txt"), "untracked").expect("write");
    assert_eq!(run_script(&exe, &repo).0, format!("1.2.3 ({hash})"));
    std::fs::write(repo.join("Cargo.toml"), "[package]\nname = \"x\"\n").expect("write");
    assert_eq!(run_script(&exe, &repo).0, format!("1.2.3 ({hash}-dirty)"));
}

#[test]
fn the_binary_prints_its_version_with_the_commit_of_this_checkout() {
    let out = Command::new(env!("CARGO_BIN_EXE_dlqctl"))
        .arg("--version")
        .env_clear()
        .output()
        .expect("dlqctl runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let want = format!("dlqctl {}", env!("CARGO_PKG_VERSION"));
    assert!(text.starts_with(&want), "{text}");
    if root().join(".git").exists() {
        // Built from this checkout: the commit is shown (HEAD may have moved since the build,
        // so only its form is checked).
        let commit = text
            .trim()
            .strip_prefix(&format!("{want} ("))
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or_else(|| panic!("no commit in {text:?}"));
        let hash = commit.strip_suffix("-dirty").unwrap_or(commit);
        assert!(
            hash.len() >= 7 && hash.chars().all(|c| c.is_ascii_hexdigit()),
            "{text}"
        );
    }
}
