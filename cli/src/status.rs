//! `nodewright status`: reads nodes and pods (from a kubeconfig, or from EKS with a token
//! minted as `nodewright eks-token` and the functions mint it), turns them into the
//! [`status_view::Fleet`] value and prints it; `--watch` redraws it. With AWS at hand
//! (`--cluster` or `--stack`) nodes are priced at the region's prices, and `--stack` adds
//! the stack's health ([`crate::health`]).

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use nodewright::api::labels;
use nodewright::catalog::DEFAULT_SPOT_DISCOUNT;
use nodewright::clock::CLOCK_VARIABLE;
use nodewright::resources::parse_milli;
use nodewright::scheduling::effective_requests;

use crate::health;
use crate::output::{Output, print_data};
use crate::prices::Prices;
use crate::status_view::{Fleet, NodeView, PendingView, render, to_json};

/// How often `--watch` asks AWS again: the Lambda metrics have one-minute periods, and a
/// region's prices change far less often than that.
const HEALTH_EVERY: Duration = Duration::from_secs(60);
const PRICES_EVERY: Duration = Duration::from_secs(600);

/// Which cluster a command reads: a kubeconfig, or EKS itself.
#[derive(Debug, Clone, clap::Args)]
pub struct Target {
    /// The kubeconfig to read (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, conflicts_with = "cluster")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, conflicts_with = "cluster")]
    pub context: Option<String>,
    /// Reach the cluster through EKS instead: DescribeCluster, then a bearer token signed
    /// with the default AWS credential chain.
    #[arg(long, group = "aws_target")]
    pub cluster: Option<String>,
    /// The AWS region with --cluster (or status's --stack); default: the AWS config
    /// chain's.
    #[arg(long, requires = "aws_target")]
    pub region: Option<String>,
}

impl Target {
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        client_for(
            self.kubeconfig.as_deref(),
            self.context.as_deref(),
            self.cluster.as_deref(),
            self.region.as_deref(),
        )
        .await
    }
}

#[derive(Debug, Clone, clap::Args)]
// `--cluster` and `--stack` both name AWS; `--region` needs either, and they may go together.
#[command(group(clap::ArgGroup::new("aws_target").multiple(true)))]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    /// Redraw every --interval until interrupted.
    #[arg(long)]
    pub watch: bool,
    /// Seconds between redraws with --watch.
    #[arg(long, default_value_t = 2.0)]
    pub interval: f64,
    /// The nodewright stack (its CloudFormation name): show its functions' last success,
    /// errors and throttles, the interruption queue, the dead letters and the alarms in
    /// ALARM beside the fleet.
    #[arg(long, group = "aws_target")]
    pub stack: Option<String>,
    /// Where a spot price is not known, it is estimated as on-demand less this fraction.
    #[arg(long, default_value_t = DEFAULT_SPOT_DISCOUNT)]
    pub spot_discount: f64,
    /// wide adds each node's instance id; json and yaml print the fleet as data.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    if !(0.0..1.0).contains(&args.spot_discount) {
        anyhow::bail!(
            "--spot-discount {}: must be a fraction in [0, 1)",
            args.spot_discount
        );
    }
    let interval = Duration::try_from_secs_f64(args.interval)
        .ok()
        .filter(|d| *d >= Duration::from_millis(100))
        .with_context(|| format!("--interval {}: must be at least 0.1 s", args.interval))?;
    if args.watch && args.output.is_data() {
        anyhow::bail!("--watch redraws a table: use it with -o table or -o wide");
    }
    nodewright::eks::install_crypto_provider();
    let client = args.target.client().await?;
    let clock = nodewright::clock::from_setting(std::env::var(CLOCK_VARIABLE).ok().as_deref())?;
    let aws = match (&args.target.cluster, &args.stack) {
        (None, None) => None,
        _ => Some(crate::aws::aws_config(args.target.region.as_deref()).await?),
    };
    let mut prices = Refreshed::new(PRICES_EVERY);
    let mut health = Refreshed::new(HEALTH_EVERY);
    loop {
        let nodes = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .context("listing nodes")?;
        let pods = Api::<Pod>::all(client.clone())
            .list(&ListParams::default())
            .await
            .context("listing pods")?;
        let now = clock.now();
        let mut problems = Vec::new();
        if prices.due() {
            let (read, mut why) = match &aws {
                Some((sdk, region)) => {
                    let spot = spot_types(&nodes.items);
                    Prices::of_region(sdk, region, &spot, args.spot_discount).await?
                }
                None => (Prices::bundled(args.spot_discount)?, Vec::new()),
            };
            prices.set(read);
            problems.append(&mut why);
        }
        if let (Some(stack), Some((sdk, region))) = (&args.stack, &aws)
            && health.due()
        {
            match health::read::health(sdk, stack, region, now).await {
                Ok((read, mut why)) => {
                    health.set(read);
                    problems.append(&mut why);
                }
                // Once shown, a failed refresh keeps the last health up and says why.
                Err(e) if health.value().is_some() => {
                    problems.push(format!("the stack's health, not refreshed: {e:#}"));
                }
                Err(e) => return Err(e),
            }
        }
        let Some(priced) = prices.value() else {
            anyhow::bail!("no prices were read");
        };
        let (fleet, mut why) = fleet_of(&nodes.items, &pods.items, priced);
        problems.append(&mut why);
        if args.output.is_data() {
            for p in &problems {
                eprintln!("warning: {p}");
            }
            let mut data = to_json(&fleet, priced);
            if let Some(h) = health.value() {
                data["health"] = health::to_json(h);
            }
            if !print_data(&data, args.output) {
                anyhow::bail!("the fleet could not be written");
            }
            return Ok(());
        }
        let mut text = render(&fleet, now, args.output == Output::Wide, priced);
        if let Some(h) = health.value() {
            text.push('\n');
            text.push_str(&health::render(h, now));
        }
        let mut out = std::io::stdout().lock();
        if args.watch {
            // Home and clear, then the frame: the terminal shows one frame at a time.
            write!(out, "\x1b[H\x1b[2J{text}")?;
        } else {
            write!(out, "{text}")?;
        }
        out.flush()?;
        drop(out);
        for p in &problems {
            eprintln!("warning: {p}");
        }
        if !args.watch {
            return Ok(());
        }
        tokio::time::sleep(interval).await;
    }
}

