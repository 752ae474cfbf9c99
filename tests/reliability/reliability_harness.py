"""Shared machinery of the reliability scenarios: ledgers, processes, a private server, a checker.

Every worker and submitter runs as a real OS process (``proc_worker.py``,
``proc_submitter.py``) so that ``kill -9`` means what it says. Each process
appends what it did to its own JSONL ledger (one line per event, flushed at
once, so a killed process loses at most the line it was writing). After a run,
``check_run`` reads the cairnq tables directly and the ledgers, and says how
many tasks were lost, settled twice or executed again without a reason.

The scenario tests (``test_reliability_*.py``), ``bench/soak.py`` and
``bench/reliability_report.py`` all drive these helpers.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PG_BIN = Path(os.environ.get("CAIRNQ_PG_BIN", "/usr/lib/postgresql/15/bin"))
LIVE = ("queued", "running")
TERMINAL = ("succeeded", "failed", "canceled")


def now_ms() -> int:
    return int(time.time() * 1000)


def ci_scale(name: str, default: int) -> int:
    """A load figure, overridable by an environment variable (``bench`` runs full size)."""
    return int(os.environ.get(name, default))


def impl() -> str:
    """Which implementation the processes load: ``engine``, or ``cairnq`` (the peer SDK).

    ``CAIRNQ_REL_IMPL=cairnq`` runs every scenario against the SDK from PyPI: a
    check of the harness itself, and a reference for the figures.
    """
    return os.environ.get("CAIRNQ_REL_IMPL", "engine")


def client_for(target: Target) -> Any:
    """An API-side handle (``CairnQ``) of the implementation under test, not connected."""
    mod = importlib.import_module(impl())
    if target.dialect == "sqlite":
        return mod.CairnQ.sqlite(target.location)
    return mod.CairnQ.postgres(target.location, schema=target.schema, min_size=1, max_size=4)


# -- targets -----------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where a run's tasks live: a SQLite file, or a Postgres DSN and schema."""

    dialect: str  # "sqlite" | "postgres"
    location: str
    schema: str | None = None

    def cli(self) -> list[str]:
        """The arguments that point a proc script at this target."""
        if self.dialect == "sqlite":
            return ["--sqlite", self.location]
        out = ["--pg", self.location]
        if self.schema:
            out += ["--schema", self.schema]
        return out

    @contextlib.contextmanager
    def connect(self) -> Iterator[Any]:
        """A plain driver connection for reading the tables (never the engine under test)."""
        if self.dialect == "sqlite":
            conn = sqlite3.connect(self.location, timeout=30)
            conn.row_factory = sqlite3.Row
            try:
                yield conn
            finally:
                conn.close()
            return
        import psycopg
        from psycopg.rows import dict_row

        options = f"-csearch_path={self.schema}" if self.schema else None
        with psycopg.connect(
            self.location, autocommit=True, row_factory=dict_row, options=options
        ) as conn:
            yield conn

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Run one read and return dict rows (``?`` placeholders are adapted for psycopg)."""
        with self.connect() as conn:
            if self.dialect == "postgres":
                sql = sql.replace("?", "%s")
            return [dict(r) for r in conn.execute(sql, params).fetchall()]

    def key_expr(self) -> str:
        """SQL for the ``key`` a submitter stored in a task's metadata."""
        if self.dialect == "sqlite":
            return "json_extract(metadata, '$.key')"
        return "metadata->>'key'"


def decode(value: Any) -> Any:
    """A JSON column as read by a plain driver (text on SQLite, decoded by psycopg)."""
    return json.loads(value) if isinstance(value, str) else value


def read_tasks(target: Target) -> dict[str, dict[str, Any]]:
    """Every task row by id, JSON columns decoded."""
    rows = target.rows(
        "select id, name, status, attempt, max_attempts, payload, result, error, metadata,"
        " cancel_requested_at_ms, lease_until_ms, worker_id from cairnq_tasks"
    )
    out = {}
    for row in rows:
        for col in ("payload", "result", "error", "metadata"):
            row[col] = decode(row[col])
        out[row["id"]] = row
    return out


