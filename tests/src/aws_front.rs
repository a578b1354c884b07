//! AWS-side faults on the wire: a loopback HTTP proxy in front of moto that the product's
//! SDK clients talk to. Every request is forwarded to moto unchanged, except those a test
//! has armed a fault for:
//!
//! - **throttling**: the next `n` calls of an action are answered as AWS answers a
//!   throttled call (EC2: HTTP 503 `RequestLimitExceeded`; JSON protocols: HTTP 400
//!   `ThrottlingException`), so the SDK's own retry policy and then nodewright's
//!   classification both run for real;
//! - **a crash between two calls**: the next call of an action is forwarded (moto acts on
//!   it) and its answer is withheld; the test is told, and drops the handler's future as a
//!   Lambda container dying at that instant would, with the side effect done and unseen.
//!
//! - **EC2 idempotency** (always on, as in AWS): a repeated CreateFleet/RunInstances
//!   ClientToken gets its first answer back, the same token with other parameters gets
//!   `IdempotentParameterMismatch` ([`crate::ec2_idempotency`]; moto ignores the token).
//!
//! - **EC2 eventual consistency** (off unless a test sets it, [`AwsFront::hide_instances_younger_than`]):
//!   an instance launched less than the lag ago is missing from DescribeInstances and not
//!   found by id ([`crate::ec2_consistency`]; moto lists it at once).
//!
//! - **CreateFleet errors**: while a [`FleetFault`] is set, a CreateFleet it answers gets
//!   EC2's answer for an `instant` fleet that launched nothing (HTTP 200, an `errorSet`
//!   item per failing override; [`crate::fleet_faults`]) and moto never sees it.
//!
//! - **The interruption queue** (once [`AwsFront::emulate_sqs`] is set, as the world does):
//!   SQS calls on the stack's queue and its dead-letter queue are answered by the world's
//!   own queue on the world's clock ([`crate::sqs`]) after moto has judged their IAM.
//!
//! - **The Price List API** (once a test sets prices, [`AwsFront::list_prices`]): GetProducts
//!   is answered from them ([`crate::price_list`]); moto has no Pricing service.
//!
//! - **Failed status checks** (off unless a test sets them, [`AwsFront::impair`]): moto's
//!   DescribeInstanceStatus answer says `impaired` for them ([`crate::status_checks`]).
//!
//! - **Capacity reservations** (ODCRs and capacity blocks a test sets, [`AwsFront::reserve`]):
//!   DescribeCapacityReservations is answered from them after moto has judged its IAM, a
//!   CreateFleet from a launch template targeting one is refused as EC2 refuses it or
//!   charged a slot per instance moto launched, TerminateInstances gives the slot back and
//!   DescribeInstances shows the reservation ([`crate::capacity_reservations`]; moto has none).
//!
//! Every call is recorded (action, time, what the front did), so tests and benchmarks can
//! read the wire: how often the SDK retried, when CreateFleet was sent.
//!
//! Insufficient capacity stays a port wrapper ([`crate::aws_faults`]): it needs the fleet's
//! per-override answer rewritten, which is clearer in the core's types than in EC2's XML.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use aws_config::SdkConfig;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::{oneshot, watch};

use crate::capacity_reservations::{Admission, Reservation, Reservations};
use crate::ec2_consistency::{Consistency, not_found_xml};
use crate::ec2_idempotency::{Remembered, Tokens, Verdict, form_params, mismatch_xml};
use crate::fleet_faults::{FleetFault, answer_xml};

/// The most a request body may be; CreateFleet with 60 types x 3 zones is ~40 KiB.
const MAX_BODY: usize = 16 * 1024 * 1024;

/// What the front did with one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// Forwarded to moto; moto's status code.
    Forwarded(u16),
    /// Answered with a throttling error; moto never saw it.
    Throttled,
    /// Forwarded to moto, answer withheld: the caller "crashed" here.
    Withheld,
    /// Arrived and held back by [`AwsFront::delay`]: recorded on arrival, and again as
    /// handled once the delay is over.
    Delayed,
    /// A ClientToken seen before with the same parameters: its first answer again, moto
    /// never saw the call.
    Replayed,
    /// A ClientToken seen before with other parameters: `IdempotentParameterMismatch`.
    TokenMismatch,
    /// A CreateFleet answered with a [`FleetFault`]'s errors, or refused by the capacity
    /// reservation it targets ([`crate::capacity_reservations`]); moto never saw it.
    FleetErrors,
    /// A DescribeInstances naming an instance too young to be visible:
    /// `InvalidInstanceID.NotFound`, moto never saw it.
    NotVisibleYet,
    /// Answered by the world: an SQS call on an emulated queue or a
    /// DescribeCapacityReservations (moto judged its IAM, the world answered), or a Price
    /// List call.
    Emulated(u16),
}

