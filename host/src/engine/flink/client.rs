//! The blocking REST client of a Flink cluster: timeouts, bounded retries with backoff, and the
//! mapping of every transport or HTTP failure to an [`EngineError`].

use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::access::{ClusterAccess, Connection, Endpoint, is_https};
use super::failure::{Failure, describe_transport, redirect_to_tls, status_cause};
use super::limit::RequestLimit;
use crate::config::ClusterSpec;
use crate::credentials::CredentialError;
use crate::engine::{EngineError, Unfenced, WriteFence};
use crate::events::Event;

/// The request header that names the host making a change (with shared state).
pub(crate) const WRITER_HOST_HEADER: &str = "X-Flowscale-Host";
/// The request header that carries the fencing token a change is made under.
pub(crate) const WRITER_TOKEN_HEADER: &str = "X-Flowscale-Fencing-Token";

/// How to reach a Flink cluster's REST API and how patient to be with it.
#[derive(Debug, Clone, PartialEq)]
pub struct FlinkOptions {
    /// Base URL of the REST API, e.g. `http://127.0.0.1:8081` or `https://flink:8443`.
    pub(crate) rest_url: String,
    /// Upper bound of one request, connect to last byte (the Flink autoscaler's `flink.rest-client.timeout`).
    pub(crate) request_timeout: Duration,
    /// Upper bound of establishing the connection.
    pub(crate) connect_timeout: Duration,
    /// Retries after the first attempt for failures that may pass (connection refused or reset,
    /// timeouts, 502/503/504). Client errors and 500 are never retried: Flink answers a bad
    /// request or an unknown job deterministically.
    pub(crate) retries: u32,
    /// Delay before the first retry; doubled for each further retry.
    pub(crate) backoff: Duration,
    /// Cap of the doubled delay.
    pub(crate) max_backoff: Duration,
    /// Flink's metric fetcher is lazy: a query after a quiet spell is answered from the old store
    /// and merely triggers a refresh. When the previous observation is older than this, the
    /// collector reads once to trigger the refresh, waits [`FlinkOptions::metrics_prime_delay`] and
    /// reads again.
    pub(crate) metrics_prime_after: Duration,
    /// How long to let the metric fetcher refresh after priming it.
    pub(crate) metrics_prime_delay: Duration,
}

impl Default for FlinkOptions {
    fn default() -> FlinkOptions {
        FlinkOptions {
            rest_url: "http://localhost:8081".to_string(),
            request_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(3),
            retries: 2,
            backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(2),
            metrics_prime_after: Duration::from_secs(3),
            metrics_prime_delay: Duration::from_millis(600),
        }
    }
}

impl FlinkOptions {
    /// Where the cluster is and how long a request may take: what its agent is built from.
    pub(crate) fn endpoint(&self) -> Endpoint {
        Endpoint {
            rest_url: self.rest_url.clone(),
            request_timeout: self.request_timeout,
            connect_timeout: self.connect_timeout,
        }
    }

    /// Options for the cluster at `rest_url`, everything else default.
    pub fn new(rest_url: impl Into<String>) -> FlinkOptions {
        FlinkOptions {
            rest_url: rest_url.into(),
            ..FlinkOptions::default()
        }
    }
}

/// A blocking client of one cluster's REST API. Cheap to clone (connections are pooled).
#[derive(Clone)]
pub struct FlinkClient {
    options: FlinkOptions,
    /// The agent and credentials to send with, shared by every client of the cluster.
    access: Arc<ClusterAccess>,
    /// The cluster's bound on requests in flight, shared with its other clients.
    in_flight: Option<Arc<RequestLimit>>,
}

