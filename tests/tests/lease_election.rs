//! Leader election (`nodewright::lease`) through the real `kube::Client` against the
//! simulated API server, which serves Leases with resourceVersion preconditions and 409 on
//! conflict as the API server does. Time is passed in, so expiry is shown without waiting.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use nodewright::lease::{Elector, Hold, KubeLeases, Launches, Step};
use nodewright_world::kube_sim::{SimCluster, SimConfig};

const NAME: &str = "nodewright-provisioner";
const DURATION: Duration = Duration::from_secs(5);

async fn contenders(names: &[&str]) -> (SimCluster, Vec<Elector<KubeLeases>>, Api<Lease>) {
    let sim = SimCluster::start(SimConfig::default())
        .await
        .expect("sim starts");
    let client = sim.client().await.expect("client");
    let electors = names
        .iter()
        .map(|n| {
            Elector::new(
                KubeLeases::new(client.clone(), "kube-system"),
                NAME,
                n,
                DURATION,
            )
        })
        .collect();
    (sim, electors, Api::namespaced(client, "kube-system"))
}

/// Now, in whole seconds: a Lease keeps microseconds, so times compared after a round trip
/// must not carry finer digits.
fn now() -> SystemTime {
    let since = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970");
    SystemTime::UNIX_EPOCH + Duration::from_secs(since.as_secs())
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

async fn holder(api: &Api<Lease>) -> Option<String> {
    api.get(NAME)
        .await
        .expect("the Lease")
        .spec
        .and_then(|s| s.holder_identity)
}

#[tokio::test]
async fn the_first_contender_creates_the_lease_and_the_second_waits_until_it_is_released() {
    let (_sim, e, api) = contenders(&["a", "b"]).await;
    let t0 = now();
    let a = e[0].hold(t0).await.expect("a holds");
    assert_eq!(
        a,
        Hold::Held {
            until: t0 + DURATION,
            how: Step::Create,
            earlier: Launches::bound(t0),
        }
    );
    let b = e[1].hold(t0 + secs(1)).await.expect("b reads");
    assert_eq!(
        b,
        Hold::Waiting {
            holder: "a".into(),
            until: t0 + DURATION
        }
    );
    assert!(matches!(
        e[0].hold(t0 + secs(2)).await,
        Ok(Hold::Held {
            how: Step::Renew,
            ..
        })
    ));
    assert!(e[0].release(t0 + secs(3)).await.expect("released"));
    assert_eq!(holder(&api).await, None);
    // Released: taken at once, long before a's renewal would have expired.
    assert!(matches!(
        e[1].hold(t0 + secs(3)).await,
        Ok(Hold::Held {
            how: Step::Acquire,
            ..
        })
    ));
    assert_eq!(holder(&api).await.as_deref(), Some("b"));
    let lease = api.get(NAME).await.expect("the Lease").spec.expect("spec");
    assert_eq!(lease.lease_transitions, Some(1));
    assert_eq!(lease.lease_duration_seconds, Some(5));
}

#[tokio::test]
async fn a_holder_that_stops_renewing_is_taken_over_only_after_its_lease_expires() {
    let (_sim, e, api) = contenders(&["a", "b"]).await;
    let t0 = now();
    e[0].hold(t0).await.expect("a holds");
    assert!(!e[1].hold(t0 + secs(4)).await.expect("b reads").is_held());
    assert_eq!(
        e[1].hold(t0 + secs(5)).await.expect("b takes over"),
        Hold::Held {
            until: t0 + secs(10),
            how: Step::TakeOver { from: "a".into() },
            earlier: Launches::bound(t0 + secs(5)),
        }
    );
    assert_eq!(holder(&api).await.as_deref(), Some("b"));
}

#[tokio::test]
async fn a_holder_frozen_past_its_lease_learns_on_resuming_that_it_lost_and_releases_nothing() {
    let (_sim, e, api) = contenders(&["a", "b"]).await;
    let t0 = now();
    e[0].hold(t0).await.expect("a holds");
    // a is frozen; b takes over once a's lease has expired.
    assert!(e[1].hold(t0 + secs(6)).await.expect("b").is_held());
    // a resumes, still believing in its lease: its re-check says b holds it.
    assert_eq!(
        e[0].hold(t0 + secs(7)).await.expect("a re-checks"),
        Hold::Waiting {
            holder: "b".into(),
            until: t0 + secs(11)
        }
    );
    assert!(!e[0].release(t0 + secs(7)).await.expect("a's release"));
    assert_eq!(holder(&api).await.as_deref(), Some("b"));
}

#[tokio::test]
async fn of_contenders_racing_for_a_free_lease_exactly_one_wins() {
    let names = ["a", "b", "c", "d"];
    let (_sim, e, api) = contenders(&names).await;
    let t0 = now();
    let results = futures::future::join_all(e.iter().map(|c| c.hold(t0))).await;
    let winners: Vec<&str> = results
        .iter()
        .zip(names)
        .filter(|(r, _)| matches!(r, Ok(h) if h.is_held()))
        .map(|(_, n)| n)
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    assert_eq!(holder(&api).await.as_deref(), Some(winners[0]));
    for (r, n) in results.iter().zip(names) {
        if n != winners[0] {
            assert!(
                matches!(r, Ok(Hold::Waiting { holder, .. }) if holder == winners[0]),
                "{n}: {r:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_holders_launches_go_with_the_lease_it_releases_to_the_next_holder_and_the_one_after() {
    let (_sim, e, api) = contenders(&["a", "b", "c"]).await;
    let t0 = now();
    e[0].hold(t0).await.expect("a holds");
    e[0].note_launches(&["i-0a".to_string()], t0 + secs(2));
    assert!(e[0].release(t0 + secs(4)).await.expect("a releases"));
    let annotations = api.get(NAME).await.expect("the Lease").metadata.annotations;
    assert!(
        annotations.is_some_and(|a| a.contains_key(nodewright::lease::LAUNCHES_ANNOTATION)),
        "the release records a's launches"
    );
    // b takes the released Lease: a's launch is named, the earlier ones bounded by a's
    // acquisition.
    let Ok(Hold::Held {
        how: Step::Acquire,
        earlier,
        ..
    }) = e[1].hold(t0 + secs(5)).await
    else {
        panic!("b acquires");
    };
    assert_eq!(earlier.since, t0);
    assert_eq!(earlier.ids().collect::<Vec<_>>(), ["i-0a"]);
    // b launches nothing and releases: a's launch is carried on to c.
    assert!(e[1].release(t0 + secs(6)).await.expect("b releases"));
    let Ok(Hold::Held { earlier, .. }) = e[2].hold(t0 + secs(7)).await else {
        panic!("c acquires");
    };
    assert_eq!(earlier.ids().collect::<Vec<_>>(), ["i-0a"]);
}