#[derive(Debug, Clone)]
pub struct Call {
    /// The API action: `CreateFleet`, `GetParameter`, ... (`METHOD /path` for REST APIs).
    pub action: String,
    pub at: Instant,
    /// The world's time when it arrived (a manual clock's, or the world's own), to compare
    /// with what the functions wrote on that time, such as a Lease's renewal.
    pub world_at: jiff::Timestamp,
    /// From arrival to the answer being ready to send (moto's time, and the front's own,
    /// for a forwarded call), so a benchmark can tell which call a wait went to.
    pub took: Duration,
    pub handling: Handling,
    /// The request's form parameters for the EC2 calls that create what the launch policy
    /// conditions on, and for DescribeInstances ([`RECORDED_PARAMS`]), so a test can read
    /// what was asked; empty for every other call.
    pub params: std::collections::BTreeMap<String, String>,
}

/// Actions whose parameters [`Call::params`] keeps (DescribeInstances and
/// DescribeCapacityReservations: so a test can tell a listing by tag or filter from a
/// describe by id).
pub const RECORDED_PARAMS: [&str; 5] = [
    "CreateFleet",
    "RunInstances",
    "CreateLaunchTemplate",
    "DescribeInstances",
    "DescribeCapacityReservations",
];

#[derive(Default)]
struct Armed {
    throttle: HashMap<String, u32>,
    /// Actions answered only after this long, as a slow API answers.
    delay: HashMap<String, Duration>,
    crash: HashMap<String, oneshot::Sender<Instant>>,
    /// Each fault with how many of the requests it answers it still lets through.
    fleet: Vec<(FleetFault, usize)>,
}

struct Front {
    upstream: String,
    http: reqwest::Client,
    armed: Mutex<Armed>,
    tokens: Tokens,
    consistency: Consistency,
    status_checks: crate::status_checks::StatusChecks,
    eks_access: crate::eks_access::EksAccess,
    price_list: crate::price_list::PriceList,
    reservations: Reservations,
    calls: Mutex<Vec<Call>>,
    sqs: std::sync::OnceLock<Arc<crate::sqs::Sqs>>,
    /// The world's clock: injected delays are world time, and a call being served counts
    /// as the world working ([`crate::world_time`]).
    clock: std::sync::OnceLock<crate::kube_sim::SimClock>,
    /// Flips to true when the front stops, releasing withheld answers.
    stopping: watch::Receiver<bool>,
}

/// The proxy; stops (and releases any withheld call) when dropped.
pub struct AwsFront {
    url: String,
    front: Arc<Front>,
    stop: watch::Sender<bool>,
    shutdown: Option<oneshot::Sender<()>>,
}

/// Resolves when the armed call reached moto and its answer was withheld.
pub struct Crash(oneshot::Receiver<Instant>);

impl Crash {
    /// When moto answered the call the caller will never see.
    pub async fn happened(self) -> anyhow::Result<Instant> {
        self.0
            .await
            .context("the front stopped before the armed call was made")
    }
}

impl AwsFront {
    /// Holds every later call of `action` for `by` (world time once [`AwsFront::use_clock`]
    /// gave it the world's own time, wall-clock time on a manual clock) before handling it, as a slow API answers (the caller may give up first);
    /// see [`Handling::Delayed`].
    pub fn delay(&self, action: &str, by: Duration) {
        if let Ok(mut armed) = self.front.armed.lock() {
            armed.delay.insert(action.to_string(), by);
        }
    }

    /// EC2 reports `check` of `instance_id` impaired since `since` from now on
    /// ([`crate::status_checks`]).
    pub fn impair(
        &self,
        instance_id: &str,
        check: crate::status_checks::Check,
        since: jiff::Timestamp,
    ) {
        self.front.status_checks.impair(instance_id, check, since);
    }

