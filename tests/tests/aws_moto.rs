//! The AWS adapters against a real moto server seeded like an EKS account.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, SystemTime};

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
use nodewright::api::{AmiSelectorTerm, SelectorTerm};
use nodewright::aws::launch_templates::BlockDevice;
use nodewright::aws::{
    AwsError, Ec2Adapter, ErrorClass, Fleet, FleetOverride, FleetRequest, IamAdapter, ImageAdapter,
    ImageResolver, InstanceInventory, InstanceProfiles, InstanceState, LaunchTemplateSpec,
    LaunchTemplates, NetworkDiscovery, instance_profile_name, pick_subnet_per_zone,
};
use nodewright::catalog::CapacityType;
use nodewright::provision::template_gc::templates_to_delete;
use nodewright_world::moto::{Moto, SeedSpec, Seeded, Stack, seed};

const CLUSTER: &str = "demo";

struct World {
    _moto: Moto,
    config: aws_config::SdkConfig,
    seeded: Seeded,
    stack: Stack,
    ec2: Ec2Adapter,
}

async fn world() -> World {
    let moto = Moto::start().await.expect("moto starts");
    let config = moto.sdk_config().await;
    let seeded = seed(&config, &SeedSpec::new(CLUSTER))
        .await
        .expect("seeded");
    let stack = nodewright_world::world::deploy_stack(&moto, CLUSTER, &Default::default())
        .await
        .expect("template.yaml deploys");
    let ec2 = Ec2Adapter::new(aws_sdk_ec2::Client::new(&config), CLUSTER);
    World {
        _moto: moto,
        config,
        seeded,
        stack,
        ec2,
    }
}

fn discovery_term(value: &str) -> SelectorTerm {
    SelectorTerm {
        tags: [("karpenter.sh/discovery".to_string(), value.to_string())].into(),
        ..Default::default()
    }
}

