"""analysis/cgroups.py on the cgroup layouts of each runtime, cgroup version and driver.

Each case says where its path comes from: written here by a real process (podman with
runc on this host, cgroups in hybrid v1/v2 mode), or the format the runtime documents
and writes (runc's and the kubelet's cgroup naming: systemd driver
`<parent>-<name>.slice` with the pod UID's dashes as underscores, cgroupfs driver
`/kubepods/<qos>/pod<uid>/<id>`; docker's `docker-<id>.scope` and `/docker/<id>`;
cri-o's `crio-<id>.scope`; containerd's `cri-containerd-<id>.scope`).
"""

from __future__ import annotations

import os

import pytest

from analysis.cgroups import CgroupOwner, owner_of_cgroup, owner_of_path, read_cgroup

ID = "3f" * 32
UID = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
UID_ = UID.replace("-", "_")

# (name, /proc/PID/cgroup content, expected)
CASES = [
    # systemd units, cgroup v2 (Debian 12/13, RHEL 9) and v1 (RHEL 8: name=systemd)
    ("systemd service v2", "0::/system.slice/nginx.service", CgroupOwner(unit="nginx.service")),
    (
        "systemd service v1",
        "12:pids:/system.slice/redis-server.service\n1:name=systemd:/system.slice/redis-server.service",
        CgroupOwner(unit="redis-server.service"),
    ),
    ("login session scope v2", "0::/user.slice/user-1000.slice/session-3.scope", CgroupOwner(unit="session-3.scope")),
    ("no owner (root cgroup)", "0::/", CgroupOwner()),
    # docker
    ("docker systemd driver v2", f"0::/system.slice/docker-{ID}.scope", CgroupOwner(runtime="docker", container_id=ID)),
    (
        "docker cgroupfs driver v1",
        f"4:memory:/docker/{ID}\n1:name=systemd:/docker/{ID}",
        CgroupOwner(runtime="docker", container_id=ID),
    ),
    # podman: systemd manager as root, cgroupfs (runc on a hybrid host: this machine), rootless
    ("podman systemd v2", f"0::/machine.slice/libpod-{ID}.scope", CgroupOwner(runtime="podman", container_id=ID)),
    (
        "podman cgroupfs hybrid (this host)",
        f"5:pids:/libpod_parent/libpod-{ID}\n0::/",
        CgroupOwner(runtime="podman", container_id=ID),
    ),
    (
        "podman rootless v2",
        f"0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope",
        CgroupOwner(runtime="podman", container_id=ID),
    ),
    (
        "podman's conmon is not the container",
        f"0::/machine.slice/libpod-conmon-{ID}.scope",
        CgroupOwner(unit=f"libpod-conmon-{ID}.scope"),
    ),
    # Kubernetes, systemd driver, v2: containerd and cri-o, all three QoS classes
    (
        "k8s containerd systemd v2 burstable",
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{ID}.scope",
        CgroupOwner(runtime="containerd", container_id=ID, pod_uid=UID, qos="Burstable"),
    ),
    (
        "k8s containerd systemd v2 besteffort",
        f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/cri-containerd-{ID}.scope",
        CgroupOwner(runtime="containerd", container_id=ID, pod_uid=UID, qos="BestEffort"),
    ),
    (
        "k8s containerd systemd v2 guaranteed",
        f"0::/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{ID}.scope",
        CgroupOwner(runtime="containerd", container_id=ID, pod_uid=UID, qos="Guaranteed"),
    ),
    (
        "k8s cri-o systemd v2 burstable",
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/crio-{ID}.scope",
        CgroupOwner(runtime="cri-o", container_id=ID, pod_uid=UID, qos="Burstable"),
    ),
    # Kubernetes, systemd driver, v1: every hierarchy line the same path
    (
        "k8s cri-o systemd v1 guaranteed",
        f"11:memory:/kubepods.slice/kubepods-pod{UID_}.slice/crio-{ID}.scope\n"
        f"1:name=systemd:/kubepods.slice/kubepods-pod{UID_}.slice/crio-{ID}.scope",
        CgroupOwner(runtime="cri-o", container_id=ID, pod_uid=UID, qos="Guaranteed"),
    ),
    # Kubernetes, cgroupfs driver: v1 and v2, all three QoS classes
    (
        "k8s containerd cgroupfs v1 burstable",
        f"4:cpu,cpuacct:/kubepods/burstable/pod{UID}/{ID}",
        CgroupOwner(container_id=ID, pod_uid=UID, qos="Burstable"),
    ),
    (
        "k8s containerd cgroupfs v2 besteffort",
        f"0::/kubepods/besteffort/pod{UID}/{ID}",
        CgroupOwner(container_id=ID, pod_uid=UID, qos="BestEffort"),
    ),
    (
        "k8s containerd cgroupfs v2 guaranteed",
        f"0::/kubepods/pod{UID}/{ID}",
        CgroupOwner(container_id=ID, pod_uid=UID, qos="Guaranteed"),
    ),
    (
        "k8s cri-o cgroupfs v1 burstable",
        f"7:pids:/kubepods/burstable/pod{UID}/crio-{ID}",
        CgroupOwner(runtime="cri-o", container_id=ID, pod_uid=UID, qos="Burstable"),
    ),
    # A pod's own cgroup (its pause process, or a process the runtime has not moved yet)
    (
        "k8s pod without container",
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice",
        CgroupOwner(pod_uid=UID, qos="Burstable"),
    ),
]