    /// The cluster's access entries, as EKS answers them from now on ([`crate::eks_access`]).
    pub fn set_access_entries(&self, entries: Vec<crate::kube_sim::eks_auth::AccessEntry>) {
        self.front.eks_access.set_entries(entries);
    }

    /// The cluster's authentication mode (`API`, `API_AND_CONFIG_MAP`, `CONFIG_MAP`).
    pub fn set_authentication_mode(&self, mode: &str) {
        self.front.eks_access.set_mode(mode);
    }

    /// `region`'s on-demand prices, as the Price List API answers them from now on
    /// ([`crate::price_list`]).
    pub fn list_prices(&self, region: &str, prices: impl IntoIterator<Item = (String, f64)>) {
        self.front.price_list.set(region, prices);
    }

    /// EC2 holds `reservation` from now on, replacing one with its id
    /// ([`crate::capacity_reservations`]).
    pub fn reserve(&self, reservation: Reservation) {
        self.front.reservations.reserve(reservation);
    }

    /// EC2 cancels reservation `id`; its instances run on outside it
    /// ([`crate::capacity_reservations::Reservations::cancel`]).
    pub fn cancel_reservation(&self, id: &str) {
        self.front.reservations.cancel(id);
    }

    /// How many instances reservation `id` has room for now; `None` for an id never
    /// reserved.
    pub fn reservation_available(&self, id: &str) -> Option<u32> {
        self.front.reservations.available(id)
    }

    /// Starts the proxy on a free loopback port, forwarding to `upstream` (moto's URL).
    pub async fn start(upstream: &str) -> anyhow::Result<AwsFront> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the AWS front to a loopback port")?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop, stopping) = watch::channel(false);
        let front = Arc::new(Front {
            upstream: upstream.trim_end_matches('/').to_string(),
            http: reqwest::Client::builder().no_proxy().build()?,
            armed: Mutex::default(),
            tokens: Tokens::default(),
            consistency: Consistency::default(),
            status_checks: Default::default(),
            eks_access: Default::default(),
            price_list: Default::default(),
            reservations: Reservations::default(),
            calls: Mutex::default(),
            sqs: std::sync::OnceLock::new(),
            clock: std::sync::OnceLock::new(),
            stopping,
        });
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(front.clone());
        let (tx, rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = rx.await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "the AWS front stopped");
            }
        });
        Ok(AwsFront {
            url,
            front,
            stop,
            shutdown: Some(tx),
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Keeps time with `clock` from now on (see [`Front::clock`]).
    pub fn use_clock(&self, clock: crate::kube_sim::SimClock) {
        let _ = self.front.clock.set(clock);
    }

    /// From now on, SQS calls on `sqs`'s queues are answered by it (see the module's doc).
    pub fn emulate_sqs(&self, sqs: Arc<crate::sqs::Sqs>) {
        let _ = self.front.sqs.set(sqs);
    }

    /// `base` pointed at this front instead of moto.
    pub fn sdk_config(&self, base: &SdkConfig) -> SdkConfig {
        base.to_builder().endpoint_url(&self.url).build()
    }

    /// The next `times` calls of `action` are throttled.
    pub fn throttle(&self, action: &str, times: u32) {
        if let Ok(mut armed) = self.front.armed.lock() {
            *armed.throttle.entry(action.to_string()).or_default() += times;
        }
    }

    /// The next call of `action` reaches moto and its answer never comes back.
    pub fn crash_after(&self, action: &str) -> Crash {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut armed) = self.front.armed.lock() {
            armed.crash.insert(action.to_string(), tx);
        }
        Crash(rx)
    }

    /// From now on, every CreateFleet `fault` answers fails with its errors, until
    /// [`AwsFront::clear_fleet_faults`].
    pub fn fail_fleet(&self, fault: FleetFault) {
        self.fail_fleet_after(0, fault);
    }

    /// [`Self::fail_fleet`], but the first `passed` requests `fault` answers launch as
    /// asked: one launch of a batch succeeds, the next fails.
    pub fn fail_fleet_after(&self, passed: usize, fault: FleetFault) {
        if let Ok(mut armed) = self.front.armed.lock() {
            armed.fleet.push((fault, passed));
        }
    }

    /// From now on, an instance launched through the front less than `lag` ago is left
    /// out of DescribeInstances, as EC2's eventual consistency may leave it out; `None`
    /// lists every instance at once again (the default).
    pub fn hide_instances_younger_than(&self, lag: Option<Duration>) {
        self.front.consistency.set_lag(lag);
    }

    pub fn clear_fleet_faults(&self) {
        if let Ok(mut armed) = self.front.armed.lock() {
            armed.fleet.clear();
        }
    }

    /// How many calls of each action the front has seen so far.
    pub fn action_counts(&self) -> std::collections::BTreeMap<String, usize> {
        let mut counts = std::collections::BTreeMap::new();
        if let Ok(calls) = self.front.calls.lock() {
            for c in calls.iter() {
                *counts.entry(c.action.clone()).or_default() += 1;
            }
        }
        counts
    }

    /// Every call of `action` so far, in order.
    pub fn calls(&self, action: &str) -> Vec<Call> {
        self.calls_where(|c| c.action == action)
    }

    /// Every call so far that `keep` keeps, in order.
    pub fn calls_where(&self, keep: impl Fn(&Call) -> bool) -> Vec<Call> {
        self.front
            .calls
            .lock()
            .map(|calls| calls.iter().filter(|c| keep(c)).cloned().collect())
            .unwrap_or_default()
    }
}

