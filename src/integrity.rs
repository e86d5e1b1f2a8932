//! Tamper evidence with a key the target names (issue 52, L4): HMAC-SHA256 over archive
//! objects and manifests, and over the audit journal's records.
//!
//! A sha256 guards against damage only: whoever can edit an archive or a journal can
//! recompute it. An HMAC cannot be recomputed without the key, which lives in the
//! environment variable the target's `operations.hmacKeyEnv` names (never in a file
//! dlqctl reads or writes). Without that field nothing here is used and the checksums stay
//! what they were.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::spec::model::Target;

/// A target's HMAC key (its bytes are never shown: `Debug` prints its length only).
#[derive(Clone)]
pub struct Key(Vec<u8>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key(«{} bytes»)", self.0.len())
    }
}

impl Key {
    /// A key of these bytes (tests; the environment's otherwise: [`key`]).
    pub fn new(bytes: &[u8]) -> Key {
        Key(bytes.to_vec())
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes a key of any length.
        <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"))
    }

    /// HMAC-SHA256 of `bytes`, hex.
    pub fn sign(&self, bytes: &[u8]) -> String {
        let mut m = self.mac();
        m.update(bytes);
        m.finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Whether `hex` is the HMAC-SHA256 of `bytes` (compared in constant time).
    pub fn verifies(&self, bytes: &[u8], hex: &str) -> bool {
        let Some(tag) = unhex(hex) else {
            return false;
        };
        let mut m = self.mac();
        m.update(bytes);
        m.verify_slice(&tag).is_ok()
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// The key target `name` names in `operations.hmacKeyEnv`, read from the environment:
/// `None` when it names none; an error when the variable is unset or empty (a run that
/// was told to sign must not quietly not).
pub fn key(name: &str, target: &Target) -> Result<Option<Key>, String> {
    let Some(var) = target
        .operations
        .as_ref()
        .and_then(|o| o.hmac_key_env.as_deref())
    else {
        return Ok(None);
    };
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => {
            crate::secrets::never_show(&v);
            Ok(Some(Key(v.into_bytes())))
        }
        _ => Err(format!(
            "target `{name}`: operations.hmacKeyEnv names `{var}`, which is not set or is empty; set it to the target's HMAC key"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hmac_verifies_with_its_key_only() {
        let k = Key::new(b"secret");
        let tag = k.sign(b"body");
        assert_eq!(tag.len(), 64);
        assert!(k.verifies(b"body", &tag));
        assert!(!k.verifies(b"bodx", &tag));
        assert!(!Key::new(b"other").verifies(b"body", &tag));
        assert!(!k.verifies(b"body", "zz"));
        assert!(!format!("{k:?}").contains("secret"));
    }
}
