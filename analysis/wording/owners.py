"""An object's owner as a person paged knows it: `pod shop/checkout (container api)`,
`container api (podman 1f2e3d4c5b6a)`, `unit nginx.service`; named first, before the
address, pid and namespace inode (analysis/derived/owners.py says who owns what)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SHORT_ID = 12  # how runtimes print a container id (docker ps, podman ps)


def owner_label(owner: Mapping[str, Any] | None) -> str | None:
    """The owner in a few words, or None when nothing is known."""
    if not owner:
        return None
    cid, name = owner.get("container_id"), owner.get("container_name")
    short = cid[:SHORT_ID] if cid else None
    if owner.get("pod_uid"):
        ns, pod = owner.get("pod_namespace"), owner.get("pod_name")
        label = f"pod {ns}/{pod}" if ns and pod else f"pod uid {owner['pod_uid']}"
        return label + (f" (container {name or short})" if name or short else "")
    if cid:
        runtime = owner.get("runtime")
        if name:
            return f"container {name} ({runtime + ' ' if runtime else ''}{short})"
        return f"{runtime or 'a'} container {short}"
    return f"unit {owner['unit']}" if owner.get("unit") else None


def owner_first(subject: Mapping[str, Any], text: str) -> str:
    """The text (an object's address, a thread) with its owner named before it, when known."""
    label = owner_label(subject.get("owner"))
    return f"{label} {text}" if label else text
