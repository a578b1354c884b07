//! EC2 capacity reservations as the product's SDK client sees them through the AWS front
//! (`nodewright_world::capacity_reservations`; moto has none): described by id and filter,
//! launched into from a launch template that targets one, freed by termination, shown on
//! the instance, and refused as EC2 refuses a full one or a launch in the wrong market.
//!
//! AWS is moto behind the front, signed as the world's administrator (or, for IAM, as a
//! user allowed only DescribeInstances); the `aws_sdk_ec2` client is real.

use aws_sdk_ec2::Client;
use aws_sdk_ec2::error::ProvideErrorMetadata as _;
use aws_sdk_ec2::types::{
    CapacityReservationPreference, CapacityReservationTarget, CapacityReservationType,
    DefaultTargetCapacityType, Filter, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest, FleetType,
    InstanceLifecycleType, InstanceMatchCriteria, InstanceType,
    LaunchTemplateCapacityReservationSpecificationRequest,
    LaunchTemplateInstanceMarketOptionsRequest, MarketType, RequestLaunchTemplateData,
    TargetCapacitySpecificationRequest,
};
use nodewright_world::aws_front::{AwsFront, Handling};
use nodewright_world::capacity_reservations::Reservation;
use nodewright_world::moto::{Moto, sdk_config_for};

/// moto, the front before it, and an EC2 client through the front.
struct Ec2World {
    moto: Moto,
    front: AwsFront,
    ec2: Client,
}

async fn world() -> Ec2World {
    let moto = Moto::start().await.expect("moto starts");
    let front = AwsFront::start(moto.url()).await.expect("the front starts");
    let ec2 = Client::new(&front.sdk_config(&moto.sdk_config().await));
    Ec2World { moto, front, ec2 }
}

/// A subnet of moto's default VPC: (id, zone).
async fn subnet(ec2: &Client) -> (String, String) {
    let out = ec2
        .describe_subnets()
        .send()
        .await
        .expect("DescribeSubnets");
    let s = &out.subnets()[0];
    let id = s.subnet_id().expect("an id").to_string();
    (id, s.availability_zone().expect("a zone").to_string())
}

/// A launch template targeting `reservation`, with the capacity block market when `block`.
async fn template_for(ec2: &Client, reservation: &str, block: bool) -> String {
    let image = ec2
        .describe_images()
        .owners("amazon")
        .send()
        .await
        .expect("images");
    let target = CapacityReservationTarget::builder()
        .capacity_reservation_id(reservation)
        .build();
    let spec = LaunchTemplateCapacityReservationSpecificationRequest::builder()
        .capacity_reservation_preference(CapacityReservationPreference::CapacityReservationsOnly)
        .capacity_reservation_target(target)
        .build();
    let mut data = RequestLaunchTemplateData::builder()
        .image_id(image.images()[0].image_id().expect("an image id"))
        .capacity_reservation_specification(spec);
    if block {
        let market = LaunchTemplateInstanceMarketOptionsRequest::builder()
            .market_type(MarketType::CapacityBlock)
            .build();
        data = data.instance_market_options(market);
    }
    let out = ec2
        .create_launch_template()
        .launch_template_name(format!("nodes-{reservation}"))
        .launch_template_data(data.build())
        .send()
        .await
        .expect("CreateLaunchTemplate");
    let template = out.launch_template().expect("a template");
    template.launch_template_id().expect("an id").to_string()
}

/// What an `instant` CreateFleet of one m5.large launched: (instance ids, error codes).
async fn launch(
    ec2: &Client,
    template: &str,
    place: &(String, String),
    capacity: DefaultTargetCapacityType,
) -> (Vec<String>, Vec<String>) {
    launch_with_token(ec2, template, place, capacity, None).await
}

