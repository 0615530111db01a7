//! The plugin manifest: a plain `#[repr(C)]` static that the host reads with nothing but `dlopen`
//! and `dlsym`, before abi_stable maps the library for good.
//!
//! The manifest's own layout never changes within a [`MANIFEST_FORMAT`]: the magic and the format
//! number come first, so that a host can always tell "not a flowscale plugin" and "a manifest
//! format I do not know" apart from everything else.

use std::fmt;

/// The bytes every manifest starts with.
pub const MANIFEST_MAGIC: [u8; 16] = *b"FLOWSCALE-PLUGIN";

/// The layout version of [`PluginManifest`] itself (not of the SDK).
pub const MANIFEST_FORMAT: u32 = 1;

/// The exported name of the manifest static (without the trailing NUL).
pub const MANIFEST_SYMBOL: &str = "FLOWSCALE_PLUGIN_MANIFEST";

/// Upper bounds that keep a corrupt manifest from making the host read far into memory.
const MAX_STR_LEN: usize = 4096;
const MAX_MODES: usize = 256;

/// A borrowed UTF-8 string in a manifest: pointer and length, no NUL terminator.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ManifestStr {
    ptr: *const u8,
    len: usize,
}

impl ManifestStr {
    /// Points at a static string.
    pub const fn new(text: &'static str) -> ManifestStr {
        ManifestStr {
            ptr: text.as_ptr(),
            len: text.len(),
        }
    }

    /// Copies the string out.
    ///
    /// # Safety
    /// `self` must point at `len` readable bytes (true for a manifest built by
    /// [`crate::export_plugin!`] in a library that is still loaded).
    unsafe fn read(&self, what: &str) -> Result<String, ManifestError> {
        if self.len > MAX_STR_LEN || (self.ptr.is_null() && self.len > 0) {
            return Err(ManifestError::Corrupt(format!(
                "{what} has length {}",
                self.len
            )));
        }
        if self.len == 0 {
            return Ok(String::new());
        }
        // SAFETY: non-null, bounded length, readable per the caller's contract.
        let bytes = unsafe { std::slice::from_raw_parts(self.ptr, self.len) };
        String::from_utf8(bytes.to_vec())
            .map_err(|_| ManifestError::Corrupt(format!("{what} is not UTF-8")))
    }
}

/// One mode a plugin exports: its implementation id and a one-line description.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ManifestMode {
    id: ManifestStr,
    description: ManifestStr,
}

impl ManifestMode {
    /// A manifest entry from static strings.
    pub const fn new(id: &'static str, description: &'static str) -> ManifestMode {
        ManifestMode {
            id: ManifestStr::new(id),
            description: ManifestStr::new(description),
        }
    }
}

/// What a plugin says about itself, readable without running any of its code.
///
/// Built by [`crate::export_plugin!`]; plugin authors never write it by hand.
#[repr(C)]
pub struct PluginManifest {
    magic: [u8; 16],
    format: u32,
    /// 1 when the plugin was built with `panic = "unwind"` (its panics can be contained).
    panic_unwind: u8,
    sdk_version: ManifestStr,
    plugin_name: ManifestStr,
    plugin_version: ManifestStr,
    modes: *const ManifestMode,
    mode_count: usize,
}

// SAFETY: manifests only hold pointers to immutable `'static` data.
unsafe impl Sync for PluginManifest {}
// SAFETY: as above.
unsafe impl Sync for ManifestMode {}
// SAFETY: as above.
unsafe impl Sync for ManifestStr {}

impl PluginManifest {
    /// The manifest of a plugin built against this SDK.
    pub const fn new(
        plugin_name: &'static str,
        plugin_version: &'static str,
        panic_unwind: bool,
        modes: &'static [ManifestMode],
    ) -> PluginManifest {
        PluginManifest {
            magic: MANIFEST_MAGIC,
            format: MANIFEST_FORMAT,
            panic_unwind: panic_unwind as u8,
            sdk_version: ManifestStr::new(crate::SDK_VERSION),
            plugin_name: ManifestStr::new(plugin_name),
            plugin_version: ManifestStr::new(plugin_version),
            modes: modes.as_ptr(),
            mode_count: modes.len(),
        }
    }

    /// Copies the manifest into owned values, checking magic, format and bounds.
    ///
    /// # Safety
    /// `ptr` must be the address of the [`MANIFEST_SYMBOL`] static of a library that is still
    /// loaded. A foreign library that happens to export that name is caught by the magic check
    /// as long as the symbol is at least 16 readable bytes.
    pub unsafe fn read(ptr: *const PluginManifest) -> Result<ManifestInfo, ManifestError> {
        if ptr.is_null() {
            return Err(ManifestError::Corrupt("the manifest symbol is null".into()));
        }
        // SAFETY: the caller guarantees `ptr` is the manifest static; the magic is read first.
        let magic = unsafe { std::ptr::read_unaligned(ptr.cast::<[u8; 16]>()) };
        if magic != MANIFEST_MAGIC {
            return Err(ManifestError::BadMagic);
        }
        // SAFETY: the magic matched, so this is a manifest; its format is checked before use.
        let format = unsafe { std::ptr::read_unaligned(std::ptr::addr_of!((*ptr).format)) };
        if format != MANIFEST_FORMAT {
            return Err(ManifestError::UnknownFormat(format));
        }
        // SAFETY: same format as ours, so the layout is ours.
        let m = unsafe { &*ptr };
        // SAFETY: built from a `'static` slice by `new` (bounds checked by `read_entries`).
        let modes = unsafe { read_entries(m.modes, m.mode_count, "mode") }?;
        // SAFETY: as above.
        unsafe {
            Ok(ManifestInfo {
                sdk_version: m.sdk_version.read("the SDK version")?,
                plugin_name: m.plugin_name.read("the plugin name")?,
                plugin_version: m.plugin_version.read("the plugin version")?,
                panic_unwind: m.panic_unwind != 0,
                modes,
                evaluators: Vec::new(),
                executors: Vec::new(),
            })
        }
    }
}

