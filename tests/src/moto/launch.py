"""Starts moto's server, changed in the ways listed below.

1. The public parameters AWS publishes under /aws/service/eks/ and
/aws/service/bottlerocket/ may be written with PutParameter.

Real AWS publishes those parameters (the EKS-optimized and Bottlerocket AMI aliases);
moto ships none of them and refuses every write under /aws/ as reserved. The test world
seeds them (tests/src/moto/seed.rs) so that nodewright resolves AMI aliases through SSM
exactly as it does in AWS, instead of the product code carrying a test-only path.

2. A form-encoded request body is kept as it arrived. With IAM enforced
(INITIAL_NO_AUTH_ACTION_COUNT), moto verifies SigV4 signatures over the body; werkzeug
consumes a form body while parsing it, and moto then signs its own re-encoding of the
parsed form (space as '+'), which differs from the Rust SDK's bytes (space as '%20'), so
every EC2 call with a space in a value would fail with AuthFailure. Reading the body
into werkzeug's cache first keeps the bytes; the form is parsed from the cache.

3. A request with an empty body is verified over that empty body. moto signs
`body or data`, so for a REST call without a body (EKS DescribeCluster: GET
/clusters/NAME) it signs its own encoding of the parameters it parsed from the path,
which no client ever sent, and answers SignatureDoesNotMatch. AWS signs the bytes on the
wire; so does this.

4. CloudFormation creates AWS::CloudWatch::Alarm through moto's own CloudWatch backend
(PutMetricAlarm), so `!GetAtt Alarm.Arn` resolves. moto's CloudFormation has no model for
alarms: it skips them, and a template naming an alarm's ARN (template.yaml's dashboard)
fails with "Fn::GetAtt references undefined resource". The alarm then exists in moto's
CloudWatch as PutMetricAlarm would leave it; moto never evaluates it.

5. Identity policies are evaluated on actions only. moto matches a statement's resources
against `*` (it does not know the resource of a request) and evaluates most condition keys
as absent, so every resource-scoped or conditional statement of template.yaml's roles
would deny what AWS allows. Each statement is evaluated with `Resource: "*"` and no
`Condition`; resources and conditions are asserted by reading the template
(tests/tests/template_policy.rs). Trust policies are evaluated unchanged, except as 6.

6. The world's administrator may assume a role whose trust policy names a service
principal (`lambda.amazonaws.com`): it stands for that service, as the Lambda service
assumes a function's role in AWS. moto compares only `AWS` principals (and fails with a
TypeError on a `Service` one); any other caller is refused as before.

7. CloudFormation's AWS::IAM::Role attaches its `ManagedPolicyArns` and keeps inline
`Policies` as JSON text, as IAM does. moto 5.2.5 drops `ManagedPolicyArns` (a stack's role
would lack every managed policy: the functions' NodeLaunchPolicy, the node role's AWS
policies) and stores an inline document as a parsed object its own evaluator cannot read.

8. A CommaDelimitedList parameter left at its default is a list, as when it is passed.
moto splits only passed values; a default stays a string, and `!Join [",", !Ref P]` then
joins its characters (DEFAULT_CAPACITY_TYPES became "s,p,o,t,,,o,n,..."). DescribeStacks
shows such a parameter as CloudFormation does, its values joined with commas (moto wrote
the Python list, `['']` for an empty one).

9. An SQS queue never invokes a Lambda function itself: the stack's event source mapping
is recorded (CreateEventSourceMapping, ListEventSourceMappings) but moto's SQS is not told
of it. moto emulates Lambda's poller inside SendMessage: it receives a batch from the queue
at once and runs the function's code in Docker, deleting the batch when that "succeeds".
The functions here are placeholder zips moto cannot run, and the world itself is the
poller (tests/src/interruption.rs: receive, run the real handler, delete what it did not
report as failed), so moto's poller only competed with it: the first message after the
stack was created (in the rule test, the spot interruption warning) was taken off the queue
by moto and never reached the test or the handler.

10. An STS request signed in its query string (a presigned URL: X-Amz-Signature and the
other auth parameters in the query, no Authorization header) is routed to STS by the
service in its X-Amz-Credential and verified as AWS verifies it:
the signature is recomputed over the request as presigned (SigV4 query signing, the
signed headers taken from the request) with the secret of the access key it names, and
compared. moto reads only an Authorization header and fails on a request without one.
The simulated EKS API server (tests/src/kube_sim/eks_auth.rs) sends the presigned STS
GetCallerIdentity URL inside a bearer token here, as the EKS authenticator sends it to STS.
Its caller is the access key X-Amz-Credential names, as in STS: moto reads the key only
from an Authorization header and answered every presigned call as its default user.

11. An instance CreateFleet launches from a launch template that names an instance
profile runs with it, as in EC2: DescribeInstances shows its `IamInstanceProfile` and
DescribeIamInstanceProfileAssociations lists the association. moto hands the template's
`IamInstanceProfile` to its fleet's launch specification and drops it there (RunInstances
associates a profile; the fleet path never does), so a profile in use would look unused
to the sweeper's collection of leftover instance profiles. A profile IAM does not
have is still not refused (EC2 would refuse the launch): the instance runs without one.

12. Not a change of behaviour, only of speed: the answers of DescribeInstanceTypes,
DescribeInstanceTypeOfferings and DescribeSpotPriceHistory are serialized once per
machine and kept on disk. moto computes them from static data (its instance type and
offering tables, a fixed spot price) as a function of the region and the request's
instance types, filters and location type, so the same request gets the same bytes, under
a fresh request id. Serializing them took most of moto's CPU (2.7 s for one
DescribeInstanceTypes of about 900 types), paid by every world and every catalog refresh
on a 2-core CI machine.

13. With NODEWRIGHT_CLOCK set (`world <pace file>`, the world's own time, which runs faster
than the wall clock while nothing works; nodewright::clock::WorldClock reads the same file),
EC2's instances, fleets and launch templates take "now" from it, so an instance's LaunchTime
is in the world's time, the time the function binaries and the simulated kubelet compare it
with. Everything else in moto keeps the wall clock (STS credentials, signatures, SQS).

14. The service-linked role of spot.amazonaws.com is AWSServiceRoleForEC2Spot, as in IAM;
moto named it AWSServiceRoleForSpot.

15. Not a change of behaviour, only of speed: this runs once per test binary, as a
zygote (tests/src/moto/zygote.rs), and each world's server is a fork of it. Importing
moto and applying the changes above takes about 1.2 s of CPU, which every world paid; a
fork takes milliseconds. The backends every world's first requests create (EC2 with its
default VPC and public AMIs, IAM with AWS's managed policies in every partition,
WORLD_BACKENDS) are created in the zygote, as those requests would create them in an
empty account, and every fork starts with them, with each service's botocore model and
REST router already built; nothing else exists before a server's first request. A server exits, removing its log, once the zygote is gone, and the
zygote once the test binary is.

16. CloudWatch answers in Smithy RPC v2 CBOR, the protocol AWS's current SDKs speak to it
(the Rust SDK's `aws-sdk-cloudwatch` speaks nothing else; CloudWatch serves it beside
awsJson1.0 and awsQuery). moto 5.2.5 routes, parses and answers only the other two. A
request to `/service/GraniteServiceVersion20100801/operation/<Operation>` with
`smithy-protocol: rpc-v2-cbor` is routed to moto's CloudWatch as that operation, its body is
decoded from CBOR (botocore's decoder) and read against the operation's input shape as
moto's JSON parser reads JSON, and the answer is moto's JSON answer encoded as CBOR, its
timestamps as tag 1 (epoch seconds) where the output shape says timestamp, with the
`smithy-protocol` header. The signature is still verified over the bytes sent. And
DescribeAlarms applies its StateValue filter together with AlarmNames, as CloudWatch does
(moto applies only the first filter it finds).

17. EKS creates a cluster's security group, as it does for every cluster: CreateCluster
makes `eks-cluster-sg-<cluster>-<n>` in the VPC of the cluster's subnets (tagged
`aws:eks:cluster-name` and `kubernetes.io/cluster/<cluster>: owned`, all traffic admitted
from itself), and DescribeCluster's `resourcesVpcConfig` names it (`clusterSecurityGroupId`)
and the VPC (`vpcId`). UpdateClusterConfig changes only the settings it is given, as EKS
does; moto replaced the whole configuration with the request's. moto had no cluster
security group, so nothing could ask whether the private endpoint admits the functions.

18. An `instant` CreateFleet whose DefaultTargetCapacityType is `capacity-block` launches
its instances, as EC2 launches them into the capacity block the launch template targets.
moto launches only `on-demand` and `spot` and answered such a fleet with no instance and no
error; it now launches them as on-demand instances (the fleet keeps the capacity type it
was asked for). Which block, and whether it has room, is the AWS front's emulation of
capacity reservations (tests/src/capacity_reservations.rs); moto knows no reservations.

Reads one JSON line per server from stdin: {"port": N, "log": PATH, "clock": SETTING or
null}, where SETTING is NODEWRIGHT_CLOCK's (13); answers each with the server's pid.
"""

