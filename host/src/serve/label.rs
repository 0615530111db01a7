//! Label values in `/metrics`, escaped the one way both text formats want.
//!
//! Job, vertex, mode and host names come from outside: a Flink job's name becomes a flowscale
//! job's name, so whoever submits Flink jobs chooses it. Written raw, a name holding
//! `",evil="1` would close its label value and add a label of its own, and a line feed or a lone
//! `"` would make the whole scrape unreadable. Every label value the host exposes goes through
//! [`escape`]: the per-vertex gauges' precomputed label text ([`super::series`]) directly, the
//! client's families through [`LabelValue`], since `prometheus-client` writes the values of its
//! label sets as they are.

use std::fmt::{self, Write};

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

/// Writes `value` into `out` as the inside of a quoted label value: `\` as `\\`, `"` as `\"`
/// and a line feed as `\n`, the three escapes of the Prometheus text format 0.0.4 and of
/// OpenMetrics 1.0. Every other character stands for itself in both formats.
pub(super) fn escape(value: &str, out: &mut impl Write) -> fmt::Result {
    let mut rest = value;
    while let Some(at) = rest.find(['\\', '"', '\n']) {
        out.write_str(&rest[..at])?;
        // The three characters found are one byte each.
        out.write_str(match rest.as_bytes()[at] {
            b'\\' => "\\\\",
            b'"' => "\\\"",
            _ => "\\n",
        })?;
        rest = &rest[at + 1..];
    }
    out.write_str(rest)
}

/// A label value of a family encoded by the client, written escaped (see [`escape`]).
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub(crate) struct LabelValue(String);

impl From<&str> for LabelValue {
    fn from(value: &str) -> LabelValue {
        LabelValue(value.to_string())
    }
}

impl EncodeLabelValue for LabelValue {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), fmt::Error> {
        escape(&self.0, encoder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(value: &str) -> String {
        let mut out = String::new();
        escape(value, &mut out).expect("a String takes any text");
        out
    }

    #[test]
    fn backslash_quote_and_line_feed_are_escaped_and_nothing_else() {
        assert_eq!(escaped(""), "");
        assert_eq!(escaped("plain"), "plain");
        assert_eq!(escaped(r#"x",evil="1"#), r#"x\",evil=\"1"#);
        assert_eq!(escaped("a\\b\nc"), r"a\\b\nc");
        // Ends and neighbours: each special character alone, twice, and at either end.
        assert_eq!(escaped("\"\"\\\\\n\n"), r#"\"\"\\\\\n\n"#);
        // A carriage return, a tab, a NUL and non-ASCII text stand for themselves.
        assert_eq!(escaped("\r\t\0é😀}{,="), "\r\t\0é😀}{,=");
    }
}
