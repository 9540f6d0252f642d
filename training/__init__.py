"""Training mode: seeded incidents on the busy-host lab (incidents.py) and the grader of a
trainee's diagnosis against the fault injected (grade.py)."""
