//! Leftover instance profiles, end to end: the sweeper's real handler, signed as the
//! template's `SweeperFunction` role (IAM enforced on actions), deletes the profiles the
//! provisioner made for EC2NodeClass roles once no class names the role, no instance runs
//! with the profile and the profile is over an hour old; a look-alike of another cluster and
//! a profile a foreign instance runs with stay.
//!
//! Emulated: AWS is moto's server, with instances launched from a template that names a
//! profile associated to it (`tests/src/moto/launch.py`, 11); Kubernetes the simulated
//! cluster, whose clock stands in for the system clock (`SimNow`). The adapters, the SDK
//! and `kube::Client` are real.

use std::time::Duration;

use aws_sdk_ec2::types::{IamInstanceProfileSpecification, InstanceType};
use aws_sdk_iam::types::Tag;
use lambda_runtime::{Context, LambdaEvent};
use nodewright::aws::{
    Ec2Adapter, IamAdapter, InstanceProfileLeftovers, InstanceProfiles, ProfileLeftoversAdapter,
    instance_profile_name,
};
use nodewright::kube::KubeCluster;
use nodewright_sweeper::{ProfileCollection, State, handler};
use nodewright_world::kit::sweeper_state;
use nodewright_world::kube_sim::{SimClock, SimConfig};
use nodewright_world::world::World;
use serde_json::{Value, json};

const ASSUME_EC2: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;

async fn create_role(iam: &aws_sdk_iam::Client, cluster: &str, name: &str) {
    iam.create_role()
        .role_name(name)
        .path(format!("/nodewright/{cluster}/"))
        .assume_role_policy_document(ASSUME_EC2)
        .send()
        .await
        .expect("CreateRole");
}