fn spec(w: &World, image_id: &str) -> LaunchTemplateSpec {
    LaunchTemplateSpec {
        image_id: image_id.to_string(),
        user_data: "[settings.kubernetes]\ncluster-name = \"demo\"\n".into(),
        security_group_ids: vec![w.seeded.security_group_id.clone()],
        instance_profile: w.stack.instance_profile_name.clone(),
        block_devices: vec![BlockDevice {
            device_name: "/dev/xvda".into(),
            volume_size_gib: Some(20),
            volume_type: Some("gp3".into()),
            encrypted: Some(true),
            delete_on_termination: Some(true),
            ..Default::default()
        }],
        tags: [("team".to_string(), "platform".to_string())].into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn subnets_and_security_groups_are_found_by_discovery_tag_and_by_key_only() {
    let w = world().await;

    let by_value = w
        .ec2
        .subnets(&[discovery_term(CLUSTER)])
        .await
        .expect("subnets");
    let by_key = w
        .ec2
        .subnets(&[discovery_term("*")])
        .await
        .expect("subnets");
    let other = w
        .ec2
        .subnets(&[discovery_term("someone-else")])
        .await
        .expect("subnets");

    let seeded: HashSet<&str> = w.seeded.subnets.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        by_value
            .iter()
            .map(|s| s.id.as_str())
            .collect::<HashSet<_>>(),
        seeded
    );
    assert_eq!(
        by_key.iter().map(|s| s.id.as_str()).collect::<HashSet<_>>(),
        seeded
    );
    assert!(other.is_empty(), "{other:?}");
    let zones: Vec<String> = pick_subnet_per_zone(&by_value).into_keys().collect();
    assert_eq!(zones, ["us-east-1a", "us-east-1b", "us-east-1c"]);
    assert!(
        by_value
            .iter()
            .all(|s| s.available_ips > 0 && !s.zone_id.is_empty()),
        "{by_value:?}"
    );

    let groups = w
        .ec2
        .security_groups(&[discovery_term("*")])
        .await
        .expect("groups");
    let by_name = w
        .ec2
        .security_groups(&[SelectorTerm {
            name: Some(w.seeded.security_group_name.clone()),
            ..Default::default()
        }])
        .await
        .expect("groups");
    let ids: Vec<&str> = groups.iter().map(|g| g.id.as_str()).collect();
    assert_eq!(ids, [w.seeded.security_group_id.as_str()]);
    assert_eq!(by_name, groups);
}

#[tokio::test]
async fn al2023_latest_resolves_through_the_public_ssm_parameters_to_both_architectures() {
    let w = world().await;
    let images = ImageAdapter::new(
        aws_sdk_ec2::Client::new(&w.config),
        aws_sdk_ssm::Client::new(&w.config),
    );
    let alias = |a: &str| AmiSelectorTerm {
        alias: Some(a.to_string()),
        ..Default::default()
    };

    let latest = images
        .resolve(&[alias("al2023@latest")], "1.32")
        .await
        .expect("resolved");
    let pinned = images
        .resolve(&[alias("bottlerocket@v1.20.0")], "1.32")
        .await
        .expect("resolved");
    let wrong_version = images
        .resolve(&[alias("al2023@latest")], "1.20")
        .await
        .expect("resolved");

    let got: Vec<(&str, &str)> = latest
        .iter()
        .map(|i| (i.arch.as_str(), i.id.as_str()))
        .collect();
    let want = |family: &str, arch: &str| {
        w.seeded
            .image(family, arch)
            .map(|i| i.image_id.as_str())
            .unwrap_or("not seeded")
    };
    assert_eq!(
        got,
        [
            ("amd64", want("al2023", "x86_64")),
            ("arm64", want("al2023", "arm64"))
        ]
    );
    let got: Vec<&str> = pinned.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(
        got,
        [
            want("bottlerocket", "x86_64"),
            want("bottlerocket", "arm64")
        ]
    );
    assert!(wrong_version.is_empty(), "{wrong_version:?}");
}

#[tokio::test]
async fn ensuring_the_same_launch_template_twice_creates_it_once() {
    let w = world().await;
    let image = w
        .seeded
        .image("al2023", "x86_64")
        .expect("seeded")
        .image_id
        .clone();

    let first = w
        .ec2
        .ensure_launch_template(&spec(&w, &image))
        .await
        .expect("created");
    let second = w
        .ec2
        .ensure_launch_template(&spec(&w, &image))
        .await
        .expect("found");

    assert_eq!(first, second);
    let ec2 = aws_sdk_ec2::Client::new(&w.config);
    let all = ec2
        .describe_launch_templates()
        .send()
        .await
        .expect("described");
    let names: Vec<&str> = all
        .launch_templates()
        .iter()
        .filter_map(|t| t.launch_template_name())
        .collect();
    assert_eq!(names, [first.name.as_str()]);
    assert!(first.name.starts_with("nodewright/demo/"), "{}", first.name);

    let listed = w.ec2.list_launch_templates().await.expect("listed");
    assert_eq!(
        listed.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        [first.name.as_str()]
    );
    w.ec2
        .delete_launch_template(&first.name)
        .await
        .expect("deleted");
    assert!(
        w.ec2
            .list_launch_templates()
            .await
            .expect("listed")
            .is_empty()
    );
}

#[tokio::test]
async fn a_fleet_launch_is_tagged_listed_and_terminated_while_foreign_instances_are_refused() {
    let w = world().await;
    let image = w
        .seeded
        .image("al2023", "x86_64")
        .expect("seeded")
        .image_id
        .clone();
    let template = w
        .ec2
        .ensure_launch_template(&spec(&w, &image))
        .await
        .expect("template");
    let subnet = &w.seeded.subnets[1];
    let request = FleetRequest {
        client_token: "claim-0001".into(),
        launch_template: template,
        overrides: vec![FleetOverride {
            instance_type: "m5.large".into(),
            subnet_id: subnet.id.clone(),
            zone: subnet.zone.clone(),
            priority: None,
        }],
        capacity_type: CapacityType::Spot,
        reservation_kind: None,
        tags: BTreeMap::from([
            (
                "nodewright.io/nodeclaim".to_string(),
                "claim-0001".to_string(),
            ),
            ("karpenter.sh/nodepool".to_string(), "default".to_string()),
        ]),
    };

    let outcome = w.ec2.create_fleet(&request).await.expect("launched");

    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    let [launched] = outcome.instances.as_slice() else {
        panic!("expected one instance, got {:?}", outcome.instances)
    };
    assert_eq!(
        (
            launched.instance_type.as_str(),
            launched.zone.as_str(),
            launched.capacity_type
        ),
        ("m5.large", subnet.zone.as_str(), CapacityType::Spot)
    );
    let ec2 = aws_sdk_ec2::Client::new(&w.config);
    let described = ec2
        .describe_instances()
        .instance_ids(&launched.id)
        .send()
        .await
        .expect("described");
    let tags: BTreeMap<&str, &str> = described
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .flat_map(|i| i.tags())
        .filter_map(|t| Some((t.key()?, t.value()?)))
        .collect();
    assert_eq!(tags.get("nodewright.io/cluster"), Some(&CLUSTER));
    assert_eq!(tags.get("nodewright.io/nodeclaim"), Some(&"claim-0001"));

    let owned = w.ec2.list_owned().await.expect("listed");
    let listed: Vec<(&str, InstanceState, CapacityType)> = owned
        .iter()
        .map(|i| (i.id.as_str(), i.state, i.capacity_type))
        .collect();
    assert_eq!(
        listed,
        [(
            launched.id.as_str(),
            InstanceState::Running,
            CapacityType::Spot
        )]
    );
    assert!(owned[0].private_dns_name.is_some() && owned[0].launch_time.is_some());

    let foreign = ec2
        .run_instances()
        .image_id(&image)
        .instance_type(aws_sdk_ec2::types::InstanceType::M5Large)
        .subnet_id(&subnet.id)
        .min_count(1)
        .max_count(1)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .tags(Tag::builder().key("Name").value("not-ours").build())
                .build(),
        )
        .send()
        .await
        .expect("foreign instance");
    let foreign_id = foreign.instances()[0]
        .instance_id()
        .expect("id")
        .to_string();

    let first = w
        .ec2
        .terminate(&[launched.id.clone(), foreign_id.clone()])
        .await
        .expect("terminated");
    let again = w
        .ec2
        .terminate(std::slice::from_ref(&launched.id))
        .await
        .expect("repeat is fine");

    assert_eq!(first.terminated, [launched.id.as_str()]);
    assert_eq!(first.refused, [foreign_id.as_str()]);
    assert!(
        again.terminated.is_empty() && again.refused.is_empty(),
        "{again:?}"
    );
    let state = |id: String| {
        let ec2 = ec2.clone();
        async move {
            let out = ec2
                .describe_instances()
                .filters(Filter::builder().name("instance-id").values(id).build())
                .send()
                .await
                .expect("described");
            out.reservations()[0].instances()[0]
                .state()
                .and_then(|s| s.name().cloned())
        }
    };
    use aws_sdk_ec2::types::InstanceStateName::{Running, Terminated};
    assert_eq!(state(launched.id.clone()).await, Some(Terminated));
    assert_eq!(state(foreign_id).await, Some(Running));
    assert!(w.ec2.list_owned().await.expect("listed").is_empty());
}

