//! The RBAC of least-privilege mode (`nodewright rbac`, `cli/src/rbac.yaml`) applied by the
//! Makefile's `deploy` line with a real kubectl to the simulated cluster, which decodes every object as its Kubernetes type
//! and refuses unknown fields (strict field validation): what is read back is what an API
//! server would store. Each function's group it binds is the one the stack's access entry
//! for that function names; what each group may do is judged by the simulated server's
//! RBAC authorizer (`kube_sim/authz.rs`), the one the world's runs of the binaries meet.
//! (`cli/tests/cli/main.rs` checks that `nodewright rbac` prints this file with the groups
//! filled in.)

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_credential_types::provider::SharedCredentialsProvider;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, EvictParams, ListParams, PostParams};
use nodewright::eks::kube_client::client_with_tokens;
use nodewright::eks::token_source::TokenSource;
use nodewright_world::world::World;

use nodewright_world::kube_sim::authz;
use nodewright_world::kube_sim::{SimCluster, SimConfig};
use nodewright_world::kubectl::Kubectl;
use nodewright_world::template::Template;
use serde_json::Value;

/// Runs the RBAC line of the Makefile's `deploy` recipe as `make deploy` runs it after the
/// stack, with the kubectl of `.venv` on the PATH and its kubeconfig for the simulated
/// cluster. `$(CARGO) run ... --` becomes the CLI binary that command builds: cargo's lock
/// is held by the `cargo test` running this.
async fn make_deploy_rbac_line(kubectl: &Kubectl) -> std::process::Output {
    let root = nodewright_world::moto::workspace_root();
    let makefile = std::fs::read_to_string(root.join("Makefile")).expect("the Makefile");
    let recipe = makefile.split("\ndeploy:").nth(1).expect("a deploy recipe");
    let line = recipe
        .lines()
        .take_while(|l| l.is_empty() || l.starts_with('\t') || !l.contains(':'))
        .find(|l| l.contains(" rbac ") && l.contains("kubectl apply"))
        .expect("make deploy applies `nodewright rbac` with kubectl");
    let (cargo_run, rest) = line.split_once(" -- ").expect("$(CARGO) run ... -- rbac");
    assert!(
        cargo_run.contains("run") && cargo_run.contains("nodewright-cli"),
        "{line}"
    );
    let cli = nodewright_world::kit::debug_binary("nodewright").expect("the CLI is built");
    let command = format!("{} {rest}", cli.display());
    let kubectl_dir = kubectl.binary().parent().expect("kubectl's directory");
    let path = format!(
        "{}:{}",
        kubectl_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&command)
        .env("PATH", path)
        .env("KUBECONFIG", kubectl.kubeconfig())
        .output()
        .await
        .expect("sh runs")
}

/// Each function's group in the access entries' `KubernetesGroups` of `template.yaml`
/// (`!If [ClusterAdminAccess, !Ref AWS::NoValue, [group]]`), by access entry.
fn stack_groups() -> BTreeMap<String, String> {
    let template = Template::load().expect("template.yaml renders");
    let t = template.as_written();
    let mut groups = BTreeMap::new();
    for (name, r) in t["Resources"].as_mapping().expect("Resources") {
        let entry = &r["Properties"]["KubernetesGroups"];
        let serde_yaml::Value::Tagged(when) = entry else {
            continue;
        };
        let list = when.value[2].as_sequence().unwrap_or_else(|| {
            panic!("{name:?}: KubernetesGroups is !If [cond, NoValue, [group]]")
        });
        assert_eq!(list.len(), 1, "{name:?}: one group per function");
        let name = name.as_str().expect("a logical id").to_string();
        groups.insert(name, list[0].as_str().expect("a group name").to_string());
    }
    groups
}

async fn get(kubectl: &Kubectl, what: &[&str]) -> Value {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", "json"]);
    let out = kubectl.run(&args).await.expect("kubectl runs");
    assert!(out.success, "kubectl {args:?}: {}", out.stderr);
    serde_json::from_str(&out.stdout).expect("JSON")
}

async fn items(kubectl: &Kubectl, kind: &str) -> Vec<Value> {
    let list = get(
        kubectl,
        &[kind, "-A", "-l", "app.kubernetes.io/name=nodewright"],
    )
    .await;
    list["items"].as_array().expect("items").clone()
}

/// Requests as method and path.
type Calls = &'static [(&'static str, &'static str)];