/// A profile under nodewright's path and named like `cluster`'s, tagged as `owner`'s.
async fn look_alike(iam: &aws_sdk_iam::Client, name: &str, owner: &str) {
    iam.create_instance_profile()
        .instance_profile_name(name)
        .path("/nodewright/")
        .tags(
            Tag::builder()
                .key("nodewright.io/cluster")
                .value(owner)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("CreateInstanceProfile");
}

async fn profiles(iam: &aws_sdk_iam::Client) -> Vec<String> {
    let mut names: Vec<String> = iam
        .list_instance_profiles()
        .send()
        .await
        .expect("ListInstanceProfiles")
        .instance_profiles()
        .iter()
        .filter(|p| p.path() == "/nodewright/")
        .map(|p| p.instance_profile_name().to_string())
        .collect();
    names.sort();
    names
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

async fn sweeper(world: &World) -> State<KubeCluster, Ec2Adapter> {
    let cluster = world.seeded.cluster.clone();
    let sdk = world.function_sdk("SweeperFunction").unwrap();
    let leftovers = ProfileLeftoversAdapter::new(
        aws_sdk_iam::Client::new(&sdk),
        aws_sdk_ec2::Client::new(&sdk),
        cluster.clone(),
    );
    sweeper_state(world)
        .await
        .expect("the sweeper's state")
        .with_profile_collection(ProfileCollection::new(
            leftovers,
            cluster,
            world.stack.node_role_name.clone(),
        ))
}

async fn sweep(state: &State<KubeCluster, Ec2Adapter>) -> Vec<String> {
    let report: Value = handler(LambdaEvent::new(json!({}), Context::default()), state)
        .await
        .expect("a sweep");
    sorted(
        report["profiles_deleted"]
            .as_array()
            .expect("the report lists deleted profiles")
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_no_class_names_and_no_instance_uses_is_deleted_after_an_hour_and_nothing_else_is()
 {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("nodewright=info,nodewright_sweeper=info")
        .try_init();
    let world = World::start(
        "profile-gc",
        SimConfig {
            clock: SimClock::manual(),
            crds_installed: true,
            ..SimConfig::default()
        },
    )
    .await
    .expect("the local world starts");
    let cluster = world.seeded.cluster.clone();
    let admin_iam = aws_sdk_iam::Client::new(&world.sdk);
    for role in ["team-a", "team-b", "team-c"] {
        create_role(&admin_iam, &cluster, role).await;
    }
    // The provisioner made a profile for each role, signed as its own role.
    let provisioner = IamAdapter::new(
        aws_sdk_iam::Client::new(&world.function_sdk("ProvisionerFunction").unwrap()),
        cluster.clone(),
    );
    let mut made = Vec::new();
    for role in ["team-a", "team-b", "team-c"] {
        made.push(provisioner.ensure_instance_profile(role).await.unwrap());
    }
    let [a, b, c] = [&made[0], &made[1], &made[2]];
    // Named like this cluster's, tagged as another's: one with a forged hash, and one of a
    // cluster whose name starts with this one's.
    let forged = format!("nodewright_{cluster}_ffffffffffffffff");
    look_alike(&admin_iam, &forged, "someone-else").await;
    let longer = instance_profile_name(&format!("{cluster}_x"), "team-b");
    look_alike(&admin_iam, &longer, &format!("{cluster}_x")).await;

    // Only team-a is still named by a class (next to the example's own class).
    let class_a = format!(
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata:\n  name: team-a\nspec:\n  \
         role: team-a\n  amiSelectorTerms:\n    - alias: al2023@latest\n  subnetSelectorTerms:\n    \
         - tags:\n        karpenter.sh/discovery: {cluster}\n  securityGroupSelectorTerms:\n    \
         - tags:\n        karpenter.sh/discovery: {cluster}\n"
    );
    let pools = world
        .example_edited("getting-started.yaml", &[("replicas: 10", "replicas: 0")])
        .unwrap();
    world.apply_yaml(&pools).unwrap();
    world.apply_yaml(&class_a).unwrap();
    world.sim.step().await;

    // A foreign instance (no ownership tag) runs with team-c's profile.
    let ec2 = aws_sdk_ec2::Client::new(&world.sdk);
    let image = world
        .seeded
        .images
        .iter()
        .find(|i| i.arch == "x86_64")
        .unwrap();
    let foreign = ec2
        .run_instances()
        .image_id(&image.image_id)
        .instance_type(InstanceType::M5Large)
        .subnet_id(&world.seeded.subnets[0].id)
        .iam_instance_profile(IamInstanceProfileSpecification::builder().name(c).build())
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .expect("RunInstances")
        .instances()[0]
        .instance_id()
        .unwrap()
        .to_string();

    let state = sweeper(&world).await;
    let all = sorted(vec![
        a.clone(),
        b.clone(),
        c.clone(),
        forged.clone(),
        longer.clone(),
    ]);
    assert_eq!(profiles(&admin_iam).await, all);

    // Just made: kept for the hour, whatever the classes say.
    assert_eq!(sweep(&state).await, Vec::<String>::new());
    assert_eq!(profiles(&admin_iam).await, all);

    // Two hours on: team-b's profile goes, its role stays (only taken out of the profile).
    world.clock().advance(Duration::from_secs(2 * 3600));
    assert_eq!(sweep(&state).await, vec![b.clone()]);
    assert_eq!(
        profiles(&admin_iam).await,
        sorted(vec![a.clone(), c.clone(), forged.clone(), longer.clone()])
    );
    admin_iam
        .get_role()
        .role_name("team-b")
        .send()
        .await
        .expect("the role itself is not deleted");

    // Within the hour nothing is listed again; after it, nothing more is unused.
    assert_eq!(sweep(&state).await, Vec::<String>::new());
    world.clock().advance(Duration::from_secs(3600));
    assert_eq!(sweep(&state).await, Vec::<String>::new());

    // Once the foreign instance is gone, team-c's profile goes too.
    ec2.terminate_instances()
        .instance_ids(&foreign)
        .send()
        .await
        .expect("TerminateInstances");
    world.clock().advance(Duration::from_secs(3600));
    assert_eq!(sweep(&state).await, vec![c.clone()]);
    assert_eq!(
        profiles(&admin_iam).await,
        sorted(vec![a.clone(), forged.clone(), longer.clone()])
    );

    // Deleting again is done already; a look-alike is refused by the adapter itself.
    let sdk = world.function_sdk("SweeperFunction").unwrap();
    let adapter = ProfileLeftoversAdapter::new(
        aws_sdk_iam::Client::new(&sdk),
        aws_sdk_ec2::Client::new(&sdk),
        cluster.clone(),
    );
    adapter
        .delete_instance_profile(b)
        .await
        .expect("a profile already gone is success");
    let refused = adapter
        .delete_instance_profile(&forged)
        .await
        .expect_err("another cluster's profile is refused");
    assert!(refused.to_string().contains("refusing"), "{refused}");
    assert!(profiles(&admin_iam).await.contains(&forged));
}
