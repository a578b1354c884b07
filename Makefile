# nodewright: every target installs what it needs; only the Rust toolchain and Python 3
# are assumed. Python tools go into a project-local venv (.venv, git-ignored).

CARGO ?= cargo
export CARGO_TERM_COLOR ?= auto

.DEFAULT_GOAL := help
.PHONY: help setup build test lint fmt demo soak bench release package sam-build deploy install-cli \
	build-ProvisionerFunction build-InterruptionFunction build-SweeperFunction

help:
	@echo "make demo    the main job on the local default: real handlers against moto + a simulated EKS cluster"
	@echo "             (KEEP=1 keeps it running for kubectl until Ctrl-C)"
	@echo "make soak    one simulated day of the functions against the world, judged by the invariant checker (HOURS=24)"
	@echo "make test    unit, property, CLI and end-to-end tests (installs moto into .venv first; no root needed)"
	@echo "make install-cli  the nodewright command into ~/.cargo/bin (cargo install --path cli)"
	@echo "make lint    cargo fmt --check, clippy -D warnings, cfn-lint and checkov on template.yaml"
	@echo "make bench   solver, provisioner, interruption, sweeper and cold-start benchmarks (figures go to BENCHMARKS.md by hand)"
	@echo "make release Lambda binaries (bootstrap per function) under target/lambda/"
	@echo "make package the three Lambda zips for ARCH=arm64 (default) or ARCH=x86_64 under target/lambda/<arch>/ (cargo-lambda)"
	@echo "make deploy  sam build, each function's RBAC with kubectl, then sam deploy --guided (needs an AWS account; the SAM CLI is installed into .venv/sam)"

include mk/venv.mk

setup: venv

build:
	$(CARGO) build --workspace --all-targets

# Benchmarks (harness = false) are left out: `cargo test --all-targets` would run them.
# The demo is built by this same command: `cargo run -p nodewright-world` resolves the
# features of one package and `cargo test --workspace` those of all members with their
# dev-dependencies (`cargo tree` shows serde_json gaining preserve_order and
# aws-smithy-http-client test-util), and nearly every crate depends on serde_json, so the
# two compiled the dependency graph twice on a fresh clone.
TEST_SELECTION := --workspace --lib --bins --tests
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)

# Nothing here needs root: the terminal `nodewright status` is tested in is a pseudo-terminal
# opened by the test itself (cli/tests/cli/status_terminal.rs), not a system package.
test: setup
	$(CARGO) test $(TEST_SELECTION)

# --locked: the versions Cargo.lock was tested with. The release profile's fat LTO makes this
# a long build; the binary lands in ~/.cargo/bin (or $CARGO_INSTALL_ROOT/bin).
install-cli:
	$(CARGO) install --locked --path cli

# --skip-download: checkov runs offline, with its bundled checks only.
lint: lint-venv
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(LINT_VENV)/bin/cfn-lint template.yaml
	$(LINT_VENV)/bin/checkov --quiet --compact --skip-download --framework cloudformation -f template.yaml

fmt:
	$(CARGO) fmt --all

# KEEP=1 keeps the world running after the story until Ctrl-C, for kubectl (see README).
KEEP ?= 0
demo: setup
	$(CARGO) test $(TEST_SELECTION) --no-run --quiet
	NODEWRIGHT_DEMO_KEEP=$(KEEP) $(TARGET_DIR)/debug/nodewright-demo

# One simulated day (HOURS=24) of the three functions against the world, judged by the
# invariant checker; the report goes to target/soak/. A simulated hour of it runs in `make test`.
HOURS ?= 24
soak: setup
	$(CARGO) test $(TEST_SELECTION) --no-run --quiet
	$(TARGET_DIR)/debug/nodewright-soak --hours $(HOURS) --out $(TARGET_DIR)/soak

# The function benchmarks run the release binaries as Lambda would, so they are built first.
# --workspace, not -p: a -p build resolves features differently and rebuilds the AWS SDK.
# The debug CLI is the functions' token plugin in the world (their kubeconfig runs
# `nodewright eks-token`, so the API server knows each by its role).
bench: setup release
	$(CARGO) build -p nodewright-cli
	$(CARGO) bench --workspace --bench solver
	$(CARGO) bench --workspace --bench sweep
	$(CARGO) bench --workspace --bench provisioner
	$(CARGO) bench --workspace --bench interruption
	$(CARGO) bench --workspace --bench sweeper
	$(CARGO) bench --workspace --bench cold_start

