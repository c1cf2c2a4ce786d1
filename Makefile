# gangcheck — two commands a new user needs: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: install test run check-examples certs bench clean help

help:
	@echo "make run    - serve the webhook on https://127.0.0.1:8443 against the embedded demo cluster"
	@echo "make test   - create the virtualenv, install, run the whole test suite"
	@echo "make check-examples - run 'gangcheck check' on every example against the demo cluster"
	@echo "make bench  - run the benchmarks under bench/"

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

test: install
	$(PY) -m pytest

certs/tls.crt: | install
	$(PY) -m webhook certs --service gangcheck --namespace gangcheck-system --out certs

certs: certs/tls.crt

run: install certs/tls.crt
	$(PY) -m webhook serve --cluster demo --host 127.0.0.1 --port 8443 --tls-cert certs/tls.crt --tls-key certs/tls.key

check-examples: install
	@for f in examples/*.yaml; do echo "== $$f"; $(PY) -m webhook check $$f --cluster demo; echo "exit $$?"; done

bench: install
	$(PY) bench/engine.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
