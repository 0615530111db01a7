//! The one crypto provider of the host's TLS links.

use std::sync::Arc;

/// The crypto provider of every TLS link of the host (the Flink clients, the state link, the
/// HTTPS server): ring, pure Rust and assembly, needing no C toolchain beyond `cc`. Handed to each
/// configuration rather than installed process-wide, so no link depends on another having
/// installed it first.
pub fn crypto_provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
