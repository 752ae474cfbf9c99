"""The built wheel works on its own: installed into a fresh virtual environment
(no editable install, no source tree on the path), it finds its ``sql/`` files
and opens a SQLite store."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest
from schema_names import SQLITE_MIGRATIONS

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

PROBE = textwrap.dedent(
    """
    import asyncio, json, sqlite3, sys
    from pathlib import Path

    import engine
    from engine._sql import sql_root
    from engine.conformance import SCENARIOS
    from engine.store.sqlite import SQLiteStore

    async def main(path):
        store = SQLiteStore(path)
        await store.connect()
        try:
            task = await store.submit(name="wheel.check", payload={"n": 1}, key="k")
            again = await store.get_by_key("k")
        finally:
            await store.close()
        with sqlite3.connect(path) as db:
            ledger = [r[0] for r in db.execute("select name from cairnq_migrations order by name")]
        print(json.dumps({
            "engine": engine.__file__,
            "version": engine.__version__,
            "scenarios": len(list(SCENARIOS.glob("*.json"))),
            "sql_root": str(sql_root()),
            "same": again is not None and again.id == task.id,
            "payload": again.payload if again else None,
            "status": again.status if again else None,
            "ledger": ledger,
            "peer": sorted(m for m in sys.modules if m.split(".")[0] == "cairnq"),
        }))

    asyncio.run(main(sys.argv[1]))
    """
)


def run(*args: str | Path, cwd: Path) -> str:
    out = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, cwd=cwd, timeout=300
    )
    assert out.returncode == 0, f"{args}\n{out.stdout}\n{out.stderr}"
    return out.stdout


def test_installed_wheel_opens_a_store(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, REPO, cwd=tmp_path)
    [wheel] = dist.glob("cairnq_tui-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "engine/sql/sqlite/insert_task.sql" in names
    assert "engine/sql/postgres/installations.sql" in names
    assert "engine/sql/migrations/sqlite/0001_init.sql" in names
    assert "engine/sql/migrations/postgres/0003_notify.sql" in names
    assert not any(name.startswith("sql/") for name in names)
    # PEP 561: type checkers read the engine's annotations from the installed wheel.
    assert "engine/py.typed" in names
    # The runner's default scenarios travel with the package.
    scenarios = [n for n in names if n.startswith("engine/conformance/scenarios/")]
    assert len(scenarios) >= 30 and all(n.endswith(".json") for n in scenarios)

    # A bare venv, filled by the outer pip: no editable install can leak in.
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False, system_site_packages=False)
    python = env_dir / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "-q", wheel, cwd=tmp_path)

    work = tmp_path / "elsewhere"
    work.mkdir()
    # -I: ignore PYTHON* variables and the user site; cwd is outside the checkout.
    report = json.loads(run(python, "-I", "-c", PROBE, work / "tasks.db", cwd=work))

    site = env_dir.resolve()
    assert Path(report["engine"]).resolve().is_relative_to(site), report["engine"]
    assert Path(report["sql_root"]).resolve().is_relative_to(site), report["sql_root"]
    assert report["same"] is True
    assert report["payload"] == {"n": 1}
    assert report["status"] == "queued"
    assert report["ledger"] == SQLITE_MIGRATIONS
    assert report["peer"] == []
    assert report["version"] == wheel.name.split("-")[1]
    assert report["scenarios"] == len(scenarios)
