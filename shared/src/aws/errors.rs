//! AWS errors, classified in one place.
//!
//! The error codes and their classes follow karpenter-provider-aws `pkg/errors/errors.go`
//! (not-found codes, `unfulfillableCapacityErrorCodes`) and the AWS SDKs' throttling codes
//! (`aws-smithy-runtime` `THROTTLING_ERRORS`, EC2's `RequestLimitExceeded`), plus the error
//! shapes of the Price List service model (`pricing-2017-10-15`: `NotFoundException`,
//! `InvalidNextTokenException`, `ExpiredNextTokenException`).

use std::error::Error as StdError;
use std::fmt;

use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

/// What an AWS error means for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ErrorClass {
    /// The thing asked about does not exist (any more): safe to treat as done when removing.
    NotFound,
    /// No capacity for this offering right now: try another type, zone or capacity type.
    InsufficientCapacity,
    /// Slow down and retry later.
    Throttled,
    /// The caller's credentials or policy do not allow this.
    Unauthorized,
    /// The request itself is wrong; retrying it unchanged will not help.
    InvalidParameter,
    /// Something just created elsewhere is not visible to this service yet (IAM is
    /// eventually consistent: EC2 refuses a new instance profile for a few seconds). Retry
    /// the same request a little later; it says nothing about capacity.
    Propagating,
    /// The ClientToken was already used with other parameters
    /// (`IdempotentParameterMismatch`): an earlier attempt of this launch reached EC2.
    TokenReused,
    Other,
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            ErrorClass::NotFound => "not found",
            ErrorClass::InsufficientCapacity => "insufficient capacity",
            ErrorClass::Throttled => "throttled",
            ErrorClass::Unauthorized => "unauthorized",
            ErrorClass::InvalidParameter => "invalid parameter",
            ErrorClass::Propagating => "not visible yet",
            ErrorClass::TokenReused => "client token already used",
            ErrorClass::Other => "other",
        };
        f.write_str(s)
    }
}

const NOT_FOUND: &[&str] = &[
    "InvalidInstanceID.NotFound",
    "InvalidLaunchTemplateName.NotFoundException",
    "InvalidLaunchTemplateId.NotFound",
    "InvalidLaunchTemplateId.VersionNotFound",
    "InvalidAMIID.NotFound",
    "InvalidSubnetID.NotFound",
    "InvalidGroup.NotFound",
    "InvalidFleetId.NotFound",
    "ParameterNotFound",
    "ParameterVersionNotFound",
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
    "ResourceNotFoundException",
    "NoSuchEntity",
    "NotFoundException",
];

/// Karpenter's `unfulfillableCapacityErrorCodes` plus the subnet running out of addresses,
/// which Karpenter also treats as "this offering cannot launch now".
const INSUFFICIENT_CAPACITY: &[&str] = &[
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
    "ReservationCapacityExceeded",
    "InsufficientCapacityOnHost",
];

const THROTTLED: &[&str] = &[
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "RequestThrottled",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "TransactionInProgressException",
    "SlowDown",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
];

const UNAUTHORIZED: &[&str] = &[
    "UnauthorizedOperation",
    "AccessDenied",
    "AccessDeniedException",
    "AuthFailure",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "ExpiredTokenException",
    "OptInRequired",
];

const INVALID_PARAMETER: &[&str] = &[
    "InvalidParameter",
    "InvalidParameterValue",
    "InvalidParameterCombination",
    "InvalidParameterException",
    "InvalidRequest",
    "MissingParameter",
    "ValidationError",
    "ValidationException",
    "InvalidFleetConfiguration",
    "InvalidLaunchTemplateName.MalformedException",
    "InvalidUserData.Malformed",
    "InvalidBlockDeviceMapping",
    "InvalidNextTokenException",
    "ExpiredNextTokenException",
];

/// The class of an AWS error code (a pure table lookup; unknown codes are `Other`).
pub fn classify_code(code: &str) -> ErrorClass {
    let is = |table: &[&str]| table.contains(&code);
    if code == "IdempotentParameterMismatch" {
        ErrorClass::TokenReused
    } else if is(NOT_FOUND) {
        ErrorClass::NotFound
    } else if is(INSUFFICIENT_CAPACITY) {
        ErrorClass::InsufficientCapacity
    } else if is(THROTTLED) {
        ErrorClass::Throttled
    } else if is(UNAUTHORIZED) {
        ErrorClass::Unauthorized
    } else if is(INVALID_PARAMETER) || code.ends_with(".Malformed") {
        ErrorClass::InvalidParameter
    } else {
        ErrorClass::Other
    }
}

/// The class of an error from its code and message. EC2 reports an instance profile it
/// cannot see yet as `InvalidParameterValue` ("Value (x) for parameter
/// iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", or "... has no
/// associated IAM Roles" while the role is being added): the same code as a request that
/// is wrong for good, so only the message tells them apart. Instance profiles nodewright
/// creates hit this for a few seconds after creation (aws/aws-sdk-js-v3#5253,
/// hashicorp/packer#9810); a profile that never appears keeps the claim retrying and is
/// reported on its pods once.
pub fn classify_error(code: &str, message: &str) -> ErrorClass {
    let about_profile = {
        let m = message.to_ascii_lowercase();
        m.contains("iaminstanceprofile") || m.contains("iam instance profile")
    };
    if code == "InvalidParameterValue" && about_profile {
        ErrorClass::Propagating
    } else {
        classify_code(code)
    }
}

