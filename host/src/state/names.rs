//! How a job's name maps to the name of its state file, and back where that can be told.

/// File names stay well below the usual 255-byte limit; longer encodings are shortened and made
/// unique with a hash of the full name.
pub(super) const MAX_STEM: usize = 160;

/// A file-name-safe, unique encoding of a job name: ASCII letters, digits, `-` and `_` are
/// kept, every other byte becomes `%XX` (so `.`, `/` and `%` itself can never escape the
/// directory or collide); the empty name is `%`. Overlong encodings are cut and suffixed with
/// a hash of the whole name.
pub(super) fn file_stem(job: &str) -> String {
    if job.is_empty() {
        return "%".to_string();
    }
    let mut stem = String::with_capacity(job.len());
    for byte in job.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' {
            stem.push(char::from(byte));
        } else {
            stem.push_str(&format!("%{byte:02X}"));
        }
    }
    if stem.len() > MAX_STEM {
        // FNV-1a: stable across builds and platforms, unlike std's `DefaultHasher`.
        let hash = job.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        stem.truncate(MAX_STEM - 17);
        // `%XX` sequences may be cut; the hash keeps the name unique.
        stem.push_str(&format!("~{hash:016x}"));
    }
    stem
}

/// The job whose file name `stem` is, when `stem` is exactly [`file_stem`] of some name. A file
/// whose content cannot be read still says which job it belongs to this way; shortened names
/// (with a hash) and names [`file_stem`] never produces tell nothing.
pub(super) fn job_of_stem(stem: &str) -> Option<String> {
    if stem == "%" {
        return Some(String::new());
    }
    let mut bytes = Vec::with_capacity(stem.len());
    let mut rest = stem.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        if first == b'%' {
            let hex = tail.get(..2)?;
            let text = std::str::from_utf8(hex).ok()?;
            bytes.push(u8::from_str_radix(text, 16).ok()?);
            rest = &tail[2..];
        } else if first.is_ascii_alphanumeric() || first == b'-' || first == b'_' {
            bytes.push(first);
            rest = tail;
        } else {
            return None;
        }
    }
    let job = String::from_utf8(bytes).ok()?;
    // Only the canonical encoding names a job (`%41` is not how `A` is written).
    (file_stem(&job) == stem).then_some(job)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_stems_are_safe_and_unique() {
        assert_eq!(file_stem("orders-v2_x"), "orders-v2_x");
        assert_eq!(file_stem("a/b"), "a%2Fb");
        assert_eq!(file_stem(".."), "%2E%2E");
        assert_eq!(file_stem("%2F"), "%252F");
        assert_eq!(file_stem(""), "%");
        let long_a = "x".repeat(300) + "a";
        let long_b = "x".repeat(300) + "b";
        assert!(file_stem(&long_a).len() <= MAX_STEM);
        assert_ne!(file_stem(&long_a), file_stem(&long_b));
    }

    #[test]
    fn stems_decode_back_to_their_job_only_when_canonical() {
        for job in ["orders", "a/b", "..", "%2F", "", "clicks/eu.1", "zürich"] {
            assert_eq!(job_of_stem(&file_stem(job)).as_deref(), Some(job), "{job}");
        }
        let long = "x".repeat(300);
        assert_eq!(job_of_stem(&file_stem(&long)), None);
        for stem in ["orders.backup", "%41", "%4", "%zz", "a%FF"] {
            assert_eq!(job_of_stem(stem), None, "{stem}");
        }
    }
}
