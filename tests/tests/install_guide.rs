//! The install guide (docs/install.md) played against the local world, as a smoke test of
//! its end: the stack deployed as `make deploy` deploys it (the Makefile's capabilities, then
//! the RBAC `nodewright rbac` prints), the guide's NodePools step, the provisioner on the
//! stack's schedule, then every line of "Check that it works" as written, `<cluster>` filled
//! in, until the guide's Deployment runs on a node nodewright launched.
//!
//! Real: kubectl, the nodewright CLI, the provisioner binary run by the world's Lambda,
//! the AWS SDK against moto. Emulated, each named where it happens: the `aws` CLI line (not
//! installed here: the same DescribeStacks through the SDK) and the cluster's address (a
//! kubeconfig for the simulated API server instead of EKS's endpoint).

use std::time::Duration;

use nodewright_world::kit;
use nodewright_world::kubectl::Kubectl;
use nodewright_world::lambda::Lambda;
use nodewright_world::world::World;

const CLUSTER: &str = "install-guide";

/// The commands of the first code block after `heading` in docs/install.md, comments
/// dropped and `<cluster>` filled in.
fn commands_after(heading: &str) -> Vec<String> {
    let path = nodewright_world::moto::workspace_root().join("docs/install.md");
    let text = std::fs::read_to_string(path).expect("docs/install.md");
    let section = text
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("docs/install.md has {heading:?}"));
    let block = section
        .split("```")
        .nth(1)
        .expect("a code block in the section");
    block
        .lines()
        .skip(1)
        .map(|l| l.split(" #").next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .map(|l| l.replace("<cluster>", CLUSTER))
        // The guide runs from the repository's root.
        .map(|l| {
            let root = nodewright_world::moto::workspace_root();
            l.replace(" examples/", &format!(" {}/examples/", root.display()))
        })
        .collect()
}

async fn nodewright(world: &World, kubeconfig: &std::path::Path, args: &[&str]) -> String {
    let mut command = kit::nodewright_cli(world, kubeconfig).expect("the CLI is built");
    command.args(args);
    if args.first() == Some(&"doctor") {
        // The cluster's address: the simulated API server, not EKS's endpoint.
        command.arg("--kubeconfig").arg(kubeconfig);
    }
    let out = command.output().await.expect("the CLI runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "nodewright {args:?}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

async fn kubectl(kubectl: &Kubectl, args: &[&str]) -> String {
    let out = kubectl.run(args).await.expect("kubectl runs");
    assert!(out.success, "kubectl {args:?}: {}", out.stderr);
    out.stdout
}

/// Polls `done` every 5 s of world time, for at most `limit` of it.
async fn within<F: std::future::Future<Output = bool>>(
    world: &World,
    limit: Duration,
    what: &str,
    mut done: impl FnMut() -> F,
) {
    let clock = world.clock();
    let until = clock.now() + limit;
    while !done().await {
        assert!(clock.now() < until, "{what} within {limit:?} of world time");
        clock.sleep(Duration::from_secs(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_install_guide_ends_with_its_deployment_running_on_a_node_nodewright_launched() {
    // Deploy: the stack and the RBAC, as `make deploy` leaves them (see `World::start`).
    let world = kit::timed_world(CLUSTER, 40.0, Duration::from_secs(2))
        .await
        .expect("the local world starts");
    let k = Kubectl::for_cluster(&world.sim).expect("kubectl is installed in .venv");
    let kubeconfig = k.kubeconfig();

    // NodePools: the guide's example, its NodePool and EC2NodeClass only (its Deployment
    // is the one the check creates).
    let example = world.example("getting-started.yaml").unwrap();
    let pools: Vec<&str> = example
        .split("\n---")
        .filter(|doc| !doc.contains("kind: Deployment"))
        .collect();
    let file = k
        .write_file("nodepools.yaml", &pools.join("\n---\n"))
        .unwrap();
    kubectl(&k, &["apply", "-f", file.to_str().unwrap()]).await;

    // The provisioner, invoked by the stack's schedule.
    let binary = kit::debug_binary("provisioner").unwrap();
    let dir = std::env::temp_dir().join(format!("nodewright-{CLUSTER}-{}", std::process::id()));
    let mut lambda =
        Lambda::deploy(&world, &[("ProvisionerFunction", binary)], &dir, |_| {}).unwrap();
    lambda.start_triggers(&world);

    let check = commands_after("## Check that it works");
    assert!(check.len() >= 5, "{check:?}");
    for line in &check {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[0] {
            "nodewright" => {
                let out = nodewright(&world, &kubeconfig, &words[1..]).await;
                if words[1] == "doctor" {
                    assert!(!out.contains("FAIL"), "{out}");
                }
            }
            "aws" => {
                // No aws CLI here: the same DescribeStacks through the SDK.
                assert!(line.contains("describe-stacks"), "{line}");
                let stack =
                    nodewright_world::moto::stack::describe(&world.moto, world.stack.name())
                        .await
                        .unwrap();
                assert!(line.contains(&stack.stack), "{line}");
                assert_eq!(stack.status, "CREATE_COMPLETE");
            }
            "kubectl" if line.contains("get lease") => {
                kubectl(&k, &words[1..]).await;
                let mut holder = words[1..].to_vec();
                holder.extend(["-o", "jsonpath={.spec.holderIdentity}"]);
                let (k, holder) = (&k, &holder);
                within(
                    &world,
                    Duration::from_secs(60),
                    "the Lease held",
                    move || async move { !kubectl(k, holder).await.trim().is_empty() },
                )
                .await;
            }
            "kubectl" if line.contains("get events") => {
                let running = [
                    "get",
                    "pods",
                    "-l",
                    "app=inflate",
                    "--field-selector=status.phase=Running",
                    "-o",
                    "name",
                ];
                let k_ref = &k;
                within(
                    &world,
                    Duration::from_secs(300),
                    "the guide's pods Running",
                    move || async move { kubectl(k_ref, &running).await.lines().count() == 5 },
                )
                .await;
                let events = kubectl(&k, &words[1..]).await;
                assert!(
                    events.contains("Launching") && events.contains("pod/inflate-"),
                    "the launch, for the guide's pods:\n{events}"
                );
            }
            "kubectl" => {
                kubectl(&k, &words[1..]).await;
            }
            other => panic!("the guide runs {other:?}, which this test does not know: {line}"),
        }
    }
    let nodes = world.sim.list_json("v1", "Node");
    assert!(
        nodes
            .iter()
            .any(|n| n["metadata"]["labels"]["nodewright.io/nodeclaim"].is_string()),
        "a node nodewright launched: {nodes:#?}"
    );
    lambda.stop();
}
