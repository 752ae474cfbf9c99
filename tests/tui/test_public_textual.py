"""The console uses Textual through its public API only: enforced, not hoped for.

A private name (a leading underscore) of a library is a break waiting for its
next release. Checked on the source of every ``cairnq_tui`` module:

- no import of a private Textual module (``textual.widgets._data_table``) or of a
  private name from a Textual module;
- no class deriving from a Textual class defines or reaches (``self._x``) a
  private method or attribute of its Textual bases: overriding ``_render_cell``
  or emptying ``self._styles_cache`` is what a new Textual breaks silently;
- no private attribute of a Textual object is reached from anywhere else
  (``table._updated_cells``) unless the console defines that name itself.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap
from functools import cache
from pathlib import Path

import cairnq_tui

PACKAGE = Path(cairnq_tui.__file__).parent


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def is_textual(module: str) -> bool:
    return module == "textual" or module.startswith("textual.")


def self_private(node: ast.AST) -> str | None:
    """The name in ``self._name``, else None."""
    match node:
        case ast.Attribute(value=ast.Name(id="self"), attr=attr) if private(attr):
            return attr
    return None


@cache
def textual_privates(cls: type) -> frozenset[str]:
    """Private names a Textual class defines: in its body, or as ``self._x`` in its source."""
    names = {name for name in vars(cls) if private(name)}
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return frozenset(names)
    names.update(filter(None, map(self_private, ast.walk(ast.parse(source)))))
    return frozenset(names)


def modules() -> list[tuple[str, ast.Module]]:
    found = [("cairnq_tui", PACKAGE / "__init__.py")]
    for info in pkgutil.walk_packages([str(PACKAGE)], "cairnq_tui."):
        spec = importlib.util.find_spec(info.name)
        assert spec is not None and spec.origin is not None
        found.append((info.name, Path(spec.origin)))
    return [(name, ast.parse(path.read_text(), str(path))) for name, path in found]


def private_imports(tree: ast.Module) -> list[str]:
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bad += [
                alias.name
                for alias in node.names
                if is_textual(alias.name) and any(map(private, alias.name.split(".")))
            ]
        elif isinstance(node, ast.ImportFrom) and is_textual(node.module or ""):
            module = node.module or ""
            if any(map(private, module.split("."))):
                bad.append(module)
            bad += [f"{module}.{a.name}" for a in node.names if private(a.name)]
    return bad


def self_privates(node: ast.ClassDef) -> set[str]:
    """Private methods a class body defines and ``self._x`` names its methods use."""
    names = {
        item.name
        for item in node.body
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and private(item.name)
    }
    return names | set(filter(None, map(self_private, ast.walk(node))))


def test_no_private_textual_module_is_imported() -> None:
    bad = {name: found for name, tree in modules() if (found := private_imports(tree))}
    assert bad == {}


def test_no_textual_subclass_overrides_or_reaches_a_private_name_of_textual() -> None:
    bad: dict[str, list[str]] = {}
    for module_name, tree in modules():
        module = importlib.import_module(module_name)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            cls = getattr(module, node.name, None)
            if not isinstance(cls, type):
                continue  # a class defined inside a function: not reachable here
            bases = [base for base in cls.__mro__ if is_textual(base.__module__)]
            theirs = frozenset().union(*map(textual_privates, bases))
            clash = sorted(self_privates(node) & theirs)
            if clash:
                bad[f"{module_name}.{node.name}"] = clash
    assert bad == {}


def test_no_private_attribute_of_a_textual_object_is_reached() -> None:
    import textual.app
    import textual.dom
    import textual.screen
    import textual.widget

    theirs = frozenset().union(
        *(
            textual_privates(cls)
            for module in (textual.app, textual.dom, textual.screen, textual.widget)
            for cls in vars(module).values()
            if isinstance(cls, type) and is_textual(cls.__module__)
        )
    )
    trees = modules()
    ours: set[str] = set()
    for _, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                ours.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                ours.add(node.attr)
            elif isinstance(node, ast.AnnAssign | ast.Assign):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(target, ast.Name):
                        ours.add(target.id)
    bad = {
        f"{name}:{node.lineno}: .{node.attr}"
        for name, tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in theirs
        and node.attr not in ours
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    }
    assert bad == set()


def test_the_checks_see_what_they_look_for() -> None:
    tree = ast.parse(
        "from textual.widgets._data_table import default_cell_formatter\n"
        "import textual._compositor\n"
        "from textual.widget import _private\n"
        "class T:\n"
        "    def _render_cell(self):\n"
        "        self._styles_cache.clear()\n"
    )
    assert private_imports(tree) == [
        "textual.widgets._data_table",
        "textual._compositor",
        "textual.widget._private",
    ]
    from textual.widgets import DataTable

    cls = next(node for node in tree.body if isinstance(node, ast.ClassDef))
    clash = self_privates(cls) & frozenset().union(
        *(textual_privates(base) for base in DataTable.__mro__ if is_textual(base.__module__))
    )
    assert clash == {"_render_cell", "_styles_cache"}
