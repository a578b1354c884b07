# The project-local Python environment: moto's server (the AWS emulator of the local world)
# and botocore (the reference SigV4 presigner the EKS token test compares against).
VENV ?= .venv
PYTHON ?= python3
MOTO_VERSION ?= 5.2.5

.PHONY: venv
venv: $(VENV)/.stamp

$(VENV)/.stamp: mk/venv.mk
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check 'moto[server]==$(MOTO_VERSION)' botocore
	touch $@
