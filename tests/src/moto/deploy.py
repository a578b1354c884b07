"""`sam deploy` into moto: the SAM transform run locally, then a CloudFormation stack.

Run by tests/src/moto/stack.rs with the venv's Python. The endpoint and the credentials
come from the environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...), as for any AWS
client. One argument: a JSON request; one JSON answer on stdout; a failure exits non-zero
with the reason on stderr.

Requests:
  {"action": "deploy", "template": PATH, "stack": NAME, "parameters": {K: V}, "cache": DIR,
   "capabilities": [...]}
      Creates the stack, or updates it when it exists, and waits until it settles.
  {"action": "describe", "stack": NAME}
      The deployed stack: outputs, resources, parameters, its functions' configuration
      (GetFunctionConfiguration) and its template (GetTemplate).

What `sam deploy` does and this does the same way: the template is transformed by
aws-sam-translator (the library inside the SAM CLI), with every function's CodeUri
pointing at an artifact in an S3 bucket of the account (`sam package` uploads the built
code there; here it is a placeholder zip, the functions are never run by moto), and the
result is handed to CloudFormation with the capabilities the request names (the world
passes those of the Makefile's `sam deploy` line). CloudFormation refuses a template with
IAM resources unless CAPABILITY_IAM is acknowledged, and one that names them (RoleName,
InstanceProfileName, ...) unless CAPABILITY_NAMED_IAM is; moto checks neither, so that
check is made here first (InsufficientCapabilitiesException, as CloudFormation words it).
The transformed template is cached per template hash and translator version, so a test
world pays for the transform once per machine, not per test.
"""

import hashlib
import io
import json
import os
import sys
import time
import zipfile

import boto3

ARTIFACT_BUCKET = "nodewright-world-artifacts"
ARTIFACT_KEY = "placeholder.zip"
SETTLED = ("_COMPLETE", "_FAILED")
WAIT_SECONDS = 60


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def translated(template_path, cache_dir):
    """The template after the SAM transform, from the cache when it holds this version."""
    from importlib.metadata import version

    with open(template_path, "rb") as f:
        text = f.read()
    translator = version("aws-sam-translator")
    digest = hashlib.sha256(text + b"\0" + translator.encode()).hexdigest()[:32]
    cached = os.path.join(cache_dir, f"{digest}.json")
    if os.path.exists(cached):
        with open(cached) as f:
            return f.read(), True
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse

    doc = yaml_parse(text.decode())
    for name, resource in doc.get("Resources", {}).items():
        if resource.get("Type") == "AWS::Serverless::Function":
            resource.setdefault("Properties", {})["CodeUri"] = (
                f"s3://{ARTIFACT_BUCKET}/{ARTIFACT_KEY}"
            )

    class NoManagedPolicies:
        # The template names managed policies by ARN only; SAM's short names (which the
        # loader would resolve through IAM ListPolicies) are not used.
        def load(self):
            return {}

    body = json.dumps(transform(doc, {}, NoManagedPolicies()), indent=1, sort_keys=True)
    os.makedirs(cache_dir, exist_ok=True)
    partial = f"{cached}.{os.getpid()}"
    with open(partial, "w") as f:
        f.write(body)
    os.replace(partial, cached)
    return body, False


def upload_artifact(s3):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("bootstrap", "placeholder: moto never runs the functions\n")
    try:
        s3.head_bucket(Bucket=ARTIFACT_BUCKET)
    except s3.exceptions.ClientError:
        s3.create_bucket(Bucket=ARTIFACT_BUCKET)
    s3.put_object(Bucket=ARTIFACT_BUCKET, Key=ARTIFACT_KEY, Body=buf.getvalue())


def stack_of(cfn, name):
    try:
        return cfn.describe_stacks(StackName=name)["Stacks"][0]
    except cfn.exceptions.ClientError as e:
        if "does not exist" in str(e):
            return None
        raise


def wait(cfn, name):
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        stack = stack_of(cfn, name)
        if stack["StackStatus"].endswith(SETTLED):
            return stack
        if time.monotonic() > deadline:
            fail(f"stack {name} still {stack['StackStatus']} after {WAIT_SECONDS} s")
        time.sleep(0.1)


