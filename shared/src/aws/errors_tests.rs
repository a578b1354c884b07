//! The AWS error classification's table tests (`errors.rs`).

use super::errors::*;

#[test]
fn error_codes_fall_into_the_classes_karpenter_uses() {
    let table = [
        ("InvalidInstanceID.NotFound", ErrorClass::NotFound),
        (
            "InvalidLaunchTemplateName.NotFoundException",
            ErrorClass::NotFound,
        ),
        ("ParameterNotFound", ErrorClass::NotFound),
        (
            "InsufficientInstanceCapacity",
            ErrorClass::InsufficientCapacity,
        ),
        (
            "MaxSpotInstanceCountExceeded",
            ErrorClass::InsufficientCapacity,
        ),
        ("VcpuLimitExceeded", ErrorClass::InsufficientCapacity),
        ("UnfulfillableCapacity", ErrorClass::InsufficientCapacity),
        ("Unsupported", ErrorClass::InsufficientCapacity),
        (
            "InsufficientFreeAddressesInSubnet",
            ErrorClass::InsufficientCapacity,
        ),
        ("RequestLimitExceeded", ErrorClass::Throttled),
        ("IdempotentParameterMismatch", ErrorClass::TokenReused),
        ("Throttling", ErrorClass::Throttled),
        ("UnauthorizedOperation", ErrorClass::Unauthorized),
        ("AccessDeniedException", ErrorClass::Unauthorized),
        ("InvalidParameterValue", ErrorClass::InvalidParameter),
        ("InvalidAMIID.Malformed", ErrorClass::InvalidParameter),
        // The Price List service's own error shapes.
        ("ThrottlingException", ErrorClass::Throttled),
        ("NotFoundException", ErrorClass::NotFound),
        ("ExpiredNextTokenException", ErrorClass::InvalidParameter),
        ("InternalErrorException", ErrorClass::Other),
        ("InternalError", ErrorClass::Other),
        ("", ErrorClass::Other),
    ];
    for (code, class) in table {
        assert_eq!(classify_code(code), class, "code {code:?}");
    }
}

#[test]
fn an_instance_profile_ec2_cannot_see_yet_is_told_apart_from_a_wrong_request() {
    let table = [
        (
            "InvalidParameterValue",
            "Value (nodewright_demo_0123) for parameter iamInstanceProfile.name is \
             invalid. Invalid IAM Instance Profile name",
            ErrorClass::Propagating,
        ),
        (
            "InvalidParameterValue",
            "IAM Instance Profile \"arn:aws:iam::1:instance-profile/x\" has no \
             associated IAM Roles",
            ErrorClass::Propagating,
        ),
        (
            "InvalidParameterValue",
            "Value (ami-1) for parameter imageId is invalid",
            ErrorClass::InvalidParameter,
        ),
        (
            "UnauthorizedOperation",
            "not authorized to perform iam:PassRole on the IAM instance profile role",
            ErrorClass::Unauthorized,
        ),
        (
            "InsufficientInstanceCapacity",
            "no capacity",
            ErrorClass::InsufficientCapacity,
        ),
    ];
    for (code, message, class) in table {
        assert_eq!(classify_error(code, message), class, "{code}: {message}");
    }
}
