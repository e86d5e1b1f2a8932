//! Where archive objects are kept: a local directory or an S3 prefix, behind one small API
//! (`put_durable`, `get`, `list`), so `dlqctl archive` and `redrive --from-archive` never ask
//! which.
//!
//! `put_durable` returns only once the object is known to be there as written: on a file
//! system, written to a temporary name, fsynced, renamed into place, the folder fsynced, then
//! read back and its sha256 compared; on S3, PutObject answered, then GetObject read back and
//! compared. `archive --delete` removes a message from its queue only after that.

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
    /// Filled in by the S3 store.
    S3 {
        bucket: String,
        prefix: String,
    },
}

impl Store {
    /// Opens `place` (a directory is created if absent).
    pub async fn open(place: &Place) -> Result<Store, StoreError> {
        match place {
            Place::Dir(p) => {
                fs_err::create_dir_all(p).map_err(|e| StoreError {
                    at: p.display().to_string(),
                    what: format!("cannot create the archive directory: {e}"),
                })?;
                Ok(Store::Dir(p.clone()))
            }
            Place::S3 { bucket, prefix } => Err(StoreError {
                at: format!("s3://{bucket}/{prefix}"),
                what: "S3 archives are not built yet".into(),
            }),
        }
    }

    /// How `key` (relative to the place, `/`-separated) is named in errors and reports.
    pub fn name(&self, key: &str) -> String {
        match self {
            Store::Dir(p) => p.join(key).display().to_string(),
            Store::S3 { bucket, prefix } if prefix.is_empty() => format!("s3://{bucket}/{key}"),
            Store::S3 { bucket, prefix } => format!("s3://{bucket}/{prefix}/{key}"),
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
            Store::S3 { .. } => Err(fail("S3 archives are not built yet".into())),
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
            Store::S3 { .. } => Err(fail("S3 archives are not built yet".into())),
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
            Store::S3 { bucket, prefix } => Err(StoreError {
                at: format!("s3://{bucket}/{prefix}"),
                what: "S3 archives are not built yet".into(),
            }),
        }
    }
}

/// The suffix of a file being written (never listed).
const TMP: &str = ".dlqctl-tmp";

/// Temporary name, fsync, rename, fsync of the folder: the file is whole or absent.
fn put_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let dir = path
        .parent()
        .ok_or_else(|| "an object needs a folder".to_owned())?;
    fs_err::create_dir_all(dir).map_err(|e| format!("cannot create its folder: {e}"))?;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(TMP);
    let tmp = PathBuf::from(tmp);
    let mut f = fs_err::File::create(&tmp).map_err(|e| format!("cannot create: {e}"))?;
    f.write_all(bytes)
        .map_err(|e| format!("cannot write {} bytes: {e}", bytes.len()))?;
    f.sync_all().map_err(|e| format!("cannot fsync: {e}"))?;
    drop(f);
    fs_err::rename(&tmp, path).map_err(|e| format!("cannot rename into place: {e}"))?;
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
}