/// A value `--watch` reads again only every so often.
struct Refreshed<T> {
    every: Duration,
    read: Option<(Instant, T)>,
}

impl<T> Refreshed<T> {
    fn new(every: Duration) -> Refreshed<T> {
        Refreshed { every, read: None }
    }

    fn due(&self) -> bool {
        self.read
            .as_ref()
            .is_none_or(|(at, _)| at.elapsed() >= self.every)
    }

    fn set(&mut self, value: T) {
        self.read = Some((Instant::now(), value));
    }

    fn value(&self) -> Option<&T> {
        self.read.as_ref().map(|(_, v)| v)
    }
}

/// The instance types of the fleet's spot nodes, whose spot prices are asked for.
fn spot_types(nodes: &[Node]) -> Vec<String> {
    let mut types: Vec<String> = nodes
        .iter()
        .filter_map(|n| n.metadata.labels.as_ref())
        .filter(|l| l.get(labels::CAPACITY_TYPE).map(String::as_str) == Some("spot"))
        .filter_map(|l| l.get(labels::INSTANCE_TYPE).cloned())
        .collect();
    types.sort();
    types.dedup();
    types
}

/// A client for the cluster: through EKS when `cluster` is given (DescribeCluster, then a
/// token signed with the default AWS credential chain), else through the kubeconfig.
pub async fn client_for(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
    cluster: Option<&str>,
    region: Option<&str>,
) -> anyhow::Result<kube::Client> {
    if let Some(name) = cluster {
        let (aws, region) = crate::aws::aws_config(region).await?;
        let cluster = nodewright::eks::describe_cluster(&aws_sdk_eks::Client::new(&aws), name)
            .await
            .with_context(|| format!("DescribeCluster {name:?}"))?;
        let credentials = aws
            .credentials_provider()
            .context("no AWS credentials provider in the default chain")?;
        let tokens = Arc::new(nodewright::eks::TokenSource::new(credentials, name, region));
        return Ok(nodewright::eks::eks_client(&cluster, tokens)?);
    }
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .with_context(|| format!("kubeconfig {}", path.display()))?
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .context("the kubeconfig ($KUBECONFIG, ~/.kube/config) and its --context")?,
        None => kube::Config::infer()
            .await
            .context("no kubeconfig ($KUBECONFIG, ~/.kube/config) and no --cluster")?,
    };
    Ok(kube::Client::try_from(config)?)
}

/// Nodes and pods to the view, pricing each node from `prices`. The second value names
/// what could not be read (a pod's request, a node's allocatable), which is shown as zero.
pub fn fleet_of(nodes: &[Node], pods: &[Pod], prices: &Prices) -> (Fleet, Vec<String>) {
    let mut problems = Vec::new();
    let mut views: Vec<NodeView> = nodes
        .iter()
        .map(|n| node_view(n, prices, &mut problems))
        .collect();
    let mut pending = Vec::new();
    for pod in pods {
        let name = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or("")
        );
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        let Some(spec) = &pod.spec else { continue };
        match spec.node_name.as_deref() {
            Some(node) => {
                let Some(view) = views.iter_mut().find(|v| v.name == node) else {
                    continue;
                };
                view.pods += 1;
                match effective_requests(spec) {
                    Ok(r) => {
                        view.cpu_requested += r.cpu;
                        view.memory_requested += r.memory;
                    }
                    Err((field, e)) => problems.push(format!("pod {name}: {field}: {e}")),
                }
            }
            None => pending.push(PendingView {
                pod: name,
                why: why_pending(pod),
            }),
        }
    }
    (
        Fleet {
            nodes: views,
            pending,
        },
        problems,
    )
}

