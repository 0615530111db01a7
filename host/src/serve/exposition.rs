//! The lines of the text formats that every family writer shares: a family's `# HELP` and
//! `# TYPE`, a sample line, and a sample's value, each the same in the Prometheus text format
//! and OpenMetrics but for a counter's name.

use std::fmt::Write as _;

/// `# HELP` and `# TYPE` of a gauge or counter family; a counter's name takes `_total` in the
/// Prometheus format (not `openmetrics`).
pub(super) fn header(out: &mut String, name: &str, help: &str, counter: bool, openmetrics: bool) {
    let suffix = if counter && !openmetrics {
        "_total"
    } else {
        ""
    };
    for (line, tail) in [("# HELP ", help), ("# TYPE ", "")] {
        out.push_str(line);
        out.push_str(name);
        out.push_str(suffix);
        out.push(' ');
        if tail.is_empty() {
            out.push_str(if counter { "counter" } else { "gauge" });
        } else {
            out.push_str(tail);
            out.push('.');
        }
        out.push('\n');
    }
}

/// The type of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Gauge,
    Counter,
    Histogram,
}

/// `# HELP` and `# TYPE` of a family of any [`Kind`]; a counter's name takes `_total` in the
/// Prometheus format (not `openmetrics`).
pub(super) fn family_header(
    out: &mut String,
    name: &str,
    help: &str,
    kind: Kind,
    openmetrics: bool,
) {
    if kind != Kind::Histogram {
        return header(out, name, help, kind == Kind::Counter, openmetrics);
    }
    for (line, tail) in [("# HELP ", help), ("# TYPE ", "")] {
        out.push_str(line);
        out.push_str(name);
        out.push(' ');
        if tail.is_empty() {
            out.push_str("histogram");
        } else {
            out.push_str(tail);
            out.push('.');
        }
        out.push('\n');
    }
}

/// Appends a sample value as both formats write it: `+Inf`, `-Inf`, `NaN`, or the shortest
/// decimal that reads back as `value` (what the client writes, through the same `dtoa`).
pub(super) fn push_f64(out: &mut String, value: f64) {
    if value.is_nan() {
        out.push_str("NaN");
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 { "+Inf" } else { "-Inf" });
    } else {
        out.push_str(dtoa::Buffer::new().format_finite(value));
    }
}

/// One sample line of a floating-point value: `name{labels} value`.
pub(super) fn sample_f64(out: &mut String, name: &str, labels: &str, value: f64) {
    out.push_str(name);
    out.push('{');
    out.push_str(labels);
    out.push_str("} ");
    push_f64(out, value);
    out.push('\n');
}

/// One sample line: `name{labels} value`.
pub(super) fn sample(out: &mut String, name: &str, labels: &str, value: impl std::fmt::Display) {
    out.push_str(name);
    out.push('{');
    out.push_str(labels);
    out.push_str("} ");
    // Writing into a String cannot fail.
    let _ = write!(out, "{value}");
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_written_as_both_formats_read_them() {
        for (value, text) in [
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (f64::NAN, "NaN"),
            (0.0, "0.0"),
            (3.0, "3.0"),
            (0.001, "0.001"),
            (1e21, "1e21"),
        ] {
            let mut out = String::new();
            push_f64(&mut out, value);
            assert_eq!(out, text);
        }
    }
}