/// A launch template created with the plain SDK, with the given tags.
async fn plain_template(ec2: &aws_sdk_ec2::Client, name: &str, tags: &[(&str, &str)]) {
    let mut call = ec2
        .create_launch_template()
        .launch_template_name(name)
        .launch_template_data(
            aws_sdk_ec2::types::RequestLaunchTemplateData::builder()
                .image_id("ami-12345678")
                .build(),
        );
    if !tags.is_empty() {
        let mut spec = TagSpecification::builder().resource_type(ResourceType::LaunchTemplate);
        for (k, v) in tags {
            spec = spec.tags(Tag::builder().key(*k).value(*v).build());
        }
        call = call.tag_specifications(spec.build());
    }
    call.send().await.expect("plain template created");
}

#[tokio::test]
async fn a_stale_tagged_template_is_collected_while_a_fresh_one_and_look_alikes_stay() {
    let w = world().await;
    let ec2 = aws_sdk_ec2::Client::new(&w.config);
    let image = w
        .seeded
        .image("al2023", "x86_64")
        .expect("seeded")
        .image_id
        .clone();
    let stale = w
        .ec2
        .ensure_launch_template(&spec(&w, &image))
        .await
        .expect("created");
    // Not ours: no tag but our kind of name; our tag but another name; another cluster's.
    let untagged = "nodewright/demo/0123456789abcdef";
    plain_template(&ec2, untagged, &[]).await;
    plain_template(&ec2, "demo-copy", &[("nodewright.io/cluster", CLUSTER)]).await;
    plain_template(
        &ec2,
        "nodewright/other/0123456789abcdef",
        &[("nodewright.io/cluster", "other")],
    )
    .await;

    let listed = w.ec2.list_launch_templates().await.expect("listed");
    let stale_created = listed
        .iter()
        .find(|t| t.name == stale.name)
        .and_then(|t| t.created)
        .expect("ours is listed with its CreateTime");
    // moto keeps CreateTime in whole seconds: the fresh template must be created in a later
    // second than the stale one for the two to differ in age at all.
    while SystemTime::now() < stale_created + Duration::from_millis(1_100) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let fresh = w
        .ec2
        .ensure_launch_template(&LaunchTemplateSpec {
            user_data: "a changed spec, a new template".into(),
            ..spec(&w, &image)
        })
        .await
        .expect("created");

    let listed = w.ec2.list_launch_templates().await.expect("listed");
    let mut names: Vec<&str> = listed.iter().map(|t| t.name.as_str()).collect();
    names.sort();
    let mut ours = vec![stale.name.as_str(), fresh.name.as_str()];
    ours.sort();
    assert_eq!(names, ours, "only tagged AND prefixed templates are listed");

    // Exactly a grace after the stale one was created: it has reached the grace, the
    // fresh one (a second or more younger) has not.
    let grace = Duration::from_secs(600);
    let doomed = templates_to_delete(
        CLUSTER,
        &listed,
        &HashSet::new(),
        stale_created + grace,
        grace,
        50,
    );
    assert_eq!(doomed, std::slice::from_ref(&stale.name));
    for name in &doomed {
        w.ec2.delete_launch_template(name).await.expect("deleted");
    }
    // A foreign name is refused unsent. (Deleting twice is not tried here: moto answers a
    // missing name with MissingParameter where EC2 says
    // InvalidLaunchTemplateName.NotFoundException; the mock tests cover that.)
    let refused = w.ec2.delete_launch_template("demo-copy").await;
    assert!(
        matches!(refused, Err(AwsError::NotOurLaunchTemplate { .. })),
        "{refused:?}"
    );

    let all = ec2
        .describe_launch_templates()
        .send()
        .await
        .expect("described");
    let mut left: Vec<&str> = all
        .launch_templates()
        .iter()
        .filter_map(|t| t.launch_template_name())
        .collect();
    left.sort();
    let mut want = vec![
        fresh.name.as_str(),
        untagged,
        "demo-copy",
        "nodewright/other/0123456789abcdef",
    ];
    want.sort();
    assert_eq!(left, want);
}

