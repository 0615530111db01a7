//! Files of the TLS tests: a secret or key written with its mode in one step (the
//! certificates themselves come from `flowscale_tests::certs::TestCa`).

use std::path::Path;

/// Writes `text` to `path` with `mode`, by a rename over it, as a rotation would.
pub(crate) fn write(path: &Path, text: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    // Written beside and renamed over, as a rotation would: never a half-written file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).expect("chmod");
    std::fs::rename(&tmp, path).expect("rename");
}
