//! Looking at a plugin file without registering anything: its manifest read through a
//! short-lived `dlopen` that is closed again (only its constructors run). Who may have planted
//! the file is checked before, in `trust`.

use std::path::{Path, PathBuf};

use flowscale_sdk::SDK_VERSION;
use flowscale_sdk::abi::{
    KINDS_SYMBOL, KindsTable, MANIFEST_SYMBOL, ManifestInfo, PluginManifest,
    sdk_versions_compatible,
};

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
    check_header_of(&real)?;
    let info = read_manifest(&real)?;
    Ok((info, real))
}

/// The ELF machine number of the platform the host was built for, when known.
#[cfg(target_os = "linux")]
fn elf_machine() -> Option<u16> {
    Some(match std::env::consts::ARCH {
        "x86" => 3,
        "arm" => 40,
        "powerpc64" => 21,
        "s390x" => 22,
        "x86_64" => 62,
        "aarch64" => 183,
        "riscv64" => 243,
        "loongarch64" => 258,
        _ => return None,
    })
}

/// The checks made on a candidate file before it is opened as a library, on the file's first
/// bytes and length: `dlopen` trusts what it maps (the dynamic loader is not hardened against
/// malformed files, and a well-formed one runs its constructors), so anything that is not a
/// shared library for this platform is refused here. On Linux that is an ELF header of this
/// pointer width, byte order and machine, of type `ET_DYN`, whose program headers lie within
/// the file.
#[cfg(target_os = "linux")]
pub(super) fn check_library_header(header: &[u8], file_len: u64) -> Result<(), Refusal> {
    const ET_DYN: u16 = 3;
    let refuse = |why: String| Err(Refusal::NotLoadable(why));
    if header.len() < 4 || header[..4] != *b"\x7fELF" {
        return refuse("not an ELF file: it does not start with the ELF magic number".into());
    }
    let (class, header_len, phdr_len) = if cfg!(target_pointer_width = "64") {
        (2, 64, 56)
    } else {
        (1, 52, 32)
    };
    if header.len() < header_len {
        return refuse(format!(
            "truncated ELF header: {} bytes, expected {header_len}",
            header.len()
        ));
    }
    if header[4] != class {
        return refuse(format!(
            "ELF class {} does not match this {}-bit host",
            header[4],
            if class == 2 { 64 } else { 32 }
        ));
    }
    let little = cfg!(target_endian = "little");
    if header[5] != if little { 1 } else { 2 } {
        return refuse(format!(
            "ELF byte order {} does not match this host's",
            header[5]
        ));
    }
    if header[6] != 1 {
        return refuse(format!("unknown ELF version {}", header[6]));
    }
    let u16_at = |at: usize| {
        let bytes = [header[at], header[at + 1]];
        if little {
            u16::from_le_bytes(bytes)
        } else {
            u16::from_be_bytes(bytes)
        }
    };
    let word_at = |at: usize, wide: bool| -> u64 {
        let mut bytes = [0u8; 8];
        let n = if wide { 8 } else { 4 };
        bytes[..n].copy_from_slice(&header[at..at + n]);
        if little {
            u64::from_le_bytes(bytes)
        } else {
            u64::from_be_bytes(bytes) >> (8 * (8 - n))
        }
    };
    let e_type = u16_at(16);
    if e_type != ET_DYN {
        return refuse(format!(
            "ELF type {e_type} is not a shared library (type {ET_DYN})"
        ));
    }
    let e_machine = u16_at(18);
    if let Some(machine) = elf_machine()
        && e_machine != machine
    {
        return refuse(format!(
            "built for ELF machine {e_machine}, this host is {} (machine {machine})",
            std::env::consts::ARCH
        ));
    }
    let wide = class == 2;
    let (phoff_at, phentsize_at, phnum_at) = if wide { (32, 54, 56) } else { (28, 42, 44) };
    let phoff = word_at(phoff_at, wide);
    let phentsize = u16_at(phentsize_at);
    let phnum = u16_at(phnum_at);
    if usize::from(phentsize) != phdr_len || phnum == 0 {
        return refuse(format!(
            "malformed ELF header: {phnum} program headers of {phentsize} bytes"
        ));
    }
    let end = u64::from(phnum)
        .checked_mul(u64::from(phentsize))
        .and_then(|size| size.checked_add(phoff));
    if end.is_none_or(|end| end > file_len) {
        return refuse(format!(
            "truncated ELF file: its program headers at offset {phoff} lie beyond its {file_len} bytes"
        ));
    }
    Ok(())
}

