"""Analysis of probe-pack runs: load a run directory, evaluate rules, write reports."""
