"""python3 -m monitor.exporter (scripts/monitor runs it so, with PYTHONPATH=<pack root>)."""

import sys

from .cli import main

sys.exit(main())