/// Other platforms' library formats are left to the platform's loader.
#[cfg(not(target_os = "linux"))]
pub(super) fn check_library_header(_header: &[u8], _file_len: u64) -> Result<(), Refusal> {
    Ok(())
}

/// Everything checked about a candidate file before it is opened: who may have planted it
/// (`trust`), then [`check_library_header`] on the first bytes of the file it resolves to.
/// Nothing is loaded or run, so any bytes are safe to check (a fuzz target does).
pub fn precheck(path: &Path) -> Result<(), Refusal> {
    let real = trust::check(path)?;
    check_header_of(&real)
}

/// [`check_library_header`] on the first bytes of `path`.
fn check_header_of(path: &Path) -> Result<(), Refusal> {
    use std::io::Read;
    let unreadable = |e: std::io::Error| Refusal::Unreadable(e.to_string());
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let file_len = file.metadata().map_err(unreadable)?.len();
    let mut header = Vec::with_capacity(64);
    file.take(64).read_to_end(&mut header).map_err(unreadable)?;
    check_library_header(&header, file_len)
}

/// Opens `path`, copies its manifest (with the evaluators and executors of its kinds table,
/// when it has one: plugins built before SDK 0.1.3 have none) and closes it again.
pub(super) fn read_manifest(path: &Path) -> Result<ManifestInfo, Refusal> {
    // SAFETY: loading a library runs its initialisers; that is the documented limit of probing
    // (plugins.md). The handle is dropped at the end of this function.
    let library = unsafe { libloading::Library::new(path) }
        .map_err(|e| Refusal::NotLoadable(error_chain(&e)))?;
    let mut symbol = MANIFEST_SYMBOL.as_bytes().to_vec();
    symbol.push(0);
    // SAFETY: the symbol is only read through `PluginManifest::read`, which checks the magic
    // before interpreting anything else.
    let mut info = unsafe {
        let manifest: libloading::Symbol<'_, *const PluginManifest> = library
            .get(symbol.as_slice())
            .map_err(|_| Refusal::NoManifest)?;
        PluginManifest::read(*manifest).map_err(Refusal::BadManifest)?
    };
    // SAFETY: as for the manifest: `KindsTable::read` checks the magic first. Only the
    // listing is kept; the entry points die with the handle.
    if let Some(table) = unsafe { kinds_table(&library) } {
        let (kinds, _) = unsafe { KindsTable::read(table) }.map_err(Refusal::BadManifest)?;
        info.evaluators = kinds.evaluators;
        info.executors = kinds.executors;
    }
    drop(library);
    Ok(info)
}

