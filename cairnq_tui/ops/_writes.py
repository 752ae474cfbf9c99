"""``submit``, ``cancel``, ``retry`` and ``purge``: the console's writes, headless.

Each runs through ``cairnq_tui.actions``, the code the console's dialogs run:
the same bulk cap, the same eligibility (cancel: queued or running; retry: failed
or canceled), the same purge cutoff rules. A bulk write prints the exact count
and asks (unless ``--yes``); ``--dry-run`` prints the count and the ids and
writes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cairnq_tui import actions
from cairnq_tui.ops._common import (
    EXIT_FAILED,
    EXIT_OK,
    BadInput,
    Opened,
    ProgressLine,
    Refused,
    add_target_arguments,
    add_write_arguments,
    confirm,
    duration_arg,
    emit_json,
    opened,
    positive_int,
)
from cairnq_tui.ops._tasks import add_filter_arguments, describe, has_filter, task_filter
from engine import CONFLICTS

_RAW = argparse.RawDescriptionHelpFormatter


# -- submit ------------------------------------------------------------------------------


def add_submit_parser(commands: Any, example: str) -> None:
    parser = commands.add_parser(
        "submit",
        help="submit one task",
        description="Submit task NAME to TARGET; prints its id and what happened "
        "(created, reused, replaced, rejected).",
        epilog=example,
        formatter_class=_RAW,
    )
    add_target_arguments(parser)
    parser.add_argument("name", metavar="NAME", help="the task name")
    parser.add_argument(
        "--payload", metavar="JSON|@FILE", help="the payload: JSON text, or @FILE to read it"
    )
    parser.add_argument("--queue", default="default", help="the queue (default: default)")
    parser.add_argument("--key", help="an idempotency key")
    parser.add_argument(
        "--on-conflict",
        choices=CONFLICTS,
        default="reuse",
        help="when the key already holds a task (default reuse)",
    )
    parser.add_argument("--delay", type=duration_arg, default=0, help="due after this (e.g. 30s)")
    parser.add_argument("--priority", type=int, default=0, help="higher is claimed first")
    parser.add_argument("--max-attempts", type=positive_int, default=3, help="default 3")
    parser.add_argument("--json", action="store_true", help='print {"id": …, "outcome": …}')
    parser.add_argument(
        "--confirm-target",
        metavar="NAME",
        help="the target's name, required to write to a target marked danger = true",
    )


def _payload(text: str | None) -> Any:
    if text is None:
        return None
    source = "--payload"
    if text.startswith("@"):
        source = text[1:]
        try:
            text = Path(source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise BadInput(f"cannot read the payload file {source}: {reason}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{source} is not JSON: {exc}") from None


async def run_submit(args: argparse.Namespace) -> int:
    payload = _payload(args.payload)
    if args.on_conflict != "reuse" and not args.key:
        raise BadInput("--on-conflict applies to a keyed submit: give --key too")
    async with opened(args, write=True) as found:
        try:
            done = await actions.submit(
                found.client,
                args.name,
                payload,
                key=args.key,
                conflict=args.on_conflict,
                queue=args.queue,
                priority=args.priority,
                delay_ms=args.delay,
                max_attempts=args.max_attempts,
            )
        except ValueError as exc:  # the engine's checks: nothing was written
            raise BadInput(str(exc)) from None
    if args.json:
        emit_json({"id": done.task_id, "outcome": done.outcome})
    else:
        print(_submit_sentence(done, args.key))
    return EXIT_FAILED if done.outcome == "rejected" else EXIT_OK


def _submit_sentence(done: actions.Submitted, key: str | None) -> str:
    if done.task is None:
        held = f" by {done.holder_id} ({done.holder_status})" if done.holder_id else ""
        return f"rejected: key {key!r} is already held{held}; nothing written"
    task = done.task
    if done.outcome == "reused":
        return f"{task.id} reused ({task.status}) under key {key!r}"
    if done.outcome == "replaced" and done.previous is not None:
        return f"{task.id} replaced {done.previous.id} under key {key!r}"
    return f"{task.id} created on queue {task.queue!r}"


# -- cancel and retry -------------------------------------------------------------------------


def add_bulk_parser(commands: Any, verb: str, example: str) -> None:
    what = "live (queued or running)" if verb == "cancel" else "failed or canceled"
    parser = commands.add_parser(
        verb,
        help=f"{verb} tasks by id or by filter",
        description=f"{verb.capitalize()} the given task ids, or the {what} tasks matching "
        f"the filters (at most --limit, default {actions.BULK_CAP:,}). Prints the exact "
        "count and asks first, unless --yes.",
        epilog=example,
        formatter_class=_RAW,
    )
    add_target_arguments(parser)
    parser.add_argument("ids", nargs="*", metavar="ID", help="task ids (or use the filters)")
    statuses = actions.LIVE if verb == "cancel" else actions.RETRYABLE
    add_filter_arguments(parser, statuses=statuses)
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=actions.BULK_CAP,
        help=f"touch at most this many tasks (default {actions.BULK_CAP:,})",
    )
    if verb == "retry":
        parser.add_argument(
            "--reset-attempts", action="store_true", help="start the attempt count again at 0"
        )
    add_write_arguments(parser)


async def _selected(
    found: Opened, args: argparse.Namespace, statuses: tuple[str, ...]
) -> list[str]:
    """The ids a bulk write acts on: the given ones that are eligible, or the matches."""
    if args.ids:
        chosen: list[str] = []
        for task_id in dict.fromkeys(args.ids):
            ref = await found.client.get_status(task_id)
            if ref is None:
                raise BadInput(f"no task {task_id!r} in {found.target.display}; nothing written")
            if ref.status in statuses:
                chosen.append(ref.id)
            else:
                print(f"skipped {ref.id}: it is {ref.status}", file=sys.stderr)
        return chosen[: args.limit]
    return await found.inspector.matching_ids(task_filter(args), statuses=statuses, cap=args.limit)


def _check_selection(args: argparse.Namespace) -> None:
    if args.ids and has_filter(args):
        raise BadInput("give task ids or filters, not both")
    if not args.ids and not has_filter(args):
        raise BadInput(
            "give task ids, or at least one filter (--status, --queue, --name, --key, --id)"
        )
    task_filter(args)  # checked before the target is opened


async def run_bulk(args: argparse.Namespace) -> int:
    verb = args.command
    _check_selection(args)
    statuses = actions.LIVE if verb == "cancel" else actions.RETRYABLE
    async with opened(args, write=not args.dry_run) as found:
        ids = await _selected(found, args, statuses)
        what = "live" if verb == "cancel" else "failed or canceled"
        where = "the given ids" if args.ids else describe(args)
        if not ids:
            print(f"No {what} task matches ({where}); nothing to {verb}.")
            return EXIT_OK
        capped = f" (capped at --limit {args.limit:,})" if len(ids) >= args.limit else ""
        print(f"{len(ids):,} {what} task(s) to {verb} ({where}){capped}.")
        if args.dry_run:
            for task_id in ids:
                print(task_id)
            print("Dry run: nothing written.")
            return EXIT_OK
        if not args.yes and not confirm(f"{verb.capitalize()} {len(ids):,} task(s)?"):
            raise Refused("not confirmed; nothing written")
        progress = ProgressLine("canceled" if verb == "cancel" else "requeued")
        try:
            if verb == "cancel":
                changed = await actions.cancel_ids(found.client, ids, progress)
            else:
                changed = await actions.retry_ids(found.client, ids, args.reset_attempts, progress)
        finally:
            progress.close()
    skipped = len(ids) - len(changed)
    gone = f"; {skipped} had changed meanwhile and were left alone" if skipped else ""
    done = "Canceled or cancel-requested" if verb == "cancel" else "Requeued"
    print(f"{done} {len(changed):,} task(s){gone}.")
    return EXIT_OK


# -- purge ----------------------------------------------------------------------------------


def add_purge_parser(commands: Any, example: str) -> None:
    parser = commands.add_parser(
        "purge",
        help="delete terminal tasks by id, or completed before a cutoff",
        description="Delete the given task ids that are terminal (succeeded, failed, "
        "canceled), or the terminal tasks completed more than --older-than ago (0: any "
        "age), with the keys pointing at them: the console's purge. Given ids that are "
        "live or not found are left alone and counted. At most --limit (default "
        f"{actions.BULK_CAP:,}); prints the exact count and asks first, unless --yes.",
        epilog=example,
        formatter_class=_RAW,
    )
    add_target_arguments(parser)
    parser.add_argument("ids", nargs="*", metavar="ID", help="task ids (or use --older-than)")
    parser.add_argument(
        "--older-than",
        type=duration_arg,
        metavar="AGE",
        help="completed more than AGE ago (e.g. 7d; 0 = any age); required without ids",
    )
    parser.add_argument("--status", choices=actions.TERMINAL, help="only this terminal status")
    parser.add_argument("--queue", help="only this queue")
    parser.add_argument("--name", help="only this task name")
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=actions.BULK_CAP,
        help=f"delete at most this many (default {actions.BULK_CAP:,})",
    )
    add_write_arguments(parser)


async def run_purge(args: argparse.Namespace) -> int:
    if args.ids:
        cutoff = (args.older_than, args.status, args.queue, args.name)
        if any(option is not None for option in cutoff):
            raise BadInput(
                "give task ids or a cutoff (--older-than, --status, --queue, --name), not both"
            )
        return await _purge_by_id(args)
    if args.older_than is None:
        raise BadInput("give task ids, or --older-than AGE (0 = any age)")
    try:
        rule = actions.PurgeRule(args.older_than, args.queue, args.status, args.name)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    async with opened(args, write=not args.dry_run) as found:
        count = await found.inspector.count_purgeable(
            older_than_ms=rule.older_than_ms,
            queue=rule.queue,
            status=rule.status,
            name=rule.name,
            cap=args.limit,
        )
        filters = [
            f"{k}={v!r}"
            for k, v in (("status", rule.status), ("queue", rule.queue), ("name", rule.name))
            if v
        ]
        where = ", ".join(filters) or "any terminal status, every queue and name"
        if count.value == 0:
            print(
                f"No terminal task completed before the cutoff matches ({where}); nothing to purge."
            )
            return EXIT_OK
        capped = f" (capped at --limit {args.limit:,})" if count.at_least else ""
        print(f"{count.value:,} task(s) to purge ({where}){capped}.")
        if args.dry_run:
            for task_id in await actions.purgeable_ids(found.inspector, rule, cap=args.limit):
                print(task_id)
            print("Dry run: nothing written.")
            return EXIT_OK
        if not args.yes and not confirm(f"Delete {count.value:,} task(s) for good?"):
            raise Refused("not confirmed; nothing written")
        progress = ProgressLine("purged")
        try:
            total = await actions.purge(
                found.client, rule, expected=count.value, limit=args.limit, progress=progress
            )
        finally:
            progress.close()
    print(f"Purged {total:,} task(s).")
    return EXIT_OK


async def _purge_by_id(args: argparse.Namespace) -> int:
    async with opened(args, write=not args.dry_run) as found:
        chosen = await actions.purge_selection(found.inspector, args.ids)
        ids = chosen.terminal[: args.limit]
        left = [
            f"{len(ids_):,} {what}"
            for ids_, what in ((chosen.live, "not terminal"), (chosen.missing, "not found"))
            if ids_
        ]
        if len(chosen.terminal) > len(ids):
            left.append(f"{len(chosen.terminal) - len(ids):,} over --limit {args.limit:,}")
        aside = f"; left alone: {', '.join(left)}" if left else ""
        given = len(chosen.terminal) + len(chosen.live) + len(chosen.missing)
        for task_id in chosen.live:
            print(f"skipped {task_id}: it is not terminal", file=sys.stderr)
        for task_id in chosen.missing:
            print(f"skipped {task_id}: not found", file=sys.stderr)
        if not ids:
            print(f"No terminal task among the {given:,} given id(s){aside}; nothing to purge.")
            return EXIT_OK
        print(f"{len(ids):,} terminal task(s) to purge of the {given:,} given id(s){aside}.")
        if args.dry_run:
            for task_id in ids:
                print(task_id)
            print("Dry run: nothing written.")
            return EXIT_OK
        if not args.yes and not confirm(f"Delete {len(ids):,} task(s) for good?"):
            raise Refused("not confirmed; nothing written")
        progress = ProgressLine("purged")
        try:
            deleted = await actions.purge_ids(found.client, ids, progress)
        finally:
            progress.close()
    gone = len(ids) - len(deleted)
    changed = f"; {gone:,} had changed meanwhile and were left alone" if gone else ""
    print(f"Purged {len(deleted):,} task(s){changed}.")
    return EXIT_OK
