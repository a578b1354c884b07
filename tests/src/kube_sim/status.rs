//! `meta/v1 Status` error bodies, shaped as the real API server writes them so that
//! `kube::Client` parses every failure into `kube::Error::Api`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A failed API request: the HTTP code, the machine-readable `reason` and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// `details` of the Status (name, group, kind), as the real server fills them.
    pub details: Value,
    /// Seconds for the `Retry-After` header (429 and some 500s).
    pub retry_after: Option<u32>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: json!({}),
            retry_after: None,
        }
    }

    fn with_details(mut self, group: &str, plural: &str, name: &str) -> Self {
        let mut d = json!({ "name": name, "kind": plural });
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        self.details = d;
        self
    }

    /// `pods "x" not found` (404 NotFound).
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, plural)),
        )
        .with_details(group, plural, name)
    }

    /// RBAC's refusal, with the authorizer's message.
    pub fn forbidden(message: String) -> Self {
        ApiError::new(403, "Forbidden", message)
    }

    /// The answer for a path no served resource matches (a group whose CRD is absent).
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// `pods "x" already exists` (409 AlreadyExists).
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, plural)),
        )
        .with_details(group, plural, name)
    }

    /// Optimistic-concurrency failure on a stale `resourceVersion` (409 Conflict).
    pub fn conflict(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                qualified(group, plural)
            ),
        )
        .with_details(group, plural, name)
    }

    /// A field failed validation (422 Invalid): `Pod "" is invalid: metadata.name: Required value`.
    pub fn invalid(kind: &str, name: &str, field: &str, problem: &str) -> Self {
        Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {field}: {problem}"),
        )
    }

    /// A JSON patch that cannot be applied (the real server answers 422 Invalid).
    pub fn invalid_patch(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// Something the simulated cluster deliberately does not serve (pod logs, exec, ...):
    /// 404 with a message that says so instead of a bare "not found".
    pub fn not_served(message: impl Into<String>) -> Self {
        Self::new(404, "NotFound", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json; got {content_type:?}"
            ),
        )
    }

    /// The eviction API's refusal when a PodDisruptionBudget would be violated.
    pub fn too_many_requests(message: impl Into<String>, causes: Value) -> Self {
        let mut e = Self::new(429, "TooManyRequests", message);
        e.details = json!({ "causes": causes });
        e
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// Any status a test injects; reason chosen as the server would for that code.
    pub fn injected(code: u16) -> Self {
        let (reason, message) = match code {
            429 => (
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
            ),
            500 => (
                "InternalError",
                "an error on the server (\"injected by the simulated cluster\") has prevented the request from succeeding",
            ),
            503 => (
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
            504 => (
                "Timeout",
                "the server was unable to return a response in the time allotted",
            ),
            401 => ("Unauthorized", "Unauthorized"),
            403 => ("Forbidden", "forbidden: injected by the simulated cluster"),
            404 => (
                "NotFound",
                "the server could not find the requested resource",
            ),
            409 => ("Conflict", "conflict injected by the simulated cluster"),
            410 => (
                "Expired",
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
            ),
            _ => ("InternalError", "failure injected by the simulated cluster"),
        };
        let mut e = Self::new(code, reason, message);
        if code == 429 {
            e.retry_after = Some(1);
            e.details = json!({ "retryAfterSeconds": 1 });
        }
        e
    }

    /// The `meta/v1 Status` body.
    pub fn status_body(&self) -> Value {
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": self.details,
            "code": self.code,
        })
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (code, axum::Json(self.status_body())).into_response();
        if let Some(secs) = self.retry_after
            && let Ok(v) = HeaderValue::from_str(&secs.to_string())
        {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        resp
    }
}

/// A successful `Status` (eviction and delete answers).
pub fn success(code: u16, details: Value) -> Value {
    json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details, "code": code })
}

fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}
