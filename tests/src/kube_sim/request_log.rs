//! An optional log of what clients sent (method, path, query, content type, body), for tests
//! that check the requests an adapter makes rather than only the state it leaves behind. Off
//! unless [`SimCluster::log_requests`](super::SimCluster::log_requests) turns it on: the
//! scenarios and benchmarks send thousands of requests whose bodies nobody reads.

use std::collections::BTreeMap;

use serde_json::Value;

/// One request as the client sent it, before any fault or page cap applied.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedRequest {
    /// The HTTP method (`GET`, `PATCH`; a watch is a `GET` with `watch=true`).
    pub method: String,
    pub path: String,
    pub query: BTreeMap<String, String>,
    /// The `Content-Type` header, empty when there is none.
    pub content_type: String,
    /// The body as JSON, `Null` when empty or not JSON.
    pub body: Value,
}

impl LoggedRequest {
    pub fn query(&self, key: &str) -> Option<&str> {
        self.query.get(key).map(String::as_str)
    }
}
