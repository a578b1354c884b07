//! Fault injection for tests: make the next requests that match fail, or answer slowly, or
//! change the cluster just before one is served (a race staged at a chosen request).

use std::time::Duration;

use serde_json::Value;

use super::status::ApiError;

/// Which requests a fault applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultTarget {
    /// Requests whose path starts with this (e.g. `/api/v1/namespaces/default/pods`).
    PathPrefix(String),
    /// Requests for a resource by plural (`pods`, `nodes`, `nodepools`), optionally only a
    /// subresource (`eviction`, `status`), in any namespace.
    Resource {
        plural: String,
        subresource: Option<String>,
    },
}

/// The next `times` requests matching `method` (any if `None`) and `target` fail with
/// `status` and a proper `Status` body (429 also carries `Retry-After: 1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub method: Option<String>,
    pub target: FaultTarget,
    pub status: u16,
    pub times: u32,
    /// Only requests that carry a `continue` token (the later pages of a list).
    pub continued_only: bool,
}

impl Fault {
    /// One failure with `status` for any request under `path_prefix`.
    pub fn path(path_prefix: impl Into<String>, status: u16) -> Fault {
        Fault {
            method: None,
            target: FaultTarget::PathPrefix(path_prefix.into()),
            status,
            times: 1,
            continued_only: false,
        }
    }

    /// One failure with `status` for any request on the resource `plural`.
    pub fn resource(plural: impl Into<String>, status: u16) -> Fault {
        Fault {
            method: None,
            target: FaultTarget::Resource {
                plural: plural.into(),
                subresource: None,
            },
            status,
            times: 1,
            continued_only: false,
        }
    }

    /// Limits the fault to a subresource (`eviction`, `status`, `scale`).
    pub fn subresource(mut self, sub: impl Into<String>) -> Fault {
        if let FaultTarget::Resource { subresource, .. } = &mut self.target {
            *subresource = Some(sub.into());
        }
        self
    }

    /// Limits the fault to one HTTP method (`GET`, `POST`, `PATCH`, `DELETE`, `PUT`).
    pub fn method(mut self, method: &str) -> Fault {
        self.method = Some(method.to_ascii_uppercase());
        self
    }

    /// Limits the fault to later pages of a list (requests with a `continue` token): with
    /// 410 it is an expired token, as an API server answers once the resource version the
    /// token holds has been compacted away.
    pub fn continued(mut self) -> Fault {
        self.continued_only = true;
        self
    }

    pub fn times(mut self, n: u32) -> Fault {
        self.times = n;
        self
    }
}

/// What a request looks like to the fault matcher.
#[derive(Debug, Clone, Copy)]
pub struct RequestFacts<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub plural: Option<&'a str>,
    pub subresource: Option<&'a str>,
    /// The request carries a `continue` token.
    pub continued: bool,
}

/// An object to store just before the first request matching `method` and `target` is
/// served: what another client (a scheduler binding a pod) did at that instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Before {
    pub method: Option<String>,
    pub target: FaultTarget,
    pub object: Value,
}

/// Active faults and slow paths.
#[derive(Debug, Default)]
pub struct Faults {
    pending: Vec<Fault>,
    before: Vec<Before>,
    slow: Vec<(String, Duration)>,
    /// The most items one list page holds, whatever `limit` asked: an API server may
    /// answer with fewer items than asked and a `continue` token.
    page_cap: Option<usize>,
}

impl Faults {
    pub fn inject(&mut self, f: Fault) {
        if f.times > 0 {
            self.pending.push(f);
        }
    }

    pub fn slow(&mut self, path_prefix: String, delay: Duration) {
        self.slow.push((path_prefix, delay));
    }

    pub fn before(&mut self, b: Before) {
        self.before.push(b);
    }

    /// Takes the objects to store before serving this request (each is stored once).
    pub fn take_before(&mut self, req: RequestFacts<'_>) -> Vec<Value> {
        let (now, later): (Vec<Before>, Vec<Before>) = std::mem::take(&mut self.before)
            .into_iter()
            .partition(|b| matches_target(b.method.as_deref(), &b.target, false, req));
        self.before = later;
        now.into_iter().map(|b| b.object).collect()
    }

    pub fn clear(&mut self) {
        self.pending.clear();
        self.before.clear();
        self.slow.clear();
        self.page_cap = None;
    }

    pub fn cap_pages(&mut self, items: usize) {
        self.page_cap = Some(items.max(1));
    }

