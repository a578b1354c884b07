//! `MIN_VALUES_POLICY` as the stack sets it (Karpenter's `--min-values-policy`): a pod that
//! only one family of a NodePool asking for three holds. `Strict` leaves it pending;
//! `BestEffort` launches it, the instance tagged as launched with relaxed `minValues`.
//!
//! Emulated: the Runtime API, AWS (moto behind the world's front) and Kubernetes (the
//! simulated cluster). The binary is the real one, with the deployed stack's environment
//! and the policy set as the stack's `MinValuesPolicy` sets it.

use std::path::Path;
use std::time::Duration;

use nodewright::provision::launch::MIN_VALUES_RELAXED_TAG;
use nodewright_world::kit::{LambdaFunction, manual_cluster};
use nodewright_world::lambda_api::Outcome;
use nodewright_world::world::World;
use nodewright_world::world::provisioner::scheduled_event;

const INVOCATION_TIMEOUT: Duration = Duration::from_secs(90);

/// The getting-started NodePool asking for three instance families among the `large`
/// types, and one pod whose 10 GiB only r5.large holds.
const EDITS: &[(&str, &str)] = &[
    (
        "          values: [\"2\"]\n",
        "          values: [\"2\"]\n        - key: karpenter.k8s.aws/instance-size\n          operator: In\n          values: [\"large\"]\n        - key: karpenter.k8s.aws/instance-family\n          operator: In\n          values: [\"c5\", \"m5\", \"r5\"]\n          minValues: 3\n",
    ),
    (
        "              cpu: 1\n",
        "              cpu: 1\n              memory: 10Gi\n",
    ),
    ("replicas: 10", "replicas: 1"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_short_of_min_values_launches_tagged_relaxed_only_under_best_effort() {
    for (policy, relaxed) in [("Strict", false), ("BestEffort", true)] {
        let cluster = format!("min-values-{}", policy.to_lowercase());
        let world = World::start(&cluster, manual_cluster())
            .await
            .expect("the local world starts");
        let example = world.example_edited("getting-started.yaml", EDITS).unwrap();
        world.apply_yaml(&example).unwrap();
        world.sim.step().await;

        let mut function = LambdaFunction::start(
            &world,
            Path::new(env!("CARGO_BIN_EXE_provisioner")),
            &cluster,
            "provisioner",
            super::short_invocation("2")
                .into_iter()
                .chain([("MIN_VALUES_POLICY", policy.to_string())]),
        )
        .await
        .unwrap();
        let answer = function
            .invoke(scheduled_event(), INVOCATION_TIMEOUT)
            .await
            .unwrap();
        let Outcome::Response(summary) = answer else {
            panic!("{policy}: {answer:?}\n{}", function.log_text());
        };
        let instances = world.instances().await.unwrap();
        if relaxed {
            let [instance] = instances.as_slice() else {
                panic!("{policy}: {instances:?}\n{summary}");
            };
            assert_eq!(instance.instance_type, "r5.large", "{policy}");
            assert_eq!(
                instance
                    .tags
                    .get(MIN_VALUES_RELAXED_TAG)
                    .map(String::as_str),
                Some("true"),
                "{policy}: {:?}",
                instance.tags
            );
        } else {
            assert!(instances.is_empty(), "{policy}: {instances:?}");
            assert!(
                function.log_text().contains("minValues"),
                "{policy}: the pod's reason names minValues\n{}",
                function.log_text()
            );
        }
        let _ = std::fs::remove_dir_all(function.dir());
    }
}