/// [`launch`] with the ClientToken `token` (the SDK makes one up for `None`).
async fn launch_with_token(
    ec2: &Client,
    template: &str,
    (subnet, zone): &(String, String),
    capacity: DefaultTargetCapacityType,
    token: Option<&str>,
) -> (Vec<String>, Vec<String>) {
    let config = FleetLaunchTemplateConfigRequest::builder()
        .launch_template_specification(
            FleetLaunchTemplateSpecificationRequest::builder()
                .launch_template_id(template)
                .version("$Latest")
                .build(),
        )
        .overrides(
            FleetLaunchTemplateOverridesRequest::builder()
                .instance_type(InstanceType::M5Large)
                .subnet_id(subnet)
                .availability_zone(zone)
                .build(),
        )
        .build();
    let out = ec2
        .create_fleet()
        .r#type(FleetType::Instant)
        .target_capacity_specification(
            TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(1)
                .default_target_capacity_type(capacity)
                .build(),
        )
        .launch_template_configs(config)
        .set_client_token(token.map(str::to_string))
        .send()
        .await
        .expect("CreateFleet answers");
    let ids = out
        .instances()
        .iter()
        .flat_map(|i| i.instance_ids())
        .cloned()
        .collect();
    let codes = out
        .errors()
        .iter()
        .filter_map(|e| e.error_code())
        .map(str::to_string)
        .collect();
    (ids, codes)
}

async fn described(ec2: &Client, id: &str) -> aws_sdk_ec2::types::Instance {
    let out = ec2
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .expect("DescribeInstances");
    out.reservations()[0].instances()[0].clone()
}

fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