impl Drop for AwsFront {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

enum Plan {
    Forward,
    Throttle,
    Crash(oneshot::Sender<Instant>),
}

impl Front {
    fn plan(&self, action: &str) -> Plan {
        let Ok(mut armed) = self.armed.lock() else {
            return Plan::Forward;
        };
        if let Some(left) = armed.throttle.get_mut(action).filter(|n| **n > 0) {
            *left -= 1;
            return Plan::Throttle;
        }
        match armed.crash.remove(action) {
            Some(tx) => Plan::Crash(tx),
            None => Plan::Forward,
        }
    }

    /// EC2's error answer to a CreateFleet body a set fault answers.
    fn fleet_fault(&self, action: &str, body: &[u8]) -> Option<String> {
        if action != "CreateFleet" {
            return None;
        }
        let params = form_params(body);
        let mut armed = self.armed.lock().ok()?;
        let (fault, passed) = armed.fleet.iter_mut().find(|(f, _)| f.answers(&params))?;
        if *passed > 0 {
            *passed -= 1;
            return None;
        }
        Some(answer_xml(&params, fault))
    }

    fn record(&self, action: String, at: Arrival, handling: Handling, body: &[u8]) {
        let params = if RECORDED_PARAMS.contains(&action.as_str()) {
            form_params(body)
        } else {
            Default::default()
        };
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(Call {
                action,
                at: at.wall,
                world_at: at.world,
                took: at.wall.elapsed(),
                handling,
                params,
            });
        }
    }

