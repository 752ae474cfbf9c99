"""The scenario file format (docs/protocol-notes.md): loading, ``$ref`` resolution, assertions.

Everything here is pure data handling; running the ops against a store lives in
``engine.conformance._runner``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The engine's own scenarios, shipped inside the package: what the runner runs
#: when it is given no path.
SCENARIOS = Path(__file__).resolve().parent / "scenarios"

#: Assertion keys of an ``expect`` object, checked in this order.
ASSERTION_KEYS = (
    "equals",
    "equalsRef",
    "notEqualsRef",
    "greaterThanRef",
    "length",
    "notNull",
    "isNull",
)


class ScenarioError(Exception):
    """A step did not behave as its scenario says; the message is the reason."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """One scenario file: its name, where it came from and its steps."""

    name: str
    path: Path
    steps: tuple[Mapping[str, Any], ...]


def load_scenario(path: Path) -> Scenario:
    """Parse one scenario file.

    Raises:
        ScenarioError: the file is not valid JSON or not a scenario object.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScenarioError(f"cannot read scenario {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise ScenarioError(f"{path}: a scenario is an object with a 'steps' array")
    steps = data["steps"]
    if not all(isinstance(step, dict) and isinstance(step.get("op"), str) for step in steps):
        raise ScenarioError(f"{path}: every step must be an object with a string 'op'")
    name = data.get("name")
    return Scenario(
        name=name if isinstance(name, str) and name else path.stem,
        path=path,
        steps=tuple(steps),
    )


def scenario_files(paths: Iterable[Path]) -> list[Path]:
    """Expand each path (a scenario file, or a folder of ``*.json`` files) in name order.

    Raises:
        FileNotFoundError: a path does not exist.
    """
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(path.glob("*.json")))
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"no scenario file or folder at {path}")
    return files


def resolve(value: Any, saved: Mapping[str, Any]) -> Any:
    """Resolve every ``$name.part...`` string in ``value``, recursively.

    The first part names a saved result; each further part is an object key or,
    when numeric, an array index. Anything missing along the way resolves to None.
    """
    if isinstance(value, str) and value.startswith("$"):
        parts = value[1:].split(".")
        current: Any = saved.get(parts[0])
        for part in parts[1:]:
            current = _descend(current, part)
        return current
    if isinstance(value, dict):
        return {key: resolve(item, saved) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, saved) for item in value]
    return value


def _descend(current: Any, part: str) -> Any:
    if current is None:
        return None
    if isinstance(current, list):
        if part.isdigit() and int(part) < len(current):
            return current[int(part)]
        return None
    if isinstance(current, Mapping):
        return current.get(part)
    return getattr(current, part, None)


def deep_equal(left: Any, right: Any) -> bool:
    """JSON equality: numbers by value (1.0 == 1), booleans only equal booleans."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(deep_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            deep_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    return type(left) is type(right) and bool(left == right)


def _field(target: Any, name: str) -> Any:
    # A field of a null target is null, so isNull on a missing task passes.
    if isinstance(target, Mapping):
        return target.get(name)
    return None


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)


def check_assertions(target: Any, expect: Mapping[str, Any], saved: Mapping[str, Any]) -> None:
    """Check every assertion key present in ``expect`` against ``target``.

    Raises:
        ScenarioError: the first assertion that does not hold, or an unknown key.
    """
    unknown = set(expect) - set(ASSERTION_KEYS) - {"target"}
    if unknown:
        raise ScenarioError(f"unknown assertion(s) {sorted(unknown)}")
    for key in ASSERTION_KEYS:
        if key in expect:
            _ASSERTIONS[key](target, resolve(expect[key], saved))


def _equals(target: Any, fields: Any) -> None:
    if not isinstance(fields, Mapping):
        raise ScenarioError("'equals' takes an object of field: value")
    for name, want in fields.items():
        got = _field(target, name)
        if not deep_equal(got, want):
            raise ScenarioError(f"equals: field {name!r} is {_show(got)}, expected {_show(want)}")


def _equals_ref(target: Any, want: Any) -> None:
    if not deep_equal(target, want):
        raise ScenarioError(f"equalsRef: got {_show(target)}, expected {_show(want)}")


def _not_equals_ref(target: Any, other: Any) -> None:
    if deep_equal(target, other):
        raise ScenarioError(f"notEqualsRef: both are {_show(target)}")


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and not (isinstance(value, float) and math.isnan(value))
    )


def _greater_than_ref(target: Any, bound: Any) -> None:
    if not (_is_number(target) and _is_number(bound)):
        raise ScenarioError(
            f"greaterThanRef: needs two numbers, got {_show(target)} and {_show(bound)}"
        )
    if not target > bound:
        raise ScenarioError(f"greaterThanRef: {_show(target)} is not greater than {_show(bound)}")


def _length(target: Any, size: Any) -> None:
    if not isinstance(target, list):
        raise ScenarioError(f"length: target is not an array but {_show(target)}")
    if not deep_equal(len(target), size):
        raise ScenarioError(f"length: got {len(target)}, expected {_show(size)}")


def _field_list(fields: Any, key: str) -> list[str]:
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise ScenarioError(f"'{key}' takes an array of field names")
    return fields


def _not_null(target: Any, fields: Any) -> None:
    for name in _field_list(fields, "notNull"):
        if _field(target, name) is None:
            raise ScenarioError(f"notNull: field {name!r} is null")


def _is_null(target: Any, fields: Any) -> None:
    for name in _field_list(fields, "isNull"):
        value = _field(target, name)
        if value is not None:
            raise ScenarioError(f"isNull: field {name!r} is {_show(value)}")


_ASSERTIONS = {
    "equals": _equals,
    "equalsRef": _equals_ref,
    "notEqualsRef": _not_equals_ref,
    "greaterThanRef": _greater_than_ref,
    "length": _length,
    "notNull": _not_null,
    "isNull": _is_null,
}
