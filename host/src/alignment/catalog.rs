//! Where custom modes come from: the seam between alignment and plugin discovery.

use std::sync::Arc;

#[cfg(test)]
use flowscale_sdk::AlignmentMode;

use super::custom::CustomMode;

/// The custom modes available to resolution (plugins and modes linked into the binary).
pub trait ModeCatalog {
    /// The mode with this implementation id.
    fn find(&self, id: &str) -> Option<CustomMode>;
    /// Every implementation id, sorted.
    fn ids(&self) -> Vec<String>;
}

/// A shared catalog is a catalog: the running host swaps the one it plans with when its plugins
/// directory changes, while plans made earlier keep theirs.
impl<T: ModeCatalog + ?Sized> ModeCatalog for Arc<T> {
    fn find(&self, id: &str) -> Option<CustomMode> {
        self.as_ref().find(id)
    }
    fn ids(&self) -> Vec<String> {
        self.as_ref().ids()
    }
}

/// A catalog with no custom modes.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCustomModes;

impl ModeCatalog for NoCustomModes {
    fn find(&self, _id: &str) -> Option<CustomMode> {
        None
    }
    fn ids(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A fixed list of modes, for the unit tests.
#[cfg(test)]
#[derive(Debug, Default, Clone)]
pub(crate) struct StaticCatalog {
    modes: Vec<CustomMode>,
}

#[cfg(test)]
impl StaticCatalog {
    /// Adds a mode.
    pub(crate) fn with(mut self, id: &str, mode: Arc<dyn AlignmentMode>) -> StaticCatalog {
        self.modes.push(CustomMode::linked(id, "", mode));
        self
    }
}

#[cfg(test)]
impl ModeCatalog for StaticCatalog {
    fn find(&self, id: &str) -> Option<CustomMode> {
        self.modes.iter().find(|m| m.id == id).cloned()
    }
    fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.modes.iter().map(|m| m.id.clone()).collect();
        ids.sort();
        ids
    }
}
