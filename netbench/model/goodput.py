"""Goodput under churn: committed steps per wall second while nodes leave and join, and the wall time to a budget.

Nodes churn as :func:`netbench.schedule.churn.draw` draws them: each takes part for an exponential time of mean
``mtbf_s``, leaves, and is back ``away_s`` later; a leave that would leave fewer than
:data:`~netbench.membership.MIN_MEMBERS` nodes is skipped. The replicator commits every ``period`` steps (a
window: ``full`` every step, DiLoCo every outer sync) and prices a leave and a join as torchft's fault-tolerant
workers meet them:

* a leave inside the window's *vulnerable* part (the whole step for ``full``, whose all-reduce needs every member;
  the outer sync's exchange for DiLoCo) fails the commit: the window so far is lost, and the next quorum waits
  ``quorum_wait_s`` for the node that left;
* a leave inside the window's *exchange* (its last part, the all-reduce itself) splits the nodes: torchft decides a
  commit per node, so the survivors that had received everything commit and the others, a step behind, are healed
  at the next quorum: the window counts, and everyone waits ``quorum_wait_s`` and then ``heal_s``;
* a leave before that part (DiLoCo's inner steps) costs only what is left of that wait when the window ends;
* a node that is back is healed at the next quorum (:mod:`netbench.model.heal`): everyone waits ``heal_s``; a
  member that leaves during the heal fails it at once (the others' transfers reset), the quorum waits
  ``quorum_wait_s`` again and the heal starts over;
* a member that leaves after it asked for a quorum and before the quorum forms, within the quorum's wait
  (the lighthouse still counts it: its heartbeat has not timed out), is listed in the new quorum, whose process group
  then waits for a member that will never answer: everyone waits out ``exchange_timeout_s`` (torchft's bound on a
  wait on peers, :func:`netbench.model.waits.exchange_timeout_s`). Members ask when their window ends or their
  collective fails; the survivors of a leave wait for the lighthouse to drop the node gone, a node back waits for
  the others' next window. A leave after the quorum formed costs no timeout: the configured process group resets
  at once;
* while ``k`` nodes are away the others train as an ``n - k``-node cluster at its step time; fewer than
  ``min_members`` form no quorum and train nothing;
* where every node that held the training has left, the nodes back have nobody to be healed from: at least
  ``min_members`` of them form a quorum at torchft's step 0 and train from the first weights at once, without a heal
  (a *restart*: its steps count as committed, as a run counts them, though they redo what was trained; the
  *progress kept*, the committed steps since the last restart, starts again from 0).

The wall time to a budget is to a budget of progress kept: :meth:`Goodput.wall_s_to_keep` takes the restarts as a
Poisson process of rate r (every node away at once comes at random times, independent of the progress) and no
checkpoint (a restart throws away everything the training holds); between restarts the training keeps g committed
steps per second, so holding N steps takes (e^(rN/g) - 1) / r on average (N / g where nothing restarts), a time that
grows exponentially once a budget takes longer than the mean time between restarts.

:func:`expected_goodput`, what ``plan --mtbf`` answers, steps the rules through seeded draws of the churn.
:func:`goodput` is their closed form: the number of nodes away follows the Engset distribution (independent nodes,
each away ``away_s`` after an exponential time up, capped where the draws skip a leave; the distribution does not
depend on how the time away is spread), each state's training rate is its step rate less the share of its time its
leaves cost, and the heals take their share of the wall clock; it falls about a fifth short where heals take
seconds, since the nodes back during a wait are healed together. :func:`simulate` steps the rules through one set of
changes: a run's own, or a draw's. :func:`run_goodput`, what ``plan --for`` answers, prices one run of a given length
that starts with every node present: the mean and spread of the rules over the draws ``--churn ...,for=,seed=``
makes for seeds 0, 1, ..., and one seed's draw.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from functools import cache
from itertools import takewhile
from typing import Protocol

from netbench.membership import DEFAULT_AWAY_S, MIN_MEMBERS, draw_changes
from netbench.settings import Setting, table

__all__ = [
    "CHURN_SETTINGS",
    "Change",
    "QUORUM_WAIT_S",
    "MIN_QUORUM",
    "MAX_PRICED_STATES",
    "OUT_OF_REACH",
    "Recovery",
    "Goodput",
    "StepAt",
    "window_shape",
    "away_distribution",
    "leave_cost_s",
    "goodput",
    "Simulated",
    "simulate",
    "expected_goodput",
    "RUN_DRAWS",
    "MIN_RUN_DRAWS",
    "MAX_RUN_CHANGES",
    "MAX_RUN_STEPS",
    "run_draws",
    "RunGoodput",
    "run_goodput",
]

QUORUM_WAIT_S = 1.0  # how long the survivors' next quorum waits for a node that left (the lighthouse's timeout)
MIN_QUORUM = 2  # the fewest nodes a quorum holds (torchft's min_replicas, as a fault-tolerant run sets it)
MAX_PRICED_STATES = 9  # member counts the step is priced at; the others are interpolated between them
NEGLIGIBLE = 1e-9  # states less likely than this are left out
DRAW_SEEDS = 4  # independent draws the expected goodput averages over
DRAWN_LEAVES = 2_000  # leaves over all the draws: the mean within a few percent of a long simulation
MIN_WINDOWS = 200  # each draw covers at least this many windows of the plain step
SIMULATED_GRID = 32  # member counts a simulation prices the step at, spread over the cluster
MAX_DRAWN = 4_000  # changes a draw may try on average: bounds the time a plan spends on it
RUN_DRAWS = 40  # seeded draws a run of a given length is priced over: its mean and its 10th-90th percentiles
MIN_RUN_DRAWS = 10  # the fewest draws that give a spread; a run too long for them is refused
MAX_RUN_CHANGES = 20_000  # changes all the draws of one run try, on average: bounds plan --for at any length
MAX_RUN_STEPS = 10**9  # a run's steps plan prices (after its churn they cost one jump of the simulation)
MAX_FAILED_HEALS = 0.95  # the share of heals a leave fails, capped: past it nothing heals and goodput is ~0 anyway
# a budget whose expected wall time under restarts is more than this many times its time without them is out of reach
# without a checkpoint: the training is lost and started afresh many times over before it holds the budget
OUT_OF_REACH = 1e3
MAX_EXPONENT = 700.0  # e^x past this overflows a float: the wall time is infinite


class Change(Protocol):
    """A membership change as a schedule holds it: at ``time_s`` node ``target`` leaves or joins (``member``)."""

    time_s: float
    target: str
    member: str | None


MAX_MTBF_S = 1e9  # a node that fails less often than every 30 years does not churn

# plan's churn: how often a node leaves and how long it stays away, as ``--churn`` draws them for a run
CHURN_SETTINGS = table(
    (
        Setting(
            "--mtbf",
            "mtbf",
            "time",
            "mean time between failures per node, e.g. 20s or 21600s: goodput (committed steps per wall second) and "
            "wall time to --tokens while nodes leave and join, for the replicators that train through churn (full, "
            "diloco).",
            range=(1.0, MAX_MTBF_S),
        ),
        Setting(
            "--away",
            "away",
            "time",
            "how long a node that left stays away before it joins again (with --mtbf).",
            default=DEFAULT_AWAY_S,
            range=(0.1, MAX_MTBF_S),
        ),
        Setting(
            "--for",
            "churn_for",
            "time",
            "how long a run lasts from its first measured step, every node present at its start, as --churn's for= "
            "(with --mtbf): goodput of that run, the mean and the 10th-90th percentiles over seeded draws of its "
            "length, beside the long-run figure.",
            range=(1.0, MAX_MTBF_S),
        ),
        Setting(
            "--seed",
            "churn_seed",
            "count",
            "the seed of the run's churn, as --churn's seed= (with --for): goodput over the very leaves and joins "
            "that run draws.",
            range=(0, 2**32 - 1),
        ),
        Setting(
            "--steps",
            "churn_steps",
            "count",
            "Measured optimizer steps of the run priced through churn (with --for), as run's --steps: it trains on "
            "after --for, every node present, until they commit, as run --churn ...,for=LEN --steps N does; its "
            "goodput is over that whole run.",
            range=(1, MAX_RUN_STEPS),
        ),
    )
)

# members -> (mean step time s, vulnerable seconds of a window, seconds of its exchange: the vulnerable part's end)
StepAt = Callable[[int], tuple[float, float, float]]


def window_shape(step_s: float, comm_s: float, period: int) -> tuple[float, float, float]:
    """A :data:`StepAt` answer from a step and its communication: a replicator that commits every step asks for its
    quorum as the step begins, so a leave anywhere in it fails every survivor's commit (the whole step vulnerable, no
    exchange to split in); one that commits every ``period`` steps is vulnerable in its sync's exchange, ``period``
    steps' communication, where a leave splits the survivors."""
    if period == 1:
        return step_s, step_s, 0.0
    exchange = period * comm_s
    return step_s, exchange, exchange