/// The class of an SDK error: a service error by its code (and message, see
/// [`classify_error`]), anything else (timeout, no connection, unparsable answer) is
/// `Other`.
pub fn classify<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> ErrorClass {
    match err {
        SdkError::ServiceError(service) => service.err().code().map_or(ErrorClass::Other, |c| {
            classify_error(c, service.err().message().unwrap_or_default())
        }),
        _ => ErrorClass::Other,
    }
}

/// One failed AWS call, with what the caller needs to decide (class and code) and the SDK
/// error as its source.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message} ({class})", code.as_deref().unwrap_or("no error code"))]
pub struct ApiError {
    pub class: ErrorClass,
    pub code: Option<String>,
    pub message: String,
    #[source]
    pub source: Box<dyn StdError + Send + Sync>,
}

impl ApiError {
    pub fn from_sdk<E, R>(err: SdkError<E, R>) -> ApiError
    where
        E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
        R: fmt::Debug + Send + Sync + 'static,
    {
        let class = classify(&err);
        let (code, message) = match &err {
            SdkError::ServiceError(service) => (
                service.err().code().map(str::to_string),
                service.err().message().unwrap_or_default().to_string(),
            ),
            other => (None, other.to_string()),
        };
        ApiError {
            class,
            code,
            message,
            source: Box::new(err),
        }
    }
}

/// Maps an SDK error into an [`AwsError`] variant that names the operation:
/// `.map_err(api(|source| AwsError::DescribeInstances { source }))`.
pub(crate) fn api<E, R>(
    variant: impl FnOnce(ApiError) -> AwsError,
) -> impl FnOnce(SdkError<E, R>) -> AwsError
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
    R: fmt::Debug + Send + Sync + 'static,
{
    move |err| variant(ApiError::from_sdk(err))
}

/// Errors of the AWS adapters: one variant per call, plus requests we refuse to send.
#[derive(Debug, thiserror::Error)]
pub enum AwsError {
    #[error("DescribeInstanceTypes failed")]
    DescribeInstanceTypes { source: ApiError },
    #[error("DescribeInstanceTypeOfferings failed")]
    DescribeInstanceTypeOfferings { source: ApiError },
    #[error("DescribeSpotPriceHistory failed")]
    DescribeSpotPriceHistory { source: ApiError },
    #[error("DescribeSubnets failed")]
    DescribeSubnets { source: ApiError },
    #[error("DescribeSecurityGroups failed")]
    DescribeSecurityGroups { source: ApiError },
    #[error("DescribeCapacityReservations failed")]
    DescribeCapacityReservations { source: ApiError },
    #[error("DescribeImages failed")]
    DescribeImages { source: ApiError },
    #[error("SSM GetParameters failed")]
    GetParameters { source: ApiError },
    #[error("CreateFleet failed for client token {client_token}")]
    CreateFleet {
        client_token: String,
        source: ApiError,
    },
    #[error("DescribeLaunchTemplates failed for {name}")]
    DescribeLaunchTemplates { name: String, source: ApiError },
    #[error("CreateLaunchTemplate failed for {name}")]
    CreateLaunchTemplate { name: String, source: ApiError },
    #[error("DeleteLaunchTemplate failed for {name}")]
    DeleteLaunchTemplate { name: String, source: ApiError },
    #[error("refusing to delete launch template {name}: it is not named {prefix}*")]
    NotOurLaunchTemplate { name: String, prefix: String },
    #[error("IAM GetInstanceProfile failed for {name}")]
    GetInstanceProfile { name: String, source: ApiError },
    #[error("IAM CreateInstanceProfile failed for {name}")]
    CreateInstanceProfile { name: String, source: ApiError },
    /// The role is not named here (it would make every `AwsError` larger); the caller's
    /// context names it.
    #[error("IAM AddRoleToInstanceProfile failed for {name}")]
    AddRoleToInstanceProfile { name: String, source: ApiError },
    #[error(
        "instance profile {name} holds role {holds}, not {role}; nodewright does not take a \
         role out of a profile, remove it by hand"
    )]
    InstanceProfileHoldsOtherRole {
        name: String,
        role: String,
        holds: String,
    },
    #[error("IAM ListInstanceProfiles failed")]
    ListInstanceProfiles { source: ApiError },
    #[error("DescribeIamInstanceProfileAssociations failed")]
    DescribeIamInstanceProfileAssociations { source: ApiError },
    #[error("IAM RemoveRoleFromInstanceProfile failed for {name}")]
    RemoveRoleFromInstanceProfile { name: String, source: ApiError },
    #[error("IAM DeleteInstanceProfile failed for {name}")]
    DeleteInstanceProfile { name: String, source: ApiError },
    #[error(
        "refusing to delete instance profile {name}: it is not named {prefix}* under \
         {path} with this cluster's ownership tag"
    )]
    NotOurInstanceProfile {
        name: String,
        prefix: String,
        path: &'static str,
    },
    #[error("instance profile {name} was reported to exist but cannot be found")]
    InstanceProfileVanished { name: String },
    #[error("DescribeInstances failed")]
    DescribeInstances { source: ApiError },
    #[error("DescribeInstanceStatus failed")]
    DescribeInstanceStatus { source: ApiError },
    #[error("TerminateInstances failed for {ids:?}")]
    TerminateInstances { ids: Vec<String>, source: ApiError },
    #[error("CreateTags failed for {ids:?}")]
    CreateTags { ids: Vec<String>, source: ApiError },
    #[error("SQS SendMessage to {queue} failed")]
    SendMessage { queue: String, source: ApiError },
    #[error("SQS ChangeMessageVisibility on {queue} failed")]
    ChangeMessageVisibility { queue: String, source: ApiError },
    #[error("Pricing GetProducts failed for the on-demand prices of {region}")]
    GetProducts { region: String, source: ApiError },
    #[error("Pricing GetProducts for the on-demand prices of {region} took longer than {after:?}")]
    GetProductsTimedOut {
        region: String,
        after: std::time::Duration,
    },
    #[error("cannot build the {request} request")]
    BuildRequest {
        request: &'static str,
        source: aws_smithy_types::error::operation::BuildError,
    },
    #[error(
        "CreateFleet request {client_token} names {count} instance types; at most {max} are \
         allowed (Karpenter's limit per launch)"
    )]
    TooManyInstanceTypes {
        client_token: String,
        count: usize,
        max: usize,
    },
    #[error("CreateFleet request {client_token} has no overrides: nothing could be launched")]
    NoOverrides { client_token: String },
    #[error("launch template {name} was reported to exist but cannot be found")]
    LaunchTemplateVanished { name: String },
    #[error("{field}: {reason}")]
    InvalidSelector { field: &'static str, reason: String },
    #[error("amiSelectorTerms alias {alias:?}: {reason}")]
    InvalidAlias { alias: String, reason: String },
}