/// The requests each function makes (`shared/src/kube/`, `shared/src/lease/store.rs`), as
/// method and path; the world's runs of the real binaries check the same under the
/// simulated server's RBAC.
const COMMON: Calls = &[
    ("GET", "/apis/karpenter.sh/v1/nodepools"),
    ("GET", "/apis/karpenter.sh/v1alpha5/provisioners"),
    ("GET", "/apis/karpenter.sh/v1alpha1/nodeoverlays"),
    ("GET", "/apis/karpenter.k8s.aws/v1/ec2nodeclasses"),
    ("GET", "/apis/karpenter.k8s.aws/v1alpha1/awsnodetemplates"),
    (
        "GET",
        "/api/v1/namespaces/kube-system/configmaps/nodewright",
    ),
    (
        "GET",
        "/api/v1/namespaces/kube-system/configmaps/nodewright-state",
    ),
    (
        "PUT",
        "/api/v1/namespaces/kube-system/configmaps/nodewright-state",
    ),
    ("POST", "/apis/events.k8s.io/v1/namespaces/team-a/events"),
    ("POST", "/api/v1/namespaces/default/events"),
    ("GET", "/apis/apps/v1/daemonsets"),
    ("GET", "/api/v1/namespaces"),
    ("GET", "/api/v1/persistentvolumeclaims"),
    ("GET", "/api/v1/persistentvolumes"),
    ("GET", "/apis/storage.k8s.io/v1/storageclasses"),
];
const PROVISIONER: Calls = &[
    ("GET", "/api/v1/pods"),
    ("WATCH", "/api/v1/pods"),
    ("GET", "/api/v1/nodes"),
    ("PATCH", "/api/v1/nodes/n"),
    (
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/nodewright-provisioner",
    ),
    (
        "PUT",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/nodewright-provisioner",
    ),
];
const REMOVER: Calls = &[
    ("GET", "/api/v1/pods"),
    ("POST", "/api/v1/namespaces/team-a/pods/p/eviction"),
    ("DELETE", "/api/v1/namespaces/team-a/pods/p"),
    ("GET", "/api/v1/nodes"),
    ("GET", "/api/v1/nodes/n"),
    ("PATCH", "/api/v1/nodes/n"),
    ("DELETE", "/api/v1/nodes/n"),
    (
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/karpenter-leader-election",
    ),
    (
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/karpenter/leases/karpenter-leader-election",
    ),
];
const SWEEPER: Calls = &[
    ("GET", "/apis/policy/v1/poddisruptionbudgets"),
    ("GET", "/apis/karpenter.sh/v1/nodepools/default/status"),
    ("PATCH", "/apis/karpenter.sh/v1/nodepools/default/status"),
    (
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/nodewright-sweeper",
    ),
    (
        "PUT",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/nodewright-sweeper",
    ),
];
/// Asked by no function; each must be refused to all three.
const NONE: Calls = &[
    ("GET", "/api/v1/secrets"),
    ("GET", "/api/v1/namespaces/kube-system/configmaps/aws-auth"),
    ("PUT", "/api/v1/namespaces/kube-system/configmaps/aws-auth"),
    ("POST", "/api/v1/namespaces/kube-system/configmaps"),
    (
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
    ),
    (
        "PUT",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler",
    ),
    (
        "PUT",
        "/apis/coordination.k8s.io/v1/namespaces/karpenter/leases/karpenter-leader-election",
    ),
    (
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/karpenter/leases/other",
    ),
    ("GET", "/api/v1/configmaps"),
    ("POST", "/api/v1/namespaces/team-a/pods"),
    ("PATCH", "/api/v1/namespaces/team-a/pods/p"),
    ("PUT", "/apis/karpenter.sh/v1/nodepools/default"),
    (
        "PATCH",
        "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/default/status",
    ),
    ("DELETE", "/apis/apps/v1/namespaces/team-a/daemonsets/d"),
    (
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    ),
];

fn may(policy: &authz::Policy, group: &str, (method, path): (&str, &str)) -> bool {
    let who = authz::Identity {
        user: "arn:aws:sts::123456789012:assumed-role/r/f".into(),
        groups: vec![group.to_string(), "system:authenticated".into()],
    };
    let (method, watching) = match method {
        "WATCH" => ("GET", true),
        m => (m, false),
    };
    let what = authz::attributes(method, path, watching).expect("a resource request");
    authz::authorize(policy, &who, &what).is_ok()
}