@dataclass(frozen=True)
class Recovery:
    """What a leave and a join cost the replicator: its commit period, its heal, the quorum's wait and minimum."""

    period: int = 1  # steps per commit
    heal_s: float = 0.0  # a heal: the whole quorum waits for it
    quorum_wait_s: float = QUORUM_WAIT_S
    min_members: int = MIN_QUORUM
    restart_s: float = 0.0  # a node back from away starts its program before it asks for a quorum
    exchange_timeout_s: float = 0.0  # a member gone while it asked for a quorum: the others wait this long on it
    # a re-formed quorum's new process group before its first window trains: its configuration and its first
    # collective on fresh connections (:func:`netbench.model.reform.reform_time_s`)
    reform_s: float = 0.0


@dataclass(frozen=True)
class Goodput:
    """The analytic answer: committed steps per wall second under churn and without, and what the churn costs."""

    steps_per_s: float
    plain_steps_per_s: float
    member_share: float  # committed steps weighted by the share of the nodes that took part (tokens per step)
    leaves_per_s: float
    mean_away: float  # nodes not training on average: away, or back and waiting for the next quorum
    stalled_share: float  # the share of the time too few nodes are there to form a quorum
    # how often every node holding the training is gone and the nodes back train afresh from the first weights (their
    # steps count as committed, as a run counts them, but redo what was trained: the progress kept starts again from
    # 0); 0 in the closed form, which leaves them out
    restarts_per_s: float = 0.0

    @property
    def ratio(self) -> float:
        """Goodput over the plain step rate."""
        return self.steps_per_s / self.plain_steps_per_s if self.plain_steps_per_s > 0 else 0.0

    def wall_s(self, steps: float) -> float:
        """Expected wall time to commit ``steps``, redone ones included (inf where nothing commits)."""
        return steps / self.steps_per_s if self.steps_per_s > 0 else math.inf

    def wall_s_to_keep(self, steps: float) -> float:
        """Expected wall time until the training holds ``steps`` committed since it last started afresh: restarts a
        Poisson process of rate r = ``restarts_per_s``, no checkpoint (each throws away all the training holds),
        g = ``steps_per_s`` committed between them: (e^(r steps / g) - 1) / r, steps / g where nothing restarts
        (inf where nothing commits or the time overflows)."""
        plain = self.wall_s(steps)
        rate = self.restarts_per_s
        if rate <= 0 or not math.isfinite(plain):
            return plain
        exponent = rate * plain
        return math.expm1(exponent) / rate if exponent < MAX_EXPONENT else math.inf

    def out_of_reach(self, steps: float) -> bool:
        """Whether holding ``steps`` takes more than :data:`OUT_OF_REACH` times committing them once: without a
        checkpoint the training is lost to a restart (every node away at once, about every 1 / ``restarts_per_s``
        seconds) far more often than it could hold them."""
        plain = self.wall_s(steps)
        return math.isfinite(plain) and self.wall_s_to_keep(steps) > OUT_OF_REACH * plain

    def steps_for_tokens(self, tokens: float, tokens_per_step: float) -> float:
        """Committed steps that train ``tokens`` when a step of every node trains ``tokens_per_step`` (a step of
        fewer nodes trains their share; inf where no step trains any)."""
        per_step = self.member_share * tokens_per_step
        return tokens / per_step if per_step > 0 else math.inf

    def wall_s_for_tokens(self, tokens: float, tokens_per_step: float) -> float:
        """Expected wall time until the training holds ``tokens`` (:meth:`wall_s_to_keep` of their steps)."""
        return self.wall_s_to_keep(self.steps_for_tokens(tokens, tokens_per_step))

    def as_dict(self) -> dict[str, float]:
        return {
            "steps_per_s": self.steps_per_s,
            "plain_steps_per_s": self.plain_steps_per_s,
            "ratio": self.ratio,
            "member_share": self.member_share,
            "leaves_per_s": self.leaves_per_s,
            "mean_away": self.mean_away,
            "stalled_share": self.stalled_share,
            "restarts_per_s": self.restarts_per_s,
        }