/// The address of `library`'s kinds table ([`KINDS_SYMBOL`]), if it exports one.
///
/// # Safety
/// The address is only valid while `library` is loaded.
pub(super) unsafe fn kinds_table(library: &libloading::Library) -> Option<*const KindsTable> {
    let mut symbol = KINDS_SYMBOL.as_bytes().to_vec();
    symbol.push(0);
    // SAFETY: the symbol is only read through `KindsTable::read`.
    unsafe {
        library
            .get::<*const KindsTable>(symbol.as_slice())
            .ok()
            .map(|s| *s)
    }
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
    if info.modes.is_empty() && info.evaluators.is_empty() && info.executors.is_empty() {
        return Err(Refusal::NoModes);
    }
    // Evaluators and executors have ids of their own (built-in mode names are not reserved
    // for them).
    for (kind, listed) in [
        ("evaluator", &info.evaluators),
        ("executor", &info.executors),
    ] {
        for (i, (id, _)) in listed.iter().enumerate() {
            if id.is_empty() || id.chars().any(char::is_whitespace) {
                return Err(Refusal::InvalidKindId {
                    kind,
                    id: id.clone(),
                });
            }
            if listed[..i].iter().any(|(other, _)| other == id) {
                return Err(Refusal::DuplicateKindInFile {
                    kind,
                    id: id.clone(),
                });
            }
        }
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
            evaluators: Vec::new(),
            executors: Vec::new(),
        }
    }

    fn listed(ids: &[&str]) -> Vec<(String, String)> {
        ids.iter()
            .map(|id| (id.to_string(), "d".to_string()))
            .collect()
    }

    #[test]
    fn evaluators_and_executors_are_checked_per_kind_and_not_reserved() {
        // Only an executor: a plugin like any other.
        let mut only = manifest(&[]);
        only.executors = listed(&["freeze"]);
        assert_eq!(check_manifest(&only), Ok(()));
        // A built-in mode name is reserved for modes only; an evaluator may share a mode's id.
        let mut shared = manifest(&["a"]);
        shared.evaluators = listed(&["balanced", "a"]);
        assert_eq!(check_manifest(&shared), Ok(()));
        let mut twice = manifest(&["a"]);
        twice.executors = listed(&["x", "x"]);
        let err = check_manifest(&twice).unwrap_err();
        assert_eq!(
            err.to_string(),
            "exports executor `x` twice; rename one of them"
        );
        let mut blank = manifest(&["a"]);
        blank.evaluators = listed(&["a b"]);
        let err = check_manifest(&blank).unwrap_err();
        assert!(err.to_string().starts_with("evaluator id \"a b\""), "{err}");
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
    /// A minimal header of this host's kind: ELF64 little-endian x86-64 shared library with one
    /// program header right after the header.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    fn elf_header() -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2; // 64-bit
        h[5] = 1; // little-endian
        h[6] = 1; // version
        h[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
        h[18..20].copy_from_slice(&62u16.to_le_bytes()); // x86-64
        h[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        h[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        h[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
        h
    }

    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[test]
    fn library_headers_are_checked_before_anything_is_loaded() {
        let h = elf_header();
        assert_eq!(check_library_header(&h, 120), Ok(()));
        let refused = |header: &[u8], len: u64, why: &str| {
            let err = check_library_header(header, len).unwrap_err();
            assert!(matches!(err, Refusal::NotLoadable(_)), "{err}");
            assert!(err.to_string().contains(why), "{err} lacks {why}");
        };
        refused(b"", 0, "ELF magic");
        refused(b"just text\n", 10, "ELF magic");
        refused(&h[..40], 40, "truncated ELF header");
        let with = |at: usize, bytes: &[u8]| {
            let mut h = elf_header();
            h[at..at + bytes.len()].copy_from_slice(bytes);
            h
        };
        refused(&with(4, &[1]), 120, "ELF class 1");
        refused(&with(5, &[2]), 120, "byte order");
        refused(&with(6, &[0]), 120, "ELF version");
        refused(&with(16, &2u16.to_le_bytes()), 120, "not a shared library");
        refused(&with(18, &183u16.to_le_bytes()), 120, "ELF machine 183");
        refused(&with(56, &0u16.to_le_bytes()), 120, "0 program headers");
        refused(&with(54, &32u16.to_le_bytes()), 120, "of 32 bytes");
        // The program headers end at 64 + 56 = 120.
        refused(&h, 119, "beyond its 119 bytes");
        // An offset near u64::MAX must not wrap around into the file.
        refused(&with(32, &u64::MAX.to_le_bytes()), 120, "beyond");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn precheck_refuses_a_text_file_without_loading_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.so");
        fs::write(&file, b"just text\n").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        let err = precheck(&file).unwrap_err();
        assert!(
            err.to_string().contains("not a loadable shared library"),
            "{err}"
        );
        assert!(err.to_string().contains("ELF magic"), "{err}");
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
