//! Reading a trace: the `seconds,rate` lines a `trace` rate component replays.

/// Parses a `seconds,rate` CSV; errors carry the 1-based line.
pub(super) fn parse_trace(text: &str) -> Result<Vec<(f64, f64)>, (usize, String)> {
    let mut points: Vec<(f64, f64)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut cols = line.split(',').map(str::trim);
        let (Some(a), Some(b)) = (cols.next(), cols.next()) else {
            return Err((n + 1, format!("`{line}` has fewer than two columns")));
        };
        let (Ok(t), Ok(r)) = (a.parse::<f64>(), b.parse::<f64>()) else {
            if points.is_empty() && n == 0 {
                continue; // a header
            }
            return Err((n + 1, format!("`{line}` is not two numbers")));
        };
        if !t.is_finite()
            || !r.is_finite()
            || r < 0.0
            || points.last().is_some_and(|(pt, _)| *pt > t)
        {
            return Err((n + 1, format!("`{line}` is out of order or negative")));
        }
        points.push((t, r));
    }
    if points.is_empty() {
        return Err((1, "the trace has no points".to_string()));
    }
    Ok(points)
}
