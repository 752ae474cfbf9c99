"""How the Postgres store runs its named statements: the text, and whether prepared.

Every statement is a file, ``sql/postgres/<name>.sql``, run as written: this
module only chooses by name (no text is edited at run time). Statements are
prepared server-side on first use (``prepare_threshold=0``) except those in
``PLANNED_WITH_VALUES``; reads in ``WITHOUT_JIT`` run with JIT off.
"""

from __future__ import annotations

from engine._sql import statement

#: Reads estimated far above what they read (the metrics sample's ranges): JIT
#: would spend ~1 s compiling a 0.1 s read.
WITHOUT_JIT = frozenset({"inspect_metrics_sample_throughput", "inspect_metrics_sample_latency"})


#: Statements with optional filters, ``(:p::text is null or col = :p::text)``: run
#: unprepared, so the server plans every call with its values (as a custom plan,
#: where ``'v' is null`` folds to false and ``null is null`` to true): a filter
#: given a value seeks its index, one left NULL drops out. Prepared, the server
#: may settle after five calls on a generic plan made without the values, which
#: seeks no filter's index. Each one's header says so; tests/engine/test_query_plans.py
#: checks this set against the files.
PLANNED_WITH_VALUES = frozenset(
    {
        "list",
        "stats",
        "purge",
        "purge_in_queue",
        "inspect_count_purgeable",
        "inspect_count_tasks",
        "inspect_count_tasks_by_key",
        "inspect_errors_failed_newer",
        "inspect_errors_failed_older",
        "inspect_errors_retrying",
        "inspect_keys_after",
        "inspect_keys_before",
        "inspect_sorted_completed_newer",
        "inspect_sorted_completed_older",
        "inspect_sorted_due_newer",
        "inspect_sorted_due_older",
        "inspect_sorted_updated_newer",
        "inspect_sorted_updated_older",
        "inspect_tasks_by_key_after",
        "inspect_tasks_by_key_before",
        "inspect_tasks_id_tail_newer",
        "inspect_tasks_id_tail_older",
        "inspect_tasks_newer",
        "inspect_tasks_older",
        "inspect_tasks_payload_newer",
        "inspect_tasks_payload_older",
        "inspect_tasks_sparse_newer",
        "inspect_tasks_sparse_older",
    }
)


def prepare_for(name: str) -> bool | None:
    """psycopg's ``prepare=`` for statement ``name``: False (never) for those in
    ``PLANNED_WITH_VALUES``, None (the connection's default: prepared) otherwise."""
    return False if name in PLANNED_WITH_VALUES else None


def _sql(name: str) -> str:
    """The statement ``sql/postgres/<name>.sql`` (written in psycopg's ``%(name)s`` style)."""
    return statement("postgres", name)