def away_distribution(nodes: int, mtbf_s: float, away_s: float) -> list[float]:
    """P(k nodes away) for k = 0 .. nodes - MIN_MEMBERS: Engset's, proportional to C(n, k) (away / mtbf)^k."""
    if nodes < 1 or mtbf_s <= 0 or away_s < 0:
        raise ValueError("churn needs nodes >= 1, mtbf > 0 and away >= 0")
    top = max(0, nodes - MIN_MEMBERS)
    if away_s == 0:
        return [1.0] + [0.0] * top
    log_rho = math.log(away_s / mtbf_s)
    logs = [
        math.lgamma(nodes + 1) - math.lgamma(k + 1) - math.lgamma(nodes - k + 1) + k * log_rho for k in range(top + 1)
    ]
    peak = max(logs)
    weights = [math.exp(x - peak) for x in logs]
    total = sum(weights)
    return [w / total for w in weights]


def leave_cost_s(
    window_s: float, vulnerable_s: float, wait_s: float, exchange_s: float = 0.0, heal_s: float = 0.0
) -> float:
    """Expected wall seconds one leave at a uniform time in a window costs: inside its exchange (the last
    ``exchange_s``) the quorum's wait and a heal of the survivors it left behind; inside the rest of the vulnerable
    part (its last ``vulnerable_s``) the window so far and the quorum's wait; before it, what is left of the wait
    when the window ends."""
    if window_s <= 0:
        return wait_s
    vulnerable = min(max(vulnerable_s, 0.0), window_s)
    exchange = min(max(exchange_s, 0.0), vulnerable)
    before = window_s - vulnerable
    failing = vulnerable - exchange
    lost_inside = before + failing / 2 + wait_s
    if before <= 0:
        stall_before = 0.0
    elif wait_s >= before:
        stall_before = wait_s - before / 2
    else:
        stall_before = wait_s * wait_s / (2 * before)
    split = exchange / window_s * (wait_s + heal_s)
    return failing / window_s * lost_inside + split + before / window_s * stall_before


