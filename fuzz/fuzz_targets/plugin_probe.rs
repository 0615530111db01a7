//! A candidate file of the plugins directory: the bytes are written to `candidate.so` (mode 0644
//! in a private directory) and put through `plugins::precheck_file`, every check discovery
//! makes before it `dlopen`s a file.
//!
//! The target never `dlopen`s: the dynamic loader trusts what it maps (a malformed file can crash
//! it, a well-formed one runs its constructors), so fuzzing past the pre-checks would test
//! ld.so, or run fuzzer-made code, rather than flowscale. Discovery only reaches `dlopen` for
//! files these checks accept.
//!
//! Never panics; garbage is refused: an accepted file starts with an ELF header of type ET_DYN.

#![warn(missing_docs, unreachable_pub)]
#![no_main]

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::OnceLock;

use flowscale::plugins::precheck_file;
use libfuzzer_sys::fuzz_target;

fn candidate() -> &'static PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir").keep();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        dir.join("candidate.so")
    })
}

fuzz_target!(|data: &[u8]| {
    let file = candidate();
    std::fs::write(file, data).expect("write the candidate");
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    match precheck_file(file) {
        Ok(()) => {
            assert!(
                data.starts_with(b"\x7fELF"),
                "accepted a file without the ELF magic"
            );
            assert!(data.len() >= 64, "accepted a truncated header");
            assert_eq!(
                data[16..18],
                [3, 0],
                "accepted an ELF file that is not ET_DYN"
            );
        }
        Err(refusal) => assert!(!refusal.to_string().is_empty()),
    }
});
