//! The routes: health, metrics, the JSON API (described by an OpenAPI document generated from
//! these handlers and their types) and the dashboard.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
use utoipa::{Modify, OpenApi, ToSchema};

use super::answer::{ApiError, error};
use super::shared::{AppState, MAX_BODY_BYTES, MAX_WHAT_IF_CALLS, REQUEST_TIMEOUT};
use super::view::{
    CooldownView, CustomView, DecisionSummary, DecisionView, EvaluatorView, EventView,
    ExecutorView, JobDetail, JobSummary, LeaseView, OwnerView, Point, VertexDecisionView,
    VertexView, VetoView,
};
use super::{auth, checks, dashboard, metrics};
use crate::plugins::PluginListing;

/// The readiness of the host.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Readiness {
    /// Plugins are loaded and every job's engine answered at least once.
    pub(crate) ready: bool,
    /// Jobs whose engine has not answered yet.
    pub(crate) waiting_for: Vec<String>,
}

/// A mode, metric evaluator or scaling executor exported by a plugin file.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PluginModeDoc {
    /// The implementation id.
    pub(crate) id: String,
    /// The one-line description.
    pub(crate) description: String,
}

/// One plugin file, as `flowscale plugins --json` describes it.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PluginFileDoc {
    /// The file.
    pub(crate) file: String,
    /// `loaded` or `refused`.
    pub(crate) status: String,
    /// Why it was refused and what to do (null when loaded).
    pub(crate) reason: Option<String>,
    /// The plugin's name, when its manifest could be read.
    pub(crate) plugin: Option<String>,
    /// The plugin's version.
    pub(crate) version: Option<String>,
    /// The SDK version it was built against.
    pub(crate) sdk_version: Option<String>,
    /// The modes it exports.
    pub(crate) modes: Vec<PluginModeDoc>,
    /// The custom metric evaluators it exports (plugins built against SDK 0.1.3 and later).
    pub(crate) evaluators: Vec<PluginModeDoc>,
    /// The custom scaling executors it exports (as above).
    pub(crate) executors: Vec<PluginModeDoc>,
}

/// The plugins directory and its files, as `flowscale plugins --json` describes them.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PluginListingDoc {
    /// The plugins directory.
    pub(crate) directory: String,
    /// One entry per plugin file, in file-name order.
    pub(crate) files: Vec<PluginFileDoc>,
    /// Plugin libraries the host has loaded (every version, refused ones included).
    pub(crate) versions_loaded: u64,
    /// The most versions the host loads before it refuses more (libraries are never unloaded).
    pub(crate) version_limit: u64,
}

/// One `align --batch` request: a vertex, its numbers and the configuration to decide with.
/// The ranges are each field's own; the fields also constrain each other (`target` in
/// [min(lower, cap), cap] with cap = min(max_parallelism, upper), `lower <= upper`, one of
/// `target` and `scale_factor`), which a request that breaks is answered with 422.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct AlignRequestDoc {
    /// Current parallelism, in [1, 2147483647].
    #[schema(minimum = 1, maximum = 2147483647)]
    pub(crate) current: i64,
    /// The computed target (or give `scale_factor`).
    #[schema(minimum = 1, maximum = 2147483647)]
    pub(crate) target: Option<i64>,
    /// A scale factor, finite and > 0 (or give `target`).
    #[schema(exclusive_minimum = 0)]
    pub(crate) scale_factor: Option<f64>,
    /// Key groups, in [1, 32768].
    #[schema(minimum = 1, maximum = 32768)]
    pub(crate) max_parallelism: i64,
    /// Partitions of a source (0: not a source).
    #[schema(minimum = 0, maximum = 2147483647)]
    pub(crate) source_partitions: Option<i64>,
    /// Lower parallelism limit (default 1).
    #[schema(minimum = 1, maximum = 2147483647)]
    pub(crate) lower: Option<i64>,
    /// Upper parallelism limit (default 2147483647).
    #[schema(minimum = 1, maximum = 2147483647)]
    pub(crate) upper: Option<i64>,
    /// Input ship strategies (HASH, REBALANCE, CUSTOM:48, ...).
    pub(crate) ship_strategies: Option<Vec<String>>,
    /// Configuration keys, e.g. `{"scaling.alignment.mode": "EVENLY_SPREAD"}`.
    #[schema(value_type = Option<Object>)]
    pub(crate) config: Option<BTreeMap<String, serde_json::Value>>,
    /// A name for the vertex in the answer.
    pub(crate) vertex: Option<String>,
}

