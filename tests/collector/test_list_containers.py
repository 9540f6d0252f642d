"""collector/list-containers: names of containers and pods from what the host keeps. The
kubelet's layouts (/var/log/pods/<namespace>_<pod>_<uid>/ and
/var/log/containers/<pod>_<namespace>_<container>-<id>.log) are laid out here under
TQ_HOST_ROOT as the kubelet writes them; podman's rows come from the real podman in the
container integration test (tests/integration/test_containers.py)."""

from __future__ import annotations

import csv
import io
import os
import subprocess
from pathlib import Path

from tests.conftest import ROOT

ID = "9c" * 32
UID = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"


def _list(root: Path) -> list[dict[str, str]]:
    r = subprocess.run([str(ROOT / "collector" / "list-containers")], capture_output=True, text=True, check=True,
                       env={**os.environ, "TQ_HOST_ROOT": str(root)})  # fmt: skip
    return [row for row in csv.DictReader(io.StringIO(r.stdout)) if row["source"].startswith("/var/log")]


def test_kubelet_log_folders_name_pods_and_containers(tmp_path: Path) -> None:
    (tmp_path / "var/log/pods" / f"shop_checkout-7d9f_{UID}" / "api").mkdir(parents=True)
    links = tmp_path / "var/log/containers"
    links.mkdir(parents=True)
    (links / f"checkout-7d9f_shop_api-{ID}.log").symlink_to(tmp_path / "var/log/pods" / f"shop_checkout-7d9f_{UID}")
    (links / "not-a-container.log").write_text("")
    rows = _list(tmp_path)
    assert {"source": "/var/log/containers", "container_id": ID, "name": "api", "pod_namespace": "shop",
            "pod_name": "checkout-7d9f", "pod_uid": ""} in rows  # fmt: skip
    assert {"source": "/var/log/pods", "container_id": "", "name": "", "pod_namespace": "shop",
            "pod_name": "checkout-7d9f", "pod_uid": UID} in rows  # fmt: skip
    assert len(rows) == 2


def test_a_host_without_containers_gives_the_header_only(tmp_path: Path) -> None:
    r = subprocess.run([str(ROOT / "collector" / "list-containers")], capture_output=True, text=True, check=True,
                       env={**os.environ, "TQ_HOST_ROOT": str(tmp_path), "PATH": "/usr/bin:/bin"})  # fmt: skip
    lines = r.stdout.splitlines()
    assert lines[0] == "source,container_id,name,pod_namespace,pod_name,pod_uid"
    assert all(not ln.startswith("/var/log") for ln in lines[1:])
