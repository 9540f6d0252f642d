"""Who owns a process, from the kernel's own record of it: /proc/PID/cgroup.

Every container runtime and systemd put a process into a cgroup whose path says what it
belongs to, so the owner (systemd unit, container, Kubernetes pod and its QoS class) needs
no orchestrator API. Standard library only: the exporter (monitor/) uses it on the host,
the analysis on a run's processes.csv.

The path formats, as each runtime documents or writes them (the tests name the source of
each case):
  systemd unit          /system.slice/nginx.service, .../session-3.scope
  docker                /system.slice/docker-<id>.scope (systemd driver), /docker/<id> (cgroupfs)
  podman                /machine.slice/libpod-<id>.scope (systemd), /libpod_parent/libpod-<id> (cgroupfs),
                        .../user@1000.service/user.slice/libpod-<id>.scope (rootless)
  containerd            cri-containerd-<id>.scope (systemd); a bare <id> in a pod (cgroupfs); /<ns>/<id>
  cri-o                 crio-<id>.scope (systemd), crio-<id> (cgroupfs)
  kubepods (systemd)    /kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid_with_underscores>.slice/
                        (Guaranteed pods sit right under kubepods.slice: kubepods-pod<uid>.slice)
  kubepods (cgroupfs)   /kubepods/<qos>/pod<uid>/<id>, Guaranteed: /kubepods/pod<uid>/<id>
cgroup v1 writes one line per hierarchy (`N:controllers:/path`), v2 one line (`0::/path`);
hybrid hosts write both. The line that says the most wins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields

_ID = r"[0-9a-f]{64}"
# Container scopes and folders, most specific first: (regex on one path component, runtime).
_CONTAINER_PARTS = (
    (re.compile(rf"^libpod-({_ID})(?:\.scope)?$"), "podman"),
    (re.compile(rf"^docker-({_ID})\.scope$"), "docker"),
    (re.compile(rf"^cri-containerd-({_ID})\.scope$"), "containerd"),
    (re.compile(rf"^crio-({_ID})(?:\.scope)?$"), "cri-o"),
    (re.compile(rf"^nerdctl-({_ID})\.scope$"), "containerd"),
)
# A runtime's own helper process beside the container (podman's conmon, cri-o's): not the container.
_HELPER_PART = re.compile(rf"^(?:libpod-conmon|crio-conmon)-{_ID}(?:\.scope)?$")
_BARE_ID = re.compile(rf"^({_ID})$")
_POD_SYSTEMD = re.compile(r"^kubepods(?:-(burstable|besteffort))?-pod([0-9a-f_]{36})\.slice$")
_POD_CGROUPFS = re.compile(r"^pod([0-9a-f-]{36})$")
_UNIT = re.compile(r"^(.+\.(?:service|scope))$")
QOS_CLASSES = {"burstable": "Burstable", "besteffort": "BestEffort", None: "Guaranteed"}


@dataclass(frozen=True)
class CgroupOwner:
    """What a cgroup path says about its processes. Any field may be unknown (None)."""

    path: str | None = None  # the cgroup path the rest was read from
    unit: str | None = None  # systemd unit of a process outside containers (nginx.service)
    runtime: str | None = None  # podman, docker, containerd, cri-o; None: unknown or not a container
    container_id: str | None = None  # 64 hex digits
    pod_uid: str | None = None  # Kubernetes pod UID, with dashes
    qos: str | None = None  # Guaranteed, Burstable, BestEffort (pods only)

    @property
    def known(self) -> int:
        """How much it says: the line that says most is the owner."""
        return sum(getattr(self, f.name) is not None for f in fields(self) if f.name != "path")


def owner_of_path(path: str) -> CgroupOwner:
    """The owner one cgroup path names."""
    parts = [p for p in path.split("/") if p]
    found: dict[str, str | None] = {"path": path}
    in_kubepods = bool(parts) and parts[0] in ("kubepods", "kubepods.slice")
    for i, part in enumerate(parts):
        if _HELPER_PART.match(part):
            return CgroupOwner(path=path, unit=part)
        for pattern, runtime in _CONTAINER_PARTS:
            if m := pattern.match(part):
                found.update(runtime=runtime, container_id=m.group(1))
        if m := _POD_SYSTEMD.match(part):
            found.update(pod_uid=m.group(2).replace("_", "-"), qos=QOS_CLASSES[m.group(1)])
        elif in_kubepods and (m := _POD_CGROUPFS.match(part)):
            found.update(pod_uid=m.group(1), qos=QOS_CLASSES.get(parts[1] if i == 2 else None, "Guaranteed"))
        elif (m := _BARE_ID.match(part)) and "container_id" not in found:
            # cgroupfs drivers name the folder by the id alone: docker's /docker/<id>, a pod's
            # container (containerd or docker: the path does not say which), nerdctl's /<ns>/<id>.
            found.update(container_id=m.group(1), runtime="docker" if parts[i - 1 : i] == ["docker"] else None)
    if "container_id" not in found and "pod_uid" not in found and parts and (m := _UNIT.match(parts[-1])):
        found["unit"] = m.group(1)
    return CgroupOwner(**found)  # type: ignore[arg-type]


def owner_of_cgroup(text: str) -> CgroupOwner:
    """The owner /proc/PID/cgroup's content names (v1, v2 or hybrid; lines may also be
    joined by ';', as processes.csv stores them): the line that says the most."""
    best = CgroupOwner()
    for line in re.split(r"[;\n]", text):
        _, _, path = line.strip().partition(":")
        _, sep, path = path.partition(":")
        if not sep or not path.startswith("/"):
            continue
        owner = owner_of_path(path)
        if owner.known > best.known:
            best = owner
    return best


NAME_FIELDS = ("name", "pod_namespace", "pod_name")


def names_from_rows(rows: Iterable[Mapping[str, str | None]]) -> dict[str, dict[str, str]]:
    """containers.csv rows (collector/list-containers) -> container id, or "pod:<uid>", to the
    names known for it. Every source adds what it knows (podman ps a container's name, the
    kubelet's links its pod's). Empty or missing values are unknown."""
    out: dict[str, dict[str, str]] = {}
    for row in rows:
        key = row.get("container_id") or (f"pod:{row['pod_uid']}" if row.get("pod_uid") else "")
        if key:
            out.setdefault(key, {}).update({k: v for k in NAME_FIELDS if (v := row.get(k))})
    return out


def named(c: CgroupOwner, names: Mapping[str, Mapping[str, str]]) -> dict[str, str | None]:
    """What a cgroup says and the names the host keeps for it, as one record (None: unknown)."""
    by_id = names.get(c.container_id or "", {})
    pod = names.get(f"pod:{c.pod_uid}", {}) if c.pod_uid else {}
    return {
        "unit": c.unit,
        "runtime": c.runtime,
        "container_id": c.container_id,
        "container_name": by_id.get("name"),
        "pod_uid": c.pod_uid,
        "pod_namespace": by_id.get("pod_namespace") or pod.get("pod_namespace"),
        "pod_name": by_id.get("pod_name") or pod.get("pod_name"),
        "qos": c.qos,
    }


def read_cgroup(pid: int, proc: str = "/proc") -> str | None:
    """/proc/PID/cgroup as one line (its lines joined by ';'), or None when the process is gone."""
    try:
        with open(f"{proc}/{pid}/cgroup", encoding="utf-8", errors="backslashreplace") as f:
            return ";".join(line.strip() for line in f if line.strip())
    except OSError:
        return None