/// The answer to an align request.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct AlignAnswerDoc {
    /// The vertex name of the request.
    pub(crate) vertex: Option<String>,
    /// Current parallelism.
    pub(crate) current: u32,
    /// Target before alignment.
    pub(crate) target: u32,
    /// The aligned parallelism.
    pub(crate) parallelism: u32,
    /// The mode that decided.
    pub(crate) mode: String,
    /// Whether the mode applied to the vertex.
    pub(crate) applicable: bool,
    /// Events of the decision.
    #[schema(value_type = Vec<Object>)]
    pub(crate) events: Vec<serde_json::Value>,
    /// Why, step by step.
    pub(crate) explanation: Vec<String>,
}

/// A request that could not be answered.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct AlignErrorDoc {
    /// Always 1: the body is one request line.
    pub(crate) line: usize,
    /// Why.
    pub(crate) error: String,
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "flowscale",
        description = "The flowscale host: its fleet, decisions, events, plugins and a what-if for alignment."
    ),
    paths(
        healthz,
        readyz,
        metrics_text,
        jobs,
        job,
        job_events,
        plugins,
        align,
        openapi
    ),
    components(schemas(
        ApiError,
        Readiness,
        JobSummary,
        LeaseView,
        OwnerView,
        DecisionSummary,
        JobDetail,
        CustomView,
        EvaluatorView,
        ExecutorView,
        VetoView,
        VertexView,
        CooldownView,
        DecisionView,
        VertexDecisionView,
        EventView,
        Point,
        PluginFileDoc,
        PluginModeDoc,
        AlignRequestDoc,
        AlignAnswerDoc,
        AlignErrorDoc
    )),
    modifiers(&LoopbackNames)
)]
struct ApiDoc;

/// Declares on every route the answer of `checks::require_loopback_host`, which every request
/// passes before its route.
struct LoopbackNames;

impl Modify for LoopbackNames {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let refused = ResponseBuilder::new()
            .description(
                "Without a token ([host] api-token-file or api-token), the Host header is not a loopback name or address \
                 (localhost, 127.0.0.1, [::1])",
            )
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ApiError")))
                    .build(),
            )
            .build();
        for item in openapi.paths.paths.values_mut() {
            for operation in [&mut item.get, &mut item.post].into_iter().flatten() {
                operation
                    .responses
                    .responses
                    .insert("421".to_string(), refused.clone().into());
            }
        }
    }
}

/// The OpenAPI document of the API.
pub(crate) fn openapi_json() -> String {
    ApiDoc::openapi()
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// Every route, behind the Host check, the token check, the body limit, the JSON check (of
/// requests that compute something) and the request deadline.
pub(super) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route("/api/v1/jobs", get(jobs))
        .route("/api/v1/jobs/{job}", get(job))
        .route("/api/v1/jobs/{job}/events", get(job_events))
        .route("/api/v1/plugins", get(plugins))
        // Only on the routes that compute something: a method a route does not have is
        // answered 405 whatever its type.
        .route(
            "/api/v1/align",
            post(align).route_layer(axum::middleware::from_fn(checks::require_json)),
        )
        .route("/api/v1/openapi.json", get(openapi))
        .merge(dashboard::routes())
        .fallback(not_found)
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            auth::require_token,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            checks::require_loopback_host,
        ))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
        .with_state(state)
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "no such page")
}

/// The process serves.
#[utoipa::path(get, path = "/healthz", responses((status = 200, description = "Serving", body = String, content_type = "text/plain")))]
async fn healthz() -> &'static str {
    "ok\n"
}

/// Plugins are loaded and every job's engine answered at least once.
#[utoipa::path(get, path = "/readyz", responses(
    (status = 200, description = "Ready", body = Readiness),
    (status = 503, description = "Not ready yet", body = Readiness)
))]
async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    // Plugins are loaded before the server starts; what remains is every engine.
    let waiting_for: Vec<String> = state
        .view
        .jobs()
        .into_iter()
        .filter(|j| !j.reached)
        .map(|j| j.job)
        .collect();
    let ready = waiting_for.is_empty();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(Readiness { ready, waiting_for })).into_response()
}

