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

from analysis.families import FAMILIES

# The server's and the client's address by IP version (scripts/lab's, IP_VERSION): an
# incident runs over either, so a trainee meets IPv6 listeners and flows too.
ADDRESSES = {4: ("198.18.0.1", "198.18.0.2"), 6: ("2001:2::1", "2001:2::2")}

# family -> the busy-host variant that injects its fault, the cause class the fault is, the
# role of the object it makes faulty (lab_objects; a loop's is the thread HOT_LOOP names), its
# own parameters drawn (the lab's environment names), and the page an on-call would get.
# None: nothing wrong (the healthy variant). A family with a training weight needs its entry.
FAULTS: dict[str | None, dict[str, Any]] = {
    "accept_queue": {
        "variant": "listener",
        "cause": "sizing",
        "role": "listener_small",
        "parameters": {"BACKLOG": [8, 12, 16, 24], "BURST": [80, 100, 120]},
        "page": "Clients of {srv} report slow or failed connects now and then; the API host looks idle.",
    },
    "retransmits": {
        "variant": "flow",
        "cause": "data_loss",
        "role": "flow_lossy",
        "parameters": {"LOSS_PCT": [3, 5, 8]},
        "page": "A bulk transfer from {cli} to {srv} crawls; other traffic between them looks fine.",
    },
    "epoll": {
        "variant": "loop",
        "cause": "loop_saturated",
        "role": "loop{HOT_LOOP}",
        "parameters": {"HOT_WORK": ["8ms", "10ms", "15ms"]},
        "page": "p99 latency is up for some of the API host's services; CPU is not at 100 %.",
    },
    "time_wait": {
        "variant": "ports",
        "cause": "short_connections_client_closes",
        "role": "endpoint_exhaust",
        "parameters": {"EXHAUST_RATE": [100, 150, 200]},
        "page": "A client on {cli} logs 'cannot assign requested address' toward {srv}.",
    },
    "socket_buffers": {
        "variant": "buffer",
        "cause": "slow_reader",
        "role": "flow_bulk_slow",
        "parameters": {"READ_EVERY_SLOW": ["100ms", "200ms", "400ms"]},
        "page": "An upload from {cli} to {srv} crawls at a fraction of the link; neither host is busy.",
    },
    None: {
        "variant": "healthy",
        "cause": "none",
        "role": None,
        "parameters": {},
        "page": "A customer says the API host at {srv} 'feels slow'. Nothing else is known.",
    },
}
# How often each is drawn: each family by its train weight in probes/families.conf (2 each
# today), a healthy host by this one (half as often as each fault).
HEALTHY_WEIGHT = 1
WEIGHTS: dict[str | None, int] = {
    **{f.name: f.train_weight for f in FAMILIES.values() if f.train_weight},
    None: HEALTHY_WEIGHT,
}

LOAD_SECONDS = [8, 10, 12]
# The lab's five aqserver listeners (roles) and its two iperf3 flows get ports drawn from
# these ranges: the faulty listener or endpoint is a different port from one seed to the next.
LISTENER_ROLES = ("HEAVY_PORT", "SMALL_PORT", "IDLE_PORT", "EXHAUST_PORT", "LIGHT_PORT")
LISTENER_PORTS = range(8000, 8100)
FLOW_PORTS = range(5200, 5300)
FLOW_CLIENT_PORTS = range(5300, 5400)
# The two bulk flows (bufflow): their servers' and clients' ports.
BULK_PORTS = range(7000, 7100)
BULK_CLIENT_PORTS = range(5400, 5500)
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
    for name, choices in fault["parameters"].items():
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
    # The bulk flows' ports, after every earlier draw (the socket-buffer family came later).
    slow, fast = rng.sample(BULK_PORTS, 2)
    slow_c, fast_c = rng.sample(BULK_CLIENT_PORTS, 2)
    env.update(BULK_SLOW_PORT=str(slow), BULK_FAST_PORT=str(fast), BULK_SLOW_CPORT=str(slow_c),
               BULK_FAST_CPORT=str(fast_c))  # fmt: skip
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
    normalises what they type). The faulty one of each family's variant: FAULTS' role."""
    srv, cli = addresses(env)

    def at(ip: str, port: str) -> str:
        return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"

    return {
        "listener_heavy": at(srv, env["HEAVY_PORT"]),
        "listener_small": at(srv, env["SMALL_PORT"]),
        "listener_idle": at(srv, env["IDLE_PORT"]),
        "flow_clean": f"{at(cli, env['CLEAN_CPORT'])}->{at(srv, env['CLEAN_PORT'])}",
        "flow_lossy": f"{at(cli, env['LOSSY_CPORT'])}->{at(srv, env['LOSSY_PORT'])}",
        "flow_bulk_slow": f"{at(cli, env['BULK_SLOW_CPORT'])}->{at(srv, env['BULK_SLOW_PORT'])}",
        "flow_bulk_fast": f"{at(cli, env['BULK_FAST_CPORT'])}->{at(srv, env['BULK_FAST_PORT'])}",
        **{f"loop{i}": f"loop{i}" for i in range(LOOPS)},
        "endpoint_exhaust": at(srv, env["EXHAUST_PORT"]),
        "endpoint_light": at(srv, env["LIGHT_PORT"]),
    }


def addresses(env: dict[str, str]) -> tuple[str, str]:
    """The server's and the client's address of an incident (IPv4 when it does not say)."""
    return ADDRESSES[int(env.get("IP_VERSION", "4"))]


def faulty_role(family: str, env: dict[str, str]) -> str:
    """The role (lab_objects) of the object FAMILY's fault makes faulty under ENV."""
    return str(FAULTS[family]["role"]).format(**env)


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
