//! How the commands print a JSON document (`--json`): pretty-printed and ended by a newline, so
//! that a script reading stdout line by line sees where it ends.

use std::io::{self, Write};

use serde::Serialize;

/// Writes `value` as pretty-printed JSON followed by a newline.
pub(super) fn write_json(
    out: &mut (impl Write + ?Sized),
    value: &impl Serialize,
) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value).map_err(io::Error::from)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_is_pretty_printed_and_ends_with_a_newline() {
        let mut out = Vec::new();
        write_json(&mut out, &serde_json::json!({"a": [1]})).expect("written");
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            "{\n  \"a\": [\n    1\n  ]\n}\n"
        );
    }
}
