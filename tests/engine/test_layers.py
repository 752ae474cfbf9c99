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
