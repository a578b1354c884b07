#!/usr/bin/env python3
"""Mint an EKS bearer token exactly as `aws eks get-token` does, at a fixed time.

The reference for nodewright's Rust token minting (shared/src/eks/token.rs): the same
steps as aws-cli's awscli/customizations/eks/get_token.py (STSClientFactory +
TokenGenerator): an STS client whose `provide-client-params` handler moves the
`x-k8s-aws-id` parameter into the request context and whose `before-sign` handler turns
it into a header, then `generate_presigned_url('get_caller_identity', ExpiresIn=60,
HttpMethod='GET')`, then 'k8s-aws-v1.' + urlsafe base64 without padding.

The only change is the clock: botocore's signer reads `botocore.auth.get_current_datetime`,
which is replaced by a function returning the time given on the command line.

Prints one JSON object: {"url": ..., "token": ..., "botocore": <version>}.
"""

import argparse
import base64
import datetime
import json
import sys

import botocore
import botocore.auth
import botocore.session

# Values copied from awscli/customizations/eks/get_token.py.
URL_TIMEOUT = 60
TOKEN_PREFIX = "k8s-aws-v1."
K8S_AWS_ID_HEADER = "x-k8s-aws-id"


def _retrieve_k8s_aws_id(params, context, **kwargs):
    if K8S_AWS_ID_HEADER in params:
        context[K8S_AWS_ID_HEADER] = params.pop(K8S_AWS_ID_HEADER)


def _inject_k8s_aws_id_header(request, **kwargs):
    if K8S_AWS_ID_HEADER in request.context:
        request.headers[K8S_AWS_ID_HEADER] = request.context[K8S_AWS_ID_HEADER]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--region", required=True)
    parser.add_argument("--access-key-id", required=True)
    parser.add_argument("--secret-access-key", required=True)
    parser.add_argument("--session-token")
    parser.add_argument(
        "--unix-time", type=int, required=True, help="signing time, seconds since the epoch"
    )
    args = parser.parse_args()

    fixed = datetime.datetime.fromtimestamp(args.unix_time, tz=datetime.timezone.utc)
    # botocore formats the naive UTC datetime it gets from this function.
    botocore.auth.get_current_datetime = lambda *a, **k: fixed.replace(tzinfo=None)

    session = botocore.session.Session()
    sts = session.create_client(
        "sts",
        region_name=args.region,
        aws_access_key_id=args.access_key_id,
        aws_secret_access_key=args.secret_access_key,
        aws_session_token=args.session_token,
    )
    sts.meta.events.register(
        "provide-client-params.sts.GetCallerIdentity", _retrieve_k8s_aws_id
    )
    sts.meta.events.register(
        "before-sign.sts.GetCallerIdentity", _inject_k8s_aws_id_header
    )
    url = sts.generate_presigned_url(
        "get_caller_identity",
        Params={K8S_AWS_ID_HEADER: args.cluster},
        ExpiresIn=URL_TIMEOUT,
        HttpMethod="GET",
    )
    token = TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode("utf-8")).decode(
        "utf-8"
    ).rstrip("=")
    json.dump({"url": url, "token": token, "botocore": botocore.__version__}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