impl std::fmt::Debug for FlinkClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlinkClient")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl FlinkClient {
    /// A client for the cluster described by `options`.
    /// A client for the cluster described by `options`: plain HTTP, or for an `https://` URL
    /// TLS verified against the system's roots.
    pub fn new(options: FlinkOptions) -> FlinkClient {
        let access = Arc::new(ClusterAccess::unnamed(&options.endpoint()));
        FlinkClient {
            options,
            access,
            in_flight: None,
        }
    }

    /// A client for the named cluster `cluster` (`[clusters.<name>]`: its TLS files and
    /// credentials, read now and re-read when they change), at `options`' URL.
    pub fn for_cluster(
        options: FlinkOptions,
        cluster: &ClusterSpec,
    ) -> Result<FlinkClient, CredentialError> {
        let access = ClusterAccess::open(&options.endpoint(), cluster)?;
        Ok(FlinkClient::with_access(options, Arc::new(access)))
    }

    /// A client that sends through `access` (a named cluster's TLS setup and credentials,
    /// shared with its other clients).
    pub(crate) fn with_access(options: FlinkOptions, access: Arc<ClusterAccess>) -> FlinkClient {
        FlinkClient {
            options,
            access,
            in_flight: None,
        }
    }

    /// The credential reloads of the cluster not yet reported (see [`ClusterAccess`]).
    pub(crate) fn take_events(&self) -> Vec<Event> {
        self.access.take_events()
    }

    /// The same client, taking a place in `limit` for each request (not for the waits between
    /// retries), so that all the clients of one cluster together stay within it.
    pub(crate) fn with_limit(self, limit: Arc<RequestLimit>) -> FlinkClient {
        FlinkClient {
            in_flight: Some(limit),
            ..self
        }
    }

    /// The options this client was built with.
    pub(crate) fn options(&self) -> &FlinkOptions {
        &self.options
    }

    /// `GET path` (relative to the REST URL, starting with `/`), parsed as JSON.
    pub fn get_json(&self, path: &str) -> Result<Value, EngineError> {
        self.get(path)
    }

    /// `GET path` deserialized into `T`.
    pub(crate) fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, EngineError> {
        self.get_fenced(path, &Unfenced)
    }

    /// `GET path` deserialized into `T`, as a step of a change under `fence`: no attempt starts
    /// once the fence refuses, and each is bounded by the time it has left.
    pub(crate) fn get_fenced<T: DeserializeOwned>(
        &self,
        path: &str,
        fence: &dyn WriteFence,
    ) -> Result<T, EngineError> {
        let body = self.with_retries("GET", path, fence, |connection, timeout| {
            let request = authorized(connection, connection.agent.get(self.url(path)));
            self.read_answer(bounded(request, timeout).call())
        })?;
        parse_body("GET", path, &body)
    }

    /// `PUT path` with a JSON body, each attempt (the first and every retry) only while `fence`
    /// lets it leave and bounded by the time the fence has left; the answer parsed as JSON
    /// (`{}` when empty). The writer the fence names goes along in two headers.
    pub(crate) fn put_json_fenced(
        &self,
        path: &str,
        body: &Value,
        fence: &dyn WriteFence,
    ) -> Result<Value, EngineError> {
        let text = body.to_string();
        let answer = self.with_retries("PUT", path, fence, |connection, timeout| {
            let mut request = authorized(connection, connection.agent.put(self.url(path)))
                .header("Content-Type", "application/json");
            if let Some((host, token)) = fence.writer() {
                request = request
                    .header(WRITER_HOST_HEADER, host)
                    .header(WRITER_TOKEN_HEADER, token.to_string());
            }
            self.read_answer(bounded(request, timeout).send(&text))
        })?;
        if answer.trim().is_empty() {
            return Ok(Value::Object(Default::default()));
        }
        parse_body("PUT", path, &answer)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.options.rest_url.trim_end_matches('/'), path)
    }

    /// Runs `attempt` up to `1 + retries` times with doubling backoff while it fails in a way that
    /// may pass. PUTs of resource requirements are idempotent, so retrying them is safe as long
    /// as the writer still may write: `fence` is asked right before every attempt (after the
    /// wait for a place among the cluster's requests in flight), and an attempt gets at most
    /// the time the fence has left (`attempt` is passed that bound). Once the fence refuses,
    /// nothing more is sent: [`EngineError::Abandoned`].
    fn with_retries(
        &self,
        method: &str,
        path: &str,
        fence: &dyn WriteFence,
        mut attempt: impl FnMut(&Connection, Option<Duration>) -> Result<String, Failure>,
    ) -> Result<String, EngineError> {
        let mut delay = self.options.backoff;
        let mut tries = 0;
        loop {
            let permit = self.in_flight.as_deref().map(RequestLimit::acquire);
            let left = match fence.check() {
                Ok(left) => left,
                Err(why) => {
                    let attempts = if tries == 0 {
                        "nothing was sent".to_string()
                    } else {
                        format!("not retried after {tries} failed attempt(s)")
                    };
                    return Err(EngineError::Abandoned(format!(
                        "{method} {path}: {why}; {attempts}"
                    )));
                }
            };
            // Re-checked before each attempt: a rotated file is used from the next one on.
            let connection = self.access.connection();
            let answer = attempt(
                &connection,
                left.map(|left| left.min(self.options.request_timeout)),
            );
            drop(permit);
            match answer {
                Ok(body) => return Ok(body),
                Err(failure) if failure.retryable() && tries < self.options.retries => {
                    tracing::debug!(method, path, ?failure, "retrying Flink REST call");
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(self.options.max_backoff);
                    tries += 1;
                }
                Err(failure) => {
                    return Err(to_engine_error(method, path, &self.access.label, failure));
                }
            }
        }
    }
}