const EC2_TRUST: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;

async fn role(iam: &aws_sdk_iam::Client, name: &str) {
    iam.create_role()
        .role_name(name)
        .assume_role_policy_document(EC2_TRUST)
        .send()
        .await
        .expect("role created");
}

/// (path, role names, ownership tag) of a profile, read with the plain SDK.
async fn profile(iam: &aws_sdk_iam::Client, name: &str) -> (String, Vec<String>, Option<String>) {
    let got = iam
        .get_instance_profile()
        .instance_profile_name(name)
        .send()
        .await
        .expect("profile exists");
    let p = got.instance_profile().expect("profile in answer");
    // GetInstanceProfile carries the tags (moto has no ListInstanceProfileTags).
    let owner = p
        .tags()
        .iter()
        .find(|t| t.key() == "nodewright.io/cluster")
        .map(|t| t.value().to_string());
    (
        p.path().to_string(),
        p.roles()
            .iter()
            .map(|r| r.role_name().to_string())
            .collect(),
        owner,
    )
}

#[tokio::test]
async fn a_role_gets_one_tagged_profile_under_the_nodewright_path_however_often_asked() {
    let w = world().await;
    let iam = aws_sdk_iam::Client::new(&w.config);
    role(&iam, "gpu-nodes").await;
    let adapter = IamAdapter::new(iam.clone(), CLUSTER);

    let first = adapter
        .ensure_instance_profile("gpu-nodes")
        .await
        .expect("ensured");
    assert_eq!(first, instance_profile_name(CLUSTER, "gpu-nodes"));
    assert_eq!(
        profile(&iam, &first).await,
        (
            "/nodewright/".to_string(),
            vec!["gpu-nodes".to_string()],
            Some(CLUSTER.to_string())
        )
    );

    // Again, by ARN, and twice at once: the same profile, still one role, no error.
    let again = adapter
        .ensure_instance_profile("arn:aws:iam::123456789012:role/gpu-nodes")
        .await
        .expect("a second call is a no-op");
    let (a, b) = tokio::join!(
        adapter.ensure_instance_profile("gpu-nodes"),
        adapter.ensure_instance_profile("gpu-nodes")
    );
    assert_eq!(
        [again, a.expect("concurrent"), b.expect("concurrent")],
        [first.clone(), first.clone(), first.clone()]
    );
    let listed = iam.list_instance_profiles().send().await.expect("listed");
    let mut names: Vec<&str> = listed
        .instance_profiles()
        .iter()
        .map(|p| p.instance_profile_name())
        .collect();
    names.sort();
    let mut want = vec![first.as_str(), w.stack.instance_profile_name.as_str()];
    want.sort();
    assert_eq!(names, want, "the seeded stack profile and one of ours");
    assert_eq!(profile(&iam, &first).await.1, ["gpu-nodes"]);
}