import datetime
import json
import sys

from moto import server
from moto.moto_server import werkzeug_app
from moto.ssm import models

PUBLIC_PREFIXES = ("/aws/service/eks/", "/aws/service/bottlerocket/")
# A name moto accepts; the parameter is written there and then moved to its real name.
SHADOW_PREFIX = "/nodewright-world-public"

_put_parameter = models.SimpleSystemManagerBackend.put_parameter


def put_parameter(self, name, *args, **kwargs):
    if not name.startswith(PUBLIC_PREFIXES):
        return _put_parameter(self, name, *args, **kwargs)
    shadow = SHADOW_PREFIX + name
    if name in self._parameters:
        self._parameters[shadow] = self._parameters.pop(name)
    try:
        return _put_parameter(self, shadow, *args, **kwargs)
    finally:
        if shadow in self._parameters:
            versions = self._parameters.pop(shadow)
            for version in versions:
                version.name = name
            self._parameters[name] = versions


models.SimpleSystemManagerBackend.put_parameter = put_parameter

_request_init = werkzeug_app.BackendRequest.__init__


def request_init(self, *args, **kwargs):
    _request_init(self, *args, **kwargs)
    self.get_data(cache=True, parse_form_data=False)


werkzeug_app.BackendRequest.__init__ = request_init

