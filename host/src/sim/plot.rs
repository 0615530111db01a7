//! An SVG chart of runs: the load (and what each mode read) over time, then one panel per vertex
//! with its parallelism over time, one line per mode.
//!
//! Written by hand: a chart of polylines, axes and a legend is a few dozen lines of SVG, and a
//! plotting crate would cost more compile time than the whole simulator.

use std::fmt::Write as _;
use std::path::Path;

use super::chart::{COLORS, fmt_num, nice_max};
use super::error::SimError;
use super::timeline::Timeline;

const WIDTH: f64 = 960.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const LOAD_HEIGHT: f64 = 200.0;
const PANEL_HEIGHT: f64 = 110.0;
const GAP: f64 = 52.0;
const MAX_POINTS: usize = 1200;
const MAX_PANELS: usize = 8;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn fmt_time(s: f64, span: f64) -> String {
    if span >= 2.0 * 86_400.0 {
        format!("{:.1}d", s / 86_400.0)
    } else if span >= 3.0 * 3600.0 {
        format!("{:.1}h", s / 3600.0)
    } else if span >= 180.0 {
        format!("{:.0}m", s / 60.0)
    } else {
        format!("{s:.0}s")
    }
}

struct Panel {
    top: f64,
    height: f64,
    y_max: f64,
    t_max: f64,
}

impl Panel {
    fn x(&self, t: f64) -> f64 {
        LEFT + (WIDTH - LEFT - RIGHT) * t / self.t_max
    }
    fn y(&self, v: f64) -> f64 {
        self.top + self.height - self.height * (v / self.y_max).min(1.05)
    }

    fn frame(&self, out: &mut String, title: &str, integer: bool) {
        let _ = writeln!(
            out,
            r##"<text x="{LEFT}" y="{:.1}" font-size="13" font-weight="bold">{}</text>"##,
            self.top - 8.0,
            escape(title)
        );
        let _ = writeln!(
            out,
            r##"<rect x="{LEFT}" y="{:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#999"/>"##,
            self.top,
            WIDTH - LEFT - RIGHT,
            self.height
        );
        for k in 0..=2 {
            let v = self.y_max * k as f64 / 2.0;
            let y = self.y(v);
            let label = if integer {
                format!("{v:.0}")
            } else {
                fmt_num(v)
            };
            let _ = writeln!(
                out,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{label}</text>"##,
                WIDTH - RIGHT,
                LEFT - 6.0,
                y + 4.0
            );
        }
        for k in 0..=6 {
            let t = self.t_max * k as f64 / 6.0;
            let x = self.x(t);
            let _ = writeln!(
                out,
                r##"<text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"##,
                self.top + self.height + 14.0,
                fmt_time(t, self.t_max)
            );
        }
    }

    fn line(&self, out: &mut String, points: &[(f64, f64)], color: &str, dash: bool, step: bool) {
        let mut d = String::new();
        let mut last_y: Option<f64> = None;
        for (t, v) in points {
            let (x, y) = (self.x(*t), self.y(*v));
            match last_y {
                None => {
                    let _ = write!(d, "M{x:.1},{y:.1}");
                }
                Some(ly) if step => {
                    let _ = write!(d, " L{x:.1},{ly:.1} L{x:.1},{y:.1}");
                }
                Some(_) => {
                    let _ = write!(d, " L{x:.1},{y:.1}");
                }
            }
            last_y = Some(y);
        }
        let dash = if dash {
            r#" stroke-dasharray="5,3""#
        } else {
            ""
        };
        let _ = writeln!(
            out,
            r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.6"{dash}/>"#
        );
    }
}

/// Picks at most `MAX_POINTS` of `n` row indices, evenly, keeping the last.
fn sample(n: usize) -> Vec<usize> {
    if n <= MAX_POINTS {
        return (0..n).collect();
    }
    let mut idx: Vec<usize> = (0..MAX_POINTS).map(|k| k * n / MAX_POINTS).collect();
    idx.push(n - 1);
    idx
}

/// The chart as SVG text.
pub(crate) fn render_svg(runs: &[(String, Timeline)]) -> String {
    let t_max = runs
        .iter()
        .filter_map(|(_, t)| t.rows.last().map(|r| (r.t_ms + t.tick_ms) as f64 / 1000.0))
        .fold(1.0, f64::max);
    let vertex_ids: Vec<String> = runs
        .first()
        .map(|(_, t)| t.vertex_ids.clone())
        .unwrap_or_default();
    let panels = panel_vertices(runs, vertex_ids.len());

    let legend_height = 22.0;
    let height = 40.0
        + legend_height
        + LOAD_HEIGHT
        + GAP
        + panels.len() as f64 * (PANEL_HEIGHT + GAP)
        + 10.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="sans-serif">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let job = runs.first().map(|(_, t)| t.job.clone()).unwrap_or_default();
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="22" font-size="16" font-weight="bold">{}</text>"#,
        escape(&format!("{job}: load and parallelism over time"))
    );
    legend(&mut out, runs);

    let top = 40.0 + legend_height + 20.0;
    load_panel(&mut out, runs, top, t_max);
    for (n, &v) in panels.iter().enumerate() {
        let ptop = top + LOAD_HEIGHT + GAP + n as f64 * (PANEL_HEIGHT + GAP);
        parallelism_panel(&mut out, runs, v, &vertex_ids[v], ptop, t_max);
    }
    out.push_str("</svg>\n");
    out
}

