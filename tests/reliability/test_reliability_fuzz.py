"""Scenario 6: bad input fuzzing — every value round-trips exactly or is refused, and
a refusal writes nothing.

Hypothesis throws JSON-ish values (unicode edge cases, lone surrogates, NUL,
NaN/Infinity, huge and odd numbers, odd dict keys, tuples, non-JSON objects,
deep nesting) at ``engine._json`` and at a real store's submit path on both
dialects, with random names, queues, keys and metadata. Each submit must either
come back identical through ``get`` (and ``get_by_key``) or raise
``SerializationError``/``ValueError`` with the tables unchanged. Anything else —
a driver error, a crash, a changed value — is a failure, on both dialects alike
(a float stays a float through Postgres' jsonb ``numeric``).

``CAIRNQ_FUZZ_EXAMPLES`` sets the number of examples per property (default 150).
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import math
import os
import uuid
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_support import pg_dsn_or_skip
from reliability_harness import Target

from engine import SerializationError, _json
from engine.store.postgres import PostgresStore
from engine.store.sqlite import SQLiteStore

T = TypeVar("T")
EXAMPLES = int(os.environ.get("CAIRNQ_FUZZ_EXAMPLES", 150))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- strategies ----------------------------------------------------------------------

HOSTILE = [
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "\ufeff",
    "\u2028\u2029",
    "\u202e",
    "\x1b[31mred\x1b[0m",
    "\x1b]0;title\x07",
    "[bold]x[/bold]",
    "[link=http://x]y[/link]",
    "e\u0301",
    "😀",
    "\\u0000",
    "\\\\u0000",
    "\\",
    '"',
    "",
]
any_char = st.characters(exclude_categories=())  # surrogates and controls included
text = st.one_of(st.sampled_from(HOSTILE), st.text(any_char, max_size=12))
number = st.one_of(
    st.integers(),  # beyond 64 bits too
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 5e-324, 1e16, 1e300, 2**63 - 1, 2**64 - 1, -(2**63)]),
)
scalar = st.one_of(st.none(), st.booleans(), number, text)
odd_key = st.one_of(st.integers(-5, 5), st.floats(), st.booleans(), st.none())
not_json = st.sampled_from(
    [
        b"bytes",
        {1, 2},
        datetime.datetime(2026, 1, 1),
        decimal.Decimal("1.5"),
        uuid.UUID(int=1),
        object(),
        complex(1, 2),
    ]
)


def nest(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(text, children, max_size=4),
        st.dictionaries(odd_key, children, max_size=2),
    )


json_ish = st.recursive(st.one_of(scalar, not_json), nest, max_leaves=16)
payloads = st.one_of(st.none(), json_ish, st.dictionaries(text, json_ish, max_size=4))
metadata = st.one_of(st.none(), st.dictionaries(text, json_ish, max_size=3), json_ish)

# -- oracles --------------------------------------------------------------------------


def faithful(value: Any) -> bool:
    """Whether JSON can state ``value`` so that it reads back as it was written.

    Dict keys must be strings: ``{1: "a"}`` would read back as ``{"1": "a"}``
    (the stdlib encoder, and the cairnq SDK with it, writes it so; the engine
    refuses it).
    """
    if value is None or isinstance(value, (bool, str, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(faithful(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and faithful(v) for k, v in value.items())
    return False


def json_form(value: Any) -> Any:
    """What a faithful value reads back as: tuples are arrays."""
    if isinstance(value, (list, tuple)):
        return [json_form(v) for v in value]
    if isinstance(value, dict):
        return {k: json_form(v) for k, v in value.items()}
    return value


def same(a: Any, b: Any, *, signed_zero: bool = True) -> bool:
    """Deep equality that also compares types (``True`` is not ``1``, ``1`` not ``1.0``).

    ``signed_zero=False``: ``-0.0`` and ``0.0`` are the same (Postgres' jsonb
    ``numeric`` has no negative zero; the two are equal numbers).
    """
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and (not signed_zero or math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, list):
        return len(a) == len(b) and all(
            same(x, y, signed_zero=signed_zero) for x, y in zip(a, b, strict=True)
        )
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], signed_zero=signed_zero) for k in a)
    return bool(a == b)


# -- engine._json ---------------------------------------------------------------------


@FUZZ
@given(json_ish)
def test_json_round_trips_or_refuses(value: Any) -> None:
    try:
        text_form = _json.dumps(value)
    except SerializationError:
        return  # refusing is always allowed; accepting an unfaithful value is not
    assert faithful(value), f"accepted a value with no faithful JSON form: {value!r}"
    assert same(_json.loads(text_form), json_form(value))


@pytest.mark.parametrize("depth", [10, 200, 300, 1_000, 1_024, 1_025, 10_000, 100_000])
@pytest.mark.parametrize("container", ["list", "dict", "odd-key dict"])
def test_json_deep_nesting_never_crashes(depth: int, container: str) -> None:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value} if container == "dict" else [value]
    if container == "odd-key dict":
        value = {1: value}
    try:
        text_form = _json.dumps(value)
    except SerializationError:
        # Refused exactly when it could not read back: too deep, or a key not a string.
        assert depth > _json.MAX_DEPTH or container == "odd-key dict"
        return
    assert depth <= _json.MAX_DEPTH and container != "odd-key dict"
    back = _json.loads(text_form)  # walked, not compared: == recurses past Python's limit
    for _ in range(depth):
        assert len(back) == 1
        back = back["a"] if container == "dict" else back[0]
    assert back == "leaf"


# -- the submit path of a real store ------------------------------------------------------


class Runner:
    """One event loop for a module's store, driven from synchronous hypothesis tests."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def store_target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Runner, Any, Target]]:
    runner = Runner()
    if request.param == "sqlite":
        path = str(Path(tmp_path_factory.mktemp("fuzz")) / "tasks.db")
        store: Any = SQLiteStore(path)
        target = Target("sqlite", path)
    else:
        dsn = pg_dsn_or_skip()
        schema = f"fuzz_{uuid.uuid4().hex[:12]}"
        store = PostgresStore(dsn, schema=schema, max_size=2)
        target = Target("postgres", dsn, schema)
    runner.run(store.connect())
    try:
        yield runner, store, target
    finally:
        runner.run(store.close())
        runner.loop.close()
        if target.dialect == "postgres":
            with target.connect() as conn:
                conn.execute(f'drop schema if exists "{target.schema}" cascade')


