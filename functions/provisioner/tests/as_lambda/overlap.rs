//! Overlapping invocations of the real `provisioner` binary, each started as Lambda starts
//! it (its own emulated Runtime API, its own container name), taking turns through the
//! Lease: one launch for one set of pods, a holder that dies is taken over once its lease
//! expires, a holder frozen past its lease launches nothing when it resumes, and an
//! invocation returns before its deadline.
//!
//! Emulated: the Runtime API (`nodewright_world::lambda_api`), AWS (moto behind the world's
//! front, which records every CreateFleet) and Kubernetes (the simulated cluster, serving
//! Leases with 409 on conflict). The binary and its clients are the real ones.
//!
//! The world keeps its own time ([`nodewright_world::world_time`]), and the binaries keep it
//! too: while nothing works (a holder waiting to renew, a standby waiting for its next
//! check, a dead holder's lease running out) it runs [`IDLE_SPEED`] times as fast as the
//! wall clock, so an invocation's minute passes in seconds; while anything works (a request,
//! a binary using the CPU) it runs at the wall clock's pace. Timeouts, deadlines and Lease
//! times are all the world's.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use nodewright_world::kit::{LambdaFunction, world_on_its_own_time};
use nodewright_world::kube_sim::SimClock;
use nodewright_world::lambda_api::{FunctionProcess, Outcome, RuntimeApi};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::scheduled_event;
use serde_json::Value;

/// The production default (`DEFAULT_LEASE_DURATION`): a holder renews every 2 s. A 2 s
/// lease (renewed every 667 ms) was lost by a working holder on a loaded 2-core CI
/// machine, which is the Lease doing its job but not what these tests are about. The
/// SDK's timeouts follow the margin (20 s per operation, 10 s per attempt): moto on a
/// loaded test machine answers the catalog's DescribeInstanceTypes pages far more slowly
/// than EC2.
const LEASE_SECONDS: u64 = 6;
const MARGIN_SECONDS: u64 = 30;
/// How much faster than the wall clock the world runs while nothing works.
const IDLE_SPEED: f64 = 10.0;

struct Container {
    api: RuntimeApi,
    process: FunctionProcess,
    log: PathBuf,
    clock: SimClock,
}

impl Container {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// One invocation with Lambda's `timeout` (world time); its answer and when it came on
    /// the world's clock. The wall clock bounds the wait too, in case the world stalls.
    async fn invoke(&self, timeout: Duration) -> (Value, Timestamp) {
        let deadline = self.clock.now() + timeout;
        let answer = tokio::time::timeout(
            timeout + Duration::from_secs(30),
            self.api
                .invoke_until(scheduled_event(), deadline.as_millisecond()),
        )
        .await
        .unwrap_or_else(|_| panic!("no answer; log:\n{}", self.log()))
        .expect("the Runtime API");
        let at = self.clock.now();
        match answer {
            Outcome::Response(summary) => (summary, at),
            Outcome::Error(e) => panic!("the invocation failed: {e}\n{}", self.log()),
        }
    }
}

async fn world(name: &str) -> World {
    let world = world_on_its_own_time(name, IDLE_SPEED)
        .await
        .expect("the local world starts");
    let pools = world
        .example_edited("getting-started.yaml", &[("replicas: 10", "replicas: 0")])
        .unwrap();
    world.apply_yaml(&pools).unwrap();
    world
}

/// `replicas` pods of 1 CPU in a Deployment of their own, pending once the sim steps.
async fn pods(world: &World, deployment: &str, replicas: u32) {
    let yaml = world
        .example_edited(
            "getting-started.yaml",
            &[
                ("replicas: 10", &format!("replicas: {replicas}")),
                ("inflate", deployment),
            ],
        )
        .unwrap();
    // Only the Deployment: the NodePool and EC2NodeClass are in place already.
    let deployment = yaml
        .split("\n---")
        .find(|doc| doc.contains("kind: Deployment"))
        .expect("the example has a Deployment");
    world.apply_yaml(deployment).unwrap();
    world.sim.step().await;
}

