//! The dashboard: the fleet, a page per job with its chart, decisions and events, and the
//! plugins. Rendered on the server (HTML and SVG, no script, nothing fetched from elsewhere);
//! each page reloads itself every few seconds.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

use super::shared::AppState;
use super::view::{CustomView, JobDetail, JobSummary, OwnerView, Point};
use crate::plugins::{PluginListing, PluginStatus};
use crate::sim::chart::{COLORS, fmt_num, nice_max};

/// Seconds between two reloads of a page.
pub(super) const REFRESH_SECONDS: u32 = 3;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#fafafa}\
header{background:#263238;color:#fff;padding:10px 20px}header a{color:#fff;margin-right:18px;text-decoration:none}\
main{padding:16px 20px}table{border-collapse:collapse;background:#fff;margin-bottom:18px}\
th,td{border:1px solid #ddd;padding:5px 9px;text-align:left;vertical-align:top;font-size:14px}\
th{background:#eceff1}.warn{color:#b71c1c}.ok{color:#1b5e20}.muted{color:#777}\
ul{margin:2px 0;padding-left:18px}h2{margin-top:22px}code{font-size:13px}";

/// The dashboard's routes.
pub(super) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/", get(fleet))
        .route("/jobs/{job}", get(job))
        .route("/plugins", get(plugins))
}

/// `s` with HTML's special characters escaped.
pub(super) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A path segment with everything but unreserved characters percent-encoded.
fn encode_segment(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Engine time as `HH:MM:SS` (days first when there are any).
fn time(ms: i64) -> String {
    let s = ms.div_euclid(1000);
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d {h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <title>{} - flowscale</title><style>{STYLE}</style></head><body>\
         <header><a href=\"/\"><b>flowscale</b></a><a href=\"/\">Fleet</a><a href=\"/plugins\">Plugins</a>\
         <a href=\"/api/v1/openapi.json\">API</a><a href=\"/metrics\">Metrics</a></header>\
         <main>{body}</main></body></html>",
        escape(title)
    ))
}

async fn fleet(State(state): State<Arc<AppState>>) -> Html<String> {
    let jobs = state.view.jobs();
    let mut body = String::from("<h1>Fleet</h1>");
    let _ = write!(
        body,
        "<table id=\"fleet\"><tr><th>Job</th><th>Engine</th><th>Mode</th><th>Status</th><th>Owner</th>\
         <th>Steps</th><th>Last decision</th></tr>"
    );
    for j in &jobs {
        let decision = j.last_decision.as_ref().map_or_else(
            || "<span class=\"muted\">none yet</span>".to_string(),
            |d| {
                format!(
                    "{} <span class=\"muted\">at {}</span>",
                    escape(&d.text),
                    time(d.at_ms)
                )
            },
        );
        let _ = write!(
            body,
            "<tr class=\"job\" data-job=\"{0}\"><td><a href=\"/jobs/{1}\">{0}</a></td><td>{2}</td>\
             <td class=\"mode\">{3}</td><td>{4}</td><td class=\"owner\">{7}</td><td>{5}</td>\
             <td>{6}</td></tr>",
            escape(&j.job),
            encode_segment(&j.job),
            escape(&j.engine),
            escape(&j.mode),
            escape(&status_with_lease(j)),
            j.steps,
            decision,
            owner_text(j.owner.as_ref()),
        );
    }
    body.push_str("</table>");
    if jobs.is_empty() {
        body.push_str("<p class=\"muted\">No jobs yet.</p>");
    }
    page("Fleet", &body)
}

/// The host holding a job's lease, escaped: `-` without shared state or while no host holds it.
fn owner_text(owner: Option<&OwnerView>) -> String {
    match owner {
        Some(o) if o.this_host => format!("{} (this host, token {})", escape(&o.host), o.token),
        Some(o) => format!("{} (token {})", escape(&o.host), o.token),
        None => "<span class=\"muted\">-</span>".to_string(),
    }
}

/// The job's status, and with shared state whether this host holds its lease.
fn status_with_lease(j: &JobSummary) -> String {
    match j.lease {
        Some(lease) if lease.held => format!("{} (lease held, token {})", j.status, lease.token),
        _ => j.status.clone(),
    }
}

async fn job(State(state): State<Arc<AppState>>, Path(name): Path<String>) -> Response {
    let Some(detail) = state.view.job(&name) else {
        return (
            StatusCode::NOT_FOUND,
            page(
                "No such job",
                &format!("<h1>No job `{}`</h1>", escape(&name)),
            ),
        )
            .into_response();
    };
    let events = state.view.events(&name).unwrap_or_default();
    let mut body = String::new();
    let s = &detail;
    let _ = write!(
        body,
        "<h1>{}</h1><p>engine <b>{}</b> · mode <b class=\"mode\">{}</b> · status <b>{}</b> · {} step(s){}{}</p>",
        escape(&s.job),
        escape(&s.engine),
        escape(&s.mode),
        escape(&s.status),
        s.steps,
        s.owner.as_ref().map_or_else(String::new, |o| format!(
            " · owner <b id=\"owner\">{}</b>",
            owner_text(Some(o))
        )),
        if detail.cooldown.active {
            format!(
                " · <span class=\"warn\">in cooldown until {}{}</span>",
                detail.cooldown.until_ms.map(time).unwrap_or_default(),
                if detail.cooldown.queued {
                    ", a decision is queued"
                } else {
                    ""
                }
            )
        } else {
            String::new()
        }
    );
    body.push_str(&custom_section(&detail.custom));
    body.push_str("<h2>Parallelism and load</h2>");
    body.push_str(&chart(&detail));
    body.push_str(
        "<h2>Vertices</h2><table><tr><th>Vertex</th><th>Current</th><th>Target</th><th>Aligned</th></tr>",
    );
    let dash = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
    for v in &detail.vertices {
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&v.name),
            v.current,
            dash(v.target),
            dash(v.aligned)
        );
    }
    body.push_str("</table><h2>Last decision</h2>");
    if detail.last_decision.is_none() {
        body.push_str("<p id=\"last-decision\" class=\"muted\">No decision yet.</p>");
    }
    for (i, d) in detail.decisions.iter().enumerate() {
        if i == 1 {
            body.push_str("<h2>Earlier decisions</h2>");
        }
        let _ = write!(
            body,
            "<div class=\"decision\"{}><p><b>{}</b> — {}</p><table><tr><th>Vertex</th><th>Current</th>\
             <th>Target</th><th>Aligned</th><th>Mode</th><th>Why</th></tr>",
            if i == 0 { " id=\"last-decision\"" } else { "" },
            time(d.at_ms),
            escape(&d.text)
        );
        for v in &d.vertices {
            let mut why = escape(&v.reason);
            if !v.explanation.is_empty() {
                why.push_str("<ul>");
                for line in &v.explanation {
                    let _ = write!(why, "<li>{}</li>", escape(line));
                }
                why.push_str("</ul>");
            }
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&v.name),
                v.current,
                dash(v.target),
                dash(v.aligned),
                escape(v.mode.as_deref().unwrap_or("-")),
                why
            );
        }
        body.push_str("</table></div>");
        if i >= 9 {
            break;
        }
    }
    body.push_str("<h2>Events</h2><table id=\"events\"><tr><th>Time</th><th>Reason</th><th>Vertex</th><th>Message</th></tr>");
    for e in events.iter().take(50) {
        let _ = write!(
            body,
            "<tr><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td></tr>",
            time(e.at_ms),
            if e.severity == "Warning" { "warn" } else { "" },
            escape(&e.reason),
            escape(e.vertex.as_deref().unwrap_or("")),
            escape(&e.message)
        );
    }
    body.push_str("</table>");
    page(&s.job, &body).into_response()
}