/// `request` bounded by `timeout` from connect to last byte, when there is one (else by the
/// agent's own timeouts).
fn bounded<B>(
    request: ureq::RequestBuilder<B>,
    timeout: Option<Duration>,
) -> ureq::RequestBuilder<B> {
    match timeout {
        Some(timeout) => request.config().timeout_global(Some(timeout)).build(),
        None => request,
    }
}

impl FlinkClient {
    fn read_answer(
        &self,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<String, Failure> {
        let https = is_https(&self.options.rest_url);
        let mut response = response.map_err(|e| describe_transport(&e, https, ""))?;
        let code = response.status().as_u16();
        if let Some(failure) = redirect_to_tls(&response) {
            return Err(failure);
        }
        let body = response
            .body_mut()
            .read_to_string()
            .map_err(|e| describe_transport(&e, https, "reading the answer: "))?;
        if (200..300).contains(&code) {
            Ok(body)
        } else {
            Err(Failure::Status { code, body })
        }
    }
}

/// `request` with the cluster's `Authorization` header, when it has one.
fn authorized<B>(
    connection: &Connection,
    request: ureq::RequestBuilder<B>,
) -> ureq::RequestBuilder<B> {
    match &connection.authorization {
        Some(value) => request.header("Authorization", value.expose()),
        None => request,
    }
}

fn parse_body<T: DeserializeOwned>(method: &str, path: &str, body: &str) -> Result<T, EngineError> {
    serde_json::from_str(body).map_err(|e| {
        EngineError::Other(format!(
            "{method} {path}: unexpected answer ({e}): {}",
            truncate(body, 200)
        ))
    })
}

/// Flink answers errors as `{"errors":["..."]}`; the first line of each is enough to tell why.
fn error_message(body: &str) -> String {
    let errors = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("errors").and_then(Value::as_array).cloned());
    match errors {
        Some(errors) if !errors.is_empty() => errors
            .iter()
            .filter_map(Value::as_str)
            .map(|e| e.lines().next().unwrap_or_default().trim().to_string())
            .collect::<Vec<_>>()
            .join("; "),
        _ => truncate(body, 200),
    }
}

/// `text` on one line: an answer (a proxy's HTML page) must not break the log's lines.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

/// The job id of a request about one job (`/jobs/<id>` or below it), when `path` is one.
fn job_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/jobs/")?;
    let id = rest.split(['/', '?']).next()?;
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// Whether a 404 answer to `path` is Flink saying that the job itself does not exist (its
/// handlers answer `NotFoundException: Job <id> not found`, or `Could not find Flink job (<id>)`
/// from the dispatcher). Any other 404 (an unknown route, a proxy in front, a vertex the job
/// lacks) says nothing about the job, so it stays "not ready".
fn says_job_is_gone(path: &str, message: &str) -> bool {
    let Some(id) = job_of(path) else {
        return false;
    };
    let message = message.to_ascii_lowercase();
    let id = id.to_ascii_lowercase();
    message.contains(&format!("job {id} not found"))
        || message.contains(&format!("could not find flink job ({id})"))
}

