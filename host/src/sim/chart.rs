//! The pieces of a hand-written SVG chart that every chart of the project draws the same way:
//! the series colours, the rounded top of an axis and the short labels of its ticks. The
//! simulator's plot and the dashboard's charts share them so the two look alike.

/// Colours of the series, in the order they are given out.
pub(crate) const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// The top of an axis showing values up to `v`: the smallest of 1, 2, 2.5, 5 and 10 times a
/// power of ten that is at least `v`, so the ticks read as round numbers. 1 when `v` is not a
/// positive finite number (an empty or broken series still gets an axis).
pub(crate) fn nice_max(v: f64) -> f64 {
    if v.is_nan() || v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|&m| m >= v)
        .unwrap_or(10.0 * mag)
}

/// A tick label: thousands as `k`, millions as `M`, so labels stay short.
pub(crate) fn fmt_num(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_tops_are_round_and_cover_the_value() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(f64::NAN), 1.0);
        assert_eq!(nice_max(f64::INFINITY), 1.0);
        assert_eq!(nice_max(7.0), 10.0);
        assert_eq!(nice_max(1.5), 2.0);
        assert_eq!(nice_max(2100.0), 2500.0);
        assert_eq!(nice_max(300.0), 500.0);
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(fmt_num(999.0), "999");
        assert_eq!(fmt_num(1500.0), "1.5k");
        assert_eq!(fmt_num(2_500_000.0), "2.5M");
    }
}
