use super::*;
use crate::aws::{ApiError, FleetError, LaunchedInstance};

fn instance() -> LaunchedInstance {
    LaunchedInstance {
        id: "i-0123".into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: CapacityType::Spot,
    }
}

fn error(code: &str, class: ErrorClass) -> FleetError {
    FleetError {
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        code: code.into(),
        message: "said EC2".into(),
        class,
    }
}

fn answered(instances: usize, errors: Vec<FleetError>) -> Result<FleetOutcome, AwsError> {
    Ok(FleetOutcome {
        instances: (0..instances).map(|_| instance()).collect(),
        errors,
    })
}

fn call_failed(class: ErrorClass, code: &str) -> Result<FleetOutcome, AwsError> {
    Err(AwsError::CreateFleet {
        client_token: "nw-1-0".into(),
        source: ApiError {
            class,
            code: Some(code.into()),
            message: "said EC2".into(),
            source: Box::new(std::io::Error::other("fake")),
        },
    })
}

fn offering() -> Exclusion {
    Exclusion::Offering {
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: CapacityType::Spot,
    }
}

#[test]
fn each_answer_to_a_create_fleet_comes_to_one_verdict_and_moves_the_token_only_when_ec2_acted() {
    let ice = || {
        error(
            "InsufficientInstanceCapacity",
            ErrorClass::InsufficientCapacity,
        )
    };
    let launched = Some(Answer::Instances { all_dead: false });
    let nothing = Some(Answer::NothingLaunched);
    // (case, answer, all dead, verdict, attempt, excluded, forget the profile)
    type Row = (
        &'static str,
        Result<FleetOutcome, AwsError>,
        bool,
        Verdict,
        Option<Answer>,
        Vec<Exclusion>,
        bool,
    );
    let cases: Vec<Row> = vec![
        (
            "an instance: launched, the attempt stands",
            answered(1, vec![]),
            false,
            Verdict::Launched,
            launched,
            vec![],
            false,
        ),
        (
            "an instance and a failed offering: launched, the offering kept out",
            answered(1, vec![ice()]),
            false,
            Verdict::Launched,
            launched,
            vec![offering()],
            false,
        ),
        (
            "only dead instances replayed: the next attempt, now",
            answered(1, vec![]),
            true,
            Verdict::Died,
            Some(Answer::Instances { all_dead: true }),
            vec![],
            false,
        ),
        (
            "no capacity on every offering: next round, a new token",
            answered(0, vec![ice(), ice()]),
            false,
            Verdict::NoCapacity,
            nothing,
            vec![offering()],
            false,
        ),
        (
            "throttled inside the answer: stop, a new token next time",
            answered(
                0,
                vec![error("RequestLimitExceeded", ErrorClass::Throttled)],
            ),
            false,
            Verdict::Throttled,
            nothing,
            vec![],
            false,
        ),
        (
            "a profile not visible yet: retried, the profile ensured again",
            answered(
                0,
                vec![error("InvalidParameterValue", ErrorClass::Propagating)],
            ),
            false,
            Verdict::RetryLater(
                "CreateFleet launched nothing: InvalidParameterValue: said EC2; will retry".into(),
            ),
            nothing,
            vec![],
            true,
        ),
        (
            "an error that excludes nothing: failed",
            answered(0, vec![error("Mystery", ErrorClass::Other)]),
            false,
            Verdict::Failed("CreateFleet launched nothing: Mystery: said EC2".into()),
            nothing,
            vec![],
            false,
        ),
        (
            "the call throttled past the SDK's retries: stop, the same token next time",
            call_failed(ErrorClass::Throttled, "RequestLimitExceeded"),
            false,
            Verdict::Throttled,
            None,
            vec![],
            false,
        ),
        (
            "the token reused with other parameters: a live instance decides",
            call_failed(ErrorClass::TokenReused, "IdempotentParameterMismatch"),
            false,
            Verdict::TokenReused,
            None,
            vec![],
            false,
        ),
        (
            "a template collected meanwhile: retried with the same token",
            call_failed(ErrorClass::NotFound, "InvalidLaunchTemplateId.NotFound"),
            false,
            Verdict::RetryLater(
                "CreateFleet: CreateFleet failed for client token nw-1-0: \
                 InvalidLaunchTemplateId.NotFound: said EC2 (not found); will retry"
                    .into(),
            ),
            None,
            vec![],
            false,
        ),
        (
            "a call that failed otherwise: failed, the same token next time",
            call_failed(ErrorClass::Other, "InternalError"),
            false,
            Verdict::Failed("CreateFleet: CreateFleet failed for client token nw-1-0".into()),
            None,
            vec![],
            false,
        ),
    ];
    for (case, answer, all_dead, verdict, attempt, exclusions, forget) in cases {
        let j = judge(&answer, all_dead, CapacityType::Spot);
        assert_eq!(j.verdict, verdict, "{case}");
        assert_eq!(j.attempt, attempt, "{case}");
        assert_eq!(j.exclusions, exclusions, "{case}");
        assert_eq!(j.forget_profile, forget, "{case}");
    }
}
