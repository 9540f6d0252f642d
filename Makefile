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
VM        ?=
HOGS      ?=
PROFILE   ?=
PYTEST_ARGS ?=
TARGETS   ?=
PROM_DIR  ?= /var/lib/prometheus/node-exporter
MONITOR_INTERVAL ?= 5
TOP       ?=
INVENTORY ?=
SCOPE     ?= all

.PHONY: help setup doctor demo test lab capture fleet fleet-monitor monitor soak-monitor soak-capture runtimes-doc train train-hint train-answer train-status train-stop train-report report validate compare sweep notebook bench bench-overhead matrix lint schema-doc clean

# Each target's group is the [tag] after its ##; its variables, the ?= ones its recipe reads.
help: ## [setup] list the targets by who runs them, with the variables each reads
	@awk -v groups="sre dev setup" ' \
		BEGIN { title["sre"] = "For an SRE"; title["dev"] = "For developers"; title["setup"] = "Set-up" } \
		/^[A-Z_]+ +\?=/ { v = $$0; sub(/ .*/, "", v); d = $$0; sub(/^[^=]*\?= */, "", d); def[v] = d; next } \
		/^[a-z-]+:.*## \[[a-z]+\] / { cur = $$0; sub(/:.*/, "", cur); g = $$0; sub(/.*## \[/, "", g); \
			d = g; sub(/\].*/, "", g); sub(/^[a-z]+\] /, "", d); desc[cur] = d; n[g]++; list[g, n[g]] = cur; next } \
		/^\t/ && cur != "" { s = $$0; while (match(s, /\$$\([A-Z_]+\)/)) { v = substr(s, RSTART + 2, RLENGTH - 3); \
			if ((v in def) && !((cur, v) in seen)) { seen[cur, v] = 1; vars[cur] = vars[cur] " " v "=" def[v] } \
			s = substr(s, RSTART + RLENGTH) } next } \
		/^[^\t]/ { cur = "" } \
		END { k = split(groups, order, " "); for (i = 1; i <= k; i++) { g = order[i]; print title[g] ":"; \
			for (j = 1; j <= n[g]; j++) { t = list[g, j]; printf "  make %-15s %s\n", t, desc[t]; \
				if (vars[t] != "") printf "  %-20s%s\n", "", vars[t] } } }' $(MAKEFILE_LIST)
	@echo "Any VAR=value also reaches the scripts: a lab's parameters (scripts/lab LAB --list), BPFTRACE=, TQ_*."
	@echo "Start with README.md; each target's page is in docs/."

setup: ## [setup] install apt packages, .venv and Go lab binaries (idempotent; docs/development.md)
	@scripts/setup

doctor: setup ## [sre] what this kernel can trace, and which probe file runs here (build/doctor.json)
	@collector/doctor

demo: setup ## [setup] run the accept-overflow lab end to end and print the run directory
	@collector/doctor -q || { echo "doctor: tracepoints do not attach here; see build/doctor.json" >&2; exit 1; }
	@scripts/lab accept-overflow $(VARIANT)

test: ## [dev] set up, then run the whole suite in two phases (dev/test-suite); PYTEST_ARGS: one plain pytest
	@dev/test-suite $(PYTEST_ARGS)

capture: setup ## [sre] capture the host (or NETNS) for DURATION s, then its report (docs/capture.md)
	@collector/capture --duration $(DURATION) --interval $(INTERVAL) $(if $(TIER),--tier $(TIER)) \
		$(foreach n,$(NETNS),--netns $(n)) $(if $(PROBES),--probes $(PROBES)) $(if $(OUT),--out $(OUT))

report: setup ## [sre] (re)write verdicts.json, report.md and plots for RUN
	@$(PY) -m analysis report $(RUN)

validate: setup ## [sre] check RUN's files against the data contract
	@$(PY) -m analysis validate $(RUN)

fleet: setup ## [sre] capture every host of an Ansible INVENTORY, one report over them (docs/fleet.md)
	@[[ -n "$(INVENTORY)" ]] || { echo "make fleet needs INVENTORY= (an Ansible inventory; scripts/fleet --help)" >&2; exit 2; }
	@scripts/fleet -i $(INVENTORY) --duration $(DURATION) --interval $(INTERVAL) --scope $(SCOPE) \
		$(if $(PROBES),--probes $(PROBES)) $(if $(OUT),--out $(OUT))

fleet-monitor: setup ## [sre] install the monitor as a hardened systemd service on an inventory's hosts, a tier per group (docs/deploy.md)
	@[[ -n "$(INVENTORY)" ]] || { echo "make fleet-monitor needs INVENTORY= (an Ansible inventory; scripts/fleet-monitor --help)" >&2; exit 2; }
	@scripts/fleet-monitor -i $(INVENTORY)

monitor: setup ## [sre] exporter mode until Ctrl-C: tq_*.prom for node_exporter (docs/monitoring.md)
	@scripts/monitor --prom-dir $(PROM_DIR) --interval $(MONITOR_INTERVAL) $(if $(TIER),--tier $(TIER)) \
		$(if $(PROBES),--probes $(PROBES)) $(if $(TOP),--top $(TOP))

