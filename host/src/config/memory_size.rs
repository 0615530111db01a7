//! Flink's memory size syntax (`MemorySize.parse`): `1536m`, `16 gb`, `4 gibibytes`, `1024`
//! (a plain number is bytes). Every unit is binary (`1k` is 1024 bytes), as in Flink.

use super::duration::number_and_unit;

/// Why a text is not a memory size. Each message quotes the text and says what would be valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MemorySizeError {
    /// No number at the start (empty, negative, a fraction, ...).
    #[error(
        "`{0}` is not a memory size (expected a whole number with an optional unit, e.g. 1536m, 16 gb; a plain number is bytes)"
    )]
    NotASize(String),
    /// A unit Flink does not know.
    #[error(
        "`{text}`: unknown memory unit `{unit}` (valid: b, k/kb, m/mb, g/gb, t/tb and their long forms bytes, kibibytes, mebibytes, gibibytes, tebibytes)"
    )]
    UnknownUnit {
        /// The whole text.
        text: String,
        /// The unit as written, lower-cased.
        unit: String,
    },
    /// More bytes than 64 bits hold (Flink's numeric overflow).
    #[error("`{0}`: the size is too large (more than 2^63 - 1 bytes)")]
    TooLarge(String),
}

/// Parses a memory size the way Flink's `MemorySize.parseBytes` does: leading digits, optional
/// whitespace, an optional case-insensitive unit; the result in bytes.
///
/// Units: `b`/`bytes`, `k`/`kb`/`kibibytes`, `m`/`mb`/`mebibytes`, `g`/`gb`/`gibibytes`,
/// `t`/`tb`/`tebibytes`, each a power of 1024.
pub(crate) fn parse_memory_size(text: &str) -> Result<u64, MemorySizeError> {
    let (number, unit) =
        number_and_unit(text).ok_or_else(|| MemorySizeError::NotASize(text.to_string()))?;
    // Flink reads the number as a Java long: at most 2^63 - 1.
    let value: i64 = number
        .parse()
        .map_err(|_| MemorySizeError::TooLarge(text.to_string()))?;
    let shift = match unit.as_str() {
        "" | "b" | "bytes" => 0,
        "k" | "kb" | "kibibytes" => 10,
        "m" | "mb" | "mebibytes" => 20,
        "g" | "gb" | "gibibytes" => 30,
        "t" | "tb" | "tebibytes" => 40,
        _ => {
            return Err(MemorySizeError::UnknownUnit {
                text: text.to_string(),
                unit,
            });
        }
    };
    let bytes = value
        .checked_mul(1_i64 << shift)
        .ok_or_else(|| MemorySizeError::TooLarge(text.to_string()))?;
    // Non-negative: only digits were read.
    u64::try_from(bytes).map_err(|_| MemorySizeError::TooLarge(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_binary_and_case_insensitive() {
        const GIB: u64 = 1024 * 1024 * 1024;
        assert_eq!(parse_memory_size("1024"), Ok(1024));
        assert_eq!(parse_memory_size("12b"), Ok(12));
        assert_eq!(parse_memory_size(" 3 bytes "), Ok(3));
        assert_eq!(parse_memory_size("2k"), Ok(2048));
        assert_eq!(parse_memory_size("2 KB"), Ok(2048));
        assert_eq!(parse_memory_size("1 kibibytes"), Ok(1024));
        // 1536 · 2^20 = 1 610 612 736: the process size Flink reports for `1536m`.
        assert_eq!(parse_memory_size("1536m"), Ok(1_610_612_736));
        assert_eq!(parse_memory_size("1 mebibytes"), Ok(1 << 20));
        assert_eq!(parse_memory_size("16 gb"), Ok(16 * GIB));
        assert_eq!(parse_memory_size("16G"), Ok(16 * GIB));
        assert_eq!(parse_memory_size("2 gibibytes"), Ok(2 * GIB));
        assert_eq!(parse_memory_size("1t"), Ok(1024 * GIB));
        assert_eq!(parse_memory_size("1 TB"), Ok(1024 * GIB));
        assert_eq!(parse_memory_size("0"), Ok(0));
    }

    #[test]
    fn bad_sizes_say_what_is_valid() {
        for bad in ["", "  ", "gb", "-1g", "1.5g"] {
            let e = parse_memory_size(bad).unwrap_err();
            // "1.5g": the digits `1` and the unit `.5g`.
            let msg = e.to_string();
            assert!(
                msg.contains("not a memory size") || msg.contains("unknown memory unit"),
                "{bad}: {msg}"
            );
        }
        let e = parse_memory_size("16 GiB").unwrap_err();
        assert_eq!(
            e,
            MemorySizeError::UnknownUnit {
                text: "16 GiB".into(),
                unit: "gib".into()
            }
        );
        assert!(e.to_string().contains("gibibytes"), "{e}");
        // 2^63 - 1 bytes is the largest; 2^53 · 2^10 overflows; 20 digits overflow the number.
        assert_eq!(
            parse_memory_size("9223372036854775807"),
            Ok(9_223_372_036_854_775_807)
        );
        assert!(matches!(
            parse_memory_size("9007199254740992k"),
            Err(MemorySizeError::TooLarge(_))
        ));
        assert!(matches!(
            parse_memory_size("99999999999999999999"),
            Err(MemorySizeError::TooLarge(_))
        ));
    }
}