def table_sizes(target: Target) -> tuple[int, int]:
    tasks = target.rows("select count(*) as n from cairnq_tasks")[0]["n"]
    keys = target.rows("select count(*) as n from cairnq_task_keys")[0]["n"]
    return int(tasks), int(keys)


@FUZZ
@given(
    name=text,
    queue=st.one_of(st.just("default"), text),
    key=st.one_of(st.none(), text),
    payload=payloads,
    meta=metadata,
    conflict=st.sampled_from(["reuse", "replace", "reject", "reuse-succeeded"]),
)
def test_submit_round_trips_or_refuses_writing_nothing(
    store_target: tuple[Runner, Any, Target],
    name: str,
    queue: str,
    key: str | None,
    payload: Any,
    meta: Any,
    conflict: str,
) -> None:
    runner, store, target = store_target
    before = table_sizes(target)
    if key is not None:  # a key of its own, so reuse/reject cannot hand back an older task
        key = f"{key}/{uuid.uuid4().hex}"
    try:
        task = runner.run(
            store.submit(
                name=name, payload=payload, queue=queue, key=key, conflict=conflict, metadata=meta
            )
        )
    except (SerializationError, ValueError):
        assert table_sizes(target) == before, "a refused submit wrote something"
        return
    assert faithful(payload) and (meta is None or faithful(meta))
    stored = runner.run(store.get(task.id))
    assert stored is not None
    assert (stored.name, stored.queue) == (name, queue)
    signed_zero = target.dialect != "postgres"
    assert same(
        stored.payload, json_form({} if payload is None else payload), signed_zero=signed_zero
    )
    assert same(stored.metadata, json_form(dict(meta) if meta else {}), signed_zero=signed_zero)
    if key is not None:
        by_key = runner.run(store.get_by_key(key))
        assert by_key is not None and by_key.id == task.id
    assert table_sizes(target) == (before[0] + 1, before[1] + (key is not None))


@pytest.mark.parametrize(
    "blob",
    [
        pytest.param("x" * 10_000_000, id="10MB-ascii"),
        pytest.param("é😀" * 1_700_000, id="10MB-unicode"),
        pytest.param(list(range(1_000_000)), id="1M-ints"),
    ],
)
def test_ten_megabyte_payloads_round_trip(
    store_target: tuple[Runner, Any, Target], blob: Any
) -> None:
    runner, store, _ = store_target
    task = runner.run(store.submit(name="big", payload={"blob": blob}, key=uuid.uuid4().hex))
    stored = runner.run(store.get(task.id))
    assert stored is not None and stored.payload == {"blob": blob}


def test_nul_in_a_payload_on_postgres_is_refused_before_writing(
    store_target: tuple[Runner, Any, Target],
) -> None:
    runner, store, target = store_target
    before = table_sizes(target)
    if target.dialect == "sqlite":  # SQLite keeps NUL inside JSON strings as it is
        task = runner.run(store.submit(name="nul", payload={"s": "a\x00b"}))
        assert runner.run(store.get(task.id)).payload == {"s": "a\x00b"}
        return
    for bad in ({"s": "a\x00b"}, {"a\x00": 1}, ["\\", "\x00"]):
        with pytest.raises(SerializationError):
            runner.run(store.submit(name="nul", payload=bad, key=f"nul-{uuid.uuid4().hex}"))
    assert table_sizes(target) == before
    # The escaped text "\\u0000" (a backslash, then u0000) is no NUL and is stored.
    task = runner.run(store.submit(name="nul", payload={"s": "\\u0000"}))
    assert runner.run(store.get(task.id)).payload == {"s": "\\u0000"}


@pytest.mark.parametrize("field", ["name", "queue", "key", "correlation_id"])
def test_nul_in_text_fields_is_refused(
    store_target: tuple[Runner, Any, Target], field: str
) -> None:
    """A NUL in a text column is bad input: ValueError, nothing written (SQLite keeps it)."""
    runner, store, target = store_target
    args: dict[str, Any] = {"name": "nul", "queue": "default", "key": None}
    args[field] = f"a\x00{uuid.uuid4().hex}"
    before = table_sizes(target)
    if target.dialect == "sqlite":
        task = runner.run(store.submit(**args))
        if field == "key":
            assert runner.run(store.get_by_key(args["key"])).id == task.id
        else:
            assert getattr(runner.run(store.get(task.id)), field) == args[field]
        return
    with pytest.raises(ValueError):
        runner.run(store.submit(**args))
    assert table_sizes(target) == before