/// The ids a DescribeCapacityReservations with `filter` lists.
async fn listed(ec2: &Client, filter: Filter) -> Vec<String> {
    let out = ec2
        .describe_capacity_reservations()
        .filters(filter)
        .send()
        .await
        .expect("DescribeCapacityReservations");
    let ids = out.capacity_reservations().iter();
    ids.filter_map(|r| r.capacity_reservation_id())
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn reservations_are_described_by_id_tag_and_owner_and_an_unknown_id_is_not_found() {
    let w = world().await;
    w.front
        .reserve(Reservation::open("cr-0aa", "m5.large", "us-east-1a", 2).tagged("team", "ml"));
    w.front.reserve(Reservation {
        owner_id: "210987654321".into(),
        ..Reservation::open("cr-0bb", "c5.large", "us-east-1b", 1).targeted()
    });

    let out = w
        .ec2
        .describe_capacity_reservations()
        .capacity_reservation_ids("cr-0aa")
        .send()
        .await
        .expect("described by id");
    let [r] = out.capacity_reservations() else {
        panic!("one reservation: {out:?}");
    };
    assert_eq!(r.instance_type(), Some("m5.large"));
    assert_eq!(r.availability_zone(), Some("us-east-1a"));
    assert_eq!(
        (r.total_instance_count(), r.available_instance_count()),
        (Some(2), Some(2))
    );
    assert_eq!(r.state().map(|s| s.as_str()), Some("active"));
    assert_eq!(
        r.instance_match_criteria(),
        Some(&InstanceMatchCriteria::Open)
    );
    assert_eq!(
        r.reservation_type(),
        Some(&CapacityReservationType::Default)
    );
    assert_eq!(r.owner_id(), Some("123456789012"));
    assert!(r.start_date().is_some() && r.end_date().is_none(), "{r:?}");
    assert_eq!(r.tags()[0].value(), Some("ml"));

    assert_eq!(listed(&w.ec2, filter("tag:team", "ml")).await, ["cr-0aa"]);
    assert_eq!(
        listed(&w.ec2, filter("owner-id", "210987654321")).await,
        ["cr-0bb"]
    );
    assert_eq!(
        listed(&w.ec2, filter("instance-match-criteria", "targeted")).await,
        ["cr-0bb"]
    );

    let pages: Vec<_> = w
        .ec2
        .describe_capacity_reservations()
        .max_results(1)
        .into_paginator()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .expect("every page");
    assert_eq!(pages.len(), 2, "one reservation a page: {pages:?}");

    let unknown = w
        .ec2
        .describe_capacity_reservations()
        .capacity_reservation_ids("cr-0ff")
        .send()
        .await
        .expect_err("an unknown id");
    assert_eq!(
        unknown.code(),
        Some("InvalidCapacityReservationId.NotFound"),
        "{unknown:?}"
    );
    let bad_filter = w
        .ec2
        .describe_capacity_reservations()
        .filters(filter("instance-family", "m5"))
        .send()
        .await
        .expect_err("an unknown filter");
    assert_eq!(
        bad_filter.code(),
        Some("InvalidParameterValue"),
        "{bad_filter:?}"
    );

    let handled: Vec<Handling> = w
        .front
        .calls("DescribeCapacityReservations")
        .iter()
        .map(|c| c.handling)
        .collect();
    let mut want = vec![Handling::Emulated(200); 6];
    want.extend([Handling::Emulated(400); 2]);
    assert_eq!(handled, want);
}

#[tokio::test]
async fn a_caller_without_the_permission_is_refused_by_moto_s_iam_before_the_world_answers() {
    let w = world().await;
    let iam = aws_sdk_iam::Client::new(&w.moto.sdk_config().await);
    iam.create_user()
        .user_name("reader")
        .send()
        .await
        .expect("CreateUser");
    let policy = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:DescribeInstances","Resource":"*"}]}"#;
    iam.put_user_policy()
        .user_name("reader")
        .policy_name("instances-only")
        .policy_document(policy)
        .send()
        .await
        .expect("PutUserPolicy");
    let key = iam
        .create_access_key()
        .user_name("reader")
        .send()
        .await
        .expect("a key");
    let key = key.access_key().expect("an access key");
    let credentials = aws_credential_types::Credentials::new(
        key.access_key_id(),
        key.secret_access_key(),
        None,
        None,
        "reader",
    );
    let reader = Client::new(&sdk_config_for(w.front.url(), &credentials).await);

    let refused = reader
        .describe_capacity_reservations()
        .send()
        .await
        .expect_err("not allowed");
    assert_eq!(refused.code(), Some("AccessDenied"), "{refused:?}");
    let allowed = reader.describe_instances().send().await;
    assert!(allowed.is_ok(), "{allowed:?}");
    let handled: Vec<Handling> = w
        .front
        .calls("DescribeCapacityReservations")
        .iter()
        .map(|c| c.handling)
        .collect();
    assert_eq!(handled, [Handling::Forwarded(403)]);
}

#[tokio::test]
async fn a_launch_into_a_reservation_takes_its_slot_until_the_instance_terminates() {
    let w = world().await;
    let place = subnet(&w.ec2).await;
    w.front
        .reserve(Reservation::open("cr-0aa", "m5.large", &place.1, 1));
    let template = template_for(&w.ec2, "cr-0aa", false).await;
    let on_demand = DefaultTargetCapacityType::OnDemand;

    let (first, errors) = launch(&w.ec2, &template, &place, on_demand.clone()).await;
    assert_eq!((first.len(), errors.len()), (1, 0), "{first:?} {errors:?}");
    assert_eq!(w.front.reservation_available("cr-0aa"), Some(0));
    let out = w
        .ec2
        .describe_capacity_reservations()
        .capacity_reservation_ids("cr-0aa")
        .send()
        .await
        .expect("described");
    assert_eq!(
        out.capacity_reservations()[0].available_instance_count(),
        Some(0)
    );

    let (second, errors) = launch(&w.ec2, &template, &place, on_demand.clone()).await;
    assert!(
        second.is_empty(),
        "nothing launches into a full reservation: {second:?}"
    );
    assert_eq!(errors, ["ReservationCapacityExceeded"]);
    let fleets: Vec<Handling> = w
        .front
        .calls("CreateFleet")
        .iter()
        .map(|c| c.handling)
        .collect();
    assert_eq!(fleets, [Handling::Forwarded(200), Handling::FleetErrors]);

    let instance = described(&w.ec2, &first[0]).await;
    assert_eq!(instance.capacity_reservation_id(), Some("cr-0aa"));
    let spec = instance
        .capacity_reservation_specification()
        .expect("its specification");
    assert_eq!(
        spec.capacity_reservation_preference(),
        Some(&CapacityReservationPreference::CapacityReservationsOnly)
    );
    let target = spec.capacity_reservation_target().expect("its target");
    assert_eq!(target.capacity_reservation_id(), Some("cr-0aa"));
    assert_eq!(
        instance.instance_lifecycle(),
        None,
        "an ODCR's instance is on-demand"
    );

    w.ec2
        .terminate_instances()
        .instance_ids(&first[0])
        .send()
        .await
        .expect("TerminateInstances");
    assert_eq!(w.front.reservation_available("cr-0aa"), Some(1));
    let (third, errors) = launch(&w.ec2, &template, &place, on_demand).await;
    assert_eq!(
        (third.len(), errors.len()),
        (1, 0),
        "the freed slot: {errors:?}"
    );
}

#[tokio::test]
async fn a_capacity_block_launches_only_in_its_market_and_its_instance_says_so() {
    let w = world().await;
    let place = subnet(&w.ec2).await;
    let end = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24);
    w.front.reserve(Reservation::capacity_block(
        "cr-0cb", "m5.large", &place.1, 1, end,
    ));
    let template = template_for(&w.ec2, "cr-0cb", true).await;

    let (wrong, errors) = launch(
        &w.ec2,
        &template,
        &place,
        DefaultTargetCapacityType::OnDemand,
    )
    .await;
    assert!(wrong.is_empty(), "{wrong:?}");
    assert_eq!(errors, ["InvalidParameterValue"]);
    assert_eq!(w.front.reservation_available("cr-0cb"), Some(1));

    let (launched, errors) = launch(
        &w.ec2,
        &template,
        &place,
        DefaultTargetCapacityType::CapacityBlock,
    )
    .await;
    assert_eq!(
        (launched.len(), errors.len()),
        (1, 0),
        "{launched:?} {errors:?}"
    );
    assert_eq!(w.front.reservation_available("cr-0cb"), Some(0));
    let instance = described(&w.ec2, &launched[0]).await;
    assert_eq!(instance.capacity_reservation_id(), Some("cr-0cb"));
    assert_eq!(
        instance.instance_lifecycle(),
        Some(&InstanceLifecycleType::CapacityBlock)
    );
}

