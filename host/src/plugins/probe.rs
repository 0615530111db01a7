//! Looking at a plugin file without registering anything: permissions, then its manifest read
//! through a short-lived `dlopen` that is closed again (only its constructors run).

use std::fs;
use std::path::Path;

use flowscale_sdk::SDK_VERSION;
use flowscale_sdk::abi::{MANIFEST_SYMBOL, ManifestInfo, PluginManifest, sdk_versions_compatible};

use super::is_reserved;
use super::report::Refusal;

/// Refuses `path` when it is writable by group or others.
#[cfg(unix)]
pub(super) fn check_not_writable(what: &'static str, path: &Path) -> Result<(), Refusal> {
    use std::os::unix::fs::PermissionsExt;
    let meta = fs::metadata(path).map_err(|e| Refusal::Unreadable(e.to_string()))?;
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(Refusal::Writable {
            what,
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

/// On platforms without Unix permission bits nothing is checked.
#[cfg(not(unix))]
pub(super) fn check_not_writable(_what: &'static str, _path: &Path) -> Result<(), Refusal> {
    Ok(())
}

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

    #[cfg(unix)]
    #[test]
    fn group_or_world_writable_files_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("libx.so");
        fs::write(&file, b"x").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(check_not_writable("file", &file).is_ok());
        fs::set_permissions(&file, fs::Permissions::from_mode(0o664)).unwrap();
        let err = check_not_writable("file", &file).unwrap_err();
        assert!(err.to_string().contains("anyone could inject code"));
        assert!(err.to_string().contains("chmod go-w"));
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
