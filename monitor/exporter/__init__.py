"""Exporter mode: the probes kept running, their numbers written as node_exporter textfiles.

scripts/monitor runs this package (PYTHONPATH=<pack root> python3 -m monitor.exporter ...).
It uses the standard library only (and the pack's own analysis.families and
analysis.kernel, standard library only too), so a monitored host needs python3, bash,
awk and what the probes need, nothing from PyPI.

One process supervises the probes (supervise.py: bpftrace children, restarted when they
die and every --segment seconds so the kernel maps and the memory stay bounded); their
output goes through collector/probe-to-csv --stream, the one parser of the probes' line
format, and the exporter reads its CSV rows as they come (stream.py) and turns them into
objects (rows.py, objects.py). It samples the namespace counters the rules reconcile
with through collector/sample-netns, the one sampler of them (sample.py), and after each
interval writes one file per family into --prom-dir (textfile.py): written under a
temporary name and renamed, no timestamps, base units, counters ending in _total, every
name prefixed tq_.

Cardinality is bounded per family: at most --top objects (listeners, endpoints,
destinations, loop threads) get their own series; the rest are summed into one series
whose object labels read "other". An object keeps its series while it is active; an
object idle for --ttl seconds is dropped. METRICS (metrics.py) is the full list of
metric names with their labels: the rules file, the dashboard and the tests read it.
"""

from .metrics import FILES, METRICS, OBJECT_LABELS, PREFIX, Metric

__all__ = ["FILES", "METRICS", "OBJECT_LABELS", "PREFIX", "Metric"]
