"""Saturation models for the hidden queues, checked against measured sweeps.

Accept queue: a single-server finite queue. The kernel queues a completed
handshake while sk_ack_backlog <= limit (its full test is `>`), so limit + 1
wait in the queue, and one more is "in service" (accepted, being handed off
while the accept loop is busy), hence K = limit + 2. Arrivals that find it full
are dropped (ListenOverflows). (The probe sees depth limit + 2 at saturation
too: two CPUs completing handshakes at once can both pass the lockless full
test; K = limit + 1 fits the sweep about as well, see sweep.md.) A loss
system, then: M/M/1/K in closed form, and a
ciw simulation for what the closed form cannot do (deterministic or shifted
service times, bursts). What none of them model: retries (a dropped SYN or
final ACK comes back 1 s later, so measured attempt rates include them) and
stalls (a server that stops accepting is not a stationary queue at all).

TIME_WAIT: an active close holds its port toward that (address, port) for
60 s (TCP_TIMEWAIT_LEN, not a sysctl), so by Little's law TW = rate x 60 s,
and without tcp_tw_reuse the sustainable rate toward one endpoint is
ports / 60 s. Measured here the sockets live about 2 s longer (the 60 s timer
sits on a coarse level of the kernel's timer wheel and fires late), which
shows as a few TIME_WAIT sockets and failures more than predicted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kernel import TCP_TIMEWAIT_LEN_S, accept_queue_room

TIME_WAIT_S = float(TCP_TIMEWAIT_LEN_S)


def accept_queue_capacity(limit: int) -> int:
    """K for the model: limit + 1 queued (full means > limit) + 1 in service."""
    return accept_queue_room(limit) + 1


@dataclass(frozen=True)
class QueuePrediction:
    p_block: float  # probability an arrival finds the system full
    wait_s: float  # mean wait in queue of the arrivals that got in
    length: float  # mean number in system
    throughput: float  # accepted per second


def mm1k(lam: float, mu: float, k: int) -> QueuePrediction:
    """M/M/1/K in closed form (Kleinrock vol. 1, 3.6)."""
    if lam <= 0:
        return QueuePrediction(0.0, 0.0, 0.0, 0.0)
    if mu <= 0:
        return QueuePrediction(1.0, float("inf"), float(k), 0.0)
    rho = lam / mu
    n = np.arange(k + 1)
    # Work with rho^n normalised directly: stable for rho near 1 and rho >> 1.
    w = np.exp(n * np.log(rho) - (k * np.log(rho) if rho > 1 else 0.0))
    p = w / w.sum()
    p_block = float(p[-1])
    length = float((n * p).sum())
    throughput = lam * (1 - p_block)
    # Little: time in system of admitted arrivals, minus their mean service.
    wait = max(length / throughput - 1 / mu, 0.0) if throughput > 0 else float("inf")
    return QueuePrediction(p_block, wait, length, throughput)


def simulate(
    lam: float,
    k: int,
    service_mean_s: float,
    *,
    service: str = "exp",
    service_floor_s: float = 0.0,
    batch: int = 1,
    arrivals: str = "poisson",
    customers: int = 20000,
    seed: int = 1,
) -> QueuePrediction:
    """A single-server loss queue simulated with ciw.

    service: "exp" (exponential with mean service_mean_s - service_floor_s, plus
    the floor: the measured accept loop never takes less than its overhead) or
    "det" (always service_mean_s). batch > 1: arrivals come in groups of that
    size at rate lam / batch (bursts); arrivals "poisson" (exponential gaps
    between arrivals or groups) or "periodic" (groups exactly 1 / (lam / batch)
    apart, like the lab's bursts).
    """
    if lam <= 0:
        return QueuePrediction(0.0, 0.0, 0.0, 0.0)
    # Imported here: ciw (and networkx under it) costs 0.4 s to import, and a report whose
    # findings need no simulation should not pay it.
    import ciw

    if service == "det":
        svc = ciw.dists.Deterministic(value=service_mean_s)
    else:
        floor = min(max(service_floor_s, 0.0), service_mean_s * 0.999)
        svc = ciw.dists.Exponential(rate=1.0 / (service_mean_s - floor))
        if floor > 0:
            svc = ciw.dists.Deterministic(value=floor) + svc
    kwargs = {}
    if batch > 1:
        kwargs["batching_distributions"] = [ciw.dists.Deterministic(value=batch)]
    net = ciw.create_network(
        arrival_distributions=[
            ciw.dists.Deterministic(value=batch / lam)
            if arrivals == "periodic"
            else ciw.dists.Exponential(rate=lam / batch)
        ],
        service_distributions=[svc],
        number_of_servers=[1],
        queue_capacities=[k - 1],
        **kwargs,
    )
    ciw.seed(seed)
    sim = ciw.Simulation(net)
    horizon = customers / lam
    sim.simulate_until_max_time(horizon)
    recs = sim.get_all_records()
    served = [r for r in recs if r.record_type == "service"]
    rejected = sum(1 for r in recs if r.record_type == "rejection")
    total = len(served) + rejected
    if total == 0:
        return QueuePrediction(0.0, 0.0, 0.0, 0.0)
    wait = float(np.mean([r.waiting_time for r in served])) if served else float("inf")
    return QueuePrediction(rejected / total, wait, float("nan"), len(served) / horizon)


# --- TIME_WAIT -----------------------------------------------------------------


def tw_max_rate(ports: int) -> float:
    """New connections per second one client can open toward one endpoint without TIME_WAIT reuse."""
    return ports / TIME_WAIT_S


def tw_level(rate: float, t: float, ports: int) -> float:
    """TIME_WAIT sockets after t seconds of rate conn/s (each lives 60 s), capped by the ports."""
    return float(min(rate * min(t, TIME_WAIT_S), ports))


def tw_first_failure(rate: float, ports: int, load_s: float) -> float | None:
    """Seconds until the first EADDRNOTAVAIL, or None if the range outlasts the load."""
    t = ports / rate
    return t if t < load_s and t < TIME_WAIT_S else None


def tw_fail_fraction(rate: float, ports: int, load_s: float) -> float:
    """Share of attempts that fail over a load of load_s seconds at rate conn/s.

    Until the ports run out every attempt succeeds; after that ports come back
    60 s after they were taken, i.e. at the rate they were taken 60 s before:
    at most `rate` per second, and none in the first 60 s.
    """
    if rate <= 0 or load_s <= 0:
        return 0.0
    t_out = ports / rate
    if t_out >= load_s:
        return 0.0
    # Simulate per 10 ms: cheap and exact enough for the plots.
    dt = 0.01
    steps = int(np.ceil(load_s / dt))
    taken = np.zeros(steps)
    free = float(ports)
    failed = 0.0
    lag = round(TIME_WAIT_S / dt)
    for i in range(steps):
        if i >= lag:
            free += taken[i - lag]
        want = rate * dt
        got = min(want, free)
        taken[i] = got
        free -= got
        failed += want - got
    return float(failed / (rate * steps * dt))
