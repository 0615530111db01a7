//! The bearer token as the server checks it: the running host replaces it when its fleet file's
//! `[host] api-token` changes, and every request is checked against the token of the moment.

use std::sync::{Arc, PoisonError, RwLock};

/// The token requests must carry (none: no token needed), shared by the server and the host that
/// replaces it.
#[derive(Debug, Clone, Default)]
pub(crate) struct ApiToken(Arc<RwLock<Option<Arc<str>>>>);

impl ApiToken {
    /// A token holder starting with `token`.
    pub(crate) fn new(token: Option<&str>) -> ApiToken {
        ApiToken(Arc::new(RwLock::new(token.map(Arc::from))))
    }

    /// The token now. A request holds it for as long as it is checked, not the lock.
    pub(crate) fn get(&self) -> Option<Arc<str>> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the token: from the next request on, only `token` is accepted.
    pub(crate) fn set(&self, token: Option<&str>) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = token.map(Arc::from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_token_is_the_one_every_holder_sees() {
        let token = ApiToken::new(Some("old-token-0123456789"));
        let server = token.clone();
        assert_eq!(server.get().as_deref(), Some("old-token-0123456789"));
        token.set(Some("new-token-0123456789"));
        assert_eq!(server.get().as_deref(), Some("new-token-0123456789"));
        token.set(None);
        assert_eq!(server.get(), None);
    }
}