/// The job's chart: load on top, one line per vertex's parallelism below, over engine time.
pub(super) fn chart(detail: &JobDetail) -> String {
    const W: f64 = 900.0;
    const LEFT: f64 = 60.0;
    const RIGHT: f64 = 180.0;
    const PANEL: f64 = 150.0;
    const TOP: f64 = 20.0;
    const GAP: f64 = 40.0;
    let points: &[Point] = &detail.series;
    let height = TOP + PANEL + GAP + PANEL + 30.0;
    let mut svg = format!(
        "<svg id=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{height}\" \
         viewBox=\"0 0 {W} {height}\" style=\"background:#fff;border:1px solid #ddd\">"
    );
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        svg.push_str("<text x=\"20\" y=\"40\" fill=\"#777\">no data yet</text></svg>");
        return svg;
    };
    let t0 = first.at_ms as f64;
    let span = (last.at_ms as f64 - t0).max(1.0);
    let plot_w = W - LEFT - RIGHT;
    let x = |at: i64| LEFT + (at as f64 - t0) / span * plot_w;
    let panel = |svg: &mut String, y0: f64, max: f64, label: &str| {
        let _ = write!(
            svg,
            "<rect x=\"{LEFT}\" y=\"{y0}\" width=\"{plot_w}\" height=\"{PANEL}\" fill=\"none\" stroke=\"#ccc\"/>\
             <text x=\"{}\" y=\"{}\" font-size=\"12\">{}</text>\
             <text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text>\
             <text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">0</text>",
            LEFT,
            y0 - 5.0,
            escape(label),
            LEFT - 4.0,
            y0 + 10.0,
            fmt_num(max),
            LEFT - 4.0,
            y0 + PANEL
        );
    };
    let polyline = |svg: &mut String, pts: &[(f64, f64)], color: &str| {
        if pts.is_empty() {
            return;
        }
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.6\" points=\""
        );
        for (px, py) in pts {
            let _ = write!(svg, "{px:.1},{py:.1} ");
        }
        svg.push_str("\"/>");
    };
    // Load.
    let load_max = nice_max(points.iter().filter_map(|p| p.load).fold(0.0, f64::max));
    let y_load = TOP;
    panel(&mut svg, y_load, load_max, "load (records/s)");
    let load_pts: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| {
            p.load
                .map(|l| (x(p.at_ms), y_load + PANEL - l / load_max * PANEL))
        })
        .collect();
    polyline(&mut svg, &load_pts, "#37474f");
    // Parallelism, as steps.
    let y_par = TOP + PANEL + GAP;
    let par_max = nice_max(
        points
            .iter()
            .flat_map(|p| p.parallelism.iter().copied())
            .max()
            .map_or(1.0, f64::from),
    );
    panel(&mut svg, y_par, par_max, "parallelism");
    for (i, vertex) in detail.vertices.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut pts = Vec::with_capacity(points.len() * 2);
        let mut previous: Option<f64> = None;
        for p in points {
            let Some(&value) = p.parallelism.get(i) else {
                continue;
            };
            let py = y_par + PANEL - f64::from(value) / par_max * PANEL;
            let px = x(p.at_ms);
            if let Some(prev) = previous {
                pts.push((px, prev));
            }
            pts.push((px, py));
            previous = Some(py);
        }
        polyline(&mut svg, &pts, color);
        let ly = y_par + 12.0 + 16.0 * i as f64;
        let _ = write!(
            svg,
            "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{color}\"/>\
             <text x=\"{}\" y=\"{}\" font-size=\"11\">{} ({})</text>",
            W - RIGHT + 10.0,
            ly - 9.0,
            W - RIGHT + 24.0,
            ly,
            escape(&truncate(&vertex.name, 22)),
            vertex.current
        );
    }
    let _ = write!(
        svg,
        "<text x=\"{LEFT}\" y=\"{}\" font-size=\"11\">{}</text>\
         <text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text></svg>",
        height - 8.0,
        time(first.at_ms),
        W - RIGHT,
        height - 8.0,
        time(last.at_ms)
    );
    svg
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

