"""The runner itself: references, equality, and how it reports failing scenarios.

A runner that cannot fail proves nothing, so these feed it scenarios that must
fail (each for a different reason) and check the report and the exit status.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.conformance import ScenarioError, check_assertions, deep_equal, main, resolve


def test_references_descend_objects_and_arrays() -> None:
    saved = {"c": [{"id": "task_1", "error": None}], "t": {"id": "task_2"}}
    assert resolve("$c.0.id", saved) == "task_1"
    assert resolve({"ids": ["$t.id", "$c.0.id"], "n": 3}, saved) == {
        "ids": ["task_2", "task_1"],
        "n": 3,
    }
    assert resolve("$c.0.error.type", saved) is None  # null stays null
    assert resolve("$c.5.id", saved) is None
    assert resolve("$t.missing", saved) is None
    assert resolve("$nothing", saved) is None
    assert resolve("plain", saved) == "plain"


def test_deep_equality_is_json_equality() -> None:
    assert deep_equal(1.0, 1)
    assert deep_equal({"a": [1, {"b": 2.0}]}, {"a": [1.0, {"b": 2}]})
    assert not deep_equal(True, 1)
    assert not deep_equal({"a": 1}, {"a": 1, "b": None})
    assert not deep_equal([1, 2], [1, 2, 3])
    assert not deep_equal("1", 1)
    assert not deep_equal(None, {})


@pytest.mark.parametrize(
    ("target", "expect"),
    [
        ({"status": "queued"}, {"equals": {"status": "running"}}),
        (None, {"equals": {"status": "queued"}}),
        ([1], {"length": 2}),
        ({"a": 1}, {"length": 1}),
        (3, {"equalsRef": 4}),
        (3, {"notEqualsRef": 3.0}),
        (3, {"greaterThanRef": 3}),
        (None, {"greaterThanRef": 1}),
        ({"id": None}, {"notNull": ["id"]}),
        ({"id": "x"}, {"isNull": ["id"]}),
        ({}, {"sameAs": 1}),
    ],
)
def test_assertions_fail_when_they_should(target: object, expect: dict[str, object]) -> None:
    with pytest.raises(ScenarioError):
        check_assertions(target, expect, {})


def test_assertions_pass_when_they_should() -> None:
    check_assertions(
        {"status": "queued", "attempt": 1, "error": None},
        {
            "equals": {"status": "queued", "attempt": 1.0},
            "isNull": ["error"],
            "notNull": ["status"],
        },
        {},
    )
    check_assertions(None, {"isNull": ["id"]}, {})
    check_assertions([1, 2], {"length": 2, "notEqualsRef": [2, 1]}, {})
    check_assertions(5, {"greaterThanRef": "$x", "equalsRef": 5.0}, {"x": 4})


def write(folder: Path, name: str, body: object) -> None:
    text = body if isinstance(body, str) else json.dumps(body)
    (folder / f"{name}.json").write_text(text, encoding="utf-8")


def test_cli_reports_each_failing_scenario_and_exits_nonzero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    submit = {"op": "submit", "args": {"name": "job", "payload": {"n": 1}}, "save": "t"}
    write(
        tmp_path,
        "a_passes",
        {
            "name": "passes",
            "steps": [
                submit,
                {"op": "get", "args": {"id": "$t.id"}, "expect": {"equals": {"payload": {"n": 1}}}},
                {
                    "op": "claim",
                    "args": {"queues": ["default"], "worker_id": "w", "names": []},
                    "expect": {"length": 0},
                },
                {
                    "op": "heartbeat",
                    "args": {"id": "$t.id", "worker_id": "w"},
                    "expectError": "LostLease",
                    "save": "e",
                },
                {"op": "expect", "target": "$e", "equals": {"type": "LostLease"}},
                {"op": "expect", "target": "$e.task_id", "equalsRef": "$t.id"},
            ],
        },
    )
    write(
        tmp_path,
        "b_wrong_status",
        {
            "name": "wrong_status",
            "steps": [submit, {"op": "expect", "target": "$t", "equals": {"status": "running"}}],
        },
    )
    write(
        tmp_path,
        "c_missing_error",
        {"name": "missing_error", "steps": [{**submit, "expectError": "AlreadyExists"}]},
    )
    write(
        tmp_path,
        "d_unexpected_error",
        {
            "name": "unexpected_error",
            "steps": [{"op": "heartbeat", "args": {"id": "task_x", "worker_id": "w"}}],
        },
    )
    write(tmp_path, "e_unknown_op", {"name": "unknown_op", "steps": [{"op": "teleport"}]})
    write(
        tmp_path,
        "f_unknown_arg",
        {"name": "unknown_arg", "steps": [{"op": "submit", "args": {"name": "x", "qeue": "q"}}]},
    )
    write(tmp_path, "g_not_json", "{ nope")

    status = main([str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()

    assert status == 1
    assert lines[-1] == "1 passed, 6 failed"
    failures = lines[:-1]
    assert len(failures) == 6
    assert failures[0].startswith("FAIL wrong_status step 1 (expect): equals: field 'status'")
    assert failures[1].startswith("FAIL missing_error step 0 (submit): expected AlreadyExists")
    assert failures[2].startswith("FAIL unexpected_error step 0 (heartbeat): raised LostLease")
    assert failures[3] == "FAIL unknown_op step 0 (teleport): unknown op 'teleport'"
    assert failures[4].startswith("FAIL unknown_arg step 0 (submit): submit: unknown argument")
    assert failures[5].startswith("FAIL g_not_json: cannot read scenario")


def test_cli_refuses_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main([str(tmp_path / "absent")])
    assert exc.value.code == 2
