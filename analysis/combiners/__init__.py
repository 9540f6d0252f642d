"""Combiners: conclusions over many runs' findings (the fleet: hosts x families).

They sit after the rules (they run them on each host's run) and before render,
as insights-core's combiners sit over its parsers and rules.
"""
