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
mod pair;
mod provider;
mod reload;

pub use files::{
    CredentialError, Secret, check_private, read_certificates, read_private_key, read_secret,
};
pub use pair::{PairFile, certified_key};
pub use provider::crypto_provider;
pub use reload::{FileWatch, Reload, Reloading};