def _priced(states: Sequence[int]) -> list[int]:
    """The member counts to price: all where few, else MAX_PRICED_STATES spread over them (ends included)."""
    if len(states) <= MAX_PRICED_STATES:
        return list(states)
    lo, hi = min(states), max(states)
    return sorted({round(lo + (hi - lo) * i / (MAX_PRICED_STATES - 1)) for i in range(MAX_PRICED_STATES)})


def _between(lo: tuple[float, float, float], hi: tuple[float, float, float], f: float) -> tuple[float, float, float]:
    """The step ``f`` of the way from one member count's (``lo``) to another's (``hi``)."""
    return tuple(a + f * (b - a) for a, b in zip(lo, hi))  # type: ignore[return-value]


def _interpolated(step_at: StepAt, members: Sequence[int]) -> dict[int, tuple[float, float, float]]:
    """``step_at`` at every count of ``members``: priced at a few, linear between them."""
    points = {m: step_at(m) for m in _priced(members)}
    known = sorted(points)
    out = {}
    for m in members:
        if m in points:
            out[m] = points[m]
            continue
        hi = next(k for k in known if k > m)
        lo = max(k for k in known if k < m)
        out[m] = _between(points[lo], points[hi], (m - lo) / (hi - lo))
    return out


def _members_away(nodes: int, mtbf_s: float, absent_s: float, wait_s: float, min_members: int) -> list[float]:
    """P(k nodes not training): away as drawn, or back and waiting ``wait_s`` (half a window) for the next quorum.
    Where too few train to form a quorum, a node back joins at once (the others wait in the quorum): those states
    keep the drawn odds, and the states that train share the rest in the odds of an absence ``wait_s`` longer."""
    drawn = away_distribution(nodes, mtbf_s, absent_s)
    waiting = away_distribution(nodes, mtbf_s, absent_s + wait_s)
    stalls = [k for k in range(len(drawn)) if nodes - k < min_members]
    trains = [k for k in range(len(drawn)) if nodes - k >= min_members]
    share = sum(waiting[k] for k in trains)
    scale = (1 - sum(drawn[k] for k in stalls)) / share if share > 0 else 0.0
    return [drawn[k] if k in stalls else waiting[k] * scale for k in range(len(drawn))]


