"""The engine never imports the console's toolkit: enforced, not hoped for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from import_graph import import_cycles


def test_engine_imports_no_ui_modules() -> None:
    code = (
        "import sys, engine, engine.store\n"
        "import importlib, pkgutil\n"
        "for m in pkgutil.walk_packages(engine.__path__, 'engine.'):\n"
        "    if m.name.endswith('__main__'):\n"
        "        continue\n"
        "    importlib.import_module(m.name)\n"
        "banned = {'textual', 'rich', 'cairnq_tui', 'cairnq'}\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in banned)\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"engine imported UI or peer modules: {out.stdout.strip()}"


def test_engine_runs_sqlite_without_aiosqlite() -> None:
    """The SQLite store runs on ``sqlite3`` and a writer thread of its own.

    It used aiosqlite only through private attributes (``_execute``, ``_tx``,
    ``_conn``, ``_thread``), which a version bump could break silently. Every
    engine module is imported and a store opened, written and closed; aiosqlite
    must not be loaded (the cairnq peer still depends on it, so it is installed).
    """
    code = (
        "import asyncio, importlib, pkgutil, sys, tempfile\n"
        "import engine\n"
        "for m in pkgutil.walk_packages(engine.__path__, 'engine.'):\n"
        "    if not m.name.endswith('__main__'):\n"
        "        importlib.import_module(m.name)\n"
        "async def main():\n"
        "    store = engine.SQLiteStore(tempfile.mkdtemp() + '/t.db')\n"
        "    await store.connect()\n"
        "    await store.submit(name='n')\n"
        "    await store.close()\n"
        "asyncio.run(main())\n"
        "print(','.join(sorted(n for n in sys.modules if n.split('.')[0] == 'aiosqlite')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"engine loaded aiosqlite: {out.stdout.strip()}"


def test_no_import_cycle_in_the_engine() -> None:
    """Among the engine's modules, counting type-only imports and imports inside
    functions (``tests/import_graph.py``): _errors <-> _json <-> _models and the
    Inspector <-> its helpers (_fleet, _metrics, _task_order, _triage) were two."""
    assert import_cycles("engine") == []


def test_the_cycle_check_sees_type_only_and_lazy_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from pkg.a import A\n")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\nA = 1\n"
    )
    (package / "b.py").write_text("def f():\n    from . import a\n    return a\nB = 2\n")
    (package / "c.py").write_text("import pkg.a\n")
    (package / "d.py").write_text("from pkg import c\n")
    (package / "e.py").write_text("from pkg import d\n")
    (package / "f.py").write_text("from .e import x\nfrom pkg import A\n")
    assert import_cycles("pkg", tmp_path) == [["pkg.a", "pkg.b"]]
    (package / "c.py").write_text("import pkg.a\nfrom pkg import e\n")
    assert import_cycles("pkg", tmp_path) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d", "pkg.e"]]


def test_no_module_over_600_lines() -> None:
    """A module that long holds more than one job (issue 21: split them)."""
    root = Path(__file__).parents[2]
    long = sorted(
        f"{path.relative_to(root)}: {lines}"
        for package in ("engine", "cairnq_tui")
        for path in (root / package).rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > 600
    )
    assert long == []
