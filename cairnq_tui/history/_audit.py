"""The audit trail: every write the console makes, appended to the history file.

``AuditedClient`` is the engine's ``CairnQ`` with each write (submit, cancel,
retry, the by-key forms, purge, run now, delay) recorded after it returns: time,
OS user, target, action, the ids, key or filter, and how many tasks changed.
The console's controls write through ``app.client``, so no write can skip it.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Callable
from typing import Any

from cairnq_tui.history._file import AuditEntry, HistoryFile
from engine import CairnQ, SubmitOutcome, Task, TaskStore


def os_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name (a container without a passwd entry)
        return "?"


class Auditor:
    """Appends audit entries for one target."""

    def __init__(self, history: HistoryFile, target: str, clock: Callable[[], int]) -> None:
        self.history = history
        self.target = target
        self.clock = clock
        self.user = os_user()

    def record(self, action: str, detail: dict[str, Any], count: int) -> None:
        self.history.audit(
            AuditEntry(
                at_ms=self.clock(),
                os_user=self.user,
                target=self.target,
                action=action,
                detail=json.dumps(detail, sort_keys=True, ensure_ascii=False),
                count=count,
            )
        )


class AuditedClient(CairnQ):
    """``CairnQ`` whose writes are recorded by an ``Auditor``."""

    def __init__(self, store: TaskStore, auditor: Auditor) -> None:
        super().__init__(store)
        self.auditor = auditor

    async def submit_outcome(self, name: Any, payload: Any = None, **kwargs: Any) -> SubmitOutcome:
        # CairnQ.submit answers through submit_outcome, so this records both.
        done = await super().submit_outcome(name, payload, **kwargs)
        task = done.task
        detail = {"id": task.id, "name": task.name, "queue": task.queue, "outcome": done.action}
        if kwargs.get("key"):
            detail |= {"key": kwargs["key"], "conflict": kwargs.get("conflict", "reuse")}
        self.auditor.record("submit", detail, 0 if done.action == "reused" else 1)
        return done

    async def cancel(self, task_id: str) -> Task | None:
        task = await super().cancel(task_id)
        self.auditor.record("cancel", {"ids": [task_id]}, int(task is not None))
        return task

    async def cancel_by_key(self, key: str) -> Task | None:
        task = await super().cancel_by_key(key)
        detail = {"key": key, "ids": [task.id] if task else []}
        self.auditor.record("cancel", detail, int(task is not None))
        return task

    async def retry(self, task_id: str, *, reset_attempt: bool = False) -> Task | None:
        task = await super().retry(task_id, reset_attempt=reset_attempt)
        detail = {"ids": [task_id], "reset_attempt": reset_attempt}
        self.auditor.record("retry", detail, int(task is not None))
        return task

    async def retry_by_key(self, key: str, *, reset_attempt: bool = False) -> Task | None:
        task = await super().retry_by_key(key, reset_attempt=reset_attempt)
        detail = {"key": key, "ids": [task.id] if task else [], "reset_attempt": reset_attempt}
        self.auditor.record("retry", detail, int(task is not None))
        return task

    async def run_now(self, task_id: str) -> Task:
        task = await super().run_now(task_id)
        self.auditor.record("run now", {"ids": [task_id]}, 1)
        return task

    async def delay(self, task_id: str, delay_ms: int) -> Task:
        task = await super().delay(task_id, delay_ms)
        self.auditor.record("delay", {"ids": [task_id], "delay_ms": delay_ms}, 1)
        return task

    async def purge(
        self,
        *,
        older_than_ms: int = 0,
        queue: str | None = None,
        status: str | None = None,
        name: str | None = None,
        limit: int = 1_000,
    ) -> list[str]:
        ids = await super().purge(
            older_than_ms=older_than_ms, queue=queue, status=status, name=name, limit=limit
        )
        detail = {
            "filter": {
                "older_than_ms": older_than_ms,
                "queue": queue,
                "status": status,
                "name": name,
            },
            "ids": ids[:20],
        }
        self.auditor.record("purge", detail, len(ids))
        return ids

    async def purge_ids(self, ids: list[str]) -> list[str]:
        deleted = await super().purge_ids(ids)
        self.auditor.record("purge", {"ids": deleted[:20]}, len(deleted))
        return deleted