def functions(session, resources):
    """Each function's configuration as Lambda holds it: name, role, environment."""
    lam = session.client("lambda")
    out = {}
    for r in resources:
        if r["type"] != "AWS::Lambda::Function":
            continue
        config = lam.get_function_configuration(FunctionName=r["physical_id"])
        out[r["logical_id"]] = {
            "name": config["FunctionName"],
            "role": config["Role"],
            "environment": {
                k: str(v)
                for k, v in config.get("Environment", {}).get("Variables", {}).items()
            },
        }
    return out


def describe(session, name):
    cfn = session.client("cloudformation")
    stack = stack_of(cfn, name)
    if stack is None:
        fail(f"stack {name} does not exist")
    resources = [
        {
            # moto lists a resource of a type it does not model with no id and no type.
            "logical_id": r.get("LogicalResourceId"),
            "type": r.get("ResourceType"),
            "physical_id": r.get("PhysicalResourceId"),
            "status": r.get("ResourceStatus"),
        }
        for r in cfn.describe_stack_resources(StackName=name)["StackResources"]
    ]
    template = cfn.get_template(StackName=name)["TemplateBody"]
    if isinstance(template, str):
        template = json.loads(template)
    return {
        "stack": name,
        "status": stack["StackStatus"],
        "outputs": {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])},
        "parameters": {
            p["ParameterKey"]: p["ParameterValue"] for p in stack.get("Parameters", [])
        },
        "resources": resources,
        "functions": functions(session, resources),
        "template": template,
    }


# The property that names each IAM resource type: named, it needs CAPABILITY_NAMED_IAM.
IAM_NAMES = {
    "AWS::IAM::Role": "RoleName",
    "AWS::IAM::InstanceProfile": "InstanceProfileName",
    "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
    "AWS::IAM::User": "UserName",
    "AWS::IAM::Group": "GroupName",
}


def check_capabilities(body, capabilities):
    resources = json.loads(body).get("Resources", {}).values()
    iam = [r for r in resources if str(r.get("Type", "")).startswith("AWS::IAM::")]
    named = any(IAM_NAMES.get(r["Type"]) in (r.get("Properties") or {}) for r in iam)
    if named and "CAPABILITY_NAMED_IAM" not in capabilities:
        fail("InsufficientCapabilitiesException: Requires capabilities : [CAPABILITY_NAMED_IAM]")
    if iam and not {"CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"} & set(capabilities):
        fail("InsufficientCapabilitiesException: Requires capabilities : [CAPABILITY_IAM]")


def deploy(session, request):
    cfn = session.client("cloudformation")
    started = time.monotonic()
    body, cached = translated(request["template"], request["cache"])
    translate_seconds = time.monotonic() - started
    check_capabilities(body, request["capabilities"])
    upload_artifact(session.client("s3"))
    name = request["stack"]
    args = {
        "StackName": name,
        "TemplateBody": body,
        "Parameters": [
            {"ParameterKey": k, "ParameterValue": v}
            for k, v in sorted(request["parameters"].items())
        ],
        "Capabilities": request["capabilities"],
    }
    if stack_of(cfn, name) is None:
        cfn.create_stack(**args)
        want = "CREATE_COMPLETE"
    else:
        cfn.update_stack(**args)
        want = "UPDATE_COMPLETE"
    stack = wait(cfn, name)
    if stack["StackStatus"] != want:
        events = cfn.describe_stack_events(StackName=name)["StackEvents"]
        reasons = [
            f"{e.get('LogicalResourceId')}: {e.get('ResourceStatusReason')}"
            for e in events
            if e.get("ResourceStatusReason")
        ]
        fail(f"stack {name} ended {stack['StackStatus']}: {reasons}")
    out = describe(session, name)
    out["seconds"] = time.monotonic() - started
    out["translate_seconds"] = translate_seconds
    out["translation_cached"] = cached
    return out


def main():
    if len(sys.argv) != 2:
        fail("usage: deploy.py REQUEST_JSON")
    request = json.loads(sys.argv[1])
    session = boto3.session.Session()
    action = request.get("action")
    if action == "deploy":
        answer = deploy(session, request)
    elif action == "describe":
        answer = describe(session, request["stack"])
    else:
        fail(f"unknown action {action!r}")
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
