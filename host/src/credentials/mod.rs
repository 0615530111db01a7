//! The secret and TLS files of the links the host opens or serves: tokens, passwords, private
//! keys, certificates and CA bundles.
//!
//! This is the one place that reads them, so every link gets the same guarantees: a private
//! file readable by group or others is refused with the fix (`chmod 600`), as ssh and libpq do;
//! every error names the file and the cause but never the contents; a secret held in memory
//! prints as `***`; and PEM is decoded by `rustls-pki-types`, never by hand. [`Reloading`]
//! re-reads a link's files when they change on disk, keeping the last good value when the new
//! one cannot be used, so certificates and tokens rotate without a restart.

mod files;
mod reload;

pub use files::{
    CredentialError, Secret, check_private, read_certificates, read_private_key, read_secret,
};
pub use reload::{FileWatch, Reload, Reloading};

use std::sync::Arc;

/// The crypto provider of every TLS link of the host (the Flink clients, the state link, the
/// HTTPS server): ring, pure Rust and assembly, needing no C toolchain beyond `cc`. Handed to each
/// configuration rather than installed process-wide, so no link depends on another having
/// installed it first.
pub fn crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
