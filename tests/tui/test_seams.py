"""The console's seams: views, screens and controls see the app as a ``Console``
(``cairnq_tui/ports.py``) and never import ``cairnq_tui.app``, which builds them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from import_graph import import_cycles

ROOT = Path(__file__).parents[2]


def test_only_the_command_line_imports_the_app() -> None:
    """Not even for type checking: the views, screens, controls and the target switch
    depend on the ``Console`` protocol (the app.py <-> controls.py cycle is gone)."""
    importers = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "cairnq_tui").rglob("*.py")
        if "cairnq_tui.app " in path.read_text() or "cairnq_tui.app\n" in path.read_text()
    )
    assert importers == ["cairnq_tui/cli.py"]


def test_controls_views_and_screens_import_without_the_app() -> None:
    code = (
        "import sys\n"
        "import cairnq_tui.controls, cairnq_tui.switching, cairnq_tui.commands\n"
        "import cairnq_tui.screens.main, cairnq_tui.screens.detail, cairnq_tui.screens.purge\n"
        "print('cairnq_tui.app' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"


def test_every_view_of_the_main_screen_is_a_data_view() -> None:
    from cairnq_tui.screens.detail import TaskDetailScreen
    from cairnq_tui.screens.main import VIEWS
    from cairnq_tui.widgets.view_bases import DataNode, DataView

    assert all(issubclass(view, DataView) for _, view in VIEWS.values())
    assert issubclass(TaskDetailScreen, DataNode)


def test_no_import_circle_in_the_console() -> None:
    """Not even through ``if TYPE_CHECKING`` or a lazy import in a function
    (``tests/import_graph.py`` says what counts): the app's pieces depend on ports,
    not on each other in a circle (console.py -> controls.py -> screens/purge.py ->
    widgets/console_node.py -> console.py was one)."""
    assert import_cycles("cairnq_tui") == []


def test_nothing_imports_the_command_line_back() -> None:
    """``cli.py`` is the top: ``serve.py`` runs its server through
    ``cairnq_tui.hosting.run_hosting`` instead of importing it from ``cli`` (the
    cli.py <-> serve.py cycle is gone)."""
    importers = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "cairnq_tui").rglob("*.py")
        if path.name != "cli.py" and "cairnq_tui.cli" in imported_modules(path)
    )
    assert importers == []


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code (``from a import b``
    counts as ``a`` and ``a.b``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found