from moto.iam import access_control  # noqa: E402

_create_aws_request = access_control.IAMRequestBase._create_aws_request


def create_aws_request(self):
    if not self._body and self._method in ("GET", "HEAD", "DELETE"):
        saved, self._data = self._data, {}
        try:
            return _create_aws_request(self)
        finally:
            self._data = saved
    return _create_aws_request(self)


access_control.IAMRequestBase._create_aws_request = create_aws_request

from moto.cloudformation import parsing  # noqa: E402
from moto.cloudwatch.models import cloudwatch_backends  # noqa: E402
from moto.core.common_models import CloudFormationModel  # noqa: E402


class CloudFormationAlarm(CloudFormationModel):
    """An AWS::CloudWatch::Alarm of a stack, created with PutMetricAlarm (see 4 above)."""

    # moto's model registry files a model under the service its module names.
    __module__ = "moto.cloudwatch.nodewright_world"

    def __init__(self, alarm):
        self.alarm = alarm

    @staticmethod
    def cloudformation_type():
        return "AWS::CloudWatch::Alarm"

    @staticmethod
    def cloudformation_name_type():
        return "AlarmName"

    @property
    def physical_resource_id(self):
        return self.alarm.name

    @classmethod
    def has_cfn_attr(cls, attr):
        return attr == "Arn"

    def get_cfn_attribute(self, attribute_name):
        if attribute_name == "Arn":
            return self.alarm.alarm_arn
        raise NotImplementedError(attribute_name)

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name, cloudformation_json, account_id, region_name, **kwargs
    ):
        props = cloudformation_json["Properties"]
        alarm = cloudwatch_backends[account_id][region_name].put_metric_alarm(
            name=props.get("AlarmName", resource_name),
            namespace=props.get("Namespace"),
            metric_name=props.get("MetricName"),
            comparison_operator=props.get("ComparisonOperator"),
            evaluation_periods=int(props.get("EvaluationPeriods", 1)),
            period=int(props.get("Period", 60)),
            threshold=float(props.get("Threshold", 0)),
            statistic=props.get("Statistic"),
            description=props.get("AlarmDescription"),
            dimensions=props.get("Dimensions", []),
            alarm_actions=props.get("AlarmActions", []),
            ok_actions=props.get("OKActions", []),
            treat_missing_data=props.get("TreatMissingData"),
        )
        return cls(alarm)

    @classmethod
    def update_from_cloudformation_json(
        cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name
    ):
        return cls.create_from_cloudformation_json(
            original_resource.alarm.name, cloudformation_json, account_id, region_name
        )

    @classmethod
    def delete_from_cloudformation_json(
        cls, resource_name, cloudformation_json, account_id, region_name
    ):
        cloudwatch_backends[account_id][region_name].delete_alarms([resource_name])


parsing.get_model_map()[CloudFormationAlarm.cloudformation_type()] = CloudFormationAlarm
parsing.get_name_type_map()[CloudFormationAlarm.cloudformation_type()] = "AlarmName"


from moto.iam import models as iam_models  # noqa: E402

_create_role = iam_models.Role.create_from_cloudformation_json.__func__