@pytest.mark.parametrize(("content", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_layout_names_its_owner(content: str, expected: CgroupOwner) -> None:
    got = owner_of_cgroup(content)
    fields = ("unit", "runtime", "container_id", "pod_uid", "qos")
    assert {f: getattr(got, f) for f in fields} == {f: getattr(expected, f) for f in fields}


def test_the_line_that_says_most_wins_and_semicolons_join_lines() -> None:
    # Hybrid host: the v2 line says only the unit, the v1 pids line the container.
    text = f"0::/system.slice/podman.service;5:pids:/libpod_parent/libpod-{ID}"
    assert owner_of_cgroup(text).container_id == ID
    assert owner_of_cgroup(text.replace(";", "\n")).container_id == ID


def test_paths_that_only_look_like_ids_are_not_containers() -> None:
    # This sandbox's own memory cgroup holds 32 hex digits: not a container id.
    assert owner_of_path("/process_api/3c284dc548ca29d4cc70947b0e8a04ef").known == 0
    assert owner_of_cgroup("garbage\n\n1:name=systemd").known == 0


def test_read_cgroup_reads_a_live_process_and_none_when_gone() -> None:
    text = read_cgroup(os.getpid())
    assert text and "\n" not in text and text.count(":") >= 2
    assert read_cgroup(2**22 + 7) is None


def _kubepods_path(runtime: str, driver: str, qos: str) -> str:
    """A pod container's cgroup path as the kubelet and the runtime name it: the systemd driver
    nests `kubepods[-<qos>].slice` units with the UID's dashes as underscores and a
    `<prefix>-<id>.scope` (cri-containerd-, crio-); the cgroupfs driver nests folders
    `/kubepods[/<qos>]/pod<uid>/` and the id (containerd) or crio-<id> (cri-o). Guaranteed pods
    have no QoS level of their own."""
    level = {"Guaranteed": None, "Burstable": "burstable", "BestEffort": "besteffort"}[qos]
    if driver == "systemd":
        pod = f"kubepods-{level}-pod{UID_}.slice" if level else f"kubepods-pod{UID_}.slice"
        parent = f"/kubepods.slice/kubepods-{level}.slice/{pod}" if level else f"/kubepods.slice/{pod}"
        scope = {"containerd": f"cri-containerd-{ID}.scope", "cri-o": f"crio-{ID}.scope"}[runtime]
        return f"{parent}/{scope}"
    parent = f"/kubepods/{level}/pod{UID}" if level else f"/kubepods/pod{UID}"
    return f"{parent}/{ID if runtime == 'containerd' else 'crio-' + ID}"


MATRIX = [
    (runtime, version, driver, qos)
    for runtime in ("containerd", "cri-o")
    for version in ("v1", "v2")
    for driver in ("systemd", "cgroupfs")
    for qos in ("Guaranteed", "Burstable", "BestEffort")
]


@pytest.mark.parametrize(("runtime", "version", "driver", "qos"), MATRIX, ids=["-".join(m) for m in MATRIX])
def test_every_kubepods_layout(runtime: str, version: str, driver: str, qos: str) -> None:
    path = _kubepods_path(runtime, driver, qos)
    # v1: a line per hierarchy (the same path in each); v2: the one unified line.
    text = f"12:memory:{path}\n4:cpu,cpuacct:{path}\n1:name=systemd:{path}" if version == "v1" else f"0::{path}"
    got = owner_of_cgroup(text)
    assert (got.container_id, got.pod_uid, got.qos, got.unit) == (ID, UID, qos, None), path
    # The cgroupfs driver names a containerd container by its id alone: the runtime is not in the path.
    assert got.runtime == (None if (runtime, driver) == ("containerd", "cgroupfs") else runtime), path
