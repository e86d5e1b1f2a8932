//! JSON pointers (RFC 6901), the one address every layer of the spec shares: the YAML tree
//! walks by them, `locate` maps them to positions, `schema` and `load` name findings with them.
//!
//! Its own file, below `yaml` and `locate`, so that neither has to import the other for it.

/// A key as one segment of a JSON pointer (RFC 6901: `~` → `~0`, `/` → `~1`).
pub fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}
