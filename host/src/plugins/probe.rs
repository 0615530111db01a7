//! Looking at a plugin file without registering anything: its manifest read through a
//! short-lived `dlopen` that is closed again (only its constructors run). Who may have planted
//! the file is checked before, in `trust`.

use std::path::{Path, PathBuf};

use flowscale_sdk::SDK_VERSION;
use flowscale_sdk::abi::{MANIFEST_SYMBOL, ManifestInfo, PluginManifest, sdk_versions_compatible};

use super::report::Refusal;
use super::{is_reserved, trust};

/// An error and all its sources, joined: libloading keeps the real reason in `source()`.
pub(super) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let next = cause.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = cause.source();
    }
    text
}

/// Probes one plugin file as listed in the plugins directory: first who may have planted it
/// (`trust`), then its manifest, read from the resolved path that was checked. Every way a file
/// gets opened goes through here, so no file is opened before it was checked; the resolved path
/// is returned for the load, which must not follow the link again.
pub(super) fn probe_file(file: &Path) -> Result<(ManifestInfo, PathBuf), Refusal> {
    let real = trust::check(file)?;
    let info = read_manifest(&real)?;
    Ok((info, real))
}

/// Opens `path`, copies its manifest and closes it again.
pub(super) fn read_manifest(path: &Path) -> Result<ManifestInfo, Refusal> {
    // SAFETY: loading a library runs its initialisers; that is the documented limit of probing
    // (plugins.md). The handle is dropped at the end of this function.
    let library = unsafe { libloading::Library::new(path) }
        .map_err(|e| Refusal::NotLoadable(error_chain(&e)))?;
    let mut symbol = MANIFEST_SYMBOL.as_bytes().to_vec();
    symbol.push(0);
    // SAFETY: the symbol is only read through `PluginManifest::read`, which checks the magic
    // before interpreting anything else.
    let info = unsafe {
        let manifest: libloading::Symbol<'_, *const PluginManifest> = library
            .get(symbol.as_slice())
            .map_err(|_| Refusal::NoManifest)?;
        PluginManifest::read(*manifest).map_err(Refusal::BadManifest)?
    };
    drop(library);
    Ok(info)
}

/// Checks a manifest on its own (without looking at other files).
pub(super) fn check_manifest(info: &ManifestInfo) -> Result<(), Refusal> {
    if sdk_versions_compatible(SDK_VERSION, &info.sdk_version) != Some(true) {
        return Err(Refusal::SdkVersion {
            plugin: info.sdk_version.clone(),
        });
    }
    if !info.panic_unwind {
        return Err(Refusal::PanicAbort);
    }
    if info.modes.is_empty() {
        return Err(Refusal::NoModes);
    }
    for (i, (id, _)) in info.modes.iter().enumerate() {
        if id.is_empty() || id.chars().any(char::is_whitespace) {
            return Err(Refusal::InvalidId(id.clone()));
        }
        if is_reserved(id) {
            return Err(Refusal::Reserved(id.clone()));
        }
        if info.modes[..i].iter().any(|(other, _)| other == id) {
            return Err(Refusal::DuplicateInFile(id.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn manifest(ids: &[&str]) -> ManifestInfo {
        ManifestInfo {
            sdk_version: SDK_VERSION.to_string(),
            plugin_name: "demo".into(),
            plugin_version: "1.0.0".into(),
            panic_unwind: true,
            modes: ids
                .iter()
                .map(|id| (id.to_string(), "d".to_string()))
                .collect(),
        }
    }

    #[test]
    fn manifest_checks_refuse_with_the_reason() {
        assert_eq!(check_manifest(&manifest(&["a", "b"])), Ok(()));
        assert_eq!(
            check_manifest(&manifest(&["a", "Balanced"])),
            Err(Refusal::Reserved("Balanced".into()))
        );
        assert_eq!(
            check_manifest(&manifest(&["a", "a"])),
            Err(Refusal::DuplicateInFile("a".into()))
        );
        assert_eq!(
            check_manifest(&manifest(&["a b"])),
            Err(Refusal::InvalidId("a b".into()))
        );
        assert_eq!(check_manifest(&manifest(&[])), Err(Refusal::NoModes));
        let mut abort = manifest(&["a"]);
        abort.panic_unwind = false;
        assert_eq!(check_manifest(&abort), Err(Refusal::PanicAbort));
        let mut old = manifest(&["a"]);
        old.sdk_version = "0.0.9".into();
        let err = check_manifest(&old).unwrap_err();
        assert!(
            err.to_string()
                .contains("built against flowscale-sdk 0.0.9")
        );
    }

    #[test]
    fn a_text_file_is_not_a_library() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.so");
        fs::write(&file, b"just text\n").unwrap();
        let err = read_manifest(&file).unwrap_err();
        assert!(matches!(err, Refusal::NotLoadable(_)), "{err}");
        assert!(err.to_string().contains("x.so"), "{err}");
    }
}
