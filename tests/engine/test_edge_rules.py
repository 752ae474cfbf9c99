"""One rule set at the edges: what a value may be is decided before any dialect sees it.

A 2,700-byte name, queue, key or correlation id is refused the same way on both
dialects with nothing written (Postgres would otherwise raise its own
``ProgramLimitExceeded`` from a B-tree index); a dict key that is not a string
is refused rather than read back as a string; a float stays the same float
through Postgres' jsonb. Each bad value is mixed into good traffic, which lands.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from store_support import Database

from engine import SerializationError, TaskStore
from engine._rules import INDEXED_TEXT_MAX_BYTES

LONG = "n" * 2_700
FIELDS = ["name", "queue", "key", "correlation_id", "parent_id", "root_id"]


def submit_args(field: str, value: str) -> dict[str, Any]:
    args: dict[str, Any] = {"name": "job", "payload": {"i": 0}}
    args[field] = value
    return args


async def count(database: Database) -> int:
    return int(database.rows("select count(*) from cairnq_tasks")[0][0])


@pytest.mark.parametrize("field", FIELDS)
async def test_an_oversized_indexed_field_is_refused_among_good_submits(
    store: TaskStore, database: Database, field: str
) -> None:
    good = [store.submit(name="job", payload={"i": i}) for i in range(10)]
    bad = store.submit(**submit_args(field, LONG))
    results = await asyncio.gather(*good, bad, return_exceptions=True)
    error = results[-1]
    assert type(error) is ValueError
    assert str(error) == (
        f"{field} is 2,700 bytes of UTF-8; at most 1,024 are allowed "
        "(an index entry must fit Postgres' B-tree page limit)"
    )
    assert all(not isinstance(r, BaseException) for r in results[:-1])
    assert await count(database) == 10


@pytest.mark.parametrize("field", FIELDS)
async def test_the_limit_counts_utf8_bytes(
    store: TaskStore, database: Database, field: str
) -> None:
    at_limit = "é" * (INDEXED_TEXT_MAX_BYTES // 2)  # two bytes each
    task = await store.submit(**submit_args(field, at_limit))
    assert getattr(task, field, at_limit) == at_limit
    with pytest.raises(ValueError, match=f"{field} is 1,026 bytes of UTF-8"):
        await store.submit(**submit_args(field, at_limit + "é"))
    assert await count(database) == 1


async def test_the_widest_index_entry_fits_at_the_limit(
    store: TaskStore, database: Database
) -> None:
    # Incompressible text at the limit in both strings of the claim-by-name
    # index: Postgres must store it (and claim it by name) without a limit error.
    def noise() -> str:
        return os.urandom(INDEXED_TEXT_MAX_BYTES // 2).hex()

    name, queue = noise(), noise()
    task = await store.submit(
        name=name, queue=queue, key=noise(), correlation_id=noise(), root_id=noise()
    )
    [claimed] = await store.claim(queues=[queue], worker_id="w", names=[name])
    assert claimed.id == task.id
    assert await store.get_by_key(noise()) is None


async def test_a_non_string_dict_key_is_refused(store: TaskStore, database: Database) -> None:
    good = [store.submit(name="job", metadata={"i": str(i)}) for i in range(5)]
    bad = [
        store.submit(name="job", metadata={1: "a"}),  # type: ignore[dict-item]
        store.submit(name="job", payload={"nested": {None: 1}}),
        store.submit(name="job", payload=[{True: 1}]),
    ]
    results = await asyncio.gather(*good, *bad, return_exceptions=True)
    for error in results[5:]:
        assert type(error) is SerializationError
        assert "is not a string" in str(error)
    assert await count(database) == 5


@pytest.mark.parametrize(
    "number",
    [1.2345678901234567e19, -1.2345678901234567e19, 1e16, 9.999999999999998e15, 1.8e19, 1e300],
)
async def test_a_float_reads_back_as_the_same_float(store: TaskStore, number: float) -> None:
    task = await store.submit(name="job", payload={"x": number, "xs": [number]})
    got = await store.get(task.id)
    assert got is not None
    assert type(got.payload["x"]) is float and got.payload["x"] == number
    assert got.payload["xs"] == [number] and type(got.payload["xs"][0]) is float
    [claimed] = await store.claim(queues=["default"], worker_id="w")
    assert type(claimed.payload["x"]) is float and claimed.payload["x"] == number
