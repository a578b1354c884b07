"""Starts moto's server, changed in one way only: the public parameters AWS publishes under
/aws/service/eks/ and /aws/service/bottlerocket/ may be written with PutParameter.

Real AWS publishes those parameters (the EKS-optimized and Bottlerocket AMI aliases);
moto ships none of them and refuses every write under /aws/ as reserved. The test world
seeds them (tests/src/moto/seed.rs) so that nodewright resolves AMI aliases through SSM
exactly as it does in AWS, instead of the product code carrying a test-only path.

Arguments are moto_server's own (-H HOST -p PORT).
"""

import sys

from moto import server
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

if __name__ == "__main__":
    server.main(sys.argv[1:])