def read_keys(target: Target) -> dict[str, str]:
    """The key table: key -> task id."""
    return {
        r["key"]: r["task_id"] for r in target.rows("select key, task_id from cairnq_task_keys")
    }


def live_keys_over_one(target: Target) -> dict[str, int]:
    """Keys with more than one live task not asked to cancel, in one consistent read."""
    expr = target.key_expr()
    rows = target.rows(
        f"select {expr} as k, count(*) as n from cairnq_tasks"
        " where status in ('queued', 'running') and cancel_requested_at_ms is null"
        f" and {expr} is not null group by {expr} having count(*) > 1"
    )
    return {r["k"]: int(r["n"]) for r in rows}


class KeyMonitor:
    """Samples ``live_keys_over_one`` in a thread for the whole run; remembers the worst."""

    def __init__(self, target: Target, interval_s: float = 0.05) -> None:
        self.target = target
        self.interval_s = interval_s
        self.worst: dict[str, int] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # table may not exist yet; server restarting
                for key, n in live_keys_over_one(self.target).items():
                    self.worst[key] = max(n, self.worst.get(key, 0))
                self.samples += 1
            self._stop.wait(self.interval_s)

    def __enter__(self) -> KeyMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# -- ledgers -------------------------------------------------------------------------


class Ledger:
    """One process's append-only event log: a JSONL file, flushed line by line."""

    def __init__(self, directory: str | Path, role: str) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        self.path = Path(directory) / f"{role}-{os.getpid()}-{random.randrange(1 << 30)}.jsonl"
        # Unbuffered binary append: each line is a single write(2), so a kill -9
        # leaves whole lines and at most one torn last line.
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115
        self._lock = threading.Lock()
        self.pid = os.getpid()

    def write(self, ev: str, **fields: Any) -> None:
        line = json.dumps({"ev": ev, "pid": self.pid, "t": now_ms(), **fields}) + "\n"
        with self._lock:
            self._file.write(line.encode())

    def close(self) -> None:
        self._file.close()


