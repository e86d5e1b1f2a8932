//! Where archive objects are kept: a local directory or an S3 prefix, behind one small API
//! (`put_durable`, `get`, `list`), so `dlqctl archive` and `redrive --from-archive` never ask
//! which.
//!
//! `put_durable` returns only once the object is known to be there as written: on a file
//! system, written to a temporary name, fsynced, renamed into place, the folder fsynced, then
//! read back and its sha256 compared; on S3, PutObject answered, then GetObject read back and
//! compared. `archive --delete` removes a message from its queue only after that.
//!
//! On a file system an archive holds whole payloads (card numbers, Authorization headers):
//! its files are created `0600` and its folders `0700`, as the journal is (issue 52, M9). A
//! write that fails removes its temporary file (a full disk stays no fuller than it was), and
//! an archive run removes the temporaries a killed writer left ([`Store::clean_temporaries`],
//! issue 52, L2).

use std::path::{Path, PathBuf};

use super::{Place, sha256_hex};

/// Why a store call failed, naming the object.
#[derive(Debug, thiserror::Error)]
#[error("{at}: {what}")]
pub struct StoreError {
    pub at: String,
    pub what: String,
}

/// An opened archive location.
#[derive(Debug, Clone)]
pub enum Store {
    Dir(PathBuf),
    /// An S3 bucket and prefix, through `aws-sdk-s3` with the standard AWS configuration.
    S3 {
        bucket: String,
        prefix: String,
        client: aws_sdk_s3::Client,
    },
}

impl Store {
    /// Opens `place` (a directory is created if absent).
    pub async fn open(place: &Place) -> Result<Store, StoreError> {
        match place {
            Place::Dir(p) => {
                create_dirs(p).map_err(|e| StoreError {
                    at: p.display().to_string(),
                    what: format!("cannot create the archive directory: {e}"),
                })?;
                Ok(Store::Dir(p.clone()))
            }
            Place::S3 { bucket, prefix } => Ok(Store::S3 {
                bucket: bucket.clone(),
                prefix: prefix.clone(),
                client: s3_client().await,
            }),
        }
    }

    /// How `key` (relative to the place, `/`-separated) is named in errors and reports.
    pub fn name(&self, key: &str) -> String {
        match self {
            Store::Dir(p) => p.join(key).display().to_string(),
            Store::S3 { bucket, prefix, .. } if prefix.is_empty() => {
                format!("s3://{bucket}/{key}")
            }
            Store::S3 { bucket, prefix, .. } => format!("s3://{bucket}/{prefix}/{key}"),
        }
    }

    /// Writes `bytes` as `key`, replacing what was there, and returns once it is durable and
    /// read back equal (see the module's doc).
    pub async fn put_durable(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let fail = |what: String| StoreError {
            at: self.name(key),
            what,
        };
        match self {
            Store::Dir(root) => {
                let path = root.join(key);
                put_file(&path, bytes).map_err(fail)?;
                let back = fs_err::read(&path)
                    .map_err(|e| fail(format!("cannot read the object back: {e}")))?;
                if sha256_hex(&back) != sha256_hex(bytes) {
                    return Err(fail(format!(
                        "read back {} bytes that differ from the {} written",
                        back.len(),
                        bytes.len()
                    )));
                }
                Ok(())
            }
            Store::S3 { bucket, client, .. } => {
                let object = self.key(key);
                client
                    .put_object()
                    .bucket(bucket)
                    .key(&object)
                    .body(bytes.to_vec().into())
                    .send()
                    .await
                    .map_err(|e| fail(format!("s3:PutObject: {}", sdk_error(&e))))?;
                let back = get_object(client, bucket, &object)
                    .await
                    .map_err(|e| fail(format!("reading the object back (s3:GetObject): {e}")))?;
                if sha256_hex(&back) != sha256_hex(bytes) {
                    return Err(fail(format!(
                        "read back {} bytes that differ from the {} written",
                        back.len(),
                        bytes.len()
                    )));
                }
                Ok(())
            }
        }
    }

