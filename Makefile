# gangcheck — two commands a new user needs: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: install test run check-examples certs bench fuzz clean help controlplane controlplane-or-skip e2e e2e-node image lock

# The e2e tier needs kube-apiserver, etcd, kube-scheduler and kubectl built from source (Go).
# `make test` builds them first when `go` is on PATH (once; cached in ~/.cache/gangcheck) and the
# tier runs; without Go the tier is skipped with a loud banner (GANGCHECK_REQUIRE_E2E=1: fails).
GO := $(shell command -v go 2>/dev/null)
TEST_PREREQS := install $(if $(GO),controlplane-or-skip)

help:
	@echo "make run    - serve the webhook on https://127.0.0.1:8443 against the embedded demo cluster"
	@echo "make test   - create the virtualenv, install, run the whole test suite"
	@echo "make install - only create .venv/ and install the package (gangcheck is then .venv/bin/gangcheck)"
	@echo "make check-examples - run 'gangcheck check' on every example against the demo cluster"
	@echo "make bench  - run the benchmarks under bench/"
	@echo "make fuzz   - 100,000 seeded requests against a live 'serve --cluster demo' (bench/fuzz.py; FUZZ_ARGS=...)"
	@echo "make controlplane - build etcd, kube-apiserver, kube-scheduler, kubectl for the e2e tier (Go; cached)"
	@echo "make e2e    - run only the e2e tier (local control plane, or KUBECONFIG + GANGCHECK_E2E_USE_KUBECONFIG=1)"
	@echo "make e2e-node - run only the real-node tier (root: containerd + kubelet; gangcheck deployed with kubectl apply -k)"
	@echo "make image  - build the container image without Docker (root; mmdebstrap + umoci); prints its tag and archive"
	@echo "make lock   - regenerate the image's pinned lists (image/requirements.lock, debian-packages.txt)"

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

test: $(TEST_PREREQS)
	$(PY) -m pytest

controlplane:
	@bash e2e/build.sh >/dev/null

# For `make test`: a failed build must not stop the other tiers; tests/e2e then skips loudly
# (or fails under GANGCHECK_REQUIRE_E2E=1).
controlplane-or-skip:
	@bash e2e/build.sh >/dev/null || echo "*** building the control plane FAILED: the e2e tier will be skipped (see above) ***" >&2

# With GANGCHECK_E2E_USE_KUBECONFIG=1 and KUBECONFIG set, the scenarios run on that cluster and
# nothing is built.
e2e: install $(if $(filter 1,$(GANGCHECK_E2E_USE_KUBECONFIG)),,$(if $(GO),controlplane))
	$(PY) -m pytest tests/e2e -v

# The real-node tier (tests/node): containerd, CNI, kube-proxy and a kubelet beside the control
# plane, the image built and imported, manifests/ applied with kubectl apply -k. Root only; it
# builds kubelet/kube-controller-manager/kube-proxy itself (e2e/build.sh, cached). `make test`
# runs it too (skipped with a banner where it cannot run; GANGCHECK_REQUIRE_NODE=1: fails).
e2e-node: install
	$(PY) -m pytest tests/node -v

# The container image, without a Docker daemon (image/build.sh; the Dockerfile builds the same image
# from the same pinned lists). Prints the reference and the archive's path.
image: install
	@PY=$(PY) bash image/build.sh

lock:
	@bash image/lock.sh

certs/tls.crt: | install
	$(PY) -m webhook certs --service gangcheck --namespace gangcheck-system --out certs

certs: certs/tls.crt

run: install certs/tls.crt
	$(PY) -m webhook serve --cluster demo --host 127.0.0.1 --port 8443 --tls-cert certs/tls.crt --tls-key certs/tls.key

check-examples: install
	@for f in examples/*.yaml; do echo "== $$f"; $(PY) -m webhook check $$f --cluster demo; echo "exit $$?"; done

bench: install
	$(PY) bench/engine.py

# Starts its own server on a free loopback port, stops by itself; reproducers go to fuzz-out/.
FUZZ_ARGS ?= --requests 100000 --seed 17
fuzz: install
	$(PY) bench/fuzz.py $(FUZZ_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