/// Copies `count` entries at `entries` (ids and descriptions) of a `kind` ("mode",
/// "evaluator", "executor": only for messages), refusing a count over the bound or a null list
/// with entries.
///
/// # Safety
/// A non-null `entries` must point at `count` entries of a loaded library.
pub(super) unsafe fn read_entries(
    entries: *const ManifestMode,
    count: usize,
    kind: &str,
) -> Result<Vec<(String, String)>, ManifestError> {
    if count > MAX_MODES || (entries.is_null() && count > 0) {
        return Err(ManifestError::Corrupt(format!("{count} {kind}s listed")));
    }
    let (id, description) = (
        format!("the id of a {kind}"),
        format!("the description of a {kind}"),
    );
    let entries: &[ManifestMode] = if count == 0 {
        &[]
    } else {
        // SAFETY: non-null and bounded; readable per the caller's contract.
        unsafe { std::slice::from_raw_parts(entries, count) }
    };
    let mut listed = Vec::with_capacity(entries.len());
    for entry in entries {
        // SAFETY: entries point at `'static` strings of the loaded library.
        let text = unsafe { entry.id.read(&id) }?;
        let about = unsafe { entry.description.read(&description) }?;
        listed.push((text, about));
    }
    Ok(listed)
}

/// An owned copy of a manifest, safe to keep after the library is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestInfo {
    /// The SDK version the plugin was built against.
    pub sdk_version: String,
    /// The plugin's name.
    pub plugin_name: String,
    /// The plugin's own version.
    pub plugin_version: String,
    /// False when the plugin was built with `panic = "abort"`.
    pub panic_unwind: bool,
    /// `(implementation id, description)` of every exported mode, in declaration order.
    pub modes: Vec<(String, String)>,
    /// `(implementation id, description)` of every exported metric evaluator (SDK 0.1.3,
    /// from the kinds table: see [`super::KindsTable`]; empty for older plugins).
    pub evaluators: Vec<(String, String)>,
    /// `(implementation id, description)` of every exported scaling executor (as above).
    pub executors: Vec<(String, String)>,
}

/// Why a manifest could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManifestError {
    /// The symbol exists but does not start with [`MANIFEST_MAGIC`].
    BadMagic,
    /// A manifest format this SDK does not know.
    UnknownFormat(u32),
    /// Lengths or pointers out of bounds, or text that is not UTF-8.
    Corrupt(String),
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ManifestError::BadMagic => {
                f.write_str("the manifest symbol does not hold a flowscale manifest")
            }
            ManifestError::UnknownFormat(v) => write!(
                f,
                "manifest format {v} is not known to this host (it reads format {MANIFEST_FORMAT})"
            ),
            ManifestError::Corrupt(what) => write!(f, "corrupt manifest: {what}"),
        }
    }
}

impl std::error::Error for ManifestError {}

/// Whether a plugin built against SDK `plugin` can be loaded by a host built against SDK
/// `host`: same major version and, while the major version is 0, same minor version (patch
/// releases only append, see the crate docs on compatibility). `None` when a version does not
/// parse.
pub fn sdk_versions_compatible(host: &str, plugin: &str) -> Option<bool> {
    let parse = |v: &str| -> Option<(u64, u64)> {
        let core = v.split(['-', '+']).next()?;
        let mut parts = core.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        parts.next()?.parse::<u64>().ok()?;
        Some((major, minor))
    };
    let (hmaj, hmin) = parse(host)?;
    let (pmaj, pmin) = parse(plugin)?;
    Some(hmaj == pmaj && (hmaj != 0 || hmin == pmin))
}

#[cfg(test)]
mod tests {
    use super::*;

    static MODES: [ManifestMode; 2] = [
        ManifestMode::new("a", "first"),
        ManifestMode::new("b", "second"),
    ];
    static MANIFEST: PluginManifest = PluginManifest::new("demo", "1.2.3", true, &MODES);

    #[test]
    fn a_manifest_round_trips_through_its_raw_form() {
        let info = unsafe { PluginManifest::read(&MANIFEST) }.unwrap();
        assert_eq!(info.plugin_name, "demo");
        assert_eq!(info.plugin_version, "1.2.3");
        assert_eq!(info.sdk_version, crate::SDK_VERSION);
        assert!(info.panic_unwind);
        assert_eq!(
            info.modes,
            vec![("a".into(), "first".into()), ("b".into(), "second".into())]
        );
    }

    #[test]
    fn foreign_bytes_are_not_a_manifest() {
        let junk = [0u8; 128];
        let err = unsafe { PluginManifest::read(junk.as_ptr().cast()) }.unwrap_err();
        assert_eq!(err, ManifestError::BadMagic);
    }

    #[test]
    fn sdk_compatibility_follows_semver_with_zero_major_strictness() {
        assert_eq!(sdk_versions_compatible("0.1.0", "0.1.7"), Some(true));
        assert_eq!(sdk_versions_compatible("0.1.3", "0.1.0"), Some(true));
        assert_eq!(sdk_versions_compatible("0.1.0", "0.2.0"), Some(false));
        assert_eq!(sdk_versions_compatible("1.4.0", "1.2.0"), Some(true));
        assert_eq!(sdk_versions_compatible("1.0.0", "2.0.0"), Some(false));
        assert_eq!(sdk_versions_compatible("0.1.0", "banana"), None);
    }
}