/// The scheduler's word on a pod without a node (its PodScheduled condition).
fn why_pending(pod: &Pod) -> String {
    let scheduled = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
    match scheduled {
        Some(c) if c.status == "False" => c
            .message
            .clone()
            .or_else(|| c.reason.clone())
            .unwrap_or_else(|| "not scheduled".into()),
        _ => "waiting for the scheduler".into(),
    }
}

fn node_view(node: &Node, prices: &Prices, problems: &mut Vec<String>) -> NodeView {
    let name = node.metadata.name.clone().unwrap_or_default();
    let label = |key: &str| {
        node.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key))
            .cloned()
    };
    // Karpenter's label, else a managed node group's (`ON_DEMAND` / `SPOT`).
    let capacity_type = label(labels::CAPACITY_TYPE)
        .or_else(|| {
            label("eks.amazonaws.com/capacityType").map(|c| c.to_lowercase().replace('_', "-"))
        })
        .unwrap_or_else(|| "-".into());
    let instance_type = label(labels::INSTANCE_TYPE).unwrap_or_else(|| "-".into());
    let zone = label(labels::ZONE).unwrap_or_else(|| "-".into());
    let price = prices.of(&instance_type, &zone, &capacity_type);
    let status = node.status.as_ref();
    let mut allocatable = |resource: &str| -> i64 {
        let Some(q) = status
            .and_then(|s| s.allocatable.as_ref())
            .and_then(|a| a.get(resource))
        else {
            return 0;
        };
        parse_milli(&q.0).unwrap_or_else(|e| {
            problems.push(format!(
                "node {name}: status.allocatable.{resource} {:?}: {e}",
                q.0
            ));
            0
        })
    };
    let cpu_allocatable = allocatable("cpu");
    let memory_allocatable = allocatable("memory");
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    // `aws:///us-east-1a/i-0abc`: the instance id is the last segment.
    let instance = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .and_then(|id| id.rsplit('/').next())
        .filter(|id| id.starts_with("i-"))
        .map(str::to_string);
    NodeView {
        instance,
        nodepool: label(labels::NODEPOOL),
        instance_type,
        capacity_type,
        zone,
        created: node.metadata.creation_timestamp.as_ref().map(|t| t.0),
        price,
        ready,
        pods: 0,
        cpu_requested: 0,
        cpu_allocatable,
        memory_requested: 0,
        memory_allocatable,
        name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bound_pods_add_their_requests_to_their_node_and_unbound_ones_are_pending_with_the_schedulers_reason()
     {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "creationTimestamp": "2026-11-24T10:00:00Z", "labels": {
                "karpenter.sh/nodepool": "default",
                "karpenter.sh/capacity-type": "spot",
                "node.kubernetes.io/instance-type": "m5.large",
                "topology.kubernetes.io/zone": "us-east-1a"}},
            "status": {"allocatable": {"cpu": "1930m", "memory": "7Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
        let pod = |name: &str, node: Option<&str>, phase: &str, cpu: &str| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"nodeName": node, "containers": [{"name": "c",
                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
                "status": {"phase": phase, "conditions": [{"type": "PodScheduled",
                    "status": "False", "reason": "Unschedulable",
                    "message": "0/1 nodes are available: 1 Insufficient cpu."}]}
            }))
            .unwrap()
        };
        let pods = [
            pod("a", Some("n1"), "Running", "500m"),
            pod("done", Some("n1"), "Succeeded", "1"),
            pod("bad", Some("n1"), "Running", "lots"),
            pod("waiting", None, "Pending", "4"),
        ];
        let prices = Prices::bundled(0.6).unwrap();
        let (fleet, problems) = fleet_of(&[node], &pods, &prices);
        let n = &fleet.nodes[0];
        assert_eq!(n.nodepool.as_deref(), Some("default"));
        assert_eq!(
            (
                n.instance_type.as_str(),
                n.capacity_type.as_str(),
                n.zone.as_str()
            ),
            ("m5.large", "spot", "us-east-1a")
        );
        let (price, estimated) = n.price.unwrap();
        let listed = prices.of("m5.large", "us-east-1a", "on-demand").unwrap().0;
        assert!((price - listed * 0.4).abs() < 1e-9 && estimated);
        assert_eq!(n.pods, 2, "the finished pod does not count");
        assert_eq!(n.cpu_requested, 500);
        assert_eq!(n.cpu_allocatable, 1930);
        assert_eq!(n.memory_allocatable, 7 * 1000 * (1 << 30));
        assert!(n.ready);
        assert_eq!(
            fleet.pending,
            [PendingView {
                pod: "default/waiting".into(),
                why: "0/1 nodes are available: 1 Insufficient cpu.".into()
            }]
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("pod default/bad: spec.containers[0].resources.requests.cpu"),
            "{problems:?}"
        );
    }
}
