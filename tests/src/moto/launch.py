"""Starts moto's server, changed in two ways:

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

Arguments are moto_server's own (-H HOST -p PORT).
"""

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

if __name__ == "__main__":
    server.main(sys.argv[1:])
