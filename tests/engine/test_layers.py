"""The engine never imports the console's toolkit: enforced, not hoped for."""

from __future__ import annotations

import subprocess
import sys


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
