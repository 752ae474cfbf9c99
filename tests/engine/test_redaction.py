"""One DSN redactor for the engine and the console, correct for any password."""

from __future__ import annotations

import pytest

from engine import PostgresStore
from engine.store import redact_dsn


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("postgresql://u:p@ss@h/db", "postgresql://u:***@h/db"),
        ("postgres://u:a@b@c@h:5432/db?sslmode=off", "postgres://u:***@h:5432/db?sslmode=off"),
        ("postgresql://u:p:q@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:p/x@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("postgresql://h/db?user=a@b", "postgresql://h/db?user=a@b"),
        (
            "postgresql://u@h/db?password=s@c&sslmode=off",
            "postgresql://u@h/db?password=***&sslmode=off",
        ),
        ("host=h password=s@c dbname=db", "host=h password=*** dbname=db"),
        ("host=h password='s c@d' dbname=db", "host=h password=*** dbname=db"),
        (
            "cannot reach postgresql://u:p@ss@h/db (timeout); retry postgres://v:w@x/y",
            "cannot reach postgresql://u:***@h/db (timeout); retry postgres://v:***@x/y",
        ),
        ("/var/lib/tasks.db", "/var/lib/tasks.db"),
    ],
)
def test_every_password_is_hidden_whole(text: str, shown: str) -> None:
    assert redact_dsn(text) == shown


def test_the_store_target_and_the_console_use_the_same_redactor() -> None:
    from cairnq_tui.target import parse_target

    dsn = "postgresql://u:p@ss@h/db"
    assert PostgresStore(dsn).target == parse_target(dsn).display == redact_dsn(dsn)