/// The vertices that get a parallelism panel, in index order: those whose parallelism moves in
/// some run first, then the others, up to `MAX_PANELS`.
fn panel_vertices(runs: &[(String, Timeline)], vertices: usize) -> Vec<usize> {
    let mut panels: Vec<usize> = (0..vertices).collect();
    let moves = |v: usize| {
        runs.iter().any(|(_, t)| {
            t.rows.windows(2).any(|w| {
                w[0].vertices.get(v).map(|x| x.parallelism)
                    != w[1].vertices.get(v).map(|x| x.parallelism)
            })
        })
    };
    panels.sort_by_key(|&v| (!moves(v), v));
    panels.truncate(MAX_PANELS);
    panels.sort_unstable();
    panels
}

/// The legend line: the load, then one colour per mode.
fn legend(out: &mut String, runs: &[(String, Timeline)]) {
    let mut x = LEFT;
    let ly = 44.0;
    let _ = writeln!(
        out,
        r##"<line x1="{x}" y1="{ly}" x2="{:.0}" y2="{ly}" stroke="#000" stroke-width="2"/><text x="{:.0}" y="{:.0}" font-size="12">load (arrivals/s)</text>"##,
        x + 24.0,
        x + 30.0,
        ly + 4.0
    );
    x += 150.0;
    for (i, (mode, _)) in runs.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let _ = writeln!(
            out,
            r#"<line x1="{x}" y1="{ly}" x2="{:.0}" y2="{ly}" stroke="{c}" stroke-width="2"/><text x="{:.0}" y="{:.0}" font-size="12">{}</text>"#,
            x + 24.0,
            x + 30.0,
            ly + 4.0,
            escape(mode)
        );
        x += 40.0 + 7.5 * mode.len() as f64;
    }
}

/// The load panel at `top`: the first run's load, and what each mode read.
fn load_panel(out: &mut String, runs: &[(String, Timeline)], top: f64, t_max: f64) {
    let load_max = runs
        .iter()
        .flat_map(|(_, t)| t.rows.iter().map(|r| r.source_rate.max(r.read_per_s)))
        .fold(0.0, f64::max);
    let load = Panel {
        top,
        height: LOAD_HEIGHT,
        y_max: nice_max(load_max),
        t_max,
    };
    load.frame(
        out,
        "load (black) and records read per second (dashed, per mode)",
        false,
    );
    if let Some((_, t)) = runs.first() {
        let pts: Vec<(f64, f64)> = sample(t.rows.len())
            .into_iter()
            .map(|i| (t.rows[i].t_ms as f64 / 1000.0, t.rows[i].source_rate))
            .collect();
        load.line(out, &pts, "#000", false, false);
    }
    for (i, (_, t)) in runs.iter().enumerate() {
        let pts: Vec<(f64, f64)> = sample(t.rows.len())
            .into_iter()
            .map(|k| (t.rows[k].t_ms as f64 / 1000.0, t.rows[k].read_per_s))
            .collect();
        load.line(out, &pts, COLORS[i % COLORS.len()], true, false);
    }
}

/// The parallelism panel of vertex `v` (named `id`) at `top`, one step line per mode.
fn parallelism_panel(
    out: &mut String,
    runs: &[(String, Timeline)],
    v: usize,
    id: &str,
    top: f64,
    t_max: f64,
) {
    let p_max = runs
        .iter()
        .flat_map(|(_, t)| {
            t.rows
                .iter()
                .filter_map(|r| r.vertices.get(v).map(|x| f64::from(x.parallelism)))
        })
        .fold(1.0, f64::max);
    // Headroom above the highest value, rounded so that the middle tick is an integer.
    let step = if p_max * 1.1 > 20.0 { 10.0 } else { 2.0 };
    let y_max = (p_max * 1.1 / step).ceil() * step;
    let panel = Panel {
        top,
        height: PANEL_HEIGHT,
        y_max,
        t_max,
    };
    panel.frame(out, &format!("parallelism of {id}"), true);
    for (i, (_, t)) in runs.iter().enumerate() {
        let pts: Vec<(f64, f64)> = sample(t.rows.len())
            .into_iter()
            .filter_map(|k| {
                t.rows[k]
                    .vertices
                    .get(v)
                    .map(|x| (t.rows[k].t_ms as f64 / 1000.0, f64::from(x.parallelism)))
            })
            .collect();
        // Nudge each mode by a pixel or two so equal parallelisms do not hide each other.
        let nudge = 1.5 * i as f64 * panel.y_max / PANEL_HEIGHT;
        let pts: Vec<(f64, f64)> = pts.into_iter().map(|(t, p)| (t, p - nudge)).collect();
        panel.line(out, &pts, COLORS[i % COLORS.len()], false, true);
    }
}

/// Writes the chart of `runs` (mode name, timeline) to `path`.
pub(crate) fn plot_svg(runs: &[(String, Timeline)], path: &Path) -> Result<(), SimError> {
    std::fs::write(path, render_svg(runs)).map_err(|source| SimError::Write {
        path: path.to_path_buf(),
        source,
    })
}