def goodput(nodes: int, mtbf_s: float, away_s: float, step_at: StepAt, recovery: Recovery) -> Goodput:
    """Expected committed steps per wall second of ``nodes`` that churn with ``mtbf_s`` and ``away_s``, each member
    count's step from ``step_at``."""
    times = (
        recovery.heal_s, recovery.quorum_wait_s, recovery.restart_s, recovery.exchange_timeout_s, recovery.reform_s
    )  # fmt: skip
    if recovery.period < 1 or min(times) < 0:
        raise ValueError("a recovery needs period >= 1 and times >= 0")
    plain_s = step_at(nodes)[0]
    absent_s = away_s + recovery.restart_s
    pi = _members_away(nodes, mtbf_s, absent_s, recovery.period * plain_s / 2, recovery.min_members)
    likely = [k for k, p in enumerate(pi) if p > NEGLIGIBLE]
    quorate = [nodes - k for k in likely if nodes - k >= recovery.min_members]
    steps = _interpolated(step_at, sorted(set(quorate) | {nodes}))
    top = len(pi) - 1
    # a leave that would leave too few nodes is skipped
    leave_rates = {k: (nodes - k) / mtbf_s if k < top else 0.0 for k in likely}
    leaves = sum(pi[k] * leave_rates[k] for k in likely)

    # a member that leaves while it asks for a quorum being re-formed makes its process group wait out the timeout
    def stuck(askers_per_s: float, asking_s: float) -> float:
        return -math.expm1(-askers_per_s * min(asking_s, recovery.quorum_wait_s)) * recovery.exchange_timeout_s

    # a node back asks as it starts and waits for the others' next window (half of one on average); the quorum that
    # heals it is a new one, configured first
    heal_s = recovery.heal_s + recovery.reform_s + stuck(1.0 / mtbf_s, recovery.period * plain_s / 2)
    # a leave during a heal fails it at once (half of it on average), the quorum waits W, and the heal starts again
    # with every node back meanwhile: each heal costs its share of failed tries on top
    failed = min(-math.expm1(-leaves * recovery.heal_s), MAX_FAILED_HEALS)
    retry_s = recovery.heal_s / 2 + recovery.quorum_wait_s + recovery.reform_s + stuck(leaves, recovery.quorum_wait_s)
    retries_per_heal_s = failed / (1 - failed) * retry_s / heal_s if heal_s > 0 else 0.0
    rate = member_rate = stalled = heal_rate = 0.0
    for k in likely:
        p, m = pi[k], nodes - k
        leave_rate = leave_rates[k]
        join_rate = k / absent_s if absent_s > 0 else 0.0
        if m < recovery.min_members:
            stalled += p
            heal_rate += p * join_rate  # a node back is healed at once: the others wait in the quorum
            continue
        step_s, vulnerable_s, exchange_s = steps[m]
        window = recovery.period * step_s
        # the nodes back within one window are healed together at its end
        heal_rate += p * (-math.expm1(-join_rate * window) / window if window > 0 else join_rate)
        # a leave costs while it trains
        failing = min(max(vulnerable_s, 0.0), window) / window if window > 0 else 1.0  # re-forms the quorum at once
        wait_cost = leave_cost_s(window, vulnerable_s, recovery.quorum_wait_s, exchange_s, heal_s)
        # the survivors of a leave in the vulnerable part ask at once and wait for the lighthouse to drop the node;
        # every leave re-forms the quorum, whose new group is configured before it trains
        survivors_per_s = max(m - 1, 0) / mtbf_s
        lost = leave_rate * (wait_cost + recovery.reform_s + failing * stuck(survivors_per_s, recovery.quorum_wait_s))
        useful = p / (1.0 + lost) / step_s
        rate += useful
        member_rate += useful * m / nodes
    # nodes come back on the wall clock, training or not; a node back during a heal is healed right after it, so
    # heals come in busy runs of e^(x) heals on average (x: nodes back per heal time) and take x e^x / (1 + x e^x)
    # of the time
    busy = heal_rate * heal_s * math.exp(min(heal_rate * heal_s, 50.0))
    unhealing = 1.0 / (1.0 + busy * (1.0 + retries_per_heal_s))
    rate, member_rate = rate * unhealing, member_rate * unhealing
    return Goodput(
        steps_per_s=rate,
        plain_steps_per_s=1.0 / plain_s if plain_s > 0 else 0.0,
        member_share=member_rate / rate if rate > 0 else 0.0,
        leaves_per_s=leaves,
        mean_away=sum(k * p for k, p in enumerate(pi)),
        stalled_share=stalled,
    )


def _from(events: Sequence[Change], start: int) -> Iterator[Change]:
    """``events`` from index ``start`` on, without copying or walking the ones before."""
    return (events[i] for i in range(start, len(events)))


def _until(events: Sequence[Change], start: int, until: float) -> Iterator[Change]:
    """``events`` from index ``start`` up to time ``until``."""
    return takewhile(lambda e: e.time_s <= until, _from(events, start))


@dataclass(frozen=True)
class Simulated:
    """One timeline's outcome: windows committed and lost, and the steps they hold."""

    committed_steps: int
    member_steps: float  # committed steps weighted by the share of the nodes that trained them
    lost_windows: int
    heals: int
    horizon_s: float
    stuck: int = 0  # re-formations a leave made wait out the exchange timeout
    failed_heals: int = 0  # heals a member's leave failed (each started again at the next quorum)
    restarts: int = 0  # quorums of nodes back alone, every node that held the training gone: trained afresh, no heal
    kept_steps: int = 0  # the progress kept: steps committed since the training last started afresh (0 at a restart)

    @property
    def steps_per_s(self) -> float:
        return self.committed_steps / self.horizon_s

    @property
    def kept_steps_per_s(self) -> float:
        """The progress the training holds at the end per second: goodput less the steps restarts threw away."""
        return self.kept_steps / self.horizon_s