    /// The bytes of `key`.
    pub async fn get(&self, key: &str) -> Result<Vec<u8>, StoreError> {
        let fail = |what: String| StoreError {
            at: self.name(key),
            what,
        };
        match self {
            Store::Dir(root) => {
                fs_err::read(root.join(key)).map_err(|e| fail(format!("cannot read: {e}")))
            }
            Store::S3 { bucket, client, .. } => get_object(client, bucket, &self.key(key))
                .await
                .map_err(|e| fail(format!("s3:GetObject: {e}"))),
        }
    }

    /// When `key` was last written (Unix milliseconds): the file's modification time, or
    /// S3's `LastModified`; `None` when it cannot be told.
    pub async fn modified_ms(&self, key: &str) -> Option<i64> {
        match self {
            Store::Dir(root) => {
                let t = std::fs::metadata(root.join(key)).ok()?.modified().ok()?;
                let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
                i64::try_from(d.as_millis()).ok()
            }
            Store::S3 { bucket, client, .. } => {
                let head = client
                    .head_object()
                    .bucket(bucket)
                    .key(self.key(key))
                    .send()
                    .await
                    .ok()?;
                head.last_modified().and_then(|t| t.to_millis().ok())
            }
        }
    }

    /// The S3 key of `key` (the prefix, then `key`).
    fn key(&self, key: &str) -> String {
        match self {
            Store::S3 { prefix, .. } if !prefix.is_empty() => format!("{prefix}/{key}"),
            _ => key.to_owned(),
        }
    }

    /// Every key under `under` (`""`: the whole place), relative to the place, sorted.
    pub async fn list(&self, under: &str) -> Result<Vec<String>, StoreError> {
        match self {
            Store::Dir(root) => {
                let base = root.join(under);
                if !base.exists() {
                    return Ok(Vec::new());
                }
                let mut out = Vec::new();
                for e in walkdir::WalkDir::new(&base).sort_by_file_name() {
                    let e = e.map_err(|e| StoreError {
                        at: base.display().to_string(),
                        what: format!("cannot list: {e}"),
                    })?;
                    if !e.file_type().is_file() {
                        continue;
                    }
                    let Ok(rel) = e.path().strip_prefix(root) else {
                        continue;
                    };
                    let key = rel
                        .components()
                        .map(|c| c.as_os_str().to_string_lossy())
                        .collect::<Vec<_>>()
                        .join("/");
                    // Temporary files of a write that did not finish.
                    if !key.ends_with(TMP) {
                        out.push(key);
                    }
                }
                out.sort();
                Ok(out)
            }
            Store::S3 {
                bucket,
                prefix,
                client,
            } => {
                let start = if prefix.is_empty() {
                    String::new()
                } else {
                    format!("{prefix}/")
                };
                let under = under.trim_matches('/');
                let wanted = if under.is_empty() {
                    start.clone()
                } else {
                    format!("{start}{under}/")
                };
                let mut out = Vec::new();
                let mut token: Option<String> = None;
                // Bounded: 10,000 pages of 1,000 keys; an endpoint that goes on is broken.
                for _ in 0..10_000 {
                    let page = client
                        .list_objects_v2()
                        .bucket(bucket)
                        .prefix(&wanted)
                        .set_continuation_token(token.take())
                        .send()
                        .await
                        .map_err(|e| StoreError {
                            at: self.name(under),
                            what: format!("s3:ListObjectsV2: {}", sdk_error(&e)),
                        })?;
                    for o in page.contents() {
                        if let Some(k) = o.key().and_then(|k| k.strip_prefix(&start)) {
                            out.push(k.to_owned());
                        }
                    }
                    match page.next_continuation_token() {
                        Some(t) if page.is_truncated() == Some(true) => token = Some(t.to_owned()),
                        _ => {
                            out.sort();
                            return Ok(out);
                        }
                    }
                }
                Err(StoreError {
                    at: self.name(under),
                    what: "s3:ListObjectsV2 does not stop listing (10,000 pages)".into(),
                })
            }
        }
    }
}