async fn plugins(State(state): State<Arc<AppState>>) -> Html<String> {
    page("Plugins", &plugins_body(&state.backend.plugins()))
}

/// The Plugins page: the directory, how many plugin versions the host has loaded, and a row per
/// file with its status, manifest, modes and, when refused, why.
fn plugins_body(listing: &PluginListing) -> String {
    let mut body = String::from("<h1>Plugins</h1>");
    let _ = write!(
        body,
        "<p>Directory <code>{}</code>: {} plugin version(s) loaded, at most {}.</p>",
        escape(&listing.directory.display().to_string()),
        listing.versions_loaded,
        listing.version_limit
    );
    if listing.files.is_empty() {
        body.push_str("<p class=\"muted\">No plugin files in the plugins directory.</p>");
        return body;
    }
    body.push_str(
        "<table id=\"plugins\"><tr><th>File</th><th>Status</th><th>Plugin</th><th>Version</th>\
         <th>SDK</th><th>Modes</th><th>Why refused</th></tr>",
    );
    let or_dash = |v: &Option<String>| escape(v.as_deref().unwrap_or("-"));
    for f in &listing.files {
        let loaded = f.status == PluginStatus::Loaded;
        let kinds = [
            ("", &f.modes),
            ("evaluator ", &f.evaluators),
            ("executor ", &f.executors),
        ];
        let modes: Vec<String> = kinds
            .iter()
            .flat_map(|(kind, list)| {
                list.iter().map(move |m| {
                    format!("{kind}<b>{}</b>: {}", escape(&m.id), escape(&m.description))
                })
            })
            .collect();
        let _ = write!(
            body,
            "<tr><td><code>{}</code></td><td class=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td></tr>",
            escape(&f.file.display().to_string()),
            if loaded { "ok" } else { "warn" },
            if loaded { "loaded" } else { "refused" },
            or_dash(&f.plugin),
            or_dash(&f.version),
            or_dash(&f.sdk_version),
            modes.join("<br>"),
            if loaded {
                String::new()
            } else {
                or_dash(&f.reason)
            }
        );
    }
    body.push_str("</table>");
    body
}

/// The job's custom evaluator and executor chain and its last veto (docs/plugin-kinds.md);
/// nothing when the job has neither.
fn custom_section(custom: &CustomView) -> String {
    if custom.evaluator.is_none() && custom.executors.is_empty() && custom.last_veto.is_none() {
        return String::new();
    }
    let mut out = String::from("<h2>Custom evaluator and executors</h2><p id=\"custom\">");
    match &custom.evaluator {
        Some(e) => {
            let _ = write!(
                out,
                "evaluator <b>{}</b> ({})",
                escape(&e.instance),
                escape(&e.class)
            );
        }
        None => out.push_str("no evaluator"),
    }
    out.push_str(" · executors: ");
    if custom.executors.is_empty() {
        out.push_str("none");
    }
    for (i, e) in custom.executors.iter().enumerate() {
        let _ = write!(
            out,
            "{}<b>{}</b> ({}, priority {})",
            if i == 0 { "" } else { " → " },
            escape(&e.instance),
            escape(&e.class),
            e.priority
        );
    }
    if let Some(v) = &custom.last_veto {
        let _ = write!(
            out,
            "</p><p class=\"warn\">last veto at {}: <b>{}</b> ({}): {}",
            time(v.at_ms),
            escape(&v.instance),
            escape(&v.class),
            escape(&v.reason)
        );
    }
    out.push_str("</p>");
    out
}