    /// The `limit` a list is answered with: the client's, capped by [`Faults::cap_pages`].
    pub fn page_limit(&self, asked: Option<usize>) -> Option<usize> {
        match (asked.filter(|a| *a > 0), self.page_cap) {
            (Some(a), Some(c)) => Some(a.min(c)),
            (a, c) => a.or(c),
        }
    }

    /// Consumes one use of the first fault matching the request.
    pub fn take(&mut self, req: RequestFacts<'_>) -> Option<ApiError> {
        let i = self.pending.iter().position(|f| matches(f, req))?;
        let f = &mut self.pending[i];
        f.times -= 1;
        let err = ApiError::injected(f.status);
        if f.times == 0 {
            self.pending.remove(i);
        }
        Some(err)
    }

    pub fn delay_for(&self, path: &str) -> Option<Duration> {
        self.slow
            .iter()
            .filter(|(p, _)| path.starts_with(p.as_str()))
            .map(|(_, d)| *d)
            .max()
    }
}

fn matches(f: &Fault, req: RequestFacts<'_>) -> bool {
    matches_target(f.method.as_deref(), &f.target, f.continued_only, req)
}

fn matches_target(
    method: Option<&str>,
    target: &FaultTarget,
    continued_only: bool,
    req: RequestFacts<'_>,
) -> bool {
    if method.is_some_and(|m| m != req.method) {
        return false;
    }
    if continued_only && !req.continued {
        return false;
    }
    match target {
        FaultTarget::PathPrefix(p) => req.path.starts_with(p.as_str()),
        FaultTarget::Resource {
            plural,
            subresource,
        } => {
            req.plural == Some(plural.as_str())
                && subresource
                    .as_deref()
                    .is_none_or(|s| req.subresource == Some(s))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(method: &'a str, plural: &'a str, sub: Option<&'a str>) -> RequestFacts<'a> {
        RequestFacts {
            method,
            path: "/api/v1/namespaces/default/pods/x/eviction",
            plural: Some(plural),
            subresource: sub,
            continued: false,
        }
    }

    #[test]
    fn a_fault_fires_the_number_of_times_asked_then_stops() {
        let mut f = Faults::default();
        f.inject(
            Fault::resource("pods", 429)
                .subresource("eviction")
                .method("post")
                .times(2),
        );
        assert_eq!(f.take(req("GET", "pods", None)), None);
        assert_eq!(
            f.take(req("POST", "pods", Some("eviction")))
                .map(|e| e.code),
            Some(429)
        );
        assert_eq!(
            f.take(req("POST", "pods", Some("eviction")))
                .map(|e| e.retry_after),
            Some(Some(1))
        );
        assert_eq!(f.take(req("POST", "pods", Some("eviction"))), None);
    }

    #[test]
    fn an_object_to_store_before_a_request_is_handed_out_once_for_the_first_match() {
        let mut f = Faults::default();
        f.before(Before {
            method: Some("PATCH".into()),
            target: FaultTarget::PathPrefix("/api/v1/nodes/n1".into()),
            object: serde_json::json!({"kind": "Pod"}),
        });
        let at = |method, path| RequestFacts {
            method,
            path,
            plural: Some("nodes"),
            subresource: None,
            continued: false,
        };
        assert!(f.take_before(at("GET", "/api/v1/nodes/n1")).is_empty());
        assert!(f.take_before(at("PATCH", "/api/v1/nodes/n2")).is_empty());
        assert_eq!(f.take_before(at("PATCH", "/api/v1/nodes/n1")).len(), 1);
        assert!(f.take_before(at("PATCH", "/api/v1/nodes/n1")).is_empty());
    }

    #[test]
    fn an_expired_continue_token_fails_only_later_pages_and_pages_can_be_capped() {
        let mut f = Faults::default();
        f.inject(Fault::resource("pods", 410).continued());
        assert_eq!(f.take(req("GET", "pods", None)), None);
        let later = RequestFacts {
            continued: true,
            ..req("GET", "pods", None)
        };
        assert_eq!(f.take(later).map(|e| e.code), Some(410));
        assert_eq!(f.take(later), None);
        assert_eq!(f.page_limit(Some(500)), Some(500));
        f.cap_pages(3);
        assert_eq!(f.page_limit(Some(500)), Some(3));
        assert_eq!(f.page_limit(Some(2)), Some(2));
        assert_eq!(f.page_limit(None), Some(3));
    }
}
