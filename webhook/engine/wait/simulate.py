"""The band with gangs ahead or later arrivals: the reservation sweep replayed on joint draws.

Owns ``simulate``: S joint draws (``LifetimeModel.samples``, fewer on large pools: at most
2^18 node-draws, at least 64) of every running group's end (its conditional law given its
age, stratified per group), of every gang ahead's run time (its law at age 0) and of a
Poisson stream of later higher-priority arrivals (``arrival_stream``: the rate
``RuntimeHistory`` observed over ``LifetimeModel.arrival_window_s``, sizes, queues and limits
bootstrapped from the gangs observed). Per draw the sweep of ``sweep`` runs on the drawn
ends: gangs ahead reserve whole nodes in queue order and hold them for their run time;
arrivals of higher priority pass ours and the gangs ahead whose priority is at most ours
(FIFO with priority). The answer is our start per draw; ``band.quantiles`` turns it into
p50/p90. A fixed seed (``_SEED``) makes the answer a function of the inputs.

The steps: ``_group_ends`` (the draws of the running groups), ``_Nodes`` (per draw when each
pool node is fully free, the reservations on it, and our start), ``_Arrivals`` (the stream,
drawn lazily in blocks), ``_queue_items`` (the gangs ahead and ours, in order) and
``_replay`` (the queue played out). Cost: draws × pool nodes, never the pods the gang
states.

Units: seconds from now; arrays are (S,) per draw or (S, P) per draw and pool node.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..model import GangRequest
from ..snapshot import ClusterSnapshot
from .ahead import AheadGang
from .history import RuntimeHistory
from .inputs import device_resources, main_pod_set, median_per_node
from .laws import Law, LifetimeModel
from .learn import law_for
from .pool import Group, PoolNode

__all__ = ["Stream", "arrival_stream", "stratified", "simulate"]

#: Seed of the joint draws: the same inputs give the same estimate.
_SEED = 0x6A7C5EED


@dataclass
class Stream:
    """Later higher-priority arrivals: a Poisson stream of ``rate`` gangs per second, each a
    bootstrap draw of an observed one (``nodes`` whole nodes of our pool, run-time law
    ``laws[law_idx]``)."""

    rate: float
    nodes: np.ndarray
    law_idx: np.ndarray
    laws: list


def arrival_stream(snap: ClusterSnapshot, gang: GangRequest, history: RuntimeHistory, model: LifetimeModel,
                   now: float, priority: int, eligible: np.ndarray, memo: dict) -> Stream | None:
    """The stream of gangs of priority above ``priority`` asking for the main pod set's device,
    as observed over ``model.arrival_window_s`` (None when observed for less than
    ``model.min_arrival_span_s``, or none arrived). Each takes ⌈pods ÷ pods-per-empty-node⌉
    eligible whole nodes, as in ``gangs_ahead``; gangs that fit on none never compete."""
    span, arrivals = history.arrivals(now, model.arrival_window_s)
    if span < model.min_arrival_span_s or not arrivals:
        return None
    ps, _ = main_pod_set(gang)
    devs = device_resources(ps)
    alloc = snap.alloc[eligible]
    per_of: dict[tuple, int] = {}
    nodes: list[int] = []
    law_idx: list[int] = []
    laws: list[Law] = []
    pos: dict[int, int] = {}
    for a in arrivals:
        if a.priority <= priority or a.gang == gang.key:
            continue
        if devs and not any(a.requests.get(r, 0) for r in devs):
            continue
        rk = tuple(sorted(a.requests.items()))
        per = per_of.get(rk)
        if per is None:
            per = per_of[rk] = median_per_node(snap, alloc, a.requests)
        if per == 0:
            continue
        law = law_for(history, model, a.queue, a.owner_kind, a.limit_s, memo)
        j = pos.setdefault(id(law), len(laws))
        if j == len(laws):
            laws.append(law)
        nodes.append(-(-a.pods // per))
        law_idx.append(j)
    if not nodes:
        return None
    return Stream(len(nodes) / span, np.array(nodes, dtype=np.int64), np.array(law_idx, dtype=np.int64), laws)


def stratified(rng: np.random.Generator, n: int) -> np.ndarray:
    """n uniforms, one in each of n equal strata, in random order."""
    return (rng.permutation(n) + rng.random(n)) / n


def simulate(groups: list[Group], pool: list[PoolNode], ahead: Sequence[AheadGang], ahead_laws: list[Law],
             stream: Stream | None, priority: int | None, need: int, horizon_s: float,
             model: LifetimeModel) -> np.ndarray:
    """Our start (s from now, inf beyond the horizon) in each of S joint draws of every end.

    Per draw: running groups end at a draw of their conditional law; each pool node frees its
    capacity levels as its chain of groups ends and is *fully* free when the last one has; in
    queue order each gang ahead takes the ``nodes`` fully-free-earliest nodes (not before the
    gang before it started: FIFO) and gives them back a run time later (its law at age 0);
    ours starts when the capacity of the nodes not taken plus the nodes given back covers its
    ``need`` pods. Later higher-priority arrivals (``stream``) come as a Poisson process and
    take nodes the same way, ahead of every not-yet-started gang they pass (ours, and gangs
    ahead whose priority is at most ``priority``). Draw order from the seeded generator: the
    groups' ends, then the gangs ahead's run times, then the arrivals as needed."""
    P = len(pool)
    S = int(max(64, min(model.samples, (1 << 18) // max(1, P))))
    if P == 0:                                 # no eligible node can ever hold a pod of ours
        return np.full(S, math.inf)
    rng = np.random.default_rng(_SEED)
    nodes = _Nodes(pool, _group_ends(groups, rng, S), need)
    items = _queue_items(ahead, ahead_laws, stream, priority, rng, S)
    arrivals = _Arrivals(stream, rng, S) if stream is not None else None
    return _replay(items, nodes, arrivals, horizon_s)


def _group_ends(groups: Sequence[Group], rng: np.random.Generator, S: int) -> np.ndarray:
    """(S, groups + 1): each group's remaining run time (s) in each draw, from its law given
    its age (stratified uniforms, two per draw); the last column "no group" ends at 0."""
    G = np.zeros((S, len(groups) + 1))
    for j, g in enumerate(groups):
        G[:, j] = g.law.sample(g.age, stratified(rng, S), stratified(rng, S))
    return G


def _queue_items(ahead: Sequence[AheadGang], ahead_laws: Sequence[Law], stream: Stream | None,
                 priority: int | None, rng: np.random.Generator, S: int) -> list[tuple]:
    """The gangs that start, in queue order: (whole nodes, run time per draw (s), whether later
    arrivals pass it) for each gang ahead — passed only when its priority is known and at most
    ``priority`` — then ours as (0, None, whether arrivals are modelled)."""
    items = [(a.nodes, law.sample(0.0, stratified(rng, S), stratified(rng, S)),
              stream is not None and a.priority is not None and priority is not None and a.priority <= priority)
             for a, law in zip(ahead, ahead_laws)]
    items.append((0, None, stream is not None))
    return items


class _Nodes:
    """The pool's P nodes in S draws: when each is fully free (``avail``, (S, P) seconds),
    which were taken by a reservation (``touched``), when the last gang to start did
    (``prev``, (S,)), and our start given all that.

    The common case — every node frees all it can hold at once, and all hold the same number
    of our pods (whole-node pods on one node type), ``uniform`` — needs no node identities:
    each draw's free times are kept sorted, a reservation takes the first ``n`` and puts their
    return time back, and ours starts at the ⌈need ÷ c⌉-th. Otherwise each node's capacity
    events (its chain's prefix ends, ``times``, adding ``inc``) are kept for our start."""

    def __init__(self, pool: Sequence[PoolNode], G: np.ndarray, need: int) -> None:
        P = len(pool)
        S = G.shape[0]
        ng = G.shape[1] - 1
        self.P, self.S, self.need = P, S, need
        lmax = max([len(ch) for ch, *_ in pool] + [1])
        chains = np.full((P, lmax), ng, dtype=np.int64)
        full = np.empty(P, dtype=np.int64)
        last_pos = np.full(P, -1, dtype=np.int64)
        ev_k: list[int] = []
        ev_pos: list[int] = []
        ev_inc: list[int] = []
        for k, (chain, steps, c0, f, _) in enumerate(pool):
            chains[k, :len(chain)] = chain
            full[k] = f
            if c0:
                ev_k.append(k)
                ev_pos.append(-1)
                ev_inc.append(c0)
            level = c0
            for length, c in steps:
                ev_k.append(k)
                ev_pos.append(length - 1)
                ev_inc.append(c - level)
                level = c
            if steps:
                last_pos[k] = steps[-1][0] - 1
        ends = np.maximum.accumulate(G[:, chains], axis=2)      # (S, P, lmax): chain prefix ends
        self.ek = np.array(ev_k, dtype=np.int64)
        ep = np.array(ev_pos, dtype=np.int64)
        self.inc = np.concatenate([np.array(ev_inc, dtype=np.int64), full])
        self.times = np.where(ep >= 0, ends[:, self.ek, np.maximum(ep, 0)], 0.0)                   # (S, E)
        avail = np.where(last_pos >= 0, ends[:, np.arange(P), np.maximum(last_pos, 0)], 0.0)     # (S, P)
        del ends
        self.ar = np.arange(S)
        self.cols = np.broadcast_to(np.arange(P), (S, P))
        self.touched = np.zeros((S, P), dtype=bool)
        self.prev = np.zeros(S)
        self.uniform = P > 0 and len(set(full.tolist())) == 1 and all(
            (not steps and c0 == f) or (c0 == 0 and len(steps) == 1) for _, steps, c0, f, _ in pool)
        if self.uniform:
            avail = np.sort(avail, axis=1)                 # a fresh array: sorted in place below
            self.need_nodes = -(-need // int(full[0]))
        self.avail = avail

    def kth_free(self, n: int) -> np.ndarray:
        """When the n-th fully free node is free (per draw); n ≤ P."""
        return self.avail[:, n - 1] if self.uniform else np.partition(self.avail, n - 1, axis=1)[:, n - 1]

    def reserve(self, sizes: np.ndarray, start_min: np.ndarray, runs: np.ndarray, mask: np.ndarray) -> None:
        """Draws in ``mask``: a gang of ``sizes`` whole nodes starts at the later of
        ``start_min`` and its nodes being free, and holds them for ``runs``. Its nodes are the
        ``sizes`` free earliest, ties to the first in pool order (the stable sort), as in
        ``sweep.first_free``."""
        P, ar, cols = self.P, self.ar, self.cols
        fit = sizes <= P                       # a gang larger than the pool does not take it
        n = np.clip(sizes, 1, P)
        if self.uniform:
            kth = self.avail[ar, n - 1]
        else:
            order = np.argsort(self.avail, axis=1, kind="stable")
            kth = np.take_along_axis(self.avail, order, axis=1)[ar, n - 1]
        st = np.where(fit, np.maximum(start_min, kth), start_min)
        rows = mask & fit
        back = st + runs
        if self.uniform:
            # The first n free times are taken; their return time goes back in, rows re-sorted.
            n0 = int(n[0])
            if rows.all() and (n == n0).all():
                self.avail[:, :n0] = back[:, None]
            else:
                self.avail = np.where((cols < n[:, None]) & rows[:, None], back[:, None], self.avail)
            self.avail.sort(axis=1)
        else:
            rank = np.empty_like(order)
            np.put_along_axis(rank, order, cols, axis=1)
            sel = (rank < n[:, None]) & rows[:, None]
            self.avail = np.where(sel, back[:, None], self.avail)
            self.touched |= sel
        self.prev = np.where(mask, st, self.prev)

    def our_start(self) -> np.ndarray:
        """When the capacity of the nodes not taken plus the nodes given back covers our pods,
        and not before the last gang to start (per draw; inf when never)."""
        if self.uniform:
            t = self.avail[:, self.need_nodes - 1] if self.need_nodes <= self.P else np.full(self.S, math.inf)
            return np.maximum(t, self.prev)
        ar = self.ar
        t = np.concatenate([np.where(self.touched[:, self.ek], math.inf, self.times),
                            np.where(self.touched, self.avail, math.inf)], axis=1)
        order = np.argsort(t, axis=1, kind="stable")
        ok = np.cumsum(self.inc[order], axis=1) >= self.need
        idx = ok.argmax(axis=1)
        first = np.take_along_axis(t, order[ar, idx][:, None], axis=1)[:, 0]
        return np.maximum(np.where(ok[ar, idx], first, math.inf), self.prev)


class _Arrivals:
    """The later arrivals of ``stream`` in S draws, drawn lazily in blocks: arrival times
    (``tau``, (S, K) seconds from now), their whole nodes (``nodes``) and run times (``runs``),
    and per draw the next one not yet placed (``next``)."""

    def __init__(self, stream: Stream, rng: np.random.Generator, S: int) -> None:
        self.stream, self.rng, self.S = stream, rng, S
        self.tau = np.empty((S, 0))
        self.nodes = np.empty((S, 0), dtype=np.int64)
        self.runs = np.empty((S, 0))
        self.next = np.zeros(S, dtype=np.int64)
        self.ar = np.arange(S)

    def more(self, n: int = 16) -> None:
        """Draw ``n`` more arrivals per draw: exponential gaps at the stream's rate, each a
        bootstrap pick of an observed gang with a run time from its law at age 0."""
        stream, rng, S = self.stream, self.rng, self.S
        last = self.tau[:, -1] if self.tau.shape[1] else np.zeros(S)
        t_new = last[:, None] + np.cumsum(rng.exponential(1.0 / stream.rate, size=(S, n)), axis=1)
        pick = rng.integers(0, len(stream.nodes), size=(S, n))
        li = stream.law_idx[pick]
        r_new = np.empty((S, n))
        for j, law in enumerate(stream.laws):
            m = li == j
            c = int(m.sum())
            if c:
                r_new[m] = law.sample(0.0, rng.random(c), rng.random(c))
        self.tau = np.concatenate([self.tau, t_new], axis=1)
        self.nodes = np.concatenate([self.nodes, stream.nodes[pick]], axis=1)
        self.runs = np.concatenate([self.runs, r_new], axis=1)

    def upcoming(self, pending: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(index, time) of each draw's next arrival, drawing more until every ``pending`` draw
        has one."""
        while (pending & (self.next >= self.tau.shape[1])).any():
            self.more()
        k = np.minimum(self.next, self.tau.shape[1] - 1)
        return k, self.tau[self.ar, k]


def _replay(items: list[tuple], nodes: _Nodes, arrivals: _Arrivals | None, horizon_s: float) -> np.ndarray:
    """Play the queue out in every draw: each item (``_queue_items``) starts when it can — a
    gang ahead when its nodes are free, ours when ``nodes.our_start`` says — unless the next
    later arrival comes first and passes it (then that arrival takes its nodes and the item
    tries again); a draw whose next start is past ``horizon_s`` stops (ours: inf there)."""
    S, P, ar = nodes.S, nodes.P, nodes.ar
    result = np.full(S, math.inf)
    done = np.zeros(S, dtype=bool)             # our start is past the horizon already
    for n_a, runs_a, passable in items:
        pending = ~done
        while pending.any():
            if runs_a is None:
                sc = nodes.our_start()
            elif n_a <= P:
                sc = np.maximum(nodes.prev, nodes.kth_free(n_a))
            else:
                sc = nodes.prev.copy()
            over = pending & (sc > horizon_s)
            done |= over
            pending &= ~over
            jump = np.zeros(S, dtype=bool)
            if passable and pending.any():
                k, tk = arrivals.upcoming(pending)
                jump = pending & (tk < sc)
                if jump.any():
                    nodes.reserve(arrivals.nodes[ar, k], np.maximum(nodes.prev, tk), arrivals.runs[ar, k], jump)
                    arrivals.next = arrivals.next + jump
            go = pending & ~jump
            if go.any():
                if runs_a is None:
                    result = np.where(go, sc, result)
                else:
                    nodes.reserve(np.full(S, n_a, dtype=np.int64), nodes.prev, runs_a, go)
            pending &= ~go
    return result