def read_ledgers(directory: str | Path) -> list[dict[str, Any]]:
    """Every event of every ledger in ``directory``; a torn last line is skipped."""
    events = []
    for path in sorted(Path(directory).glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
    return events


def count_events(directory: str | Path, ev: str) -> int:
    return sum(1 for e in read_ledgers(directory) if e["ev"] == ev)


# -- processes -------------------------------------------------------------------------


def spawn(script: str, *args: str, stdout: Any = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    """Start ``tests/reliability/<script>`` with this interpreter, the repo importable.

    Its stderr goes to a file (``stderr_of`` reads it): a pipe nobody drains
    would block a chatty process after 64 KiB and fake a hang.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    with tempfile.NamedTemporaryFile(prefix="cairnq-rel-", suffix=".err", delete=False) as err:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / script), *args],
            env=env,
            stdout=stdout,
            stderr=err,
            cwd=str(REPO),
        )
    _stderr_paths[proc.pid] = Path(err.name)
    return proc


_stderr_paths: dict[int, Path] = {}


def stderr_of(proc: subprocess.Popen[bytes]) -> str:
    """What a spawned process wrote to stderr so far."""
    path = _stderr_paths.get(proc.pid)
    return path.read_text(errors="replace") if path and path.exists() else ""


def kill9(proc: subprocess.Popen[bytes], ledger: Ledger | None = None) -> None:
    """SIGKILL a process and record when (recovery delays are measured from here)."""
    if ledger is not None:
        ledger.write("kill", victim=proc.pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    _forget_stderr(proc)


def stop(proc: subprocess.Popen[bytes], timeout: float = 20) -> str:
    """SIGTERM, wait, SIGKILL if needed; returns the process's stderr text."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    text = stderr_of(proc)
    _forget_stderr(proc)
    return text


def _forget_stderr(proc: subprocess.Popen[bytes]) -> None:
    path = _stderr_paths.pop(proc.pid, None)
    if path is not None:
        path.unlink(missing_ok=True)


def proc_args(target: Target, ledger_dir: str | Path) -> list[str]:
    """The arguments every proc script takes: database, ledger folder, implementation."""
    return [*target.cli(), "--ledger", str(ledger_dir), "--impl", impl()]


def wait_until(
    predicate: Any,
    timeout: float,
    what: str,
    interval: float = 0.05,
    watch: Sequence[subprocess.Popen[bytes]] = (),
) -> None:
    """Poll ``predicate``; fail on timeout or as soon as a watched process dies."""
    deadline = time.monotonic() + timeout
    while not predicate():
        for proc in watch:
            if proc.poll() is not None:
                err = stderr_of(proc)
                raise AssertionError(f"process {proc.pid} exited {proc.returncode}:\n{err}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def wait_drained(
    target: Target,
    timeout: float,
    *,
    expect_at_least: int = 0,
    watch: Sequence[subprocess.Popen[bytes]] = (),
) -> None:
    """Wait until every task row is terminal (and at least ``expect_at_least`` exist)."""

    def drained() -> bool:
        try:
            rows = target.rows(
                "select count(*) as n, sum(case when status in ('queued','running')"
                " then 1 else 0 end) as live from cairnq_tasks"
            )
        except Exception:
            return False
        return int(rows[0]["n"]) >= expect_at_least and not rows[0]["live"]

    wait_until(drained, timeout, "every task to reach a terminal status", 0.2, watch)


def rss_kib(pid: int) -> int | None:
    """Resident set size of a process from /proc, or None when gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


# -- a private Postgres server --------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivatePostgres:
    """A throwaway PostgreSQL cluster of our own, on its own port and socket folder.

    Restarting it disturbs nobody else using the machine's main server. The
    cluster runs with ``fsync=off``: a restart (even ``-m immediate``) keeps the
    OS page cache, so committed data survives exactly as it would with fsync;
    only an OS crash would need it, and it spares the shared disk.
    """

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="cairnq-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.log = self.dir / "server.log"
        self._as_postgres = os.geteuid() == 0

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        prefix = ["runuser", "-u", "postgres", "--"] if self._as_postgres else []
        return subprocess.run(
            [*prefix, *cmd], check=check, capture_output=True, cwd=str(self.dir), timeout=120
        )

    def _ctl(self, action: str, *extra: str) -> None:
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1"
            " -c fsync=off -c max_connections=100"
        )
        self._run(
            str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w",
            "-o", options, action, *extra,
        )  # fmt: skip

    def start(self) -> PrivatePostgres:
        if self._as_postgres:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run(str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres")
        self._ctl("start")
        return self

    def restart(self, mode: str = "fast") -> None:
        """Stop (``fast``: clean; ``immediate``: crash-like) and start again on the same port."""
        self._ctl("restart", "-m", mode)

    def stop(self) -> None:
        if self.data.exists():
            self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop",
                      check=False)  # fmt: skip
        shutil.rmtree(self.dir, ignore_errors=True)


# -- the checker ------------------------------------------------------------------------------


@dataclass
class Verdict:
    """What a run did to its tasks; the scenario asserts the zero fields stay zero."""

    submitted: int = 0  # acknowledged submits (ledger); keyed reuses count too
    tasks: int = 0  # rows in cairnq_tasks
    lost: list[str] = field(default_factory=list)  # acknowledged, then missing or not terminal
    settled_twice: list[str] = field(default_factory=list)
    double_dispatch: list[str] = field(default_factory=list)  # one (task, attempt) run twice
    unexplained_reruns: list[str] = field(default_factory=list)  # re-run without lease loss
    wrong_result: list[str] = field(default_factory=list)  # result not from the last run
    #: A run whose lease was lost without the worker noticing (its heartbeats failed
    #: while the server was away) got its settlement accepted after the task had
    #: been claimed again by the same worker id (test_reliability_stale_settle.py).
    stale_settles: list[str] = field(default_factory=list)
    keys_pointing_wrong: list[str] = field(default_factory=list)
    executions: Counter[int] = field(default_factory=Counter)  # runs per task -> tasks
    statuses: Counter[str] = field(default_factory=Counter)
    reruns_after_loss: int = 0  # all explained re-runs, of which:
    reruns_after_kill: int = 0
    reruns_after_failure: int = 0  # planned failures
    reruns_after_lost_lease: int = 0  # LostLease, or a settle that could not be written
    errors: Counter[str] = field(default_factory=Counter)  # error types reported by processes
    busy_errors: list[str] = field(default_factory=list)
    max_recovery_ms: int = 0  # kill -> next start of a task the victim held
    kills: int = 0

    def failures(self) -> dict[str, Any]:
        """Every violated invariant with a few examples (empty means the run is clean)."""
        bad = {
            name: getattr(self, name)[:5]
            for name in (
                "lost",
                "settled_twice",
                "double_dispatch",
                "unexplained_reruns",
                "wrong_result",
                "keys_pointing_wrong",
                "stale_settles",
                "busy_errors",
            )
            if getattr(self, name)
        }
        return bad

    def summary(self) -> dict[str, Any]:
        return {
            "submitted": self.submitted,
            "tasks": self.tasks,
            "statuses": dict(self.statuses),
            "executions_per_task": dict(sorted(self.executions.items())),
            "reruns_after_lease_loss_or_failure": self.reruns_after_loss,
            "reruns_after_kill": self.reruns_after_kill,
            "reruns_after_planned_failure": self.reruns_after_failure,
            "reruns_after_lost_lease": self.reruns_after_lost_lease,
            "kills": self.kills,
            "max_recovery_ms": self.max_recovery_ms,
            "lost": len(self.lost),
            "settled_twice": len(self.settled_twice),
            "double_dispatch": len(self.double_dispatch),
            "unexplained_reruns": len(self.unexplained_reruns),
            "wrong_result": len(self.wrong_result),
            "stale_settles": len(self.stale_settles),
            "busy_errors": len(self.busy_errors),
            "errors": dict(self.errors),
        }


def is_busy_error(text: str) -> bool:
    low = text.lower()
    return "database is locked" in low or "sqlite_busy" in low or "database is busy" in low


def check_run(target: Target, ledger_dir: str | Path) -> Verdict:
    """Compare the tables with what every process says it did.

    * lost: a submit acknowledged to its caller whose task is missing or still live;
    * settled twice: two settlements of one task acknowledged to handlers;
    * double dispatch: one (task, attempt) started twice (two claims of one row);
    * unexplained rerun: a task started again although the earlier run neither
      lost its lease (LostLease, a killed process) nor failed on purpose, or after
      that run's settlement was acknowledged — a duplicate beyond at-least-once;
    * wrong result: a succeeded task whose result does not come from its last run.
    """
    events = read_ledgers(ledger_dir)
    tasks = read_tasks(target)
    keys = read_keys(target)
    v = Verdict(tasks=len(tasks))
    v.statuses = Counter(t["status"] for t in tasks.values())

    killed_at = {e["victim"]: e["t"] for e in events if e["ev"] == "kill"}
    v.kills = len(killed_at)
    acked: set[str] = set()
    starts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    ends: dict[tuple[str, int], list[str]] = defaultdict(list)  # (task, attempt) -> end kinds
    settled_at: dict[tuple[str, int], int] = {}  # (task, attempt) -> when its settle was acked
    for e in events:
        ev = e["ev"]
        if ev == "submit":
            acked.add(e["id"])
            v.submitted += 1
        elif ev == "start":
            starts[e["id"]].append(e)
        elif ev in ("settle", "lost", "fail", "unsettled"):
            ends[(e["id"], e["attempt"])].append(ev)
            if ev == "unsettled":  # a handler's own write failed: an error it saw
                v.errors[e.get("type", "?")] += 1
                if is_busy_error(e.get("err", "")):
                    v.busy_errors.append(e.get("err", ""))
            if ev == "settle":
                settled_at[(e["id"], e["attempt"])] = e["t"]
        elif ev == "error":
            v.errors[e.get("type", "?")] += 1
            if is_busy_error(e.get("err", "")):
                v.busy_errors.append(e.get("err", ""))

    for task_id in sorted(acked):
        row = tasks.get(task_id)
        if row is None or row["status"] in LIVE:
            v.lost.append(task_id)

    for task_id, runs in starts.items():
        runs.sort(key=lambda e: (e["attempt"], e["t"]))
        v.executions[len(runs)] += 1
        attempts = Counter(r["attempt"] for r in runs)
        if any(n > 1 for n in attempts.values()):
            v.double_dispatch.append(task_id)
        settles = sum(ends[(task_id, r["attempt"])].count("settle") for r in runs)
        if settles > 1:
            v.settled_twice.append(task_id)
        for earlier, later in itertools.pairwise(runs):
            kinds = ends[(task_id, earlier["attempt"])]
            victim_kill = killed_at.get(earlier["pid"])
            if "settle" in kinds and settled_at[(task_id, earlier["attempt"])] > later["t"]:
                # The earlier run lost its lease unseen and was settled after the
                # task had been claimed again: see Verdict.stale_settles.
                v.stale_settles.append(task_id)
                v.reruns_after_loss += 1
                v.reruns_after_lost_lease += 1
            elif "settle" in kinds:
                v.unexplained_reruns.append(task_id)
            elif "fail" in kinds:
                v.reruns_after_loss += 1
                v.reruns_after_failure += 1
            elif "lost" in kinds or "unsettled" in kinds:
                v.reruns_after_loss += 1
                v.reruns_after_lost_lease += 1
            elif victim_kill is not None:
                v.reruns_after_loss += 1
                v.reruns_after_kill += 1
                v.max_recovery_ms = max(v.max_recovery_ms, later["t"] - victim_kill)
            else:
                v.unexplained_reruns.append(task_id)
        row = tasks.get(task_id)
        if row is not None and row["status"] == "succeeded" and isinstance(row["result"], dict):
            last = runs[-1]
            res = row["result"]
            stale = task_id in v.stale_settles
            if not stale and (
                res.get("attempt") != row["attempt"] or res.get("attempt") != last["attempt"]
            ):
                v.wrong_result.append(task_id)

    for key, task_id in keys.items():
        row = tasks.get(task_id)
        if row is None or (row["metadata"] or {}).get("key") != key:
            v.keys_pointing_wrong.append(key)
    return v


# -- a fleet run (scenarios 2 and 3, the report, the soak) ----------------------------------------


@dataclass
class FleetResult:
    verdict: Verdict
    elapsed_s: float
    key_worst: dict[str, int]
    key_samples: int
    stderr: list[str]

    def throughput(self) -> float:
        return self.verdict.tasks / self.elapsed_s if self.elapsed_s else 0.0


def run_fleet(
    target: Target,
    ledger_dir: Path,
    *,
    tasks: int,
    workers: int = 4,
    submitters: int = 2,
    lease_ms: int = 1000,
    worker_args: Sequence[str] = (),
    submitter_args: Sequence[str] = (),
    during: Any = None,
    timeout_s: float = 300,
) -> FleetResult:
    """Start workers and submitters on one database, let them finish, check the outcome.

    ``during(control)`` runs in this thread once every process is started, with
    ``control`` a dict holding ``workers``, ``submitters``, ``ledger`` (the
    orchestrator's own, for kill records) and ``ledger_dir``; it may kill and
    replace workers (``control["workers"]`` is a list it can edit) or restart a
    server. Returns when every task is terminal and every process has exited.
    """
    ledger_dir.mkdir(parents=True, exist_ok=True)
    orchestrator = Ledger(ledger_dir, "orchestrator")
    base = proc_args(target, ledger_dir)
    started = time.monotonic()
    worker_cmd = [*base, "--lease-ms", str(lease_ms), *worker_args]
    control: dict[str, Any] = {
        "workers": [spawn("proc_worker.py", *worker_cmd) for _ in range(workers)],
        "worker_cmd": worker_cmd,
        "ledger": orchestrator,
        "ledger_dir": ledger_dir,
        "target": target,
    }
    share = [tasks // submitters + (1 if i < tasks % submitters else 0) for i in range(submitters)]
    control["submitters"] = [
        spawn("proc_submitter.py", *base, "--count", str(n), "--seed", str(i), *submitter_args)
        for i, n in enumerate(share)
    ]
    stderr: list[str] = []
    with KeyMonitor(target) as monitor:
        try:
            if during is not None:
                during(control)
            for proc in control["submitters"]:
                remaining = max(1.0, timeout_s - (time.monotonic() - started))
                proc.wait(timeout=remaining)
                stderr.append(stop(proc))
                if proc.returncode != 0:
                    raise AssertionError(f"submitter exited {proc.returncode}:\n{stderr[-1]}")
            remaining = max(1.0, timeout_s - (time.monotonic() - started))
            wait_drained(target, remaining, watch=control["workers"])
            elapsed = time.monotonic() - started
        finally:
            for proc in control["workers"] + control["submitters"]:
                if proc.returncode is None:
                    stderr.append(stop(proc))
    orchestrator.close()
    return FleetResult(
        verdict=check_run(target, ledger_dir),
        elapsed_s=elapsed,
        key_worst=dict(monitor.worst),
        key_samples=monitor.samples,
        stderr=[e for e in stderr if e.strip()],
    )


def assert_clean(result: FleetResult) -> None:
    """The invariants every fleet scenario claims."""
    v = result.verdict
    assert v.submitted > 0 and v.tasks > 0
    assert v.failures() == {}, (v.failures(), v.summary())
    assert result.key_worst == {}, f"keys with two live tasks: {result.key_worst}"
    assert result.key_samples > 0
    crashes = [e for e in result.stderr if "Traceback" in e]
    assert not crashes, crashes[0]
    # Every task ran to completion here (no task exhausts its attempts).
    assert set(v.statuses) == {"succeeded"}, v.summary()
    # At-least-once: more than one execution only after a lease loss or a planned failure.
    assert sum(v.executions.values()) == v.tasks, v.summary()


#: Errors a process may see while the server restarts; after this long, none.
RECOVERY_WINDOW_MS = 30_000


@dataclass
class RestartRun:
    result: FleetResult
    restart_ms: int  # how long the restart itself took
    errors_during: int  # errors callers saw inside the window
    late_errors: list[dict[str, Any]]  # errors after the window (must be none)
    settled_after: int  # settlements acknowledged after the server was back


def run_fleet_across_restart(
    server: PrivatePostgres,
    target: Target,
    ledger_dir: Path,
    *,
    tasks: int,
    mode: str = "fast",
    timeout_s: float = 300,
) -> RestartRun:
    """Scenario 3: the fleet on a private server restarted once a third of the submits landed."""
    window: dict[str, int] = {}

    def restart_midway(control: dict[str, Any]) -> None:
        wait_until(
            lambda: count_events(ledger_dir, "submit") >= tasks // 3,
            60,
            "a third of the submits",
            watch=control["submitters"],
        )
        window["from"] = now_ms()
        server.restart(mode)
        window["to"] = now_ms()

    result = run_fleet(
        target,
        ledger_dir,
        tasks=tasks,
        lease_ms=1000,
        # A bounded rate keeps both submitters busy across the restart.
        submitter_args=["--fail-every", "10", "--rate", str(max(100, tasks // 6))],
        during=restart_midway,
        timeout_s=timeout_s,
    )
    events = read_ledgers(ledger_dir)
    errors = [e for e in events if e["ev"] == "error"]
    limit = window["to"] + RECOVERY_WINDOW_MS
    return RestartRun(
        result=result,
        restart_ms=window["to"] - window["from"],
        errors_during=sum(window["from"] <= e["t"] <= limit for e in errors),
        late_errors=[e for e in errors if not window["from"] <= e["t"] <= limit],
        settled_after=sum(e["ev"] == "settle" and e["t"] > window["to"] for e in events),
    )
