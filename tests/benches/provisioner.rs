//! Provisioner latency in the local world (`make bench`): the time from a pod becoming
//! unschedulable to its instance existing in moto, with the real handler polling at its
//! default interval (5 s) and batching window (1 s idle, 10 s max), as in AWS.
//!
//! Emulated: AWS is moto and Kubernetes the simulated cluster; the handler, the AWS SDK
//! and kube::Client are real. moto answers on loopback, so EC2's own latency is not in
//! these figures.

use std::time::{Duration, Instant};

use nodewright::provision::BatchWindow;
use nodewright_provisioner::HandlerConfig;
use nodewright_world::kube_sim::{SimClock, SimConfig};
use nodewright_world::world::World;
use nodewright_world::world::provisioner::invoke;
use serde_json::json;

const SAMPLES: usize = 15;

async fn instance_count(world: &World) -> usize {
    world
        .instances()
        .await
        .expect("DescribeInstances against moto")
        .len()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let config = SimConfig {
        clock: SimClock::manual(),
        crds_installed: true,
        ..SimConfig::default()
    };
    let world = World::start("bench-cluster", config).await?;
    // One 7-cpu pod per c6a.2xlarge: every new pod needs a new instance.
    world.apply_yaml(
        r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c6a.2xlarge]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: bench-cluster-node
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: bench-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: bench-cluster}}]
"#,
    )?;
    let defaults = HandlerConfig {
        poll_interval: Duration::from_secs(5),
        budget: Duration::from_secs(50),
    };
    let state = std::sync::Arc::new(world.provisioner(defaults, BatchWindow::default()).await?);
    let mut samples = vec![];
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    while samples.len() < SAMPLES {
        // Each invocation runs up to 50 s, as the one-minute schedule would.
        let handler = {
            let state = state.clone();
            tokio::spawn(async move { invoke(&state).await })
        };
        while !handler.is_finished() && samples.len() < SAMPLES {
            // Pods arrive at a random point of the poll cycle.
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            tokio::time::sleep(Duration::from_millis(rng % 5000)).await;
            let before = instance_count(&world).await;
            let name = format!("burst-{}", samples.len());
            world.sim.apply_json(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "uid": name},
                "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "7"}}}]}
            }))?;
            world.sim.step().await; // the scheduler marks it Unschedulable
            let pending_at = Instant::now();
            let deadline = pending_at + Duration::from_secs(30);
            while instance_count(&world).await == before {
                if Instant::now() > deadline || handler.is_finished() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if instance_count(&world).await > before {
                samples.push(pending_at.elapsed());
                println!(
                    "sample {:2}: {:.2} s",
                    samples.len(),
                    pending_at.elapsed().as_secs_f64()
                );
            }
        }
        let _ = handler.await;
    }
    samples.sort();
    println!(
        "\npending -> instance in moto over {} pods: median {:.2} s, p99 {:.2} s, min {:.2} s, max {:.2} s (poll interval 5 s, batching 1 s idle)",
        samples.len(),
        percentile(&samples, 0.5).as_secs_f64(),
        percentile(&samples, 0.99).as_secs_f64(),
        samples[0].as_secs_f64(),
        samples[samples.len() - 1].as_secs_f64()
    );
    Ok(())
}