/// A container named `name` (its log stream: the first part of its holder identity).
fn container(world: &World, api: RuntimeApi, name: &str, test: &str) -> Container {
    LambdaFunction::start_behind(
        world,
        api,
        Path::new(env!("CARGO_BIN_EXE_provisioner")),
        test,
        name,
        [
            ("AWS_LAMBDA_LOG_STREAM_NAME", name.to_string()),
            ("POLL_INTERVAL", "1".to_string()),
            ("LEASE_DURATION", LEASE_SECONDS.to_string()),
            ("DEADLINE_MARGIN", MARGIN_SECONDS.to_string()),
            ("INVOCATION_BUDGET", "600".to_string()),
        ],
    )
    .map(|LambdaFunction { api, process, log }| Container {
        api,
        process,
        log,
        clock: world.clock(),
    })
    .unwrap()
}

async fn two_containers(world: &World, test: &str) -> (Container, Container) {
    let a = container(world, RuntimeApi::start().await.unwrap(), "a", test);
    let b = container(world, RuntimeApi::start().await.unwrap(), "b", test);
    (a, b)
}

async fn leases(world: &World) -> Api<Lease> {
    Api::namespaced(world.sim.client().await.unwrap(), "kube-system")
}

/// Waits (up to a minute, for a cold start) until the provisioner's Lease names a holder
/// starting with `prefix`.
async fn held_by(api: &Api<Lease>, prefix: &str) -> String {
    let start = Instant::now();
    loop {
        let holder = api
            .get_opt("nodewright-provisioner")
            .await
            .unwrap()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .unwrap_or_default();
        if holder.starts_with(prefix) {
            return holder;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the Lease never went to {prefix:?} (holder {holder:?})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn launched(summary: &Value) -> usize {
    summary["launchedInstances"].as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_invocations_take_turns_one_launch_per_set_of_pods_and_no_gap() {
    let world = world("overlap").await;
    pods(&world, "first", 2).await;
    let (a, b) = two_containers(&world, "overlap").await;
    // a's first poll is a cold one (its catalog built from moto on a loaded machine).
    let timeout = Duration::from_secs(MARGIN_SECONDS + 40);
    let lease = leases(&world).await;

    let (a_answer, b_answer) = tokio::join!(a.invoke(timeout), async {
        // The next scheduled invocation starts while the first still runs.
        held_by(&lease, "a/").await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        // Pods that turn pending after the first invocation has ended are covered by the
        // second, which took the Lease over at once. Four more of 1 CPU: more than what
        // is left on the first launch's instance.
        let more = async {
            held_by(&lease, "b/").await;
            pods(&world, "second", 4).await;
        };
        // b never polled before: its first poll builds its catalog, so it gets the
        // time to.
        let (answer, ()) = tokio::join!(b.invoke(timeout + Duration::from_secs(30)), more);
        answer
    });
    let (a_summary, _) = a_answer;
    let (b_summary, _) = b_answer;

    assert_eq!(launched(&a_summary), 1, "a: {a_summary}\n{}", a.log());
    assert!(launched(&b_summary) >= 1, "b: {b_summary}\n{}", b.log());
    assert_eq!(
        a_summary["lease"]["released"],
        true,
        "a held the Lease to its end and released it: {a_summary}\n{}",
        a.log()
    );
    assert!(
        b_summary["lease"]["standbyChecks"].as_u64() > Some(0),
        "b stood by while a held the Lease: {b_summary}"
    );
    assert_eq!(b_summary["lease"]["acquired"], 1, "{b_summary}");
    let fleets = world.front.calls("CreateFleet").len();
    let claims = a_summary["claims"].as_u64().unwrap() + b_summary["claims"].as_u64().unwrap();
    assert_eq!(
        fleets as u64, claims,
        "one CreateFleet per claim, none twice"
    );
    assert_eq!(
        world.instances().await.unwrap().len(),
        launched(&a_summary) + launched(&b_summary)
    );
    assert!(a.process.pid().is_some() && b.process.pid().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_invocation_builds_its_catalog_while_waiting_so_taking_over_asks_ec2_for_none() {
    let world = world("standby-warm").await;
    pods(&world, "first", 1).await;
    let (a, b) = two_containers(&world, "standby-warm").await;
    let timeout = Duration::from_secs(MARGIN_SECONDS + 40);
    let lease = leases(&world).await;

    let (a_answer, (b_answer, took_over)) = tokio::join!(a.invoke(timeout), async {
        held_by(&lease, "a/").await;
        // As a minute later in Lambda: a has launched (its cold catalog built) by the time
        // the next invocation starts, so the two do not load moto at once.
        while world.front.calls("CreateFleet").is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // b is a cold container that never polled: all it knows it learns standing by.
        let more = async {
            held_by(&lease, "b/").await;
            let took_over = Instant::now();
            pods(&world, "second", 4).await;
            took_over
        };
        tokio::join!(b.invoke(timeout + Duration::from_secs(30)), more)
    });
    let (a_summary, _) = a_answer;
    let (b_summary, _) = b_answer;

    assert!(launched(&b_summary) >= 1, "b: {b_summary}\n{}", b.log());
    assert!(
        b_summary["lease"]["standbyWarmUp"]["ms"].is_u64(),
        "b warmed up while a held the Lease: {b_summary}"
    );
    // a's first poll and b's warm-up built their catalogs; b's polls as holder, with the
    // second Deployment's pods pending, asked EC2 for none of it.
    let describes = world.front.calls("DescribeInstanceTypes");
    assert!(!describes.is_empty());
    let after: Vec<_> = describes.iter().filter(|c| c.at >= took_over).collect();
    assert!(
        after.is_empty(),
        "{} DescribeInstanceTypes calls after b took over; b: {b_summary}\n{}",
        after.len(),
        b.log()
    );
    let fleets = world.front.calls("CreateFleet").len();
    let claims = a_summary["claims"].as_u64().unwrap() + b_summary["claims"].as_u64().unwrap();
    assert_eq!(
        fleets as u64, claims,
        "one CreateFleet per claim, none twice"
    );
}

/// Whether `call` lists this cluster's instances by its ownership tag (not by id).
fn lists_by_tag(call: &nodewright_world::aws_front::Call) -> bool {
    call.action == "DescribeInstances" && call.params.values().any(|v| v.starts_with("tag:"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_plans_for_new_pods_with_the_instances_it_listed_between_polls() {
    let world = world("kept-listing").await;
    pods(&world, "first", 1).await;
    let a = container(
        &world,
        RuntimeApi::start().await.unwrap(),
        "a",
        "kept-listing",
    );
    let timeout = Duration::from_secs(MARGIN_SECONDS + 30);
    let (answer, pods_at) = tokio::join!(a.invoke(timeout), async {
        let first_fleet = loop {
            if let Some(c) = world.front.calls("CreateFleet").first() {
                break c.at;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        // The holder lists between polls once it has launched; the next listing is due
        // ten seconds later, so the poll for the pods below is left to plan with this one.
        let start = Instant::now();
        while !world
            .front
            .calls("DescribeInstances")
            .iter()
            .any(|c| c.at > first_fleet && lists_by_tag(c))
        {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "no listing between polls"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let pods_at = Instant::now();
        pods(&world, "second", 4).await;
        pods_at
    });
    let (summary, _) = answer;
    let fleets = world.front.calls("CreateFleet");
    assert!(
        fleets.len() >= 2,
        "the second pods launched: {summary}
{}",
        a.log()
    );
    assert_eq!(
        fleets.len() as u64,
        summary["claims"].as_u64().unwrap(),
        "{summary}"
    );
    let second = fleets[1].at;
    let on_path: Vec<_> = world
        .front
        .calls("DescribeInstances")
        .into_iter()
        .filter(|c| c.at >= pods_at && c.at <= second && lists_by_tag(c))
        .collect();
    assert!(
        on_path.is_empty(),
        "the poll for the second pods listed instances: {on_path:?}
{}",
        a.log()
    );
}

/// Sends `signal` (`KILL`, `STOP`, `CONT`) to a container's process.
fn signal(c: &Container, signal: &str) {
    let pid = c.process.pid().expect("the process runs");
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("kill(1)");
    assert!(status.success(), "kill -{signal} {pid}");
}

/// When the Lease as it stands now expires, on the world's clock (the holder's).
async fn expiry(api: &Api<Lease>) -> Timestamp {
    let spec = api
        .get("nodewright-provisioner")
        .await
        .unwrap()
        .spec
        .unwrap();
    spec.renew_time.unwrap().0 + Duration::from_secs(spec.lease_duration_seconds.unwrap() as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_killed_without_releasing_is_taken_over_once_its_lease_expires() {
    let world = world("killed").await;
    let (a, b) = two_containers(&world, "killed").await;
    let lease = leases(&world).await;
    let a_call = a.invoke(Duration::from_secs(MARGIN_SECONDS + 60));
    tokio::pin!(a_call);
    tokio::select! {
        (summary, _) = &mut a_call => panic!("a answered before being killed: {summary}"),
        _ = held_by(&lease, "a/") => {}
    }
    signal(&a, "KILL");
    let expires = expiry(&lease).await;
    pods(&world, "inflate", 2).await;

    // b waits out the dead holder's lease, then builds its catalog cold: its working time
    // (the timeout less the margin) covers both on a loaded machine.
    let (summary, _) = b
        .invoke(Duration::from_secs(MARGIN_SECONDS + 30 + LEASE_SECONDS))
        .await;
    assert_eq!(launched(&summary), 1, "{summary}\n{}", b.log());
    assert!(
        summary["lease"]["standbyChecks"].as_u64() > Some(0),
        "b found the dead holder's lease first: {summary}"
    );
    let fleets = world.front.calls("CreateFleet");
    assert_eq!(fleets.len(), 1);
    assert!(
        fleets[0].world_at >= expires,
        "b launched {} before the dead holder's lease expired",
        expires.duration_since(fleets[0].world_at)
    );
    assert_eq!(world.instances().await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_frozen_past_its_lease_launches_nothing_when_it_resumes() {
    let world = world("frozen").await;
    let (a, b) = two_containers(&world, "frozen").await;
    let lease = leases(&world).await;
    let a_call = a.invoke(Duration::from_secs(MARGIN_SECONDS + 60));
    tokio::pin!(a_call);
    tokio::select! {
        (summary, _) = &mut a_call => panic!("a answered before being frozen: {summary}"),
        _ = held_by(&lease, "a/") => {}
    }
    // Frozen holding the Lease, its pod watch open: the pods turn pending meanwhile.
    signal(&a, "STOP");
    pods(&world, "inflate", 2).await;

    // As above: the frozen holder's lease, then a cold catalog, within b's working time.
    let b_call = b.invoke(Duration::from_secs(MARGIN_SECONDS + 30 + LEASE_SECONDS));
    tokio::pin!(b_call);
    let start = Instant::now();
    while world.front.calls("CreateFleet").is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "b never launched\n{}",
            b.log()
        );
        tokio::select! {
            (summary, _) = &mut b_call => panic!("b answered without launching: {summary}"),
            () = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
    // a resumes past its lease, with the pods it saw pending still unplaced.
    signal(&a, "CONT");
    let ((a_summary, _), (b_summary, _)) = tokio::join!(a_call, b_call);
    assert_eq!(launched(&b_summary), 1, "{b_summary}\n{}", b.log());
    assert_eq!(launched(&a_summary), 0, "{a_summary}\n{}", a.log());
    assert_eq!(
        world.front.calls("CreateFleet").len(),
        1,
        "a: {a_summary}\nb: {b_summary}"
    );
    assert_eq!(world.instances().await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invocation_whose_deadline_is_within_the_margin_starts_nothing_and_answers_in_time() {
    let world = world("deadline").await;
    pods(&world, "inflate", 2).await;
    let a = container(&world, RuntimeApi::start().await.unwrap(), "a", "deadline");
    let timeout = Duration::from_secs(MARGIN_SECONDS - 2);
    let invoked = world.clock().now();
    let (summary, answered) = a.invoke(timeout).await;
    assert!(
        answered < invoked + timeout,
        "answered {} after the deadline",
        answered.duration_since(invoked + timeout)
    );
    assert_eq!(summary["polls"], 0, "{summary}");
    assert!(world.front.calls("CreateFleet").is_empty());
    assert!(world.instances().await.unwrap().is_empty());

    // With time enough, the same warm container launches, once, and still answers in time.
    let timeout = Duration::from_secs(MARGIN_SECONDS + 20);
    let invoked = world.clock().now();
    let (summary, answered) = a.invoke(timeout).await;
    assert!(answered < invoked + timeout, "{summary}");
    assert_eq!(launched(&summary), 1, "{summary}\n{}", a.log());
    assert_eq!(world.front.calls("CreateFleet").len(), 1);
    assert_eq!(world.instances().await.unwrap().len(), 1);
}
