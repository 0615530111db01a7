//! Where custom modes come from: the seam between alignment and plugin discovery.

use std::sync::Arc;

use flowscale_sdk::AlignmentMode;

/// A custom mode found by implementation id.
#[derive(Clone)]
pub struct CatalogMode {
    /// The implementation id (what `scaling.alignment.mode.<name>.class` names).
    pub id: String,
    /// Where it comes from, for messages: a plugin file, or "linked into the binary".
    pub origin: String,
    /// The mode.
    pub mode: Arc<dyn AlignmentMode>,
}

impl std::fmt::Debug for CatalogMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogMode")
            .field("id", &self.id)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

/// The custom modes available to resolution (plugins and modes linked into the binary).
pub trait ModeCatalog {
    /// The mode with this implementation id.
    fn find(&self, id: &str) -> Option<CatalogMode>;
    /// Every implementation id, sorted.
    fn ids(&self) -> Vec<String>;
}

/// A catalog with no custom modes.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCustomModes;

impl ModeCatalog for NoCustomModes {
    fn find(&self, _id: &str) -> Option<CatalogMode> {
        None
    }
    fn ids(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A fixed list of modes; used by tests and by hosts that embed their own modes.
#[derive(Debug, Default, Clone)]
pub struct StaticCatalog {
    modes: Vec<CatalogMode>,
}

impl StaticCatalog {
    /// Adds a mode.
    pub fn with(mut self, id: &str, mode: Arc<dyn AlignmentMode>) -> StaticCatalog {
        self.modes.push(CatalogMode {
            id: id.to_string(),
            origin: "linked into the binary".to_string(),
            mode,
        });
        self
    }
}

impl ModeCatalog for StaticCatalog {
    fn find(&self, id: &str) -> Option<CatalogMode> {
        self.modes.iter().find(|m| m.id == id).cloned()
    }
    fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.modes.iter().map(|m| m.id.clone()).collect();
        ids.sort();
        ids
    }
}