impl Store {
    /// Removes the temporary files under `under` (a folder store) that a writer killed
    /// part-way left, those last changed more than `older_than` ago (a writer at work
    /// renames its own within seconds); returns how many. S3 writes leave none.
    pub fn clean_temporaries(&self, under: &str, older_than: std::time::Duration) -> u64 {
        let Store::Dir(root) = self else {
            return 0;
        };
        let base = root.join(under);
        let mut removed = 0;
        for e in walkdir::WalkDir::new(&base)
            .max_depth(3)
            .into_iter()
            .filter_map(Result::ok)
        {
            let stale = e.file_type().is_file()
                && e.file_name().to_string_lossy().ends_with(TMP)
                && e.metadata()
                    .ok()
                    .and_then(|m| m.modified().ok())
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age >= older_than);
            if stale && std::fs::remove_file(e.path()).is_ok() {
                tracing::info!(
                    "removed {}, left by a writer killed part-way",
                    e.path().display()
                );
                removed += 1;
            }
        }
        removed
    }
}

/// Creates `dir` and its missing parents `0700` (those that exist keep their mode).
fn create_dirs(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The S3 client: the SDK's standard configuration (credential chain, profiles, region, and
/// its endpoint settings such as `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL`). With an
/// endpoint override (moto, MinIO, a VPC endpoint), path-style addressing: a local endpoint
/// has no per-bucket host names. Without a region anywhere, `us-east-1`.
async fn s3_client() -> aws_sdk_s3::Client {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .operation_timeout(std::time::Duration::from_secs(60))
                .connect_timeout(std::time::Duration::from_secs(10))
                .build(),
        )
        .load()
        .await;
    let overridden = config.endpoint_url().is_some()
        || ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]
            .iter()
            .any(|v| std::env::var(v).is_ok_and(|v| !v.trim().is_empty()));
    let mut b = aws_sdk_s3::config::Builder::from(&config).force_path_style(overridden);
    if config.region().is_none() {
        b = b.region(aws_sdk_s3::config::Region::new("us-east-1"));
    }
    aws_sdk_s3::Client::from_conf(b.build())
}

/// An SDK error as people read it: the service's code and message, else the whole chain.
fn sdk_error<E, R>(e: &aws_sdk_s3::error::SdkError<E, R>) -> String
where
    E: aws_sdk_s3::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    use aws_sdk_s3::error::ProvideErrorMetadata;
    match (e.code(), e.message()) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        (Some(c), None) => c.to_owned(),
        _ => aws_sdk_s3::error::DisplayErrorContext(e).to_string(),
    }
}

/// GetObject, the whole body.
async fn get_object(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
) -> Result<Vec<u8>, String> {
    let got = client
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .map_err(|e| sdk_error(&e))?;
    let body = got
        .body
        .collect()
        .await
        .map_err(|e| format!("reading the body: {e}"))?;
    Ok(body.into_bytes().to_vec())
}

/// The suffix of a file being written (never listed).
const TMP: &str = ".dlqctl-tmp";

