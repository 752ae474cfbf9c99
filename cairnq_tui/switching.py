"""Switching the running console to another named target, and guarding danger ones.

``:`` (or "Switch to target …" in the palette) lists the config's targets; the
chosen one is checked like ``launch`` checks its target, and only then does the
console drop its views and store and reconnect on the new one. Switching keeps
``--read-only`` (a console started read-only stays read-only) and is refused
while the console hosts workers (they belong to the first target) and in the
consoles ``serve`` starts (a browser only reaches the target it was served).

(A ``danger = true`` target asks for its name before every write: that is a
policy of the controls, ``controls/_write_path.py``.)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, Protocol, cast

from cairnq_tui import named_targets
from cairnq_tui.commands import ConsoleCommands
from cairnq_tui.formatting import clean
from cairnq_tui.hosting import WorkerHost
from cairnq_tui.ports import AppCalls
from cairnq_tui.screens.targets import TargetPickerScreen
from cairnq_tui.settings import SERVED_ENV, Settings
from cairnq_tui.target import TargetError, check_target, make_store
from engine import TaskStore


class SwitchHost(AppCalls, Protocol):
    """What switching uses of the console app (``ConsoleApp`` implements it)."""

    settings: Settings
    host: WorkerHost | None

    async def retarget(self, store: TaskStore, settings: Settings) -> None:
        """Point the running console at another database, then connect."""


def _why_not(app: SwitchHost) -> str | None:
    if app.host is not None:
        return f"This console hosts {_hosted(app.host)} on its target: it cannot switch."
    if os.environ.get(SERVED_ENV) == "1":
        return "A served console stays on the target it was served for."
    return None


def _hosted(host: WorkerHost) -> str:
    """What the console hosts, in the words it was asked for (the demo's is built in)."""
    specs = [str(hosted.spec) for hosted in host.workers]
    if all(spec.startswith("cairnq_tui.demo:") for spec in specs):
        return "the demo worker"
    return f"--worker {', '.join(specs)}"


def _targets(app: SwitchHost) -> named_targets.Config | None:
    """The config's targets now (read again, so edits show), or None after a notice."""
    why = _why_not(app)
    if why is not None:
        app.notify(why, severity="warning", markup=False)
        return None
    try:
        found = named_targets.load(app.settings.config_path)
    except named_targets.ConfigError as exc:
        app.notify(str(exc), title="Bad config", severity="error", markup=False)
        return None
    if not found.targets:
        app.notify(f"No targets are named in {found.path}.", severity="warning", markup=False)
        return None
    return found


def pick_target(app: SwitchHost) -> None:
    """``:``: ask which target to show, then switch to it."""
    found = _targets(app)
    if found is None:
        return
    listed = [(t.name, t.where, t.danger) for t in found.targets.values()]

    def chosen(name: str | None) -> None:
        if name is not None:
            switch_to(app, found.targets[name])

    app.push_screen(TargetPickerScreen(listed, app.settings.name), chosen)


def switch_to(app: SwitchHost, named: named_targets.NamedTarget) -> None:
    """Check ``named`` in a worker, then point the console at it."""

    async def job() -> None:
        read_only = named.read_only or app.settings.locked_read_only
        try:
            target = named.open_target()
            notice = await check_target(target, read_only=read_only)
            store = make_store(target, read_only=read_only)
        except (named_targets.ConfigError, TargetError) as exc:
            app.notify(
                clean(str(exc)),
                title=f"Cannot switch to {named.name}",
                severity="error",
                markup=False,
            )
            return
        settings = replace(
            app.settings,
            target=target,
            name=named.name,
            danger=named.danger,
            read_only=read_only,
            queues=named.queues,
            refresh_s=named.refresh or 1.0,
            theme=named.theme,
            max_depth=dict(named.max_depth),
            notice=notice,
        )
        await app.retarget(store, settings)
        app.notify(f"Now on {named.name}: {named.where}", markup=False)

    app.run_worker(job(), group="switch", exclusive=True, exit_on_error=False)


class TargetCommands(ConsoleCommands):
    """ "Switch to target NAME" for every target of the config."""

    def _commands(self) -> list[tuple[str, str, Callable[[], Any]]]:
        app = cast("SwitchHost", self.app)
        if _why_not(app) is not None:
            return []
        try:
            found = named_targets.load(app.settings.config_path)
        except named_targets.ConfigError:
            return []  # the palette stays quiet; ":" says what is wrong
        return [
            (
                f"Switch to target {named.name}",
                clean(named.where) + ("  (danger)" if named.danger else ""),
                partial(switch_to, app, named),
            )
            for named in found.targets.values()
        ]
