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
TIER      ?=
OUT       ?=
RUN       ?= runs/latest
A         ?= defaults
B         ?=
REPEAT    ?= 3
SET       ?=
KIND      ?= accept-queue
RATES     ?=
BACKLOGS  ?=
SECONDS   ?=
SEED      ?=
MINUTES   ?=
ANSWER    ?=
LOG       ?=
PORT      ?= 8888
PAIRS     ?=
CASES     ?=
PYTEST_ARGS ?=
TARGETS   ?=
PROM_DIR  ?= /var/lib/prometheus/node-exporter
MONITOR_INTERVAL ?= 5
TOP       ?=
INVENTORY ?=
SCOPE     ?= all

.PHONY: help setup doctor demo test lab capture fleet fleet-monitor monitor soak-monitor soak-capture runtimes-doc train train-hint train-answer train-status train-stop train-report report validate compare sweep notebook bench bench-overhead matrix lint schema-doc clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'
	@echo "  variables: LAB VARIANT DURATION INTERVAL NETNS PROBES OUT RUN A B REPEAT SET KIND RATES BACKLOGS SECONDS PORT PAIRS CASES PROM_DIR MONITOR_INTERVAL TOP INVENTORY SCOPE"
	@echo "  (see README.md)"

setup: ## install apt packages, .venv and Go lab binaries (idempotent)
	@scripts/setup

doctor: setup ## what this kernel can trace (writes build/doctor.json)
	@collector/doctor

demo: setup ## run the accept-overflow lab end to end and print the run directory
	@collector/doctor -q || { echo "doctor: tracepoints do not attach here; see build/doctor.json" >&2; exit 1; }
	@scripts/lab accept-overflow $(VARIANT)

test: ## set up, then run the whole test suite (unit + integration with real bpftrace; dev/test-suite)
	@dev/test-suite $(PYTEST_ARGS)

lab: setup ## run a lab: make lab LAB=accept-overflow VARIANT=stall
	@scripts/lab $(LAB) $(VARIANT) $(if $(OUT),--out $(OUT))

capture: setup ## capture, then its report: make capture DURATION=60 INTERVAL=1 NETNS="ns1 ns2" PROBES=epoll,time_wait TIER=full|rare|sampled OUT=dir
	@collector/capture --duration $(DURATION) --interval $(INTERVAL) $(if $(TIER),--tier $(TIER)) \
		$(foreach n,$(NETNS),--netns $(n)) $(if $(PROBES),--probes $(PROBES)) $(if $(OUT),--out $(OUT))

fleet: setup ## capture on the hosts of an Ansible inventory, one report: make fleet INVENTORY=hosts.ini DURATION=60 [SCOPE=sampled PROBES= OUT=]
	@[[ -n "$(INVENTORY)" ]] || { echo "make fleet needs INVENTORY= (an Ansible inventory; scripts/fleet --help)" >&2; exit 2; }
	@scripts/fleet -i $(INVENTORY) --duration $(DURATION) --interval $(INTERVAL) --scope $(SCOPE) \
		$(if $(PROBES),--probes $(PROBES)) $(if $(OUT),--out $(OUT))

fleet-monitor: setup ## install the monitor as a hardened systemd service on an inventory's hosts, a tier per group (tq_tier), idempotently: make fleet-monitor INVENTORY=hosts.ini (docs/deploy.md)
	@[[ -n "$(INVENTORY)" ]] || { echo "make fleet-monitor needs INVENTORY= (an Ansible inventory; scripts/fleet-monitor --help)" >&2; exit 2; }
	@scripts/fleet-monitor -i $(INVENTORY)

monitor: setup ## exporter mode until Ctrl-C: tq_*.prom for node_exporter's textfile collector (PROM_DIR= MONITOR_INTERVAL= TIER=sampled|rare|full PROBES= TOP=)
	@scripts/monitor --prom-dir $(PROM_DIR) --interval $(MONITOR_INTERVAL) $(if $(TIER),--tier $(TIER)) \
		$(if $(PROBES),--probes $(PROBES)) $(if $(TOP),--top $(TOP))

soak-monitor: setup ## exporter mode for 30 min beside the busy-host labs: series count and memory (build/soak-monitor.csv)
	@dev/soak-monitor

soak-capture: setup ## a capture of every family for 60 min beside steady load and thread churn: output bytes/s per minute, report time (build/soak-capture.csv; MINUTES=)
	@dev/soak-capture $(if $(MINUTES),--minutes $(MINUTES))