/// The error of a failed request to the cluster `cluster` (its name and address, or its
/// address): one line, naming the cluster and the cause.
fn to_engine_error(method: &str, path: &str, cluster: &str, failure: Failure) -> EngineError {
    match failure {
        Failure::Transport(message) | Failure::Setup(message) => {
            EngineError::Unreachable(format!("{method} {path}: {cluster}: {message}"))
        }
        Failure::Status { code, body } => {
            let flink_says = one_line(&error_message(&body));
            let message = match status_cause(code) {
                Some(cause) => {
                    format!("{method} {path}: {cluster}: HTTP {code}: {cause}: {flink_says}")
                }
                None => format!("{method} {path}: {cluster}: HTTP {code}: {flink_says}"),
            };
            match code {
                404 if says_job_is_gone(path, &flink_says) => EngineError::JobGone(message),
                404 => EngineError::NotReady(message),
                503 => EngineError::Unreachable(message),
                _ => EngineError::Refused(message),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_keep_the_first_line_of_each_flink_error() {
        let body = r#"{"errors":["org.apache.flink.runtime.rest.handler.RestHandlerException: bad\n\tat x","second"]}"#;
        assert_eq!(
            error_message(body),
            "org.apache.flink.runtime.rest.handler.RestHandlerException: bad; second"
        );
        assert_eq!(error_message("not json"), "not json");
    }

    #[test]
    fn statuses_map_to_engine_errors() {
        let status = |code| Failure::Status {
            code,
            body: r#"{"errors":["nope"]}"#.into(),
        };
        assert!(matches!(
            to_engine_error("GET", "/x", "http://a", status(400)),
            EngineError::Refused(m) if m == "GET /x: http://a: HTTP 400: nope"
        ));
        assert!(matches!(
            to_engine_error("GET", "/x", "http://a", status(404)),
            EngineError::NotReady(_)
        ));
        assert!(matches!(
            to_engine_error(
                "GET",
                "/x",
                "http://a",
                Failure::Transport("refused".into())
            ),
            EngineError::Unreachable(_)
        ));
        assert!(!status(500).retryable());
        assert!(!status(400).retryable());
        assert!(status(503).retryable());
        assert!(Failure::Transport(String::new()).retryable());
    }

    #[test]
    fn only_flinks_job_not_found_means_the_job_is_gone() {
        let id = "8930b1fd94e042463a80e45360195d7e";
        let not_found = |path: &str, error: &str| {
            let failure = Failure::Status {
                code: 404,
                body: serde_json::json!({ "errors": [error] }).to_string(),
            };
            to_engine_error("GET", path, "http://a", failure)
        };
        let flink =
            format!("org.apache.flink.runtime.rest.NotFoundException: Job {id} not found\n\tat x");
        for path in [format!("/jobs/{id}"), format!("/jobs/{id}/plan")] {
            assert!(
                matches!(not_found(&path, &flink), EngineError::JobGone(ref m) if m.contains(id)),
                "{path}"
            );
        }
        let dispatcher = format!(
            "org.apache.flink.runtime.messages.FlinkJobNotFoundException: Could not find Flink job ({id})"
        );
        assert!(matches!(
            not_found(&format!("/jobs/{id}"), &dispatcher),
            EngineError::JobGone(_)
        ));
        // Another job's id, an unknown route, or a 404 that does not name the job: not gone.
        let other = "00000000000000000000000000000000";
        assert!(matches!(
            not_found(&format!("/jobs/{other}"), &flink),
            EngineError::NotReady(_)
        ));
        assert!(matches!(
            not_found(&format!("/jobs/{id}"), "Not found: /jobs/x"),
            EngineError::NotReady(_)
        ));
        assert!(matches!(
            not_found("/overview", &flink),
            EngineError::NotReady(_)
        ));
        assert_eq!(job_of("/jobs/overview"), None);
        assert_eq!(job_of(&format!("/jobs/{id}?x=1")), Some(id));
    }

    #[test]
    fn truncation_is_char_safe() {
        assert_eq!(truncate("ääää", 2), "ää...");
        assert_eq!(truncate("ab", 5), "ab");
    }
}