release:
	$(CARGO) build --release -p nodewright-provisioner -p nodewright-interruption -p nodewright-sweeper
	@for f in provisioner interruption sweeper; do \
		mkdir -p $(TARGET_DIR)/lambda/$$f && cp $(TARGET_DIR)/release/$$f $(TARGET_DIR)/lambda/$$f/bootstrap; \
		ls -l $(TARGET_DIR)/lambda/$$f/bootstrap; \
	done

# Lambda zips (`bootstrap` at the root, as provided.al2023 wants it) for the template's
# Architecture parameter, built by cargo-lambda (from PyPI, into .venv/lambda) with zig as
# the linker for either architecture. The Rust standard library of the target is added
# with rustup when missing (it downloads from static.rust-lang.org).
# arm64 (Graviton) by default: 20% cheaper per GB-second than x86_64.
ARCH ?= arm64
RUST_TARGET_x86_64 := x86_64-unknown-linux-gnu
RUST_TARGET_arm64 := aarch64-unknown-linux-gnu
RUST_TARGET := $(or $(RUST_TARGET_$(ARCH)),$(error ARCH=$(ARCH): use x86_64 or arm64))
LAMBDA_ARCH_FLAG_x86_64 := --x86-64
LAMBDA_ARCH_FLAG_arm64 := --arm64
FUNCTIONS := provisioner interruption sweeper
# The profile the packages are built with: `release` (fat LTO) for deploys; CI checks
# that the arm64 path builds with a quicker one (see .ci/run).
PACKAGE_PROFILE ?= release

package: lambda-venv
	@rustup target list --installed | grep -qx $(RUST_TARGET) || rustup target add $(RUST_TARGET)
	PATH="$(abspath $(LAMBDA_VENV))/bin:$$PATH" $(CARGO) lambda build --profile $(PACKAGE_PROFILE) \
		$(LAMBDA_ARCH_FLAG_$(ARCH)) $(FUNCTIONS:%=--bin %) $(FUNCTIONS:%=-p nodewright-%)
	@for f in $(FUNCTIONS); do \
		d=$(TARGET_DIR)/lambda/$(ARCH)/$$f; mkdir -p $$d; \
		cp $(TARGET_DIR)/lambda/$$f/bootstrap $$d/bootstrap; \
		rm -f $$d.zip; (cd $$d && $(PYTHON) -m zipfile -c ../$$f.zip bootstrap); \
		file $$d/bootstrap 2>/dev/null || true; ls -l $$d/bootstrap $$d.zip; \
	done

# `sam build` runs `make build-<LogicalId>` for each function (BuildMethod: makefile) with
# ARTIFACTS_DIR set; Lambda's provided.al2023 runtime starts the file named `bootstrap`.
build-ProvisionerFunction build-InterruptionFunction build-SweeperFunction: package
	cp $(TARGET_DIR)/lambda/$(ARCH)/$(subst function,,$(shell echo $(@:build-%=%) | tr A-Z a-z))/bootstrap $(ARTIFACTS_DIR)/bootstrap

# --build-in-source: build once in this tree (and its target/) instead of three scratch copies.
# ARCH reaches `make build-*` through sam build's environment and the stack through its
# Architecture parameter, so the binaries and the functions agree. The SAM CLI comes from
# PyPI into .venv/sam; `make sam-build` is the part that needs no AWS account.
SAM := $(abspath $(SAM_VENV))/bin/sam
sam-build: sam-venv
	ARCH=$(ARCH) PACKAGE_PROFILE=$(PACKAGE_PROFILE) $(SAM) build --build-in-source

# The template names its node role and instance profile (`RoleName`, `InstanceProfileName`),
# so CloudFormation requires CAPABILITY_NAMED_IAM; `--guided` alone asks only for
# CAPABILITY_IAM and the first deploy fails.
#
# Each function's RBAC goes first (the default KubernetesAccess=rbac maps each role to a
# group of its own and grants nothing else), so the functions never run before it: applied
# with the current kubectl context, which must be the stack's cluster (`aws eks
# update-kubeconfig --name <cluster>`). The objects are inert until the stack's access
# entries name their groups, and with KubernetesAccess=cluster-admin.
# PARAMS: more `Name=value` overrides, offered as the guided deploy's defaults
# (`make deploy PARAMS=TakeOverFromKarpenter=true`).
PARAMS ?=
deploy: sam-build
	$(CARGO) run --quiet --locked -p nodewright-cli -- rbac | kubectl apply -f -
	$(SAM) deploy --guided --capabilities CAPABILITY_IAM CAPABILITY_NAMED_IAM \
		--parameter-overrides Architecture=$(ARCH) $(PARAMS)