impl AwsError {
    /// Worth trying again in a moment: throttled, not visible yet, or an answer that says
    /// nothing of the request (a timeout, a 5xx).
    pub fn is_transient(&self) -> bool {
        matches!(
            self.class(),
            ErrorClass::Throttled | ErrorClass::Propagating | ErrorClass::Other
        )
    }

    /// The class of the AWS error behind this one; requests refused before sending are
    /// `InvalidParameter`.
    pub fn class(&self) -> ErrorClass {
        match self {
            AwsError::DescribeInstanceTypes { source }
            | AwsError::DescribeInstanceTypeOfferings { source }
            | AwsError::DescribeSpotPriceHistory { source }
            | AwsError::DescribeSubnets { source }
            | AwsError::DescribeSecurityGroups { source }
            | AwsError::DescribeCapacityReservations { source }
            | AwsError::DescribeImages { source }
            | AwsError::GetParameters { source }
            | AwsError::CreateFleet { source, .. }
            | AwsError::DescribeLaunchTemplates { source, .. }
            | AwsError::CreateLaunchTemplate { source, .. }
            | AwsError::DeleteLaunchTemplate { source, .. }
            | AwsError::GetInstanceProfile { source, .. }
            | AwsError::CreateInstanceProfile { source, .. }
            | AwsError::AddRoleToInstanceProfile { source, .. }
            | AwsError::ListInstanceProfiles { source }
            | AwsError::DescribeIamInstanceProfileAssociations { source }
            | AwsError::RemoveRoleFromInstanceProfile { source, .. }
            | AwsError::DeleteInstanceProfile { source, .. }
            | AwsError::DescribeInstances { source }
            | AwsError::DescribeInstanceStatus { source }
            | AwsError::TerminateInstances { source, .. }
            | AwsError::CreateTags { source, .. }
            | AwsError::SendMessage { source, .. }
            | AwsError::ChangeMessageVisibility { source, .. }
            | AwsError::GetProducts { source, .. } => source.class,
            AwsError::LaunchTemplateVanished { .. } | AwsError::InstanceProfileVanished { .. } => {
                ErrorClass::NotFound
            }
            AwsError::InstanceProfileHoldsOtherRole { .. } => ErrorClass::InvalidParameter,
            AwsError::NotOurLaunchTemplate { .. } | AwsError::NotOurInstanceProfile { .. } => {
                ErrorClass::Unauthorized
            }
            // As the SDK's own timeouts: not a service answer, so no class of its own.
            AwsError::GetProductsTimedOut { .. } => ErrorClass::Other,
            AwsError::BuildRequest { .. }
            | AwsError::TooManyInstanceTypes { .. }
            | AwsError::NoOverrides { .. }
            | AwsError::InvalidSelector { .. }
            | AwsError::InvalidAlias { .. } => ErrorClass::InvalidParameter,
        }
    }
}
