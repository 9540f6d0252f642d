"""analysis/wording/owners.py: the owner named first, in the words a paged SRE knows."""

from __future__ import annotations

from analysis.wording.owners import owner_first, owner_label

ID = "0123456789ab" + "c" * 52


def test_labels_for_each_kind_of_owner() -> None:
    pod = {
        "pod_uid": "u-1",
        "pod_namespace": "shop",
        "pod_name": "checkout-7d9f",
        "container_id": ID,
        "container_name": "api",
    }
    assert owner_label(pod) == "pod shop/checkout-7d9f (container api)"
    assert owner_label({**pod, "pod_namespace": None, "container_name": None}) == "pod uid u-1 (container 0123456789ab)"
    assert owner_label({"container_id": ID, "container_name": "api", "runtime": "podman"}) == (
        "container api (podman 0123456789ab)"
    )
    assert owner_label({"container_id": ID, "runtime": None}) == "a container 0123456789ab"
    assert owner_label({"unit": "nginx.service"}) == "unit nginx.service"
    assert owner_label(None) is None and owner_label({"unit": None}) is None


def test_owner_first_leaves_the_text_alone_when_nothing_is_known() -> None:
    assert owner_first({"owner": None}, "198.18.0.1:80") == "198.18.0.1:80"
    assert owner_first({"owner": {"unit": "nginx.service"}}, "198.18.0.1:80") == "unit nginx.service 198.18.0.1:80"
