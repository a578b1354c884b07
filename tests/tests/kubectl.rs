//! A real kubectl (from `.venv`, `make setup`) against the simulated cluster: one test per
//! command an operator uses with nodewright, each checking what kubectl prints — the
//! columns and values — not only its exit code.
//!
//! The cluster here is seeded directly (nodes and pods as the kubelet simulation would
//! write them) and its control plane stepped by hand on the simulated clock; the demo
//! (`make demo KEEP=1`) runs the same server with moto and the real provisioner behind it.

use std::time::Duration;

use nodewright_world::kube_sim::{SimClock, SimCluster, SimConfig};
use nodewright_world::kubectl::{Kubectl, Output};
use serde_json::{Value, json};

/// A cluster whose simulated clock starts at 2025-01-01T00:00:00Z, so that ages are exact.
async fn cluster(crds: bool) -> (SimCluster, Kubectl) {
    let start = "2025-01-01T00:00:00Z".parse().expect("a timestamp");
    let sim = SimCluster::start(SimConfig {
        clock: SimClock::manual_at(start),
        crds_installed: crds,
        ..SimConfig::default()
    })
    .await
    .expect("the simulated cluster starts");
    let kubectl = Kubectl::for_cluster(&sim).expect("kubectl is installed in .venv");
    (sim, kubectl)
}

async fn ok(kubectl: &Kubectl, args: &[&str]) -> Output {
    let out = kubectl.run(args).await.expect("kubectl runs");
    assert!(
        out.success,
        "kubectl {} failed:\nstdout:\n{}\nstderr:\n{}",
        args.join(" "),
        out.stdout,
        out.stderr
    );
    out
}

async fn fails(kubectl: &Kubectl, args: &[&str]) -> Output {
    let out = kubectl.run(args).await.expect("kubectl runs");
    assert!(
        !out.success,
        "kubectl {} should fail:\n{}",
        args.join(" "),
        out.stdout
    );
    out
}

/// The row of a table whose first field is `first`.
fn row(out: &Output, first: &str) -> Vec<String> {
    out.rows()
        .into_iter()
        .find(|r| r.first().map(String::as_str) == Some(first))
        .unwrap_or_else(|| panic!("no row {first} in:\n{}", out.stdout))
}

fn header(out: &Output) -> String {
    out.stdout
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// A node as the kubelet simulation registers one, Ready.
fn node(name: &str, ip: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
            "node.kubernetes.io/instance-type": "m5.large", "karpenter.sh/nodepool": "default",
            "topology.kubernetes.io/zone": "us-east-1a"}},
        "spec": {"providerID": format!("aws:///us-east-1a/i-{name}")},
        "status": {
            "allocatable": {"cpu": "1930m", "memory": "7134Mi", "pods": "29"},
            "capacity": {"cpu": "2", "memory": "7934Mi", "pods": "29"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "lastHeartbeatTime": "2025-01-01T00:00:00Z", "lastTransitionTime": "2025-01-01T00:00:00Z"}],
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "osImage": "Amazon Linux 2023",
                "kernelVersion": "6.1.0", "containerRuntimeVersion": "containerd://1.7.0",
                "kubeletVersion": "v1.35.0-eks", "kubeProxyVersion": "v1.35.0-eks",
                "machineID": "m", "systemUUID": "s", "bootID": "b"}
        }
    })
}

/// A Running pod on `node` whose one container is ready and restarted `restarts` times.
/// A running pod that stops at once when deleted (`terminationGracePeriodSeconds: 0`):
/// these tests read kubectl's output, and the manual clock never runs out a grace period
/// (`kube_sim_graceful.rs` tests Terminating pods).
fn pod(name: &str, app: &str, node: &str, ip: &str, restarts: i64) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "app", "image": "nginx",
                 "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Running", "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "app", "image": "nginx", "imageID": "", "ready": true,
                "restartCount": restarts, "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}}}]}
    })
}

fn deployment(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx",
                    "resources": {"requests": {"cpu": "100m"}}}]}}}
    })
}

