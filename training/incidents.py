"""Training incidents: a seed draws one hidden fault, or none, on the busy-host lab.

The busy-host lab (labs/busy-host/lab.sh) runs every object a real server host has —
listeners, flows, event-loop threads, client endpoints — with at most one of them faulty.
An incident is that lab with a drawn variant, drawn fault parameters, and the objects' ports
drawn too, so the faulty listener or endpoint is not always the same port. The same seed
always gives the same incident (a trainer replays one by its seed).

`Incident.lab_env` is what the runner hands scripts/lab; `Incident.key` is the answer the
grader (training/grade.py) compares a trainee's diagnosis with: the fault the generator
injected, never what the tool's own report says; `Incident.page` is all the trainee is told.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

# The server's and the client's address by IP version (scripts/lab's, IP_VERSION): an
# incident runs over either, so a trainee meets IPv6 listeners and flows too.
ADDRESSES = {4: ("198.18.0.1", "198.18.0.2"), 6: ("2001:2::1", "2001:2::2")}

# family -> the busy-host variant that injects its fault, the cause class the fault is, and
# the page an on-call would get. None: nothing wrong (the healthy variant).
FAULTS: dict[str | None, dict[str, Any]] = {
    "accept_queue": {
        "variant": "listener",
        "cause": "sizing",
        "page": "Clients of {srv} report slow or failed connects now and then; the API host looks idle.",
    },
    "retransmits": {
        "variant": "flow",
        "cause": "data_loss",
        "page": "A bulk transfer from {cli} to {srv} crawls; other traffic between them looks fine.",
    },
    "epoll": {
        "variant": "loop",
        "cause": "loop_saturated",
        "page": "p99 latency is up for some of the API host's services; CPU is not at 100 %.",
    },
    "time_wait": {
        "variant": "ports",
        "cause": "short_connections_client_closes",
        "page": "A client on {cli} logs 'cannot assign requested address' toward {srv}.",
    },
    None: {
        "variant": "healthy",
        "cause": "none",
        "page": "A customer says the API host at {srv} 'feels slow'. Nothing else is known.",
    },
}
# How often each is drawn: a healthy host half as often as each fault.
WEIGHTS: dict[str | None, int] = {"accept_queue": 2, "retransmits": 2, "epoll": 2, "time_wait": 2, None: 1}

# The fault's own parameter, drawn per family (the lab's environment names).
PARAMETERS: dict[str, dict[str, list[Any]]] = {
    "accept_queue": {"BACKLOG": [8, 12, 16, 24], "BURST": [80, 100, 120]},
    "retransmits": {"LOSS_PCT": [3, 5, 8]},
    "epoll": {"HOT_WORK": ["8ms", "10ms", "15ms"]},
    "time_wait": {"EXHAUST_RATE": [100, 150, 200]},
}
LOAD_SECONDS = [8, 10, 12]
# The lab's five aqserver listeners (roles) and its two iperf3 flows get ports drawn from
# these ranges: the faulty listener or endpoint is a different port from one seed to the next.
LISTENER_ROLES = ("HEAVY_PORT", "SMALL_PORT", "IDLE_PORT", "EXHAUST_PORT", "LIGHT_PORT")
LISTENER_PORTS = range(8000, 8100)
FLOW_PORTS = range(5200, 5300)
FLOW_CLIENT_PORTS = range(5300, 5400)
LOOPS = 4  # the lab's event-loop threads, loop0..loop3


@dataclass(frozen=True)
class Incident:
    seed: int
    family: str | None
    variant: str
    lab_env: dict[str, str]
    key: dict[str, Any]
    neighbours: list[str] = field(default_factory=list)
    page: str = ""
    seconds: int = 0


def draw(seed: int) -> Incident:
    """The incident of SEED: the same every time."""
    rng = random.Random(seed)
    family = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
    fault = FAULTS[family]
    env: dict[str, str] = {"LOAD_SECONDS": str(rng.choice(LOAD_SECONDS))}
    for name, choices in PARAMETERS.get(family or "", {}).items():
        env[name] = str(rng.choice(choices))
    ports = rng.sample(LISTENER_PORTS, len(LISTENER_ROLES))
    env.update({role: str(port) for role, port in zip(LISTENER_ROLES, ports, strict=True)})
    clean, lossy = rng.sample(FLOW_PORTS, 2)
    clean_c, lossy_c = rng.sample(FLOW_CLIENT_PORTS, 2)
    env.update(CLEAN_PORT=str(clean), LOSSY_PORT=str(lossy), CLEAN_CPORT=str(clean_c), LOSSY_CPORT=str(lossy_c))
    # The busy event loop (the hot one when the loop is the fault): any of the four threads.
    # Drawn last, so the draws before it are those of the seeds that came before it.
    env["HOT_LOOP"] = str(rng.randrange(LOOPS))
    env["IP_VERSION"] = str(rng.choice(sorted(ADDRESSES)))
    srv, cli = addresses(env)
    objects = lab_objects(env)
    faulty = objects[faulty_role(family, env)] if family else None
    return Incident(
        seed=seed,
        family=family,
        variant=fault["variant"],
        lab_env=env,
        key={"family": family or "none", "object": faulty, "cause": fault["cause"]},
        neighbours=sorted(o for o in objects.values() if o != faulty),
        page=fault["page"].format(srv=srv, cli=cli),
        seconds=int(env["LOAD_SECONDS"]),
    )


def lab_objects(env: dict[str, str]) -> dict[str, str]:
    """Every object the lab runs, by role, named as a trainee names it (training/grade.py
    normalises what they type). The faulty one of each family's variant: FAULTY_ROLE."""
    srv, cli = addresses(env)

    def at(ip: str, port: str) -> str:
        return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"

    return {
        "listener_heavy": at(srv, env["HEAVY_PORT"]),
        "listener_small": at(srv, env["SMALL_PORT"]),
        "listener_idle": at(srv, env["IDLE_PORT"]),
        "flow_clean": f"{at(cli, env['CLEAN_CPORT'])}->{at(srv, env['CLEAN_PORT'])}",
        "flow_lossy": f"{at(cli, env['LOSSY_CPORT'])}->{at(srv, env['LOSSY_PORT'])}",
        **{f"loop{i}": f"loop{i}" for i in range(LOOPS)},
        "endpoint_exhaust": at(srv, env["EXHAUST_PORT"]),
        "endpoint_light": at(srv, env["LIGHT_PORT"]),
    }


def addresses(env: dict[str, str]) -> tuple[str, str]:
    """The server's and the client's address of an incident (IPv4 when it does not say)."""
    return ADDRESSES[int(env.get("IP_VERSION", "4"))]


# The role each family's variant makes faulty (labs/busy-host/lab.sh, "Variants"); the
# event loop's is the thread HOT_LOOP names.
FAULTY_ROLE = {
    "accept_queue": "listener_small",
    "retransmits": "flow_lossy",
    "epoll": "loop{HOT_LOOP}",
    "time_wait": "endpoint_exhaust",
}


def faulty_role(family: str, env: dict[str, str]) -> str:
    return FAULTY_ROLE[family].format(**env)


def distribution(seeds: range, by_ip_version: bool = False) -> dict[str, int]:
    """How many incidents of each family SEEDS draw ("none": a healthy host); by_ip_version:
    of each family over each IP version ("accept_queue ipv6")."""
    out: dict[str, int] = {}
    for s in seeds:
        inc = draw(s)
        name = inc.family or "none"
        if by_ip_version:
            name += f" ipv{inc.lab_env['IP_VERSION']}"
        out[name] = out.get(name, 0) + 1
    return out