def simulate(
    changes: Sequence[Change],
    names: Sequence[str],
    horizon_s: float,
    step_at: StepAt,
    recovery: Recovery,
    steps: int | None = None,
) -> Simulated:
    """Train through ``changes`` (leaves and joins of ``names``, in time order) for ``horizon_s`` under the rules
    :func:`goodput` prices: window after window at the members' step, a leave in the vulnerable part losing the
    window (in its exchange: kept, the survivors behind healed), the quorum's wait, a heal for the nodes back, a
    quorum of nodes back alone (every node that held the training gone) training afresh without a heal.

    With ``steps``, train instead until that many steps are committed since the training last started afresh (a
    restart's quorum counts from 0, as a fresh torchft manager does), the changes over and every node back training
    on after the last of them, as ``run --churn ...,for=LEN --steps N`` does: the outcome's ``horizon_s`` is when
    the last of them commits (infinite where they never do), and its committed steps count every step trained;
    ``kept_steps`` counts those since the training last started afresh, what ``steps`` asks for."""
    end_s = math.inf if steps is not None else horizon_s
    finished = end_s
    progress = 0  # steps committed since the training last started afresh: the progress kept, what ``steps`` counts
    events = sorted((c for c in changes if c.member in ("leave", "join")), key=lambda c: c.time_s)
    nodes = len(names)
    away: set[str] = set()
    back: dict[str, float] = {}  # node -> when it asks for a quorum
    t, done = 0.0, 0
    committed, member_steps, lost, heals, stuck, failed_heals, restarts = 0, 0.0, 0, 0, 0, 0, 0

    asked_then_left: list[float] = []  # when nodes back, asking for a quorum, left before it formed

    def reformed(asked: float, formed: float) -> float:
        """When a quorum the members asked for at ``asked`` and formed at ``formed`` is configured and ready to train:
        its configuration after ``formed``, and the exchange timeout more where a member left in between, within the
        quorum's wait (a node back that left while it asked counts too)."""
        nonlocal stuck
        listed_from = max(asked, formed - recovery.quorum_wait_s)
        left_asking = [x for x in asked_then_left if x > formed - recovery.quorum_wait_s]
        asked_then_left.clear()
        for e in _from(events, done):
            if e.time_s > formed:
                break
            if e.member == "leave" and e.time_s > listed_from and e.target not in away and e.target not in back:
                left_asking.append(e.time_s)
        if left_asking:
            stuck += 1
            return formed + recovery.reform_s + recovery.exchange_timeout_s
        return formed + recovery.reform_s

    def apply_until(until: float) -> None:
        nonlocal done
        while done < len(events) and events[done].time_s <= until:
            change = events[done]
            if change.member == "leave":
                if back.pop(change.target, math.inf) <= change.time_s:
                    asked_then_left.append(change.time_s)
                away.add(change.target)
            elif change.target in away:
                back[change.target] = change.time_s + recovery.restart_s
            done += 1

    while t < end_s:
        apply_until(t)
        ready = [name for name, at in back.items() if at <= t]
        if ready and all(name in away or name in back for name in names):
            # every node that held the training is gone: nobody is ahead to heal from, so a quorum of the nodes back
            # trains from the first weights at once, and a node back alone waits for another
            if len(ready) < recovery.min_members:
                upcoming = [at for at in back.values() if at > t]
                t = min([events[done].time_s if done < len(events) else end_s, *upcoming])
                continue
            restarts += 1
            progress = 0
            for name in ready:
                away.discard(name)
                del back[name]
            t = reformed(t, t)
            apply_until(t)
            continue
        if ready or asked_then_left:  # the quorum re-forms with the nodes back (and any that left while asking)
            for name in ready:
                away.discard(name)
                del back[name]
            t = reformed(t, t)
            if ready:
                heals += 1
                healed = t + recovery.heal_s
                gone = next((e.time_s for e in _until(events, done, healed) if e.member == "leave"), None)
                if gone is None:
                    t = healed
                else:  # the heal fails at once: its nodes are healed again at the next quorum, which waits for W
                    failed_heals += 1
                    apply_until(gone)
                    for name in ready:
                        if name not in away:
                            back[name] = gone
                    t = reformed(gone, gone + recovery.quorum_wait_s)
                    continue
            apply_until(t)
        members = nodes - len(away)
        if members < recovery.min_members:
            upcoming = [at for at in back.values() if at > t]
            if done < len(events):
                upcoming.append(events[done].time_s)
            t = min(upcoming) if upcoming else end_s
            continue
        step_s, vulnerable_s, exchange_s = step_at(members)
        window = recovery.period * step_s
        # the windows that end before the next change and the next node back are alike: train through them at once
        next_at = min([events[done].time_s if done < len(events) else end_s, end_s, *back.values()])
        alike = int((next_at - t) // window) - 1 if window > 0 and next_at < math.inf else 0
        if steps is not None and window > 0:  # no further than the windows the steps still need
            needed = -(-(steps - progress) // recovery.period)
            alike = needed if next_at == math.inf else min(alike, needed)
        if alike > 0:
            committed += alike * recovery.period
            progress += alike * recovery.period
            member_steps += alike * recovery.period * members / nodes
            t += alike * window
            if steps is not None and progress >= steps:
                finished = t
                break
            continue
        end = t + window
        vulnerable_from = end - min(max(vulnerable_s, 0.0), window)
        exchange_from = end - min(max(exchange_s, 0.0), end - vulnerable_from)
        leaving = []
        for e in _from(events, done):
            if e.time_s >= end:
                break
            if e.member == "leave" and e.target not in away and e.target not in back:
                leaving.append(e.time_s)
        failed = [x for x in leaving if x >= vulnerable_from]
        if failed and failed[0] < exchange_from:
            lost += 1
            apply_until(failed[0])
            t = reformed(failed[0], failed[0] + recovery.quorum_wait_s)
            continue
        if failed:  # inside the exchange: some survivors commit, the others are healed at the next quorum
            if end > end_s:
                break
            committed += recovery.period
            progress += recovery.period
            member_steps += recovery.period * (members - len(leaving)) / nodes
            heals += 1
            if steps is not None and progress >= steps:
                finished = end
                break
            apply_until(leaving[0])
            t = reformed(leaving[0], max([end] + [x + recovery.quorum_wait_s for x in leaving])) + recovery.heal_s
            continue
        if end > end_s:
            break
        committed += recovery.period
        progress += recovery.period
        member_steps += recovery.period * (members - len(leaving)) / nodes
        if steps is not None and progress >= steps:
            finished = end
            break
        t = max([end] + [x + recovery.quorum_wait_s for x in leaving])
        if leaving:  # the members ask as the window ends and wait for the lighthouse to drop the nodes gone
            apply_until(leaving[0])
            t = reformed(end, t)
    return Simulated(committed, member_steps, lost, heals, finished, stuck, failed_heals, restarts, progress)


def _on_grid(step_at: StepAt, nodes: int) -> StepAt:
    """``step_at`` priced at the :data:`MAX_PRICED_STATES` largest counts (where a cluster spends most of its time,
    and where the analytic answer prices it too) and below them on a grid of at most :data:`SIMULATED_GRID` counts,
    linear between: a simulation meets many member counts, and each costs the planner a step."""
    spacing = max(1, math.ceil(nodes / SIMULATED_GRID))
    priced = cache(step_at)

    def at(members: int) -> tuple[float, float, float]:
        lo = nodes - math.ceil((nodes - members) / spacing) * spacing  # the grid counts down from the cluster's size
        hi = min(lo + spacing, nodes)
        if members > nodes - MAX_PRICED_STATES or lo < 1 or members in (lo, hi):
            return priced(members)
        return _between(priced(lo), priced(hi), (members - lo) / (hi - lo))

    return at


def expected_goodput(nodes: int, mtbf_s: float, away_s: float, step_at: StepAt, recovery: Recovery) -> Goodput:
    """:func:`goodput` with its committed steps per second (and their share of the members) from :func:`simulate`
    over :data:`DRAW_SEEDS` seeded draws of the churn, as ``--churn`` draws it: the rules exactly, where the analytic
    answer approximates how heals, their failures and the waits queue behind one another (it falls 20 % below the
    simulation where heals take seconds). Deterministic: the same seeds every time."""
    analytic = goodput(nodes, mtbf_s, away_s, step_at, recovery)
    step_at = _on_grid(step_at, nodes)
    window_s = recovery.period * step_at(nodes)[0]
    horizon_s = max(DRAWN_LEAVES / DRAW_SEEDS / max(analytic.leaves_per_s, NEGLIGIBLE), MIN_WINDOWS * window_s)
    drawn_per_s = 2 * nodes / (mtbf_s + away_s)  # leaves and joins the draws try, skipped ones included
    horizon_s = min(horizon_s, MAX_DRAWN / drawn_per_s)
    names = tuple(f"n{i}" for i in range(nodes))
    committed = member_steps = restarts = 0.0
    for seed in range(DRAW_SEEDS):
        drawn = draw_changes(names, mtbf_s, away_s, horizon_s, seed, max_changes=4 * MAX_DRAWN)
        found = simulate(drawn, names, horizon_s, step_at, recovery)
        committed += found.committed_steps
        member_steps += found.member_steps
        restarts += found.restarts
    return replace(
        analytic,
        steps_per_s=committed / (DRAW_SEEDS * horizon_s),
        member_share=member_steps / committed if committed > 0 else 0.0,
        restarts_per_s=restarts / (DRAW_SEEDS * horizon_s),
    )


def run_draws(nodes: int, mtbf_s: float, away_s: float, for_s: float) -> int:
    """How many seeded draws price a run of ``for_s``: :data:`RUN_DRAWS`, fewer where they would try more than
    :data:`MAX_RUN_CHANGES` changes in all (each node leaves and joins about once per ``mtbf_s + away_s``), and 0
    where even :data:`MIN_RUN_DRAWS` would (a run that long is the long-run figure's, :func:`expected_goodput`)."""
    per_draw = 2 * nodes * for_s / (mtbf_s + away_s)
    draws = min(RUN_DRAWS, int(MAX_RUN_CHANGES // max(per_draw, 1.0)))
    return draws if draws >= MIN_RUN_DRAWS else 0


@dataclass(frozen=True)
class RunGoodput:
    """Committed steps per second of one run of ``for_s`` through churn, every node present at its start: the mean
    over ``draws`` seeded draws, their standard deviation and 10th and 90th percentiles, and one seed's draw; with
    ``steps``, of a run that trains on with every node present after its churn until that many steps commit. Beside
    them the progress kept (the steps the training holds at the run's end per second): the draws' mean and the
    seed's."""

    for_s: float
    draws: int
    steps_per_s: float
    sd: float
    p10: float
    p90: float
    seed: int | None = None
    seed_steps_per_s: float | None = None
    steps: int | None = None
    kept_steps_per_s: float = 0.0  # the draws' mean progress kept: the steps each holds at its end per second
    seed_kept_steps_per_s: float | None = None

    def as_dict(self) -> dict[str, float | int]:
        """The fields, the seed's two left out where no seed was asked for."""
        return {name: value for name, value in asdict(self).items() if value is not None}


def run_goodput(
    nodes: int,
    mtbf_s: float,
    away_s: float,
    for_s: float,
    step_at: StepAt,
    recovery: Recovery,
    seed: int | None = None,
    steps: int | None = None,
) -> RunGoodput:
    """The rules (:func:`simulate`) over a run of ``for_s`` seconds from its first measured step, as ``--churn
    MTBF,away=,for=,seed=`` draws its changes: over seeds 0 .. :func:`run_draws` - 1 (the mean and the spread a run
    of that length has by chance alone; a short run reads above the long-run figure, since it starts with every
    node present) and, with ``seed``, that seed's draw (what that run should give). With ``steps``, the run goes on
    after its churn's ``for_s``, every node back and training, until ``steps`` are committed, as ``run --churn
    ...,for=LEN --steps N`` does (the churn's draws are those of ``for_s`` either way, so the cost is the same).
    ValueError where the run is too long to price in :data:`MAX_RUN_CHANGES` changes."""
    draws = run_draws(nodes, mtbf_s, away_s, for_s)
    if draws == 0:
        raise ValueError(
            f"a run of {for_s:g} s on {nodes} nodes draws too many changes to price (the long-run figure's)"
        )
    step_at = _on_grid(step_at, nodes)
    names = tuple(f"n{i}" for i in range(nodes))
    bound = 4 * MAX_RUN_CHANGES // draws + 100  # a draw of many times its expected changes does not occur

    def rate(s: int) -> tuple[float, float]:
        drawn = draw_changes(names, mtbf_s, away_s, for_s, s, max_changes=bound)
        found = simulate(drawn, names, for_s, step_at, recovery, steps=steps)
        return found.steps_per_s, found.kept_steps_per_s

    both = [rate(s) for s in range(draws)]
    rates = [r for r, _ in both]
    deciles = statistics.quantiles(rates, n=10, method="inclusive")
    chosen = None if seed is None else (both[seed] if seed < draws else rate(seed))
    return RunGoodput(
        for_s=for_s,
        draws=draws,
        steps_per_s=statistics.fmean(rates),
        sd=statistics.stdev(rates),
        p10=deciles[0],
        p90=deciles[-1],
        seed=seed,
        seed_steps_per_s=None if chosen is None else chosen[0],
        steps=steps,
        kept_steps_per_s=statistics.fmean(k for _, k in both),
        seed_kept_steps_per_s=None if chosen is None else chosen[1],
    )