/// Temporary name (`0600`), fsync, rename, fsync of the folder: the file is whole or
/// absent. A failure removes the temporary file.
fn put_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path
        .parent()
        .ok_or_else(|| "an object needs a folder".to_owned())?;
    create_dirs(dir).map_err(|e| format!("cannot create its folder {}: {e}", dir.display()))?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(TMP);
    let tmp = PathBuf::from(tmp);
    // One left by a writer killed part-way: created anew, with this mode.
    let _ = std::fs::remove_file(&tmp);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
        f.write_all(bytes)
            .map_err(|e| format!("cannot write {} bytes: {e}", bytes.len()))?;
        f.sync_all().map_err(|e| format!("cannot fsync: {e}"))?;
        drop(f);
        fs_err::rename(&tmp, path).map_err(|e| format!("cannot rename into place: {e}"))
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    fs_err::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| format!("cannot fsync its folder: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_directory_store_puts_durably_lists_and_gets_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let place = Place::Dir(dir.path().join("arch"));
        let s = Store::open(&place).await.expect("opens");
        s.put_durable("orders/run-1/batch-00001.jsonl", b"line\n")
            .await
            .expect("put");
        s.put_durable("orders/run-1/manifest.json", b"{}")
            .await
            .expect("put");
        assert_eq!(
            s.list("orders").await.expect("lists"),
            vec![
                "orders/run-1/batch-00001.jsonl".to_owned(),
                "orders/run-1/manifest.json".to_owned()
            ]
        );
        assert_eq!(
            s.get("orders/run-1/batch-00001.jsonl").await.expect("gets"),
            b"line\n"
        );
        assert!(s.list("nothing").await.expect("lists").is_empty());
        let e = s.get("orders/none").await.expect_err("absent");
        assert!(e.to_string().contains("orders/none"), "{e}");
    }

    /// Issue 52, M9: whole payloads are readable by their owner only: files 0600 (the
    /// manifest rewritten over itself too), folders 0700.
    #[tokio::test]
    async fn archive_files_are_0600_and_folders_0700() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let place = Place::Dir(dir.path().join("arch").join("prod"));
        let s = Store::open(&place).await.expect("opens");
        for _ in 0..2 {
            s.put_durable("orders/run-1/manifest.json", b"{}")
                .await
                .expect("put");
        }
        s.put_durable("orders/run-1/batch-00001.jsonl", b"line\n")
            .await
            .expect("put");
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        let root = dir.path().join("arch");
        for d in [
            root.clone(),
            root.join("prod"),
            root.join("prod/orders"),
            root.join("prod/orders/run-1"),
        ] {
            assert_eq!(mode(&d), 0o700, "{}", d.display());
        }
        for f in ["manifest.json", "batch-00001.jsonl"] {
            let p = root.join("prod/orders/run-1").join(f);
            assert_eq!(mode(&p), 0o600, "{}", p.display());
        }
    }

    /// Issue 52, L2: a write that hits a full disk (a 64 KiB tmpfs, mounted when this runs
    /// as root) leaves no temporary file behind, so the next write that fits succeeds; a
    /// temporary file a killed writer left is removed by the next run once it is stale.
    #[tokio::test]
    async fn a_full_disk_leaves_no_temporary_file_and_stale_ones_are_cleaned() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mnt = dir.path().join("small");
        std::fs::create_dir(&mnt).expect("mkdir");
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(&mnt)
            .status()
            .is_ok_and(|s| s.success());
        if mounted {
            let s = Store::open(&Place::Dir(mnt.clone())).await.expect("opens");
            let big = vec![b'x'; 48 * 1024];
            s.put_durable("orders/r/batch-00001.jsonl", &big)
                .await
                .expect("fits");
            let e = s
                .put_durable("orders/r/batch-00002.jsonl", &big)
                .await
                .expect_err("the disk is full");
            let tmps: Vec<String> = walkdir::WalkDir::new(&mnt)
                .into_iter()
                .filter_map(Result::ok)
                .map(|e| e.path().display().to_string())
                .filter(|p| p.ends_with(TMP))
                .collect();
            let small = s.put_durable("orders/r/manifest.json", b"{}").await;
            let _ = std::process::Command::new("umount").arg(&mnt).status();
            assert!(tmps.is_empty(), "{e}: left {tmps:?}");
            small.expect("the next write that fits succeeds");
        }
        // A temporary file of a writer killed part-way: removed once stale.
        let s = Store::open(&Place::Dir(dir.path().join("arch")))
            .await
            .expect("opens");
        let left = dir
            .path()
            .join("arch/orders/r/batch-00001.jsonl.dlqctl-tmp");
        std::fs::create_dir_all(left.parent().expect("folder")).expect("mkdir");
        std::fs::write(&left, b"half").expect("write");
        assert_eq!(
            s.clean_temporaries("orders", std::time::Duration::from_secs(600)),
            0,
            "a fresh one may be a writer's at work"
        );
        assert_eq!(s.clean_temporaries("orders", std::time::Duration::ZERO), 1);
        assert!(!left.exists());
    }
}