def create_role(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
    properties = cloudformation_json["Properties"]
    for policy in properties.get("Policies", []):
        if not isinstance(policy["PolicyDocument"], str):
            policy["PolicyDocument"] = json.dumps(policy["PolicyDocument"])
    role = _create_role(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)
    backend = iam_models.iam_backends[account_id][iam_models.get_partition(region_name)]
    for arn in properties.get("ManagedPolicyArns", []):
        backend.attach_role_policy(arn, role.name)
    return role


iam_models.Role.create_from_cloudformation_json = classmethod(create_role)
iam_models.SERVICE_NAME_CONVERSION["spot"] = "EC2Spot"

_load_parameters = parsing.ResourceMap.load_parameters


def load_parameters(self):
    _load_parameters(self)
    for name, slot in self._template.get("Parameters", {}).items():
        value = self.resolved_parameters.get(name)
        if slot.get("Type") == "CommaDelimitedList" and isinstance(value, str):
            self.resolved_parameters[name] = value.split(",")
            self._parsed_resources[name] = self.resolved_parameters[name]


parsing.ResourceMap.load_parameters = load_parameters

from moto.cloudformation import models as cloudformation_models  # noqa: E402

_parameter_list = cloudformation_models.Stack.parameter_list.fget


def parameter_list(self):
    listed = _parameter_list(self)
    for p in listed:
        if isinstance(p["ParameterValue"], list):
            p["ParameterValue"] = ",".join(p["ParameterValue"])
    return listed


cloudformation_models.Stack.parameter_list = property(parameter_list)

WORLD_ADMIN = "nodewright-world-admin"  # tests/src/moto/iam.rs ADMIN_USER

_check_action_permitted = access_control.IAMRequestBase.check_action_permitted


def actions_only(policy):
    doc = access_control.IAMPolicy(policy)._policy_json
    statements = doc["Statement"] if isinstance(doc["Statement"], list) else [doc["Statement"]]
    kept = []
    for statement in statements:
        reduced = {k: statement[k] for k in ("Sid", "Effect", "Action", "NotAction") if k in statement}
        reduced["Resource"] = "*"
        kept.append(reduced)
    return json.dumps({"Version": "2012-10-17", "Statement": kept})


def check_action_permitted(self, resource):
    key = self._access_key
    collect = key.collect_policies
    key.collect_policies = lambda: [actions_only(p) for p in collect()]
    try:
        return _check_action_permitted(self, resource)
    finally:
        key.collect_policies = collect


access_control.IAMRequestBase.check_action_permitted = check_action_permitted

_check_principal = access_control.IAMPolicyStatement._check_principal


def check_principal(self, principal):
    expected = self._statement.get("Principal")
    if isinstance(expected, dict) and "Service" in expected and "AWS" not in expected:
        return principal.endswith(":user/" + WORLD_ADMIN)
    return _check_principal(self, principal)


access_control.IAMPolicyStatement._check_principal = check_principal

from botocore.auth import SigV4QueryAuth  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402

_iam_request_init = access_control.IAMRequestBase.__init__
PRESIGN_PARAMS = (
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-Expires",
    "X-Amz-SignedHeaders",
    "X-Amz-Security-Token",
    "X-Amz-Signature",
)


def _first(value):
    return value[0] if isinstance(value, list) else value


def iam_request_init(self, account_id, method, path, data, body, headers, action):
    self._presigned = None
    presigned_sts = "/sts/" in str(_first(data.get("X-Amz-Credential", "")))
    if "Authorization" not in headers and "X-Amz-Signature" in data and presigned_sts:
        query = {k: _first(data[k]) for k in PRESIGN_PARAMS if k in data}
        headers = dict(headers)
        headers["Authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={query['X-Amz-Credential']}, "
            f"SignedHeaders={query.get('X-Amz-SignedHeaders', '')}, "
            f"Signature={query['X-Amz-Signature']}"
        )
        if "X-Amz-Security-Token" in query:
            headers["X-Amz-Security-Token"] = query["X-Amz-Security-Token"]
        self._presigned = query
    _iam_request_init(self, account_id, method, path, data, body, headers, action)


def calculate_signature(self):
    query = self._presigned
    if query is None:
        return _calculate_signature(self)
    credentials = self._access_key.create_credentials()
    auth = SigV4QueryAuth(credentials, self._service, self._region, int(query["X-Amz-Expires"]))
    signed = query.get("X-Amz-SignedHeaders", "").split(";")
    headers = {k: v for k, v in self._headers.items() if k.lower() in signed}
    operation = "&".join(
        f"{k}={_first(v)}" for k, v in self._data.items() if k not in PRESIGN_PARAMS
    )
    host = self._headers.get("Host", "")
    request = AWSRequest(method=self._method, url=f"https://{host}/?{operation}", headers=headers)
    request.context["timestamp"] = query["X-Amz-Date"]
    auth._modify_request_before_signing(request)
    canonical_request = auth.canonical_request(request)
    return auth.signature(auth.string_to_sign(request, canonical_request), request)


_calculate_signature = access_control.IAMRequestBase._calculate_signature
access_control.IAMRequestBase.__init__ = iam_request_init
access_control.IAMRequestBase._calculate_signature = calculate_signature

from moto.core import responses as core_responses  # noqa: E402

_get_access_key = core_responses.BaseResponse.get_access_key


def get_access_key(self):
    credential = self.querystring.get("X-Amz-Credential")
    if "Authorization" not in self.headers and credential:
        return _first(credential).split("/")[0]
    return _get_access_key(self)


core_responses.BaseResponse.get_access_key = get_access_key

_infer_service = werkzeug_app.DomainDispatcherApplication.infer_service_region_host


def infer_service_region_host(self, environ, path):
    # moto finds the service of a request in its Authorization header, else guesses (S3
    # for a GET of "/"); a presigned request names it in X-Amz-Credential.
    from urllib.parse import parse_qs

    if "HTTP_AUTHORIZATION" not in environ:
        credential = parse_qs(environ.get("QUERY_STRING", "")).get("X-Amz-Credential")
        if credential:
            environ["HTTP_AUTHORIZATION"] = f"AWS4-HMAC-SHA256 Credential={credential[0]}, x"
            try:
                return _infer_service(self, environ, path)
            finally:
                del environ["HTTP_AUTHORIZATION"]
    return _infer_service(self, environ, path)


werkzeug_app.DomainDispatcherApplication.infer_service_region_host = infer_service_region_host

from moto.sqs import models as sqs_models  # noqa: E402


def no_event_source_mappings(self):
    # A fresh dict each time: moto's Lambda backend files a mapping into it (lost), and
    # Queue.add_message finds none to run (see 9 above).
    return {}


sqs_models.Queue.lambda_event_source_mappings = property(
    no_event_source_mappings, lambda self, value: None
)

from moto.ec2.models import fleets as fleet_models  # noqa: E402


def _associate_profiles(fleet):
    # (instance, launch spec) of every instance the fleet holds, on-demand and spot.
    launched = [(i["instance"], i["launch_spec"]) for i in fleet.on_demand_instances]
    for request in fleet.spot_requests:
        instance = getattr(request, "instance", None)
        spec = getattr(request, "launch_spec", None)
        if instance is not None and spec is not None:
            launched.append((instance, spec))
    backend = fleet.ec2_backend
    for instance, spec in launched:
        # The launch template's `IamInstanceProfile` as the fleet kept it: {"Name": ...}
        # or {"Arn": ...} (its `iam_instance_profile` property wraps that in an "Arn").
        profile = getattr(spec, "_iam_instance_profile_arn", None) or {}
        if isinstance(profile, str):
            profile = {"Arn": profile}
        if not profile or instance.id in backend.iam_instance_profile_associations:
            continue
        try:
            backend.associate_iam_instance_profile(
                instance_id=instance.id,
                iam_instance_profile_name=profile.get("Name"),
                iam_instance_profile_arn=profile.get("Arn"),
            )
        except Exception:  # noqa: BLE001
            # A profile IAM does not have: EC2 would refuse the launch; moto launched it
            # anyway before this patch and still does, without a profile (kinder, as before).
            pass


for _name in ("create_on_demand_requests", "create_spot_requests"):
    _original = getattr(fleet_models.Fleet, _name)

    def _launch_then_associate(self, *args, _original=_original, **kwargs):
        result = _original(self, *args, **kwargs)
        _associate_profiles(self)
        return result

    setattr(fleet_models.Fleet, _name, _launch_then_associate)

_create_fleet = fleet_models.FleetsBackend.create_fleet


def create_fleet(self, *args, **kwargs):
    # 18: a capacity block's instances launch; moto knows on-demand and spot only.
    spec = kwargs.get("target_capacity_specification") or {}
    if spec.get("DefaultTargetCapacityType") != "capacity-block":
        return _create_fleet(self, *args, **kwargs)
    kwargs["target_capacity_specification"] = {**spec, "DefaultTargetCapacityType": "on-demand"}
    fleet = _create_fleet(self, *args, **kwargs)
    fleet.target_capacity_specification = spec
    return fleet


fleet_models.FleetsBackend.create_fleet = create_fleet

import hashlib  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import tempfile  # noqa: E402
import uuid  # noqa: E402

import moto  # noqa: E402
from moto.core import responses as core_responses  # noqa: E402

STATIC_EC2_ANSWERS = {
    "DescribeInstanceTypes",
    "DescribeInstanceTypeOfferings",
    "DescribeSpotPriceHistory",
}
ANSWER_DIR = os.path.join(tempfile.gettempdir(), f"nodewright-moto-{moto.__version__}-answers")
_answers = {}
_serialized = core_responses.BaseResponse.serialized


def _static_answer_key(response):
    if response.__class__.__module__.split(".")[1] != "ec2":
        return None
    action = response._get_action()
    if action not in STATIC_EC2_ANSWERS:
        return None
    # Exactly what moto's handlers of these actions read (moto/ec2/responses).
    inputs = {
        "action": action,
        "region": response.region,
        "instance_types": response._get_param("InstanceTypes", []),
        "filters": response._filters_from_querystring(),
        "location_type": response._get_param("LocationType"),
    }
    text = json.dumps(inputs, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def serialized(self, action_result):
    key = None if isinstance(action_result.result, Exception) else _static_answer_key(self)
    if key is None:
        return _serialized(self, action_result)
    kept = _answers.get(key)
    path = os.path.join(ANSWER_DIR, key + ".json")
    if kept is None and os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as f:
                kept = json.load(f)
        except (OSError, ValueError):
            kept = None  # unreadable: serialized again and written anew
    if kept is None:
        status, headers, body = _serialized(self, action_result)
        if status != 200:
            return status, headers, body
        kept = {"headers": dict(headers), "body": body if isinstance(body, str) else body.decode()}
        os.makedirs(ANSWER_DIR, exist_ok=True)
        # Several worlds write at once: each its own file, renamed into place whole.
        fd, tmp = tempfile.mkstemp(dir=ANSWER_DIR)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(kept, f)
        os.replace(tmp, path)
    _answers[key] = kept
    headers = dict(kept["headers"])
    headers.update(self.response_headers)
    request_id = f"<requestId>{uuid.uuid4()}</requestId>"
    body = re.sub(r"<requestId>[^<]*</requestId>", request_id, kept["body"], count=1)
    return 200, headers, body


core_responses.BaseResponse.serialized = serialized


def world_utcnow(setting):
    """moto's naive-UTC `utcnow`, read from the pace file `world <path>` names: the line
    `<wall anchor> <time at it> <speed>` (RFC 3339), time = at + speed x (wall - anchor)."""
    kind, _, path = setting.partition(" ")
    if kind != "world" or not path.strip():
        raise SystemExit(f"NODEWRIGHT_CLOCK={setting!r}: expected `world <pace file>`")
    path = path.strip()

    def parse(text):
        def ts(value):
            # Python's fromisoformat takes at most microseconds; jiff may write nanoseconds.
            value = value.replace("Z", "+00:00")
            head, _, tail = value.partition(".")
            if tail:
                digits = len(tail) - len(tail.lstrip("0123456789"))
                value = f"{head}.{tail[:min(digits, 6)]}{tail[digits:]}"
            return datetime.datetime.fromisoformat(value)

        wall, at, speed = text.split()
        return ts(wall), ts(at), float(speed)

    last = []

    def utcnow():
        try:
            with open(path, encoding="utf-8") as f:
                last[:] = [parse(f.read())]
        except (OSError, ValueError):
            pass  # renamed into place while read: the last pace read still holds
        now = datetime.datetime.now(datetime.timezone.utc)
        if not last:
            return now.replace(tzinfo=None)
        wall, at, speed = last[0]
        return (at + (now - wall) * speed).replace(tzinfo=None)

    return utcnow


def use_world_clock(setting):
    from moto.ec2.models import fleets, instances, launch_templates

    now = world_utcnow(setting)
    for module in (instances, fleets, launch_templates):
        module.utcnow = now


def exit_with_parent():
    import threading
    import time

    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        log = os.environ.get("NODEWRIGHT_MOTO_LOG")
        if log:
            try:
                os.remove(log)
            except OSError:
                pass
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def serve(port, log, clock):
    """In a child forked by `zygote`: moto's server on `port`, writing to `log`."""
    import signal

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        os.setpgid(0, 0)
    except OSError:
        pass  # the zygote made it the group's leader first
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.close(nothing)
    os.environ["NODEWRIGHT_MOTO_LOG"] = log
    # A fork inherits the zygote's random state: reseeded, each world's ids are its own.
    import random

    from moto.moto_api._internal import mock_random

    random.seed()
    mock_random.seed()
    if clock:
        os.environ["NODEWRIGHT_CLOCK"] = clock
        use_world_clock(clock)
    exit_with_parent()
    server.main(["-H", "127.0.0.1", "-p", str(port)])


# 16. CloudWatch in Smithy RPC v2 CBOR.
import struct  # noqa: E402

from botocore.parsers import BaseCBORParser  # noqa: E402
from moto.cloudwatch import responses as cloudwatch_responses  # noqa: E402
from moto.cloudwatch import urls as cloudwatch_urls  # noqa: E402
from moto.core import parse as core_parse  # noqa: E402
from moto.core import serialize as core_serialize  # noqa: E402

CBOR_PROTOCOL = "smithy-rpc-v2-cbor"
CBOR_OPERATION = re.compile(r"/service/[^/]+/operation/([^/]+)$")
CloudWatchResponse = cloudwatch_responses.CloudWatchResponse
cloudwatch_urls.url_paths["{0}/service/(?P<service>[^/]+)/operation/(?P<operation>[^/]+)$"] = (
    CloudWatchResponse.dispatch
)


def is_cbor(headers):
    protocol = next((v for k, v in headers.items() if k.lower() == "smithy-protocol"), "")
    return protocol.lower() == "rpc-v2-cbor"


_cloudwatch_setup = CloudWatchResponse.setup_class


def cloudwatch_setup(self, request, full_url, headers, use_raw_body=None):
    # A CBOR body is binary: kept as bytes, not decoded as UTF-8 text.
    raw = True if is_cbor(headers) else use_raw_body
    return _cloudwatch_setup(self, request, full_url, headers, use_raw_body=raw)


_cloudwatch_action = CloudWatchResponse._get_action


def cloudwatch_action(self):
    match = CBOR_OPERATION.search(self.path or "")
    return match.group(1) if match else _cloudwatch_action(self)


CloudWatchResponse.setup_class = cloudwatch_setup
CloudWatchResponse._get_action = cloudwatch_action


class CBORDecoder(BaseCBORParser):
    def loads(self, data):
        return self.parse_data_item(self.get_peekable_stream_from_bytes(data)) if data else {}


class CBORRequestParser(core_parse.JSONParser):
    def _parse_body_as_json(self, body_contents):
        if isinstance(body_contents, str):
            body_contents = body_contents.encode("latin-1")
        return CBORDecoder().loads(body_contents)

    def _parse_timestamp(self, shape, value):
        # As the same instant arrives in JSON: epoch seconds.
        if isinstance(value, datetime.datetime):
            value = value.timestamp()
        return super()._parse_timestamp(shape, value)


def cbor_head(major, n):
    if n < 24:
        return bytes([major << 5 | n])
    for info, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if n < 1 << (8 * struct.calcsize(fmt)):
            return bytes([major << 5 | info]) + struct.pack(fmt, n)
    raise ValueError(n)


def cbor_dumps(value, shape=None):
    """`value` (moto's JSON answer, parsed) as CBOR; a number whose shape is a timestamp
    becomes tag 1."""
    kind = getattr(shape, "type_name", None)
    if kind == "timestamp" and isinstance(value, (int, float)):
        return b"\xc1" + cbor_dumps(float(value))
    if value is None:
        return b"\xf6"
    if value is True or value is False:
        return b"\xf5" if value else b"\xf4"
    if isinstance(value, int):
        return cbor_head(0, value) if value >= 0 else cbor_head(1, -1 - value)
    if isinstance(value, float):
        return b"\xfb" + struct.pack(">d", value)
    if isinstance(value, str):
        data = value.encode("utf-8")
        return cbor_head(3, len(data)) + data
    if isinstance(value, bytes):
        return cbor_head(2, len(value)) + value
    if isinstance(value, list):
        member = getattr(shape, "member", None)
        return cbor_head(4, len(value)) + b"".join(cbor_dumps(v, member) for v in value)
    if isinstance(value, dict):
        members = getattr(shape, "members", {}) if kind == "structure" else {}
        values = getattr(shape, "value", None) if kind == "map" else None
        out = cbor_head(5, len(value))
        for k, v in value.items():
            out += cbor_dumps(k) + cbor_dumps(v, members.get(k) if members else values)
        return out
    raise TypeError(f"no CBOR for {type(value)}")


class CBORResponseSerializer(core_serialize.JSONSerializer):
    def serialize(self, result):
        resp = super().serialize(result)
        body = resp["body"]
        parsed = json.loads(body) if body else {}
        ok = int(resp["status_code"]) < 300
        resp["body"] = cbor_dumps(parsed, self.operation_model.output_shape if ok else None)
        resp["headers"]["Content-Type"] = "application/cbor"
        resp["headers"]["smithy-protocol"] = "rpc-v2-cbor"
        return resp


_describe_alarms = CloudWatchResponse.describe_alarms


def describe_alarms(self):
    # DescribeAlarms applies StateValue with AlarmNames, as CloudWatch does; moto reads
    # only the first filter given.
    answer = _describe_alarms(self)
    state = self._get_param("StateValue")
    if state:
        for kind in ("MetricAlarms", "CompositeAlarms"):
            answer.result[kind] = [a for a in answer.result[kind] if a.state_value == state]
    return answer


CloudWatchResponse.describe_alarms = describe_alarms
core_parse.PROTOCOL_PARSERS[CBOR_PROTOCOL] = CBORRequestParser
core_serialize.SERIALIZERS[CBOR_PROTOCOL] = CBORResponseSerializer



# 17. EKS's cluster security group.
from moto.ec2.models import ec2_backends  # noqa: E402
from moto.eks import models as eks_models  # noqa: E402

_create_cluster = eks_models.EKSBackend.create_cluster
_update_cluster_config = eks_models.EKSBackend.update_cluster_config


def create_cluster(self, name, role_arn, resources_vpc_config, *args, **kwargs):
    cluster = _create_cluster(self, name, role_arn, resources_vpc_config, *args, **kwargs)
    ec2 = ec2_backends[self.account_id][self.region_name]
    subnets = resources_vpc_config.get("subnetIds") or []
    vpc_id = ec2.get_subnet(subnets[0]).vpc_id if subnets else None
    group = ec2.create_security_group(
        name=f"eks-cluster-sg-{name}-{self.cluster_count}",
        description="EKS created security group applied to ENI that is attached to EKS "
        "Control Plane master nodes, as well as any managed workloads.",
        vpc_id=vpc_id,
        tags={"aws:eks:cluster-name": name, f"kubernetes.io/cluster/{name}": "owned"},
    )
    ec2.authorize_security_group_ingress(
        group.id, "-1", None, None, [], source_groups=[{"GroupId": group.id}]
    )
    cluster.resources_vpc_config = dict(
        resources_vpc_config, clusterSecurityGroupId=group.id, vpcId=vpc_id
    )
    return cluster


def update_cluster_config(self, name, resources_vpc_config, *args, **kwargs):
    cluster = self.clusters.get(name)
    if cluster and resources_vpc_config:
        resources_vpc_config = dict(cluster.resources_vpc_config, **resources_vpc_config)
    return _update_cluster_config(self, name, resources_vpc_config, *args, **kwargs)


eks_models.EKSBackend.create_cluster = create_cluster
eks_models.EKSBackend.update_cluster_config = update_cluster_config


# Every world's first requests create these, each as an empty account and region would
# have it (EC2's default VPC and public AMIs, IAM's managed policies): created once here,
# every fork starts with them.
WORLD_BACKENDS = (
    ("ec2", "us-east-1"),
    ("iam", "global"),
    ("ssm", "us-east-1"),
    ("cloudformation", "us-east-1"),
    ("eks", "us-east-1"),
    ("sqs", "us-east-1"),
    ("events", "us-east-1"),
    ("lambda", "us-east-1"),
    ("cloudwatch", "us-east-1"),
    ("logs", "us-east-1"),
)


def create_backends():
    from moto.backends import get_backend
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.utilities.utils import PARTITION_NAMES

    for service, region in WORLD_BACKENDS:
        get_backend(service)[DEFAULT_ACCOUNT_ID][region]
    # Finding a request's account looks its access key up in IAM in every partition,
    # creating each partition's IAM (all managed policies again) on the first request.
    for partition in PARTITION_NAMES:
        get_backend("iam")[DEFAULT_ACCOUNT_ID][partition]
    # The first request of a service loads botocore's model of it (cached per process)
    # and imports its responses and URLs.
    import importlib

    from moto.backends import ALT_SERVICE_NAMES
    from moto.core.utils import get_service_model

    from moto.core.routing import get_service_router

    for service in {service for service, _ in WORLD_BACKENDS} | {"sts"}:
        model = get_service_model(service)
        package = ALT_SERVICE_NAMES.get(service, service)
        for module in ("responses", "urls"):
            importlib.import_module(f"moto.{package}.{module}")
        # A REST service's first request builds its router's URL rules from the model
        # (about 0.3 s of CPU per world for EKS and Lambda).
        if model.protocol.startswith("rest"):
            get_service_router(service)._get_router(model.protocol)


def zygote():
    """Forks a server for each JSON line read ({"port", "log", "clock"}), answering with
    its process id; exits at the end of the input, when the test binary is gone. No thread
    is started here: a fork copies only the thread that forks."""
    import signal

    # The kernel reaps the servers: one that exits leaves no zombie behind.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    create_backends()
    for line in sys.stdin:
        ask = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                serve(ask["port"], ask["log"], ask.get("clock"))
            finally:
                os._exit(1)
        # The child does the same: whichever runs first, the group exists before the pid
        # is answered, so killing the group never misses the server.
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass  # the child already made it its group, or has exited
        print(pid, flush=True)


if __name__ == "__main__":
    zygote()