runtimes-doc: setup ## each runtime's listen() backlog with its defaults, and what it does past its own connection limit (the runtimes lab's two variants): runs into tests/fixtures/runtimes-{defaults,limits}, the tables into docs/runtimes.md
	@rm -rf tests/fixtures/runtimes-defaults tests/fixtures/runtimes-limits
	@TQ_NO_LATEST=1 scripts/lab runtimes defaults --no-report --out tests/fixtures/runtimes-defaults >/dev/null
	@TQ_NO_LATEST=1 scripts/lab runtimes limits --no-report --out tests/fixtures/runtimes-limits >/dev/null
	@$(PY) -m analysis runtimes tests/fixtures/runtimes-defaults --limits tests/fixtures/runtimes-limits --out docs/runtimes.md

train: setup ## SRE training: a hidden incident on the busy-host lab, the page only: make train [SEED=N] [MINUTES=10] (docs/training.md)
	@scripts/train start $(if $(SEED),--seed $(SEED)) $(if $(MINUTES),--minutes $(MINUTES))

train-hint: ## the next hint for the running incident (5 points each, three levels)
	@scripts/train hint

train-answer: ## grade ANSWER=file.json against the injected fault, then the incident's evidence chain
	@scripts/train answer $(ANSWER)

train-status: ## is an incident running, since when, hints used
	@scripts/train status

train-stop: ## end the incident without an answer
	@scripts/train stop

train-report: setup ## a group's results per family from the session log, with a plot
	@scripts/train report $(LOG)

report: setup ## (re)write verdicts.json, report.md and plots for RUN (default runs/latest)
	@$(PY) -m analysis report $(RUN)

validate: setup ## check RUN's CSV files against the data contract
	@$(PY) -m analysis validate $(RUN)

compare: setup ## A/B profiles: make compare LAB=time-wait VARIANT=exhaust A=defaults B=short-lived-clients REPEAT=3
	@[[ -n "$(VARIANT)" && -n "$(B)" ]] || { echo "make compare needs VARIANT= and B= (A defaults to defaults)" >&2; exit 2; }
	@scripts/compare $(LAB) $(VARIANT) $(A) $(B) --repeat $(REPEAT) $(foreach s,$(SET),--set $(s)) $(if $(OUT),--out $(OUT))

sweep: setup ## model check: make sweep KIND=accept-queue|time-wait [RATES=.. BACKLOGS=.. SECONDS=..]
	@scripts/sweep $(KIND) $(if $(RATES),--rates $(RATES)) $(if $(BACKLOGS),--backlogs $(BACKLOGS)) \
		$(if $(SECONDS),--seconds $(SECONDS)) $(if $(OUT),--out $(OUT))

notebook: setup ## Jupyter on 127.0.0.1:8888 (PORT=) over notebooks/: RUN, latest sweeps and comparison
	@RUN=$(abspath $(RUN)) SWEEP=$(abspath runs/latest-sweep-accept-queue) TW_SWEEP=$(abspath runs/latest-sweep-time-wait) \
		COMPARE=$(abspath runs/latest-compare) PYTHONPATH=$(CURDIR) MPLBACKEND=module://matplotlib_inline.backend_inline \
		.venv/bin/jupyter notebook --no-browser --allow-root --ip 127.0.0.1 --port $(PORT) \
		--ServerApp.root_dir=$(CURDIR)/notebooks

bench: setup ## in-kernel cost per event of each probe on its lab's traffic (bpf_stats)
	@dev/bench

bench-overhead: setup ## capture cost on loopback nginx churn, A/B: throughput ratio, BPF µs/connection (PAIRS= SECONDS= CASES=)
	@dev/bench-overhead $(if $(PAIRS),--pairs $(PAIRS)) $(if $(SECONDS),--seconds $(SECONDS)) $(if $(CASES),--cases $(CASES))

matrix: setup ## VM test matrix: Debian 12 (6.1, bpftrace 0.17), Debian 13 (6.12, 0.23), this host; prints the tier table
	@dev/vm/matrix $(TARGETS)

lint: setup ## shellcheck + ruff (the same files as tests/test_lint.py)
	@shellcheck $$(grep -lsE "^#!.*bash" collector/* scripts/* dev/* dev/vm/*) collector/lib.sh labs/*/lab.sh .ci/run
	@.venv/bin/ruff check analysis monitor training tests dev labs scripts/sysctl-profile

schema-doc: setup ## regenerate docs/data-contract.md from analysis/contract/
	@$(PY) -m analysis schema-doc > docs/data-contract.md

clean: ## remove build outputs and the virtualenv (runs/ is kept)
	rm -rf build .venv .pytest_cache .ruff_cache
