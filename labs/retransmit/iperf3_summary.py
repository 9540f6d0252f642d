"""iperf3_summary: what labs/retransmit/lab.sh stores of iperf3's JSON report.

USAGE: iperf3_summary.py IPERF3.json
Prints {"retransmits", "bytes_sent", "bits_per_second"} of the sender's totals
as one JSON line; exits non-zero when the file is not a finished iperf3 report.
"""

from __future__ import annotations

import json
import sys


def summary(path: str) -> dict[str, int | None]:
    with open(path) as f:
        sent = json.load(f)["end"]["sum_sent"]
    return {
        "retransmits": sent.get("retransmits"),
        "bytes_sent": sent["bytes"],
        "bits_per_second": round(sent["bits_per_second"]),
    }


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(json.dumps(summary(sys.argv[1])))