lab: setup ## [sre] a lab: a real fault in network namespaces, captured and reported (docs/labs.md)
	@scripts/lab $(LAB) $(VARIANT) $(if $(OUT),--out $(OUT))

soak-monitor: setup ## [dev] exporter mode for 30 min beside the busy-host labs: series and memory (build/soak-monitor.csv)
	@dev/soak-monitor

soak-capture: setup ## [dev] a capture of every family for MINUTES (60) beside load and churn: output and report time
	@dev/soak-capture $(if $(MINUTES),--minutes $(MINUTES))

runtimes-doc: setup ## [dev] run the runtimes lab's two variants into tests/fixtures/, their tables into docs/runtimes.md
	@rm -rf tests/fixtures/runtimes-defaults tests/fixtures/runtimes-limits
	@TQ_NO_LATEST=1 scripts/lab runtimes defaults --no-report --out tests/fixtures/runtimes-defaults >/dev/null
	@TQ_NO_LATEST=1 scripts/lab runtimes limits --no-report --out tests/fixtures/runtimes-limits >/dev/null
	@$(PY) -m analysis runtimes tests/fixtures/runtimes-defaults --limits tests/fixtures/runtimes-limits --out docs/runtimes.md

train: setup ## [sre] training: a hidden incident on the busy-host lab, the page only (docs/training.md)
	@scripts/train start $(if $(SEED),--seed $(SEED)) $(if $(MINUTES),--minutes $(MINUTES))

train-hint: ## [sre] the next hint for the running incident (5 points each, three levels)
	@scripts/train hint

train-answer: ## [sre] grade ANSWER=file.json against the injected fault, then the incident's evidence chain
	@scripts/train answer $(ANSWER)

train-status: ## [sre] is an incident running, since when, hints used
	@scripts/train status

train-stop: ## [sre] end the incident without an answer
	@scripts/train stop

train-report: setup ## [sre] a group's results per family from the session LOG, with a plot
	@scripts/train report $(LOG)

compare: setup ## [sre] A/B sysctl profiles A and B on a lab VARIANT, REPEAT runs a side (docs/experiments.md)
	@[[ -n "$(VARIANT)" && -n "$(B)" ]] || { echo "make compare needs VARIANT= and B= (A defaults to defaults)" >&2; exit 2; }
	@scripts/compare $(LAB) $(VARIANT) $(A) $(B) --repeat $(REPEAT) $(foreach s,$(SET),--set $(s)) $(if $(OUT),--out $(OUT))

sweep: setup ## [sre] a queueing model against measured points: KIND=accept-queue|time-wait (docs/experiments.md)
	@scripts/sweep $(KIND) $(if $(RATES),--rates $(RATES)) $(if $(BACKLOGS),--backlogs $(BACKLOGS)) \
		$(if $(SECONDS),--seconds $(SECONDS)) $(if $(OUT),--out $(OUT))

notebook: setup ## [sre] Jupyter on 127.0.0.1:PORT over notebooks/, reading RUN and the latest sweeps and comparison
	@RUN=$(abspath $(RUN)) SWEEP=$(abspath runs/latest-sweep-accept-queue) TW_SWEEP=$(abspath runs/latest-sweep-time-wait) \
		COMPARE=$(abspath runs/latest-compare) PYTHONPATH=$(CURDIR) MPLBACKEND=module://matplotlib_inline.backend_inline \
		.venv/bin/jupyter notebook --no-browser --allow-root --ip 127.0.0.1 --port $(PORT) \
		--ServerApp.root_dir=$(CURDIR)/notebooks

bench: setup ## [dev] in-kernel cost per event of each probe on its lab's traffic (bpf_stats), then the report of a synthetic day (docs/cost.md)
	@dev/bench
	@dev/bench-report

bench-overhead: setup ## [dev] capture cost on loopback nginx churn, A/B pairs; VM=trixie: counted in instructions in a TCG guest; PROFILE=1: where they go (docs/cost.md)
	@dev/bench-overhead $(if $(PAIRS),--pairs $(PAIRS)) $(if $(SECONDS),--seconds $(SECONDS)) $(if $(CASES),--cases $(CASES)) \
		$(if $(VM),--vm $(VM)) $(if $(HOGS),--host-hogs $(HOGS)) $(if $(PROFILE),--profile)

matrix: setup ## [dev] VM test matrix over TARGETS (Debian 12, Debian 13, this host): the tier table (docs/kernels.md)
	@dev/vm/matrix $(TARGETS)

lint: setup ## [dev] shellcheck + ruff (the same files as tests/test_lint.py)
	@shellcheck $$(grep -lsE "^#!.*bash" collector/* scripts/* dev/* dev/vm/*) collector/lib.sh labs/*/lab.sh .ci/run
	@.venv/bin/ruff check analysis monitor training tests dev labs scripts/sysctl-profile

schema-doc: setup ## [dev] regenerate docs/data-contract.md from analysis/contract/
	@$(PY) -m analysis schema-doc > docs/data-contract.md

clean: ## [setup] remove build outputs and the virtualenv (runs/ is kept)
	rm -rf build .venv .pytest_cache .ruff_cache
