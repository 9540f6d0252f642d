# tcp-hidden-queues: probe pack + analysis. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PY        := .venv/bin/python
LAB       ?= accept-overflow
VARIANT   ?=
DURATION  ?= 30
INTERVAL  ?= 1
NETNS     ?=
PROBES    ?=
OUT       ?=
RUN       ?= runs/latest
PYTEST_ARGS ?=

.PHONY: help setup doctor demo test lab capture report validate bench lint schema-doc clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'
	@echo "  variables: LAB VARIANT DURATION INTERVAL NETNS PROBES OUT RUN (see README.md)"

setup: ## install apt packages, .venv and Go lab binaries (idempotent)
	@scripts/setup

doctor: setup ## what this kernel can trace (writes build/doctor.json)
	@scripts/doctor

demo: setup ## run the accept-overflow lab end to end and print the run directory
	@scripts/doctor -q || { echo "doctor: tracepoints do not attach here; see build/doctor.json" >&2; exit 1; }
	@scripts/lab accept-overflow $(VARIANT)

test: setup ## run the whole test suite (unit + integration with real bpftrace)
	@$(PY) -m pytest -q $(PYTEST_ARGS)

lab: setup ## run a lab: make lab LAB=accept-overflow VARIANT=stall
	@scripts/lab $(LAB) $(VARIANT)

capture: setup ## capture: make capture DURATION=60 INTERVAL=1 NETNS="ns1 ns2" PROBES=epoll,time_wait OUT=dir
	@scripts/capture --duration $(DURATION) --interval $(INTERVAL) \
		$(foreach n,$(NETNS),--netns $(n)) $(if $(PROBES),--probes $(PROBES)) $(if $(OUT),--out $(OUT))

report: setup ## (re)write verdicts.json, report.md and plots for RUN (default runs/latest)
	@$(PY) -m analysis report $(RUN)

validate: setup ## check RUN's CSV files against the data contract
	@$(PY) -m analysis validate $(RUN)

bench: setup ## in-kernel cost per event of each probe on its lab's traffic (bpf_stats)
	@scripts/bench

lint: setup ## shellcheck + ruff
	@shellcheck scripts/* labs/*/lab.sh .ci/run
	@.venv/bin/ruff check analysis tests

schema-doc: setup ## regenerate docs/data-contract.md from analysis/schemas.py
	@$(PY) -m analysis schema-doc > docs/data-contract.md

clean: ## remove build outputs and the virtualenv (runs/ is kept)
	rm -rf build .venv .pytest_cache .ruff_cache
