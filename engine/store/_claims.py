"""Claims: the claim variant of a draw, claim sessions and the completing claim (§4.13-§4.14).

Every draw is screened (``screen_plan``): a task whose payload or metadata
cannot be decoded is failed, never handed out.
"""

from __future__ import annotations

import abc
import asyncio
import builtins
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from engine import _rules
from engine._errors import LostLease, UnsupportedBackend
from engine._models import (
    Task,
)
from engine.store._owned_writes import OwnedWriteStore
from engine.store._rows import encode_error, undecodable, undecodable_error
from engine.store._signals import Claimer

T = TypeVar("T")

#: ``draw(names, limit)`` inside a claim session: one claim statement in the
#: session's transaction. ``names=None`` draws any name.
Draw = Callable[[Sequence[str] | None, int], Awaitable[list[Task]]]


#: A claim plan: called once with ``draw``, inside the session's transaction.
Plan = Callable[[Draw], Awaitable[T]]


@dataclass(frozen=True, slots=True)
class ClaimArgs:
    """A claim's validated arguments."""

    queues: list[str]
    worker_id: str
    lease_ms: int
    names: list[str] | None


def claim_variant(queues: Sequence[str], names: Sequence[str] | None) -> tuple[str, dict[str, Any]]:
    """The claim statement for these filters and its list/equality parameters (§4.13).

    One queue or one name binds an equality (``queue``/``name``) so the indexes
    stay usable; otherwise the list (``queues``/``names``, None = any name).
    The dialect encodes the lists as it binds them.
    """
    params: dict[str, Any] = {}
    one_queue = len(queues) == 1
    one_name = names is not None and len(names) == 1
    if one_queue:
        params["queue"] = queues[0]
    else:
        params["queues"] = list(queues)
    if one_name:
        assert names is not None
        params["name"] = names[0]
    else:
        params["names"] = None if names is None else list(names)
    variant = "claim" + ("_one_queue" if one_queue else "") + ("_one_name" if one_name else "")
    return variant, params


@dataclass(frozen=True, slots=True)
class OwnedSettle:
    """One owned task's settlement, encoded and ready to ride a completing claim.

    Made by ``ClaimStore.owned_complete`` / ``owned_fail`` (which check and
    encode the value, so a bad one fails its own caller before anything is
    grouped) and written by ``claim_session_completing`` (``settles``) or alone
    by ``ClaimStore.settle_alone``.
    """

    #: The statement: ``complete`` (with a result) or ``fail``.
    kind: Literal["complete", "fail"]
    task_id: str
    worker_id: str
    #: ``complete``: the result's JSON or None; ``fail``: the error envelope's JSON.
    value_json: str | None
    retryable: bool = False
    delay_ms: int = 0


#: What became of one ``OwnedSettle``: the row written, None for a lost lease,
#: or the error its own write raised.
SettleOutcome = Task | None | Exception


@dataclass(slots=True)
class CompletingClaim(Generic[T]):
    """What a store's ``claim_session_completing`` did (stores declaring ``completing_claim``)."""

    #: The ids completed; an id asked for but missing had lost its lease.
    settled: set[str]
    #: The plan's value; None if the probe found nothing or the claim failed.
    value: T | None
    #: Why the claim part failed (the completions were then written alone).
    claim_error: Exception | None
    recovered: list[Task] = field(default_factory=list)
    #: Per task id of the ``settles`` given: what became of it.
    written: dict[str, SettleOutcome] = field(default_factory=dict)


def screen_plan(plan: Plan[T], *, top_up: bool) -> tuple[Plan[T], builtins.list[Task]]:
    """``plan`` with every draw screened: undecodable tasks are set aside, not handed on.

    Returns the screened plan and the list it fills with the tasks set aside
    (claimed by the session: the caller fails them once it is over). With
    ``top_up`` a draw that set some aside draws again for the shortfall in the
    same transaction, so the plan sees the draw it asked for (a plan that
    promised a single draw cannot, and gets a short one).
    """
    set_aside: builtins.list[Task] = []

    async def screened(draw: Draw) -> T:
        async def screened_draw(names: Sequence[str] | None, limit: int) -> builtins.list[Task]:
            kept: builtins.list[Task] = []
            wanted = limit
            while True:
                rows = await draw(names, wanted)
                bad = [task for task in rows if undecodable(task)]
                kept += [task for task in rows if not undecodable(task)] if bad else rows
                set_aside.extend(bad)
                if not bad or not top_up or len(rows) < wanted:
                    return kept
                wanted = len(bad)

        return await plan(screened_draw)

    return screened, set_aside


