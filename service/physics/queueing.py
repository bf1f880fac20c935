"""Waiting in line: the latency a request sees when requests arrive at random (Poisson) and each takes a fixed time
on one of `servers` identical workers fed from one queue (a job queue in front of image or video pipelines).

Pure functions over numbers. The chance of waiting is Erlang C (M/M/c); a wait, given one, is taken as exponential
with mean `service / (servers x (1 - load))` scaled by the Allen-Cunneen factor (1 + cs^2) / 2 for the service
time's squared coefficient of variation cs^2 (0 for a fixed number of denoising steps, which halves the M/M/c
wait). So the p-quantile of the wait is 0 when the chance of waiting is below 1 - p, else
mean x ln(P(wait) / (1 - p)); the quantile of the latency adds the service time itself.
"""

from __future__ import annotations

import math


def erlang_c(servers: int, offered: float) -> float:
    """P(a request waits) in M/M/c with `servers` workers and `offered` = arrival rate x service time (Erlangs).
    1.0 when the workers cannot keep up (offered >= servers). Erlang B by its recurrence, then C from B: exact for
    any number of servers without factorials."""
    c = max(1, int(servers))
    if offered <= 0:
        return 0.0
    if offered >= c:
        return 1.0
    b = 1.0
    for k in range(1, c + 1):
        b = offered * b / (k + offered * b)
    load = offered / c
    return b / (1 - load * (1 - b))


def latency_quantile_s(service_s: float, arrivals_per_s: float, servers: int, quantile: float = 0.95,
                       service_cv2: float = 0.0) -> float:
    """The `quantile` of the time from arrival to done, in seconds: the service time plus the wait in line at
    `arrivals_per_s` over `servers` workers. math.inf when they cannot keep up."""
    if service_s <= 0:
        return 0.0
    c = max(1, int(servers))
    offered = arrivals_per_s * service_s
    if offered <= 0:
        return service_s
    if offered >= c:
        return math.inf
    tail = 1 - quantile
    waits = erlang_c(c, offered)
    if waits <= tail:
        return service_s
    mean_wait_given_one = service_s / (c * (1 - offered / c)) * (1 + service_cv2) / 2
    return service_s + mean_wait_given_one * math.log(waits / tail)


def closed_loop_wait_s(clients: int, slots: int, cycle_s: float) -> float:
    """What each of `clients` closed-loop clients (each sends its next request when the last one ends) waits for a
    slot when the engine runs at most `slots` requests at once, each for `cycle_s` (first token and decode): by
    Little's law the engine completes slots / cycle_s requests a second, so a client's round trip is
    clients / that, of which cycle_s is service and the rest waiting. 0 when every client has a slot."""
    k = max(1, int(slots))
    if clients <= k or cycle_s <= 0:
        return 0.0
    return cycle_s * (clients / k - 1)