fn advance(sim: &SimCluster, secs: u64) {
    sim.clock().advance(Duration::from_secs(secs));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_nodes_shows_status_roles_age_and_version_and_wide_adds_addresses_and_os() {
    let (sim, kubectl) = cluster(false).await;
    sim.apply_json(node("ip-10-0-1-10.ec2.internal", "10.0.1.10"))
        .expect("node");
    let mut cordoned = node("ip-10-0-1-11.ec2.internal", "10.0.1.11");
    cordoned["spec"]["unschedulable"] = json!(true);
    cordoned["metadata"]["labels"]["node-role.kubernetes.io/worker"] = json!("");
    sim.apply_json(cordoned).expect("node");
    advance(&sim, 150);

    let out = ok(&kubectl, &["get", "nodes"]).await;
    assert_eq!(header(&out), "NAME STATUS ROLES AGE VERSION");
    assert_eq!(
        row(&out, "ip-10-0-1-10.ec2.internal")[1..],
        ["Ready", "<none>", "2m30s", "v1.35.0-eks"]
    );
    assert_eq!(
        row(&out, "ip-10-0-1-11.ec2.internal")[1..],
        ["Ready,SchedulingDisabled", "worker", "2m30s", "v1.35.0-eks"]
    );

    let wide = ok(&kubectl, &["get", "nodes", "-o", "wide"]).await;
    assert_eq!(
        header(&wide),
        "NAME STATUS ROLES AGE VERSION INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME"
    );
    let line = wide
        .stdout
        .lines()
        .find(|l| l.starts_with("ip-10-0-1-10"))
        .unwrap_or("");
    assert!(
        line.contains("10.0.1.10")
            && line.contains("<none>")
            && line.contains("Amazon Linux 2023")
            && line.contains("6.1.0")
            && line.contains("containerd://1.7.0"),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_pods_wide_shows_ready_status_restarts_ip_and_node() {
    let (sim, kubectl) = cluster(false).await;
    sim.apply_json(node("n1", "10.0.1.10")).expect("node");
    sim.apply_json(pod("web-1", "web", "n1", "10.0.1.20", 2))
        .expect("pod");
    let mut pending = pod("web-2", "web", "", "", 0);
    pending["spec"]
        .as_object_mut()
        .map(|s| s.remove("nodeName"));
    pending["status"] = json!({"phase": "Pending"});
    sim.apply_json(pending).expect("pod");
    advance(&sim, 45);

    let out = ok(&kubectl, &["get", "pods"]).await;
    assert_eq!(header(&out), "NAME READY STATUS RESTARTS AGE");
    assert_eq!(row(&out, "web-1")[1..], ["1/1", "Running", "2", "45s"]);
    assert_eq!(row(&out, "web-2")[1..], ["0/1", "Pending", "0", "45s"]);

    let wide = ok(&kubectl, &["get", "pods", "-o", "wide"]).await;
    assert_eq!(
        header(&wide),
        "NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES"
    );
    assert_eq!(
        row(&wide, "web-1")[5..],
        ["10.0.1.20", "n1", "<none>", "<none>"]
    );
    assert_eq!(
        row(&wide, "web-2")[5..],
        ["<none>", "<none>", "<none>", "<none>"]
    );

    let all = ok(&kubectl, &["get", "pods", "-A"]).await;
    assert_eq!(header(&all), "NAMESPACE NAME READY STATUS RESTARTS AGE");
    assert_eq!(row(&all, "default")[1], "web-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_deployments_replicasets_and_pdbs_show_their_columns() {
    let (sim, kubectl) = cluster(false).await;
    sim.apply_json(node("n1", "10.0.1.10")).expect("node");
    sim.apply_json(deployment("web", 2)).expect("deployment");
    sim.apply_json(
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 1}}),
    )
    .expect("pdb");
    for _ in 0..3 {
        sim.step().await;
    }
    advance(&sim, 600);

    let deploy = ok(&kubectl, &["get", "deployments", "-o", "wide"]).await;
    assert_eq!(
        header(&deploy),
        "NAME READY UP-TO-DATE AVAILABLE AGE CONTAINERS IMAGES SELECTOR"
    );
    let web = row(&deploy, "web");
    assert_eq!(web[1], "2/2", "{}", deploy.stdout);
    assert_eq!(web[4..], ["10m", "app", "nginx", "app=web"]);

    let rs = ok(&kubectl, &["get", "rs"]).await;
    assert_eq!(header(&rs), "NAME DESIRED CURRENT READY AGE");
    let web_rs = rs
        .rows()
        .into_iter()
        .find(|r| r[0].starts_with("web-"))
        .expect("a ReplicaSet");
    assert_eq!(web_rs[1..4], ["2", "2", "2"]);

    let pdb = ok(&kubectl, &["get", "pdb"]).await;
    assert_eq!(
        header(&pdb),
        "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE"
    );
    assert_eq!(row(&pdb, "web")[1..3], ["1", "N/A"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_nodepools_and_ec2nodeclasses_show_the_crd_printer_columns() {
    let (sim, kubectl) = cluster(true).await;
    sim.apply_json(json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"weight": 10, "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws",
            "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}},
        "status": {"resources": {"nodes": "3", "cpu": "6", "memory": "24Gi"},
            "conditions": [{"type": "Ready", "status": "True"}]}}))
        .expect("nodepool");
    sim.apply_json(
        json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": "default"}, "spec": {"role": "KarpenterNodeRole"},
        "status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
    )
    .expect("nodeclass");
    advance(&sim, 3 * 3600);

    let pools = ok(&kubectl, &["get", "nodepools", "-o", "wide"]).await;
    assert_eq!(
        header(&pools),
        "NAME NODECLASS NODES READY AGE WEIGHT CPU MEMORY"
    );
    assert_eq!(
        row(&pools, "default")[1..],
        ["default", "3", "True", "3h", "10", "6", "24Gi"]
    );

    let classes = ok(&kubectl, &["get", "ec2nodeclasses", "-o", "wide"]).await;
    assert_eq!(header(&classes), "NAME READY AGE ROLE");
    assert_eq!(
        row(&classes, "default")[1..],
        ["False", "3h", "KarpenterNodeRole"]
    );
}

/// A core/v1 Event about an object, as a kubelet or controller records one.
fn core_event(
    name: &str,
    kind: &str,
    object: &Value,
    reason: &str,
    message: &str,
    last: &str,
) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": kind, "name": object["metadata"]["name"],
            "namespace": object["metadata"].get("namespace").cloned().unwrap_or(json!("")),
            "uid": object["metadata"]["uid"]},
        "reason": reason, "message": message, "type": "Normal",
        "source": {"component": "kubelet"},
        "firstTimestamp": last, "lastTimestamp": last, "count": 1
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_events_sorted_by_last_timestamp_lists_both_event_apis_in_time_order() {
    let (sim, kubectl) = cluster(false).await;
    let n1 = sim.apply_json(node("n1", "10.0.1.10")).expect("node");
    sim.apply_json(core_event(
        "b",
        "Node",
        &n1,
        "NodeReady",
        "Node n1 is ready",
        "2025-01-01T00:03:00Z",
    ))
    .expect("event");
    sim.apply_json(core_event(
        "a",
        "Node",
        &n1,
        "RegisteredNode",
        "registered",
        "2025-01-01T00:05:00Z",
    ))
    .expect("event");
    // nodewright writes events.k8s.io/v1 Events; kubectl reads them as core/v1 ones.
    sim.apply_json(json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "c", "namespace": "default"},
        "eventTime": "2025-01-01T00:01:00.000000Z", "reportingController": "nodewright.io/provisioner",
        "reportingInstance": "provisioner", "action": "Launch", "reason": "Launched", "type": "Normal",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "web-1"},
        "note": "launched m5.large for this pod"}))
    .expect("events.k8s.io event");
    advance(&sim, 600);

    let out = ok(&kubectl, &["get", "events", "--sort-by=.lastTimestamp"]).await;
    assert_eq!(header(&out), "LAST SEEN TYPE REASON OBJECT MESSAGE");
    let reasons: Vec<String> = out.rows().iter().skip(1).map(|r| r[2].clone()).collect();
    assert_eq!(
        reasons,
        ["Launched", "NodeReady", "RegisteredNode"],
        "{}",
        out.stdout
    );
    assert_eq!(row(&out, "7m")[1..4], ["Normal", "NodeReady", "node/n1"]);
    assert!(
        out.stdout.contains("pod/web-1") && out.stdout.contains("launched m5.large for this pod")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_prints_a_row_for_a_pod_created_while_it_watches() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let (sim, kubectl) = cluster(false).await;
    sim.apply_json(node("n1", "10.0.1.10")).expect("node");
    sim.apply_json(pod("first", "web", "n1", "10.0.1.20", 0))
        .expect("pod");
    let mut child = kubectl
        .command()
        .args(["get", "pods", "-w"])
        .spawn()
        .expect("kubectl get -w starts");
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    let watched = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            seen.push(line.clone());
            if line.starts_with("first") {
                sim.apply_json(pod("second", "web", "n1", "10.0.1.21", 0))
                    .expect("pod");
            }
            if line.starts_with("second") {
                return true;
            }
        }
        false
    })
    .await;
    let _ = child.kill().await;
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        use tokio::io::AsyncReadExt;
        let _ = e.read_to_string(&mut stderr).await;
    }
    assert_eq!(
        watched,
        Ok(true),
        "kubectl printed:\n{}\n{stderr}",
        seen.join("\n")
    );
    assert_eq!(
        seen[0].split_whitespace().collect::<Vec<_>>(),
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    );
    let second: Vec<&str> = seen
        .last()
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    assert_eq!(second[..4], ["second", "1/1", "Running", "0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_node_shows_its_lease_pods_and_events() {
    let (sim, kubectl) = cluster(false).await;
    let n1 = sim.apply_json(node("n1", "10.0.1.10")).expect("node");
    sim.apply_json(pod("web-1", "web", "n1", "10.0.1.20", 0))
        .expect("pod");
    sim.apply_json(core_event(
        "n1.ready",
        "Node",
        &n1,
        "NodeReady",
        "Node n1 status is now: NodeReady",
        "2025-01-01T00:00:00Z",
    ))
    .expect("event");
    sim.step().await; // the kubelet simulation takes the node's Lease
    advance(&sim, 30);

    let out = ok(&kubectl, &["describe", "node", "n1"]).await;
    assert!(
        !out.stdout.contains("Failed to get lease"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("HolderIdentity:  n1"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("RenewTime:       Wed, 01 Jan 2025 00:00:00 +0000"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("Unschedulable:      false"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("Non-terminated Pods:          (1 in total)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .lines()
            .any(|l| l.contains("default") && l.contains("web-1") && l.contains("100m"))
    );
    assert!(
        out.stdout
            .lines()
            .any(|l| l.contains("NodeReady") && l.contains("Node n1 status is now: NodeReady")),
        "{}",
        out.stdout
    );

    let lease = ok(&kubectl, &["get", "lease", "-n", "kube-node-lease"]).await;
    assert_eq!(header(&lease), "NAME HOLDER AGE");
    assert_eq!(row(&lease, "n1")[1..], ["n1", "30s"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_pod_shows_its_node_ip_and_events() {
    let (sim, kubectl) = cluster(false).await;
    sim.apply_json(node("n1", "10.0.1.10")).expect("node");
    let web = sim
        .apply_json(pod("web-1", "web", "n1", "10.0.1.20", 0))
        .expect("pod");
    sim.apply_json(core_event(
        "web-1.pulled",
        "Pod",
        &web,
        "Pulled",
        "Container image \"nginx\" already present",
        "2025-01-01T00:00:00Z",
    ))
    .expect("event");
    let out = ok(&kubectl, &["describe", "pod", "web-1"]).await;
    let fields: Vec<Vec<String>> = out.rows();
    for want in [
        ["Node:", "n1/"],
        ["Status:", "Running"],
        ["IP:", "10.0.1.20"],
    ] {
        assert!(
            fields.iter().any(|r| r[..] == want),
            "no {want:?} in:\n{}",
            out.stdout
        );
    }
    assert!(
        out.stdout
            .lines()
            .any(|l| l.contains("Pulled") && l.contains("already present")),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_creates_then_leaves_unchanged_and_strict_validation_names_an_unknown_field() {
    let (sim, kubectl) = cluster(true).await;
    let example = nodewright_world::moto::workspace_root().join("examples/getting-started.yaml");
    let example = example.to_str().expect("utf-8 path");
    let out = ok(&kubectl, &["apply", "-f", example]).await;
    for want in [
        "nodepool.karpenter.sh/default created",
        "ec2nodeclass.karpenter.k8s.aws/default created",
        "deployment.apps/inflate created",
    ] {
        assert!(
            out.stdout.contains(want),
            "no {want:?} in:\n{}\n{}",
            out.stdout,
            out.stderr
        );
    }
    assert!(
        sim.get_json("karpenter.sh/v1", "NodePool", "", "default")
            .is_some()
    );
    let again = ok(&kubectl, &["apply", "-f", example]).await;
    assert!(
        again.stdout.contains("deployment.apps/inflate unchanged"),
        "{}\n{}",
        again.stdout,
        again.stderr
    );

    let typo = kubectl
        .write_file("typo.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: typo\nspec:\n  replicaz: 2\n  selector:\n    matchLabels: {app: typo}\n  template:\n    metadata:\n      labels: {app: typo}\n    spec:\n      containers: [{name: app, image: nginx}]\n")
        .expect("file");
    let out = fails(&kubectl, &["apply", "-f", typo.to_str().expect("utf-8")]).await;
    assert!(
        out.stderr
            .contains(r#"strict decoding error: unknown field "spec.replicaz""#),
        "{}",
        out.stderr
    );
    let bad_pool = kubectl
        .write_file("pool.yaml", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: typo\nspec:\n  disruption:\n    consolidateAftr: 1m\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []\n")
        .expect("file");
    let out = fails(
        &kubectl,
        &["apply", "-f", bad_pool.to_str().expect("utf-8")],
    )
    .await;
    assert!(
        out.stderr
            .contains(r#"unknown field "spec.disruption.consolidateAftr""#),
        "{}",
        out.stderr
    );
    assert!(
        sim.get_json("apps/v1", "Deployment", "default", "typo")
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_nodepool_describes_its_fields_from_openapi_v3() {
    let (_sim, kubectl) = cluster(true).await;
    let out = ok(&kubectl, &["explain", "nodepool.spec.disruption"]).await;
    assert!(
        out.stdout.contains("KIND:       NodePool"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("GROUP:      karpenter.sh"),
        "{}",
        out.stdout
    );
    for field in ["budgets", "consolidateAfter", "consolidationPolicy"] {
        assert!(
            out.stdout
                .lines()
                .any(|l| l.trim_start().starts_with(field)),
            "no {field} in:\n{}",
            out.stdout
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cordon_and_uncordon_flip_the_node_status() {
    let (sim, kubectl) = cluster(false).await;
    sim.apply_json(node("n1", "10.0.1.10")).expect("node");
    assert!(
        ok(&kubectl, &["cordon", "n1"])
            .await
            .stdout
            .contains("node/n1 cordoned")
    );
    assert_eq!(
        row(&ok(&kubectl, &["get", "node", "n1"]).await, "n1")[1],
        "Ready,SchedulingDisabled"
    );
    assert!(
        ok(&kubectl, &["uncordon", "n1"])
            .await
            .stdout
            .contains("node/n1 uncordoned")
    );
    assert_eq!(
        row(&ok(&kubectl, &["get", "node", "n1"]).await, "n1")[1],
        "Ready"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_evicts_what_the_budget_allows_and_reports_what_it_does_not() {
    let (sim, kubectl) = cluster(false).await;
    sim.apply_json(node("n1", "10.0.1.10")).expect("node");
    sim.apply_json(pod("web-1", "web", "n1", "10.0.1.20", 0))
        .expect("pod");
    sim.apply_json(pod("db-1", "db", "n1", "10.0.1.21", 0))
        .expect("pod");
    sim.apply_json(
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}, "minAvailable": 1}}),
    )
    .expect("pdb");
    let out = fails(&kubectl, &["drain", "n1", "--force", "--timeout=3s"]).await;
    assert!(out.stdout.contains("node/n1 cordoned"), "{}", out.stdout);
    assert!(out.stdout.contains("pod/web-1 evicted"), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("Cannot evict pod as it would violate the pod's disruption budget"),
        "{}",
        out.stderr
    );
    let pods = ok(&kubectl, &["get", "pods"]).await;
    assert_eq!(
        pods.rows()
            .iter()
            .skip(1)
            .map(|r| r[0].as_str())
            .collect::<Vec<_>>(),
        ["db-1"]
    );

    ok(&kubectl, &["delete", "pdb", "db"]).await;
    let out = ok(&kubectl, &["drain", "n1", "--force"]).await;
    assert!(
        out.stdout.contains("pod/db-1 evicted") && out.stdout.contains("node/n1 drained"),
        "{}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_the_pod_and_waits_for_it_to_go() {
    let (sim, kubectl) = cluster(false).await;
    sim.apply_json(node("n1", "10.0.1.10")).expect("node");
    sim.apply_json(pod("web-1", "web", "n1", "10.0.1.20", 0))
        .expect("pod");
    let out = ok(&kubectl, &["delete", "pod", "web-1"]).await;
    assert!(
        out.stdout.contains(r#"pod "web-1" deleted"#),
        "{}",
        out.stdout
    );
    assert!(sim.get_json("v1", "Pod", "default", "web-1").is_none());
    let out = fails(&kubectl, &["get", "pod", "web-1"]).await;
    assert!(
        out.stderr.contains(r#"pods "web-1" not found"#),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_deployment_changes_replicas_and_the_controllers_follow() {
    let (sim, kubectl) = cluster(false).await;
    sim.apply_json(node("n1", "10.0.1.10")).expect("node");
    sim.apply_json(deployment("web", 1)).expect("deployment");
    sim.step().await;
    let out = ok(&kubectl, &["scale", "deployment", "web", "--replicas=3"]).await;
    assert!(
        out.stdout.contains("deployment.apps/web scaled"),
        "{}",
        out.stdout
    );
    for _ in 0..3 {
        sim.step().await;
    }
    let pods = ok(&kubectl, &["get", "pods", "-l", "app=web"]).await;
    let running = pods
        .rows()
        .iter()
        .skip(1)
        .filter(|r| r[0].starts_with("web-") && r[2] == "Running")
        .count();
    assert_eq!(running, 3, "{}", pods.stdout);
    assert_eq!(
        row(&ok(&kubectl, &["get", "deployment", "web"]).await, "web")[1],
        "3/3"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_and_exec_say_the_simulated_cluster_runs_no_containers() {
    let (sim, kubectl) = cluster(false).await;
    sim.apply_json(node("n1", "10.0.1.10")).expect("node");
    sim.apply_json(pod("web-1", "web", "n1", "10.0.1.20", 0))
        .expect("pod");
    let logs = fails(&kubectl, &["logs", "web-1"]).await;
    assert!(
        logs.stderr
            .contains("pods/log is not served by the simulated cluster"),
        "{}",
        logs.stderr
    );
    let exec = fails(&kubectl, &["exec", "web-1", "--", "true"]).await;
    assert!(
        exec.stderr.contains("not served by the simulated cluster"),
        "{}",
        exec.stderr
    );
}
