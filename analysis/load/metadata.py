"""A run's metadata.json (and doctor.json): read, version-gated, refused while the capture runs, checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.contract import READABLE_CONTRACTS

from .json_files import check_json, read_json, read_json_text
from .json_locate import json_error

METADATA_SCHEMA_VERSION = 1


def read_metadata(run_dir: Path) -> tuple[dict[str, Any], str]:
    """metadata.json of a run directory, parsed and checked, and its text (for line numbers)."""
    meta_path = run_dir / "metadata.json"
    meta, text = read_json_text(meta_path, f"is {run_dir} a run directory written by collector/capture?")
    if not isinstance(meta, dict):
        raise json_error(meta_path, text, (), f"expected an object, found {type(meta).__name__}")
    _check_versions(meta_path, text, meta)
    _check_ended(meta_path, text, meta)
    check_json(meta_path, text, meta, "metadata")
    if meta["ended_epoch"] < meta["started_epoch"]:
        raise json_error(
            meta_path,
            text,
            ("ended_epoch",),
            f"{meta['ended_epoch']} is before started_epoch {meta['started_epoch']}",
        )
    inodes = [ns["inode"] for ns in meta["netns"]]
    for i, ino in enumerate(inodes):
        if ino in inodes[:i]:
            raise json_error(meta_path, text, ("netns", i, "inode"), f"{ino} listed twice")
    doctor = run_dir / "doctor.json"
    if doctor.exists() or doctor.is_symlink():
        read_json(doctor, "", schema="doctor")
    return meta, text


def _check_versions(meta_path: Path, text: str, meta: dict[str, Any]) -> None:
    """The metadata schema and data contract are ones this analysis reads."""
    for key, want, what in (
        ("schema_version", (METADATA_SCHEMA_VERSION,), "metadata schema"),
        ("data_contract", READABLE_CONTRACTS, "data contract"),
    ):
        if key not in meta:
            raise json_error(meta_path, text, (), f"no {key!r}: not a metadata.json written by collector/capture")
        if meta[key] not in want or type(meta[key]) is not int:
            raise json_error(
                meta_path,
                text,
                (key,),
                f"{what} v{meta[key]!r}, this analysis reads v{' and v'.join(map(str, want))}: analyse it "
                f"with the version of this repository that wrote it, or capture again",
            )


def _check_ended(meta_path: Path, text: str, meta: dict[str, Any]) -> None:
    """A capture still running (or dead and never reaped) is refused."""
    if meta.get("stop_reason") == "running" or ("ended_epoch" in meta and meta["ended_epoch"] is None):
        key = "stop_reason" if meta.get("stop_reason") == "running" else "ended_epoch"
        raise json_error(
            meta_path,
            text,
            (key,),
            "this capture has not ended: it is still running, or it died and was never reaped; "
            "wait for it, or reap it with collector/capture --reap (any of collector/capture, scripts/lab, "
            "scripts/compare, scripts/sweep reaps dead runs when it starts)",
        )
