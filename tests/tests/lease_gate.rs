//! The check right before CreateFleet (the poll's `Turn` with the provisioner handler's
//! `InvocationGate`): a holder whose Lease was taken over while it was preparing
//! a launch (frozen past its lease, or slower than it) sends no CreateFleet; once the Lease
//! is its own again, the same launch goes out.
//!
//! Emulated: AWS is moto behind the world's front (which records every CreateFleet),
//! Kubernetes the simulated cluster serving Leases with 409 on conflict. The provisioner,
//! the AWS SDK and `kube::Client` are real.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use nodewright::clock::SystemClock;
use nodewright::lease::{Elector, KubeLeases};
use nodewright::provision::{BatchWindow, PollReport, Turn};
use nodewright_provisioner::coverage::InvocationGate;
use nodewright_world::kube_sim::{SimClock, SimConfig};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::{ProvisionerState, quick};

const NAME: &str = "nodewright-provisioner";
const LEASE: Duration = Duration::from_secs(2);

/// Polls in `turn` until the batching window has closed and the poll planned something.
async fn poll_until_planned(state: &ProvisionerState, turn: &Turn<'_>) -> PollReport {
    for _ in 0..50 {
        let report = state
            .provisioner()
            .lock()
            .await
            .poll(turn, SystemTime::now())
            .await
            .expect("the poll");
        if report.waiting.is_none() && report.claims > 0 {
            return report;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("nothing was planned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_lease_was_taken_over_withholds_its_launch_until_the_lease_is_its_own() {
    let world = World::start(
        "lease-gate",
        SimConfig {
            clock: SimClock::manual(),
            crds_installed: true,
            ..SimConfig::default()
        },
    )
    .await
    .expect("the local world starts");
    let example = world
        .example_edited("getting-started.yaml", &[("replicas: 10", "replicas: 2")])
        .unwrap();
    world.apply_yaml(&example).unwrap();
    world.sim.step().await;
    let batch = BatchWindow::fixed(Duration::from_millis(200), Duration::from_secs(2));
    let state = world
        .provisioner(quick(Duration::from_secs(2)), batch)
        .await
        .unwrap();

    let store = KubeLeases::new(world.sim.client().await.unwrap(), "kube-system");
    let me = Arc::new(Elector::new(store.clone(), NAME, "me", LEASE));
    // A long lease for the other holder: it must outlast this container's cold first
    // poll (its catalog built from moto), however slow.
    let other = Elector::new(store, NAME, "other", Duration::from_secs(120));
    let t0 = SystemTime::now();
    assert!(me.hold(t0).await.unwrap().is_held());
    // While "me" is frozen, its lease expires and "other" takes over.
    assert!(other.hold(t0 + LEASE).await.unwrap().is_held());
    let gate = InvocationGate {
        elector: me.clone(),
        clock: Arc::new(SystemClock),
    };
    let turn = Turn {
        gate: Some(&gate),
        ..Turn::OUTSIDE
    };

    let withheld = poll_until_planned(&state, &turn).await;
    assert!(withheld.launched_instances.is_empty(), "{withheld:?}");
    assert!(
        withheld
            .withheld
            .as_deref()
            .is_some_and(|why| why.contains("held by other")),
        "{withheld:?}"
    );
    assert_eq!(
        withheld.unschedulable_pods, 0,
        "withheld pods are not unschedulable"
    );
    assert!(world.front.calls("CreateFleet").is_empty());

    // "other" ends and releases: the same claim is launched, once.
    assert!(other.release(SystemTime::now()).await.unwrap());
    let launched = poll_until_planned(&state, &turn).await;
    assert_eq!(launched.launched_instances.len(), 1, "{launched:?}");
    assert_eq!(launched.withheld, None);
    assert_eq!(world.front.calls("CreateFleet").len(), 1);
    assert_eq!(world.instances().await.unwrap().len(), 1);
}