#[tokio::test]
async fn make_deploy_s_rbac_line_applies_with_kubectl_and_grants_each_function_what_it_calls_and_no_more()
 {
    let sim = SimCluster::start(SimConfig::default())
        .await
        .expect("the simulated cluster starts");
    let kubectl = Kubectl::for_cluster(&sim).expect("kubectl is installed in .venv");
    let out = make_deploy_rbac_line(&kubectl).await;
    assert!(out.status.success(), "the Makefile's line: {out:?}");
    let applied = String::from_utf8_lossy(&out.stdout);
    for function in ["provisioner", "interruption", "sweeper"] {
        for kind in ["clusterrole", "clusterrolebinding", "role", "rolebinding"] {
            let created = format!("{kind}.rbac.authorization.k8s.io/nodewright-{function} created");
            assert!(applied.contains(&created), "{created:?} in {applied}");
        }
    }
    for created in [
        "configmap/nodewright-state created",
        "lease.coordination.k8s.io/nodewright-provisioner created",
        "lease.coordination.k8s.io/nodewright-sweeper created",
    ] {
        assert!(applied.contains(created), "{created:?} in {applied}");
    }

    // Read back as stored, and judged by the simulated server's RBAC authorizer.
    let (cluster_roles, cluster_role_bindings, roles, role_bindings) = (
        items(&kubectl, "clusterroles").await,
        items(&kubectl, "clusterrolebindings").await,
        items(&kubectl, "roles").await,
        items(&kubectl, "rolebindings").await,
    );
    let policy = authz::Policy {
        cluster_roles: cluster_roles.iter().collect(),
        cluster_role_bindings: cluster_role_bindings.iter().collect(),
        roles: roles.iter().collect(),
        role_bindings: role_bindings.iter().collect(),
    };
    let groups = stack_groups();
    let group = |entry: &str| {
        groups
            .get(entry)
            .unwrap_or_else(|| panic!("{entry} in {groups:?}"))
            .clone()
    };
    let granted: [(String, Vec<Calls>); 3] = [
        (group("ProvisionerAccessEntry"), vec![COMMON, PROVISIONER]),
        (group("InterruptionAccessEntry"), vec![COMMON, REMOVER]),
        (group("SweeperAccessEntry"), vec![COMMON, REMOVER, SWEEPER]),
    ];
    let every: Vec<(&str, &str)> = [COMMON, PROVISIONER, REMOVER, SWEEPER, NONE].concat();
    for (group, calls) in &granted {
        let mine: Vec<(&str, &str)> = calls.concat();
        for call in &every {
            assert_eq!(
                may(&policy, group, *call),
                mine.contains(call),
                "{group} {} {} (granted: {})",
                call.0,
                call.1,
                mine.contains(call)
            );
        }
    }
    assert_eq!(groups.len(), 3, "one group for each function: {groups:?}");
}

/// A client signed in as `function`'s role with the production token path (`TokenSource`,
/// as a function outside the world mints its tokens), through the world's access entries.
async fn signed_in_as(world: &World, function: &str) -> kube::Client {
    let credentials = world.function_credentials[function].clone();
    let tokens = Arc::new(TokenSource::new(
        SharedCredentialsProvider::new(credentials),
        world.sim.cluster_name(),
        nodewright_world::moto::REGION,
    ));
    client_with_tokens(&world.sim.url(), None, tokens).expect("a client")
}

fn status_of<T>(result: Result<T, kube::Error>) -> u16 {
    match result {
        Ok(_) => 200, // any success
        Err(kube::Error::Api(status)) => status.code,
        Err(e) => panic!("no answer from the API server: {e}"),
    }
}

#[tokio::test]
async fn in_the_world_each_function_s_role_may_do_what_its_group_is_granted_and_is_refused_the_rest()
 {
    let world = World::start(
        "rbac-enforced",
        SimConfig {
            crds_installed: true,
            ..SimConfig::default()
        },
    )
    .await
    .expect("the local world starts");
    world
        .apply_yaml(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\n\
             spec: {containers: [{name: c, image: x}]}\n",
        )
        .unwrap();
    let provisioner = signed_in_as(&world, "ProvisionerFunction").await;
    let interruption = signed_in_as(&world, "InterruptionFunction").await;
    let sweeper = signed_in_as(&world, "SweeperFunction").await;
    let pods = |c: &kube::Client| Api::<Pod>::namespaced(c.clone(), "default");
    let leases = |c: &kube::Client| Api::<Lease>::namespaced(c.clone(), "kube-system");
    let config_maps = |c: &kube::Client| Api::<ConfigMap>::namespaced(c.clone(), "kube-system");
    let evict = |c: &kube::Client| {
        let pods = pods(c);
        async move { pods.evict("p", &EvictParams::default()).await }
    };

    assert_eq!(
        status_of(pods(&provisioner).list(&ListParams::default()).await),
        200
    );
    assert_eq!(
        status_of(leases(&provisioner).get("nodewright-provisioner").await),
        200
    );
    assert_eq!(
        status_of(evict(&provisioner).await),
        403,
        "the provisioner never evicts"
    );
    assert_eq!(
        status_of(leases(&interruption).get("nodewright-provisioner").await),
        403,
        "the interruption function holds no Lease"
    );
    assert_eq!(
        status_of(leases(&sweeper).get("nodewright-provisioner").await),
        403,
        "the sweeper holds its own Lease only"
    );
    let aws_auth = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("aws-auth".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    for (name, client) in [
        ("provisioner", &provisioner),
        ("interruption", &interruption),
        ("sweeper", &sweeper),
    ] {
        assert_eq!(
            status_of(
                config_maps(client)
                    .create(&PostParams::default(), &aws_auth)
                    .await
            ),
            403,
            "the {name} creates no ConfigMap in kube-system"
        );
        assert_eq!(
            status_of(config_maps(client).get("nodewright-state").await),
            200,
            "the {name} reads its state"
        );
    }
    assert_eq!(
        status_of(evict(&interruption).await),
        200,
        "the interruption function evicts"
    );
    let refusals = world.sim.rbac_refusals();
    assert_eq!(refusals.len(), 6, "{refusals:#?}");
    assert!(
        refusals[0].contains("cannot create resource \"pods/eviction\"")
            && refusals[0].contains("assumed-role/"),
        "the refusal names the call and the caller: {}",
        refusals[0]
    );
}
