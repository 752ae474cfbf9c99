"""The status bar: where the console points, its versions, and how refresh is going."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from cairnq_tui.formatting import clean


class StatusBar(Static):
    """One line: target (password redacted), dialect, versions, refresh state and cost."""

    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; color: $text; padding: 0 1; }
    StatusBar.-danger { background: $error-darken-2; }
    """

    target: reactive[str] = reactive("")
    dialect: reactive[str] = reactive("")
    versions: reactive[str] = reactive("")
    state: reactive[str] = reactive("connecting")
    cost_ms: reactive[float | None] = reactive(None)
    read_only: reactive[bool] = reactive(False)
    #: The config's name for the target, and whether it is marked ``danger``.
    target_name: reactive[str] = reactive("")
    danger: reactive[bool] = reactive(False)

    def watch_danger(self, danger: bool) -> None:
        self.set_class(danger, "-danger")

    def render(self) -> Text:
        parts: list[tuple[str, str] | str] = []
        if self.read_only:
            parts += [(" READ-ONLY ", "bold reverse red"), " "]
        if self.target_name:
            badge = "bold reverse yellow" if self.danger else "bold reverse"
            parts += [(f" {clean(self.target_name)} ", badge), " "]
        parts += [(clean(self.target), "bold"), f"  {self.dialect}"]
        if self.versions:
            parts.append(f"  {self.versions}")
        style = (
            "red"
            if self.state.startswith("error")
            else "yellow"
            if "paused" in self.state
            else "green"
        )
        parts += ["  ", (clean(self.state), style)]
        if self.cost_ms is not None:
            parts.append(f"  last refresh {self.cost_ms:.1f} ms")
        return Text.assemble(*parts, no_wrap=True, overflow="ellipsis")