#[tokio::test]
async fn a_refused_launch_is_answered_again_to_its_token_as_ec2_remembers_any_answer() {
    let w = world().await;
    let place = subnet(&w.ec2).await;
    w.front
        .reserve(Reservation::open("cr-0aa", "m5.large", &place.1, 1));
    let template = template_for(&w.ec2, "cr-0aa", false).await;
    let on_demand = DefaultTargetCapacityType::OnDemand;
    let (first, _) = launch(&w.ec2, &template, &place, on_demand.clone()).await;

    let token = Some("claim-full");
    let refused = launch_with_token(&w.ec2, &template, &place, on_demand.clone(), token).await;
    assert_eq!(refused.1, ["ReservationCapacityExceeded"]);
    w.ec2
        .terminate_instances()
        .instance_ids(&first[0])
        .send()
        .await
        .expect("TerminateInstances");
    let again = launch_with_token(&w.ec2, &template, &place, on_demand, token).await;
    assert_eq!(again, refused, "the same token gets the first answer");
    assert_eq!(w.front.reservation_available("cr-0aa"), Some(1));
    let fleets: Vec<Handling> = w
        .front
        .calls("CreateFleet")
        .iter()
        .map(|c| c.handling)
        .collect();
    assert_eq!(
        fleets,
        [
            Handling::Forwarded(200),
            Handling::FleetErrors,
            Handling::Replayed
        ]
    );
}