/// The metrics: OpenMetrics when the client asks for it (Prometheus does), else the
/// Prometheus text format.
#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "Metrics", body = String, content_type = "text/plain")))]
async fn metrics_text(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    state.view.refresh_owners();
    let m = state.view.metrics();
    if openmetrics {
        (
            [(header::CONTENT_TYPE, metrics::OPENMETRICS_TYPE)],
            m.encoded(true),
        )
            .into_response()
    } else {
        (
            [(header::CONTENT_TYPE, metrics::TEXT_TYPE)],
            m.encoded(false),
        )
            .into_response()
    }
}

/// Every job, with its engine, mode, status and last decision.
#[utoipa::path(get, path = "/api/v1/jobs", responses((status = 200, description = "The fleet", body = Vec<JobSummary>)))]
async fn jobs(State(state): State<Arc<AppState>>) -> Json<Vec<JobSummary>> {
    Json(state.view.jobs())
}

/// One job: vertices with current, target and aligned parallelism, its decisions with their
/// explanations, its cooldown and its time series.
#[utoipa::path(get, path = "/api/v1/jobs/{job}",
    params(("job" = String, Path, description = "The job's name")),
    responses(
        (status = 200, description = "The job", body = JobDetail),
        (status = 404, description = "No such job", body = ApiError)
    ))]
async fn job(State(state): State<Arc<AppState>>, Path(name): Path<String>) -> Response {
    match state.view.job(&name) {
        Some(detail) => Json(detail).into_response(),
        None => error(StatusCode::NOT_FOUND, format!("no job `{name}`")),
    }
}

/// One job's recent events, newest first.
#[utoipa::path(get, path = "/api/v1/jobs/{job}/events",
    params(("job" = String, Path, description = "The job's name")),
    responses(
        (status = 200, description = "Its events", body = Vec<EventView>),
        (status = 404, description = "No such job", body = ApiError)
    ))]
async fn job_events(State(state): State<Arc<AppState>>, Path(name): Path<String>) -> Response {
    match state.view.events(&name) {
        Some(events) => Json(events).into_response(),
        None => error(StatusCode::NOT_FOUND, format!("no job `{name}`")),
    }
}

/// The plugins directory and its files, loaded or refused and why: the document of
/// `flowscale plugins --json`.
#[utoipa::path(get, path = "/api/v1/plugins", responses((status = 200, description = "The plugin files", body = PluginListingDoc)))]
async fn plugins(State(state): State<Arc<AppState>>) -> Json<PluginListing> {
    Json(state.backend.plugins())
}

/// A what-if: aligns one vertex as `flowscale align --batch` answers one request line, with the
/// plugins the host loaded. A plugin mode runs in a what-if worker process, never in the host
/// or in the fleet's workers, each call with the deadline `[host] plugin-call-timeout`.
#[utoipa::path(post, path = "/api/v1/align",
    request_body(content = AlignRequestDoc, content_type = "application/json"),
    responses(
        (status = 200, description = "The answer", body = AlignAnswerDoc),
        (status = 413, description = "The body is larger than 64 KiB"),
        (status = 415, description = "The request's Content-Type is not application/json", body = ApiError),
        (status = 422, description = "The request cannot be answered", body = AlignErrorDoc),
        (status = 503, description = "As many what-if requests as the host answers at once (2) are running; try again after Retry-After seconds", body = ApiError,
            headers(("Retry-After" = u32, description = "Seconds to wait")))
    ))]
async fn align(State(state): State<Arc<AppState>>, body: Bytes) -> Response {
    let Ok(permit) = Arc::clone(&state.what_ifs).try_acquire_owned() else {
        let mut busy = error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{MAX_WHAT_IF_CALLS} what-if requests are running, as many as this host \
                 answers at once; try again shortly"
            ),
        );
        busy.headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        return busy;
    };
    // A plugin mode runs outside the connection loop, so that a slow one holds up only its
    // own request. The permit goes with the call: a request given up on (its deadline passed)
    // still counts until its call returns.
    let backend = Arc::clone(&state.backend);
    let answered = tokio::task::spawn_blocking(move || {
        let answer = backend.align(&body);
        drop(permit);
        answer
    });
    match answered.await {
        Ok(Ok(answer)) => Json(answer).into_response(),
        Ok(Err(answer)) => (StatusCode::UNPROCESSABLE_ENTITY, Json(answer)).into_response(),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the alignment of this request failed",
        ),
    }
}

/// This document.
#[utoipa::path(get, path = "/api/v1/openapi.json", responses((status = 200, description = "The OpenAPI document", body = Object)))]
async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], openapi_json()).into_response()
}
