# nodewright: every target installs what it needs; only the Rust toolchain and Python 3
# are assumed. Python tools go into a project-local venv (.venv, git-ignored).

CARGO ?= cargo
export CARGO_TERM_COLOR ?= auto

.DEFAULT_GOAL := help
.PHONY: help setup build test lint fmt demo bench release deploy \
	build-ProvisionerFunction build-InterruptionFunction build-SweeperFunction

help:
	@echo "make demo    the main job on the local default: real handlers against moto + a simulated EKS cluster"
	@echo "             (KEEP=1 keeps it running for kubectl until Ctrl-C)"
	@echo "make test    unit, property, CLI and end-to-end tests (installs moto into .venv first)"
	@echo "make lint    cargo fmt --check, clippy -D warnings, cfn-lint and checkov on template.yaml"
	@echo "make bench   solver, provisioner, interruption and cold-start benchmarks (figures go to BENCHMARKS.md by hand)"
	@echo "make release Lambda binaries (bootstrap per function) under target/lambda/"
	@echo "make deploy  sam build + sam deploy --guided (needs an AWS account and the SAM CLI)"

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

test: setup
	$(CARGO) test $(TEST_SELECTION)

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

# The function benchmarks run the release binaries as Lambda would, so they are built first.
# --workspace, not -p: a -p build resolves features differently and rebuilds the AWS SDK.
bench: setup release
	$(CARGO) bench --workspace --bench solver
	$(CARGO) bench --workspace --bench provisioner
	$(CARGO) bench --workspace --bench interruption
	$(CARGO) bench --workspace --bench cold_start

release:
	$(CARGO) build --release -p nodewright-provisioner -p nodewright-interruption -p nodewright-sweeper
	@for f in provisioner interruption sweeper; do \
		mkdir -p target/lambda/$$f && cp target/release/$$f target/lambda/$$f/bootstrap; \
		ls -l target/lambda/$$f/bootstrap; \
	done

# `sam build` runs `make build-<LogicalId>` for each function (BuildMethod: makefile) with
# ARTIFACTS_DIR set; Lambda's provided.al2023 runtime starts the file named `bootstrap`.
build-ProvisionerFunction build-InterruptionFunction build-SweeperFunction: release
	cp target/lambda/$(subst function,,$(shell echo $(@:build-%=%) | tr A-Z a-z))/bootstrap $(ARTIFACTS_DIR)/bootstrap

# --build-in-source: build once in this tree (and its target/) instead of three scratch copies.
deploy:
	sam build --build-in-source && sam deploy --guided