class ClaimStore(OwnedWriteStore):
    """Claims, claim sessions, and the completing claim orchestrated above the dialects."""

    # -- claims ----------------------------------------------------------------

    async def claim(
        self,
        *,
        queues: Sequence[str],
        worker_id: str,
        lease_ms: int = 30_000,
        limit: int = 1,
        names: Sequence[str] | None = None,
    ) -> builtins.list[Task]:
        """A claim session with one draw (§4.14); empty if nothing is claimable.

        Raises:
            ValueError: bad queues, names, worker id, ``lease_ms`` or a negative
                ``limit`` (``limit=0`` claims nothing).
        """
        _rules.integer(limit, "limit", minimum=0)

        async def plan(draw: Draw) -> builtins.list[Task]:
            return await draw(names, limit)

        result = await self.claim_session(
            queues=queues, worker_id=worker_id, lease_ms=lease_ms, names=names, plan=plan
        )
        return result if result is not None else []

    async def claim_session(
        self,
        *,
        queues: Sequence[str],
        worker_id: str,
        lease_ms: int = 30_000,
        names: Sequence[str] | None,
        plan: Plan[T],
        signalled: bool = False,
        single_draw: bool = False,
        claimer: Claimer | None = None,
    ) -> T | None:
        """Probe, then one transaction: recover expired leases, run ``plan(draw)``.

        ``signalled``: the caller was just woken by a claimable signal for these
        queues (``claim_wake`` returned True), so the probe would most likely
        say yes. A store whose probe costs about what the transaction costs
        (Postgres: a round trip and the planning of a large statement) then
        opens the transaction at once: the probe only ever spares a
        transaction, and one that finds nothing locks no row and writes
        nothing. SQLite probes all the same (a read of microseconds, and its
        wakes include every commit on the file).

        ``single_draw``: the plan draws at most once; Postgres then sends the
        COMMIT with that draw's statement (one round trip for the whole
        transaction; a second draw raises ``RuntimeError``, and a draw that
        set undecodable rows aside is not topped up).

        ``claimer``: who looks (``Claimer``): signals before this call are seen
        by its next ``claim_wake``; a worker passes its own to both.

        Returns the plan's value, or None when the probe found nothing to do (the
        plan is then not called and no transaction is opened).
        """
        args = self._check_claim(queues, worker_id, lease_ms, names)
        self.signals.claiming(args.queues, claimer)
        if args.names == []:
            return None
        one_trip = single_draw and self.capabilities.single_draw_commits
        probe = not (signalled and self.capabilities.signalled_claims_skip_probe)
        screened, set_aside = screen_plan(plan, top_up=not one_trip)
        primitive = self._claim_session_one_draw if one_trip else self._claim_session
        try:
            session = await primitive(args, screened, probe=probe)
        finally:
            await self._fail_undecodable(set_aside)
        if session is None:
            return None
        value, recovered = session
        # Committed; now the signals: recovery requeued or ended these rows.
        for task in recovered:
            self._after_write(task)
        return value

    def _check_claim(self, queues: Any, worker_id: Any, lease_ms: Any, names: Any) -> ClaimArgs:
        """A claim's arguments checked by the shared rules (ValueError otherwise)."""
        nul = self.text_refuses_nul
        return ClaimArgs(
            queues=_rules.queues(queues, refuses_nul=nul),
            worker_id=self._text(worker_id, "worker_id"),
            lease_ms=_rules.duration_ms(lease_ms, "lease_ms", minimum=1),
            names=_rules.names(names, refuses_nul=nul),
        )

    def _draw_variant(
        self, queues: builtins.list[str], names: Any, limit: Any
    ) -> tuple[str, dict[str, Any]] | None:
        """One draw's claim variant and parameters (§4.13); None = no statement to run.

        Raises:
            ValueError: bad names or a negative ``limit``.
        """
        wanted = _rules.names(names, refuses_nul=self.text_refuses_nul)
        _rules.integer(limit, "limit", minimum=0)
        if limit == 0 or wanted == []:
            return None
        variant, params = claim_variant(queues, wanted)
        params["limit"] = limit
        return variant, params

    @abc.abstractmethod
    async def _claim_session(
        self, args: ClaimArgs, plan: Plan[T], *, probe: bool
    ) -> tuple[T, builtins.list[Task]] | None:
        """The probe (when ``probe``), then the dialect's transaction: recover
        leases, run ``plan``, COMMIT.

        Each draw validates ``limit`` (<= 0 or [] → no statement). Returns the
        plan's value and the rows lease recovery touched (the caller signals
        them), or None when the probe found nothing.
        """

    async def _claim_session_one_draw(
        self, args: ClaimArgs, plan: Plan[T], *, probe: bool
    ) -> tuple[T, builtins.list[Task]] | None:
        """``_claim_session`` for a plan that draws once, its COMMIT sent with
        the draw. Stores declaring ``capabilities.single_draw_commits`` only.
        """
        raise UnsupportedBackend(f"{self.dialect} sends no COMMIT with a draw")

    async def _fail_undecodable(self, tasks: builtins.list[Task]) -> None:
        """Fail, once and for good, claimed tasks whose payload or metadata cannot be decoded.

        A claim never hands such a task to its caller: no handler could read
        it, and left queued it would be drawn again by every claim. Best
        effort: a row whose failure cannot be written now stays running under
        the claim's lease and comes back through lease recovery.
        """
        if not tasks:
            return
        await asyncio.gather(
            *(
                self.fail(
                    task_id=task.id,
                    worker_id=str(task.worker_id),
                    error=undecodable_error(task),
                    retryable=False,
                )
                for task in tasks
            ),
            return_exceptions=True,
        )

    async def claim_session_completing(
        self,
        *,
        complete_ids: Sequence[str],
        queues: Sequence[str],
        worker_id: str,
        lease_ms: int = 30_000,
        names: Sequence[str] | None,
        plan: Plan[T],
        single_draw: bool = False,
        settles: Sequence[OwnedSettle] = (),
        claimer: Claimer | None = None,
    ) -> CompletingClaim[T]:
        """``complete_many(complete_ids)``, ``settles`` and a claim session, sharing one COMMIT.

        The worker's path when the calls it settles free the slots the claim
        fills (stores declaring ``capabilities.completing_claim``). The probe
        runs first, outside any transaction (§4.14 step 1), unless there are
        completions to write and the plan promises a ``single_draw``: their
        transaction is written anyway and an empty draw in it costs less than
        the probe's own round trip. If there is work (or no probe), one
        transaction completes the given tasks (each ownership-checked,
        cancel wins, as ``complete_many``), recovers expired leases, runs
        ``plan`` as ``claim_session`` does, and commits: completions and claims
        become durable together (one fsync under SQLite's FULL), so the worker
        never holds more leases than its slots. If the probe finds nothing,
        the completions are written alone.

        ``settles`` (``owned_complete`` / ``owned_fail``) are written in the
        same transaction, after the completions, each ownership-checked on its
        own; ``written`` says what became of each. If the shared transaction
        fails, each is written alone afterwards (``settle_alone``), so a row
        the database refuses costs only its own settlement (and when one is
        refused alone, its error explains the failure: ``claim_error`` is None).

        With ``single_draw`` the plan promises at most one draw; on Postgres
        its COMMIT then travels with that draw's statement (one round trip for
        the whole transaction; a second draw raises ``RuntimeError``).

        ``claimer``: as for ``claim_session``.

        Failure isolation: if the shared transaction fails for any reason but
        the loss of the connection, nothing of it lands and the completions are
        written alone; the claim's error is returned in ``claim_error`` (a
        failure of the completions' own write is raised, as ``complete_many``
        raises it), so completing never fails because of the claim. On
        Postgres, a plan raising after a single draw's COMMIT leaves the
        completions durable (``claim_error`` set; the claimed rows return
        through lease recovery).

        Returns:
            ``settled`` (ids completed; a missing id lost its lease), ``value``
            (the plan's value; None when the probe found nothing or the claim
            failed), ``claim_error`` and the rows lease recovery touched.

        Raises:
            ValueError: malformed ids, queues or names.
            UnsupportedBackend: the store does not declare ``completing_claim``.
            StoreLocked, StoreUnavailable: as the dialect's writes raise them.
        """
        if not self.capabilities.completing_claim:
            raise UnsupportedBackend(f"claim_session_completing is not offered by {self.dialect}")
        ids = _rules.text_list(complete_ids, "complete_ids", refuses_nul=self.text_refuses_nul)
        args = self._check_claim(queues, worker_id, lease_ms, names)
        self._check_writable("claim_session_completing")
        self.signals.claiming(args.queues, claimer)
        commit_with_draw = single_draw and self.capabilities.single_draw_commits
        screened, set_aside = screen_plan(plan, top_up=not commit_with_draw)
        owned = list(settles)
        # The probe spares an idle worker a write transaction; completions
        # open one anyway, and with a single draw the claim costs no extra
        # round trip inside it (Postgres: the whole transaction is one).
        probe = not (ids or owned) or not single_draw
        try:
            if args.names == [] or (probe and not await self._probe(args.queues, args.names)):
                settled = await self._settle_alone(ids, args.worker_id)
                written = await self.settle_each(owned)
                return CompletingClaim(settled, None, None, written=written)
            primitive = (
                self._completing_claim_one_draw if commit_with_draw else self._completing_claim
            )
            outcome = await primitive(ids, args, screened, owned)
            if isinstance(outcome, Exception):
                # Nothing of the transaction landed: the completions go alone
                # (and raise if it was their own statement that failed, before
                # any settlement was written), then each settlement alone.
                settled = await self._settle_alone(ids, args.worker_id)
                written = await self.settle_each(owned)
                # A settlement refused alone explains the failure: its caller
                # hears of it, and the claim itself is not to blame.
                refused = any(isinstance(w, Exception) for w in written.values())
                claim_error = None if refused else outcome
                return CompletingClaim(settled, None, claim_error, written=written)
        finally:
            await self._fail_undecodable(set_aside)
        # Committed; now the signals.
        for task in outcome.recovered:
            self._after_write(task)
        for task_id in outcome.settled:
            self.signals.done(task_id)  # complete only ever ends a task
        for row in outcome.written.values():
            if isinstance(row, Task):
                self._after_write(row)
        return outcome

    # -- settlements that ride a completing claim ---------------------------------------

    def owned_complete(self, *, task_id: str, worker_id: str, result: Any) -> OwnedSettle:
        """``complete(task_id, result)`` encoded for ``settles``.

        Raises:
            ValueError: a malformed id.
            SerializationError: ``result`` has no faithful JSON form here.
        """
        task_id, worker_id = self._owned_ids(task_id, worker_id)
        return OwnedSettle("complete", task_id, worker_id, self._result_json(result))

    def owned_fail(
        self,
        *,
        task_id: str,
        worker_id: str,
        error: Any,
        retryable: bool = True,
        delay_ms: int = 0,
    ) -> OwnedSettle:
        """``fail(...)`` encoded for ``settles`` (the arguments checked as ``fail`` checks them)."""
        task_id, worker_id = self._owned_ids(task_id, worker_id)
        _rules.boolean(retryable, "retryable")
        _rules.duration_ms(delay_ms, "delay_ms")
        return OwnedSettle(
            "fail", task_id, worker_id, encode_error(error, retryable), retryable, delay_ms
        )

    async def settle_alone(self, settle: OwnedSettle) -> Task:
        """Write one ``OwnedSettle`` on its own (group-committed with what arrives with it).

        Raises:
            LostLease: the task is no longer running under this worker's lease.
        """
        if settle.kind == "complete":
            task = await self._complete(settle.task_id, settle.worker_id, settle.value_json)
        else:
            assert settle.value_json is not None
            task = await self._fail(
                settle.task_id,
                settle.worker_id,
                settle.value_json,
                settle.retryable,
                settle.delay_ms,
            )
        self._after_write(task)
        return task

    async def settle_each(self, owned: builtins.list[OwnedSettle]) -> dict[str, SettleOutcome]:
        """Each settlement written alone (together, through group commit); what became of each:
        its row, None for a lease lost, or the exception that refused it."""
        if not owned:
            return {}
        outcomes = await asyncio.gather(
            *(self.settle_alone(s) for s in owned), return_exceptions=True
        )
        written: dict[str, SettleOutcome] = {}
        for settle, outcome in zip(owned, outcomes, strict=True):
            if isinstance(outcome, LostLease):
                written[settle.task_id] = None
            elif isinstance(outcome, Exception | Task):
                written[settle.task_id] = outcome
            else:
                raise outcome  # cancelled: not ours to swallow
        return written

    async def _settle_alone(self, ids: builtins.list[str], worker_id: str) -> set[str]:
        """``complete_many`` (validated ids) with its signals; nothing for no ids."""
        if not ids:
            return set()
        settled = await self._complete_many(ids, worker_id)
        for task_id in settled:
            self.signals.done(task_id)
        return settled

    @abc.abstractmethod
    def _check_writable(self, what: str) -> None:
        """Raise ``StoreUnavailable`` if this store refuses writes (opened read-only)."""

    async def _probe(self, queues: builtins.list[str], names: builtins.list[str] | None) -> bool:
        """§4.14 step 1, outside any transaction: may a claim on these filters find work?"""
        raise UnsupportedBackend(f"{self.dialect} has no claim probe")

    async def _completing_claim(
        self,
        ids: builtins.list[str],
        args: ClaimArgs,
        plan: Plan[T],
        settles: builtins.list[OwnedSettle],
    ) -> CompletingClaim[T] | Exception:
        """One transaction: complete ``ids``, write ``settles``, recover, run ``plan``, COMMIT.

        Returns what was committed (signals are the caller's), or the error
        that rolled all of it back (the caller then settles the ids alone).
        Raises only for the loss of the connection.
        """
        raise UnsupportedBackend(f"claim_session_completing is not offered by {self.dialect}")

    async def _completing_claim_one_draw(
        self,
        ids: builtins.list[str],
        args: ClaimArgs,
        plan: Plan[T],
        settles: builtins.list[OwnedSettle],
    ) -> CompletingClaim[T] | Exception:
        """``_completing_claim`` for a plan drawing at most once, its COMMIT sent with the draw.

        Stores declaring ``capabilities.single_draw_commits`` only; once the
        COMMIT is sent, a second draw raises ``RuntimeError``.
        """
        raise UnsupportedBackend(f"a single-draw completing claim is not offered by {self.dialect}")