#[tokio::test]
async fn two_callers_racing_on_a_new_profile_both_get_it() {
    let w = world().await;
    let iam = aws_sdk_iam::Client::new(&w.config);
    role(&iam, "batch-nodes").await;
    let one = IamAdapter::new(iam.clone(), CLUSTER);
    let two = IamAdapter::new(iam.clone(), CLUSTER);

    let (a, b) = tokio::join!(
        one.ensure_instance_profile("batch-nodes"),
        two.ensure_instance_profile("batch-nodes")
    );

    let name = instance_profile_name(CLUSTER, "batch-nodes");
    assert_eq!(
        [a.expect("first racer"), b.expect("second racer")],
        [name.clone(), name.clone()]
    );
    assert_eq!(profile(&iam, &name).await.1, ["batch-nodes"]);
}

#[tokio::test]
async fn a_profile_holding_another_role_or_a_missing_role_is_an_error_not_a_change() {
    let w = world().await;
    let iam = aws_sdk_iam::Client::new(&w.config);
    role(&iam, "intended").await;
    role(&iam, "someone-elses").await;
    // Someone put another role into the profile nodewright would use for `intended`.
    let name = instance_profile_name(CLUSTER, "intended");
    iam.create_instance_profile()
        .instance_profile_name(&name)
        .path("/nodewright/")
        .send()
        .await
        .expect("profile created by hand");
    iam.add_role_to_instance_profile()
        .instance_profile_name(&name)
        .role_name("someone-elses")
        .send()
        .await
        .expect("role added by hand");
    let adapter = IamAdapter::new(iam.clone(), CLUSTER);

    let taken = adapter.ensure_instance_profile("intended").await;
    let missing = adapter.ensure_instance_profile("no-such-role").await;

    assert!(
        matches!(&taken, Err(AwsError::InstanceProfileHoldsOtherRole { holds, .. }) if holds == "someone-elses"),
        "{taken:?}"
    );
    assert_eq!(profile(&iam, &name).await.1, ["someone-elses"]);
    let missing = missing.expect_err("a role that does not exist");
    assert_eq!(missing.class(), ErrorClass::NotFound, "{missing:?}");
}