    async fn forward(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Response, reqwest::Error> {
        let mut request = self
            .http
            .request(method, format!("{}{path_and_query}", self.upstream))
            .body(body);
        // Every header is forwarded as the caller sent it, Host and Content-Length included:
        // the SDK signs them (a GET such as EKS DescribeCluster signs `content-length: 0`,
        // which the HTTP client would not add on its own), and moto verifies the signature.
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let answer = request.send().await?;
        let status = answer.status();
        let headers = answer.headers().clone();
        let body = answer.bytes().await?;
        let mut response = Response::new(Body::from(body));
        *response.status_mut() = status;
        for (name, value) in &headers {
            if name != header::CONTENT_LENGTH && name != header::TRANSFER_ENCODING {
                response.headers_mut().insert(name, value.clone());
            }
        }
        Ok(response)
    }
}

/// When a call arrived, on the wall clock and on the world's.
#[derive(Clone, Copy)]
struct Arrival {
    wall: Instant,
    world: jiff::Timestamp,
}

async fn handle(State(front): State<Arc<Front>>, request: Request) -> Response {
    let at = Arrival {
        wall: Instant::now(),
        world: front
            .clock
            .get()
            .map_or_else(jiff::Timestamp::now, |c| c.now()),
    };
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let action = action_of(&parts.method, parts.uri.path(), &parts.headers, &body);
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let delay = front
        .armed
        .lock()
        .ok()
        .and_then(|a| a.delay.get(&action).copied());
    if let Some(delay) = delay {
        front.record(action.clone(), at, Handling::Delayed, &body);
        let mut stopping = front.stopping.clone();
        let wait = async {
            // On the world's own time the delay is world time; a manual clock moves only
            // when a test moves it, so there the delay is the wall clock's.
            match front.clock.get().filter(|c| c.world_time().is_some()) {
                Some(clock) => clock.sleep(delay).await,
                None => tokio::time::sleep(delay).await,
            }
        };
        tokio::select! {
            () = wait => {}
            _ = stopping.wait_for(|stop| *stop) => {}
        }
    }
    // A long poll waits; everything else is work while it is served.
    let _busy = front
        .clock
        .get()
        .filter(|_| action != "ReceiveMessage")
        .map(|c| c.busy());
    let plan = front.plan(&action);
    if let Plan::Throttle = plan {
        front.record(action.clone(), at, Handling::Throttled, &body);
        return throttled(&parts.headers, &action);
    }
    if let Some(sqs) = front.sqs.get()
        && crate::sqs::wire::queue_url_of(&parts.headers, &body)
            .is_some_and(|url| sqs.queue(&url).is_some())
    {
        let response = emulated_sqs(&front, sqs, parts, body, &action, at, &path_and_query).await;
        return match plan {
            Plan::Crash(tx) => withhold(&front, tx).await,
            _ => response,
        };
    }
    if action == crate::capacity_reservations::DESCRIBE {
        let response = emulated_reservations(&front, &parts, body, &action, at, &path_and_query);
        let response = response.await;
        return match plan {
            Plan::Crash(tx) => withhold(&front, tx).await,
            _ => response,
        };
    }
    if let Some((code, json)) = front
        .eks_access
        .answer(parts.method.as_str(), parts.uri.path())
    {
        front.record(action, at, Handling::Forwarded(code), &body);
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
        return (status, axum::Json(json)).into_response();
    }
    if let Some(json) = front.price_list.answer(&action, &body) {
        front.record(action, at, Handling::Emulated(200), &body);
        return axum::Json(json).into_response();
    }
    let eks_read = parts.method == Method::GET && parts.uri.path().starts_with("/clusters/");
    let request_path = parts.uri.path().to_string();
    if let Some(id) = front.consistency.not_found(&action, &body, at.wall) {
        front.record(action, at, Handling::NotVisibleYet, &body);
        let mut r = (StatusCode::BAD_REQUEST, not_found_xml(&id)).into_response();
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml"));
        return r;
    }
    let _token_turn = front.tokens.turn(&action, &body).await;
    let token_key = match front.tokens.judge(&action, &body) {
        Verdict::Forward { key } => key,
        Verdict::Replay(first) => {
            front.record(action, at, Handling::Replayed, &body);
            return replay(first);
        }
        Verdict::Mismatch { token } => {
            front.record(action, at, Handling::TokenMismatch, &body);
            let mut r = (StatusCode::BAD_REQUEST, mismatch_xml(&token)).into_response();
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml"));
            return r;
        }
    };
    let admission = match front.fleet_fault(&action, &body) {
        Some(xml) => Admission::Refused(xml),
        None => front.reservations.admit(&action, &body),
    };
    let hold = match admission {
        Admission::Refused(xml) => return refuse_fleet(&front, action, at, &body, token_key, xml),
        Admission::Forward(hold) => hold,
    };
    let answer = front
        .forward(parts.method, &path_and_query, &parts.headers, body.clone())
        .await;
    let response = match answer {
        Ok(r) => r,
        Err(e) => {
            front.reservations.settle(hold, 502, &[]);
            return (
                StatusCode::BAD_GATEWAY,
                format!("the AWS front could not reach moto: {e}"),
            )
                .into_response();
        }
    };
    let response = if eks_read {
        let (mut parts_out, out_body) = response.into_parts();
        let bytes = axum::body::to_bytes(out_body, MAX_BODY)
            .await
            .unwrap_or_default();
        let bytes = front
            .eks_access
            .describe_cluster("GET", &request_path, bytes.to_vec());
        parts_out.headers.remove(header::CONTENT_LENGTH);
        Response::from_parts(parts_out, Body::from(bytes))
    } else {
        response
    };
    let read_answer = token_key.is_some()
        || hold.is_some()
        || matches!(
            action.as_str(),
            "CreateFleet"
                | "RunInstances"
                | "DescribeInstances"
                | "DescribeInstanceStatus"
                | "CreateLaunchTemplate"
                | "TerminateInstances"
        );
    let response = if read_answer {
        let (parts_out, out_body) = response.into_parts();
        let bytes = axum::body::to_bytes(out_body, MAX_BODY)
            .await
            .unwrap_or_default();
        front.consistency.launched(&action, &bytes, at.wall);
        let bytes = front.consistency.visible(&action, bytes.to_vec(), at.wall);
        let bytes = front.status_checks.rewrite(&action, bytes);
        let status = parts_out.status.as_u16();
        front.reservations.settle(hold, status, &bytes);
        let bytes = Bytes::from(front.reservations.answered(&action, &body, status, bytes));
        // EC2 remembers the answer whether or not the caller lived to read it.
        if let Some(key) = token_key {
            let content_type = parts_out
                .headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("text/xml")
                .to_string();
            front.tokens.remember(
                key,
                &body,
                Remembered {
                    status: parts_out.status.as_u16(),
                    content_type,
                    body: bytes.clone(),
                },
            );
        }
        Response::from_parts(parts_out, Body::from(bytes))
    } else {
        response
    };
    match plan {
        Plan::Crash(tx) => {
            front.record(action, at, Handling::Withheld, &body);
            withhold(&front, tx).await
        }
        _ => {
            front.record(
                action,
                at,
                Handling::Forwarded(response.status().as_u16()),
                &body,
            );
            response
        }
    }
}

/// The caller "crashed" after its call took effect: the test is told, and the answer is
/// held until the front stops.
async fn withhold(front: &Front, crashed: oneshot::Sender<Instant>) -> Response {
    let _ = crashed.send(Instant::now());
    let mut stopping = front.stopping.clone();
    let _ = stopping.wait_for(|s| *s).await;
    StatusCode::SERVICE_UNAVAILABLE.into_response()
}

/// An SQS call on an emulated queue: moto judges its IAM (its answer is returned when it
/// refused), then the world's queue answers.
async fn emulated_sqs(
    front: &Front,
    sqs: &crate::sqs::Sqs,
    parts: axum::http::request::Parts,
    body: Bytes,
    action: &str,
    at: Arrival,
    path_and_query: &str,
) -> Response {
    let moto_bytes = match judged_by_moto(front, &parts, &body, action, at, path_and_query).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    let moto_json: serde_json::Value = serde_json::from_slice(&moto_bytes).unwrap_or_default();
    let response = crate::sqs::wire::serve(sqs, action, &parts.headers, &body, &moto_json)
        .await
        .unwrap_or_else(|| StatusCode::BAD_REQUEST.into_response());
    front.record(
        action.to_string(),
        at,
        Handling::Emulated(response.status().as_u16()),
        &body,
    );
    response
}

/// A DescribeCapacityReservations: moto judges its IAM (its answer is returned when it
/// refused; when it allowed the call, moto answers that it has no such action), then the
/// world's reservations answer.
async fn emulated_reservations(
    front: &Front,
    parts: &axum::http::request::Parts,
    body: Bytes,
    action: &str,
    at: Arrival,
    path_and_query: &str,
) -> Response {
    if let Err(refused) = judged_by_moto(front, parts, &body, action, at, path_and_query).await {
        return refused;
    }
    let (status, xml) = front.reservations.describe(&body);
    front.record(action.to_string(), at, Handling::Emulated(status), &body);
    xml_answer(status, xml)
}

/// moto's verdict on a call the world answers itself: `Ok` with moto's answer when IAM
/// let it through, `Err` with the answer to send (moto's refusal, recorded as forwarded,
/// or a gateway error when moto could not be reached).
async fn judged_by_moto(
    front: &Front,
    parts: &axum::http::request::Parts,
    body: &Bytes,
    action: &str,
    at: Arrival,
    path_and_query: &str,
) -> Result<Bytes, Response> {
    let judged = front
        .forward(
            parts.method.clone(),
            path_and_query,
            &parts.headers,
            body.clone(),
        )
        .await;
    let moto = judged.map_err(|e| {
        let message = format!("the AWS front could not reach moto: {e}");
        (StatusCode::BAD_GATEWAY, message).into_response()
    })?;
    let (moto_parts, moto_body) = moto.into_parts();
    let moto_bytes = axum::body::to_bytes(moto_body, MAX_BODY)
        .await
        .unwrap_or_default();
    if refused_by_iam(moto_parts.status, &moto_bytes) {
        let handling = Handling::Forwarded(moto_parts.status.as_u16());
        front.record(action.to_string(), at, handling, body);
        return Err(Response::from_parts(moto_parts, Body::from(moto_bytes)));
    }
    Ok(moto_bytes)
}

/// A CreateFleet refused before moto saw it (a [`FleetFault`], a capacity reservation):
/// EC2's `instant` fleet answer `xml`, remembered under the call's token as EC2 remembers
/// an error answer like any other.
fn refuse_fleet(
    front: &Front,
    action: String,
    at: Arrival,
    body: &[u8],
    token_key: Option<(String, String)>,
    xml: String,
) -> Response {
    if let Some(key) = token_key {
        let remembered = Remembered {
            status: 200,
            content_type: "text/xml".into(),
            body: Bytes::from(xml.clone()),
        };
        front.tokens.remember(key, body, remembered);
    }
    front.record(action, at, Handling::FleetErrors, body);
    xml_answer(200, xml)
}

/// An EC2 (query protocol) answer.
fn xml_answer(status: u16, xml: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = (status, xml).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml"));
    r
}

/// Whether moto's answer is IAM's refusal (403, or an AccessDenied error document).
fn refused_by_iam(status: StatusCode, body: &[u8]) -> bool {
    status == StatusCode::FORBIDDEN || String::from_utf8_lossy(body).contains("AccessDenied")
}

fn replay(first: Remembered) -> Response {
    let mut r = Response::new(Body::from(first.body));
    *r.status_mut() = StatusCode::from_u16(first.status).unwrap_or(StatusCode::OK);
    if let Ok(v) = HeaderValue::from_str(&first.content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

/// The action a request calls: `X-Amz-Target`'s operation for JSON protocols, `Action=`
/// of a form body for the query protocol (EC2, STS, IAM), else `METHOD /path` (REST).
pub fn action_of(method: &Method, path: &str, headers: &HeaderMap, body: &[u8]) -> String {
    if let Some(target) = headers.get("x-amz-target").and_then(|v| v.to_str().ok()) {
        return target.rsplit('.').next().unwrap_or(target).to_string();
    }
    let form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if form {
        let action = std::str::from_utf8(body)
            .ok()
            .and_then(|b| b.split('&').find_map(|kv| kv.strip_prefix("Action=")));
        if let Some(a) = action {
            return a.to_string();
        }
    }
    format!("{method} {path}")
}

/// AWS's answer to a throttled call, in the protocol the caller spoke.
fn throttled(headers: &HeaderMap, action: &str) -> Response {
    let message = format!("Request limit exceeded (injected by the local world for {action}).");
    if headers.contains_key("x-amz-target") {
        let mut r = (
            StatusCode::BAD_REQUEST,
            serde_json::json!({"__type": "ThrottlingException", "message": message}).to_string(),
        )
            .into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-amz-json-1.1"),
        );
        return r;
    }
    // EC2's query-protocol error document (RequestLimitExceeded is answered with 503).
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error>\
         <Code>RequestLimitExceeded</Code><Message>{message}</Message></Error></Errors>\
         <RequestID>00000000-0000-0000-0000-000000000000</RequestID></Response>"
    );
    let mut r = (StatusCode::SERVICE_UNAVAILABLE, xml).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_action_is_read_from_the_target_header_the_form_body_or_the_path() {
        let mut json = HeaderMap::new();
        json.insert(
            "x-amz-target",
            HeaderValue::from_static("AmazonSSM.GetParameter"),
        );
        let mut form = HeaderMap::new();
        form.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded; charset=utf-8"),
        );
        let cases: [(&HeaderMap, &[u8], &str); 4] = [
            (&json, b"{}", "GetParameter"),
            (
                &form,
                b"Version=2016-11-15&Action=CreateFleet&Type=instant",
                "CreateFleet",
            ),
            (&form, b"Version=2016-11-15", "POST /"),
            (&HeaderMap::new(), b"", "POST /"),
        ];
        for (headers, body, want) in cases {
            assert_eq!(action_of(&Method::POST, "/", headers, body), want);
        }
    }
}
