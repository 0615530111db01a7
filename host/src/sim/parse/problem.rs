//! Locating a problem in a job file: the file, line and column, the key at fault, and what
//! would be valid, in the words of someone editing the file.

use std::ops::Range;

use crate::sim::error::{JobFileProblem, SimError};

/// Where errors point: the file name and its text.
pub(super) struct Ctx<'a> {
    pub(super) file: &'a str,
    pub(super) src: &'a str,
}

impl Ctx<'_> {
    /// The problem at `span` of the job file.
    pub(super) fn problem(
        &self,
        span: Range<usize>,
        key: &str,
        message: &str,
        valid: &str,
    ) -> SimError {
        let (line, column) = line_col(self.src, span.start);
        SimError::Invalid(Box::new(JobFileProblem {
            file: self.file.to_string(),
            line,
            column,
            key: key.to_string(),
            message: message.to_string(),
            valid: valid.to_string(),
        }))
    }

    /// Turns a TOML/serde error into a located problem; the key is read from the line the error
    /// points at, since the parser's key path is not public.
    pub(super) fn toml_problem(&self, e: &toml::de::Error) -> SimError {
        let span = e.span().unwrap_or(0..0);
        let line_text = self.src[..span.start.min(self.src.len())]
            .rsplit('\n')
            .next()
            .unwrap_or("")
            .to_string()
            + self.src[span.start.min(self.src.len())..]
                .split('\n')
                .next()
                .unwrap_or("");
        let mut key = match line_text.split_once('=') {
            Some((k, _)) => k.trim().to_string(),
            None => line_text.trim().to_string(),
        };
        let message = e.message().trim().to_string();
        let (message, valid) = match message.split_once(", expected ") {
            Some((m, v)) => (m.to_string(), readable_type(v)),
            None => (
                message,
                "see the job files in examples/jobs/ and the `flowscale::sim` docs".to_string(),
            ),
        };
        // A missing field points at its table's header: name the field under that table.
        if let Some(field) = message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.strip_suffix('`'))
        {
            let table = key.trim_matches(|c| c == '[' || c == ']').trim();
            key = if table.is_empty() || line_text.contains('=') {
                field.to_string()
            } else {
                format!("{table}.{field}")
            };
        }
        self.problem(span, &key, &message, &valid)
    }
}

/// serde's names for expected types, as a reader of a TOML file would say them.
fn readable_type(expected: &str) -> String {
    match expected {
        "i64" | "u64" | "u32" | "i32" => "an integer".to_string(),
        "f64" => "a number".to_string(),
        "a string" | "string" => "a string".to_string(),
        "a boolean" | "bool" => "true or false".to_string(),
        other => other.to_string(),
    }
}

/// 1-based line and column of a byte offset.
fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let before = &src[..offset.min(src.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}
