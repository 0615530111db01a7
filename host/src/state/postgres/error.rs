//! Client errors as state errors.

use crate::state::StateError;

/// Turns a client error into a [`StateError::Database`] saying what was being done.
pub(super) fn db_error(action: &str) -> impl FnOnce(postgres::Error) -> StateError + '_ {
    move |source| StateError::Database {
        action: action.to_string(),
        source,
    }
}