/// The world's launcher keeps moto's catalog answers on disk (tests/src/moto/launch.py,
/// change 12): each must still answer its own request, and carry its own request id.
#[tokio::test]
async fn moto_s_kept_catalog_answers_follow_each_request_s_types_and_filters() {
    use aws_sdk_ec2::operation::RequestId as _;
    let moto = Moto::start().await.expect("moto starts");
    let ec2 = aws_sdk_ec2::Client::new(&moto.sdk_config().await);
    let by_filter = |t: &str| Filter::builder().name("instance-type").values(t).build();
    let mut request_ids = HashSet::new();
    // (instance types asked, filter): the types answered. Asked twice: the second answer
    // is the kept one.
    let cases: [(&[&str], Option<&str>, &[&str]); 3] = [
        (&[], Some("m5.large"), &["m5.large"]),
        (&[], Some("c6g.xlarge"), &["c6g.xlarge"]),
        (&["r5.large", "t3.micro"], None, &["r5.large", "t3.micro"]),
    ];
    for _ in 0..2 {
        for (types, filter, want) in cases {
            let mut request = ec2.describe_instance_types();
            for t in types {
                request = request.instance_types(aws_sdk_ec2::types::InstanceType::from(*t));
            }
            if let Some(f) = filter {
                request = request.filters(by_filter(f));
            }
            let out = request.send().await.expect("DescribeInstanceTypes");
            let mut got: Vec<&str> = out
                .instance_types()
                .iter()
                .filter_map(|t| t.instance_type().map(|t| t.as_str()))
                .collect();
            got.sort();
            assert_eq!(got, want, "types {types:?}, filter {filter:?}");
            request_ids.insert(out.request_id().unwrap_or_default().to_string());
        }
    }
    assert_eq!(request_ids.len(), 6, "{request_ids:?}");

    let zones = |zone: &str| {
        let ec2 = ec2.clone();
        let zone = zone.to_string();
        async move {
            let out = ec2
                .describe_instance_type_offerings()
                .location_type(aws_sdk_ec2::types::LocationType::AvailabilityZone)
                .filters(Filter::builder().name("location").values(&zone).build())
                .send()
                .await
                .expect("DescribeInstanceTypeOfferings");
            let located: HashSet<String> = out
                .instance_type_offerings()
                .iter()
                .filter_map(|o| o.location.clone())
                .collect();
            (located, out.instance_type_offerings().len())
        }
    };
    for _ in 0..2 {
        for zone in ["us-east-1a", "us-east-1b"] {
            let (located, n) = zones(zone).await;
            assert_eq!(located, HashSet::from([zone.to_string()]));
            assert!(n > 100, "{zone}: {n} offerings");
        }
    }
}

#[tokio::test]
async fn spot_prices_are_asked_for_the_types_named_or_for_every_type() {
    use nodewright::aws::InstanceTypeSource as _;
    let w = world().await;
    let named = ["m5.large".to_string(), "c5.xlarge".to_string()];
    let some = w.ec2.spot_prices_of(&named).await.expect("spot prices");
    let types: HashSet<&str> = some.iter().map(|p| p.instance_type.as_str()).collect();
    assert_eq!(types, HashSet::from(["m5.large", "c5.xlarge"]), "{some:?}");
    assert!(
        some.iter()
            .all(|p| p.zone.starts_with(nodewright_world::moto::REGION)),
        "one price per zone of the region: {some:?}"
    );
    let every = w.ec2.spot_prices().await.expect("spot prices");
    assert!(every.len() > some.len() * 10, "{} prices", every.len());
}
