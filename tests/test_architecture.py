"""runner's layout: modules import each other without a circle and never into a layer above
their own (five layers: foundation, language, run, tools, cli); at most ten modules at the
package root, at most twelve in a package of the LLM path; no module over 400 lines.

The graph is built with `ast` from every module's imports: at module level, inside functions
(a lazy import still ties two modules together) and in `if TYPE_CHECKING:` blocks (a type
names the module it comes from: a circle of types is a circle). An edge goes to the module
an import names; the parent packages Python also runs on the way are not edges of their own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runner.docgen.architecture import BEGIN, DOC_FILE, END, LAYERS, docstring, main, render_table, unit_path, updated

PACKAGE = Path(__file__).resolve().parent.parent / "runner"
# One worker runs this module: the import graph (every module parsed) is built once, not once a worker.
pytestmark = pytest.mark.xdist_group("architecture")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                           for alias in node.names]
            graph[name] |= {t for t in targets if t in known and t != name}
    return graph


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    """runner's import graph, built once for the tests that only read it (each build parses every module)."""
    return import_graph()


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each as one circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strongconnect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                strongconnect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(_circle(graph, set(component)))

    for node in sorted(graph):
        if node not in index:
            strongconnect(node)
    return found


def _circle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """One concrete circle through a component: a -> b -> ... -> a (shortest from its first module)."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node] & component):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    return sorted(component)


MAX_ROOT_MODULES = 10
MAX_PACKAGE_MODULES = 12       # in runner/llm and each package under it, beside its __init__.py
MAX_LINES = 400


def unit_of(module: str) -> str:
    """runner.llm.service -> runner.llm; a root module (runner.api) is its own unit."""
    return ".".join(module.split(".")[:2])


def layer_of(unit: str) -> int:
    for number, (_, _, units) in enumerate(LAYERS):
        if unit in units:
            return number
    raise AssertionError(f"{unit} is in no layer: add it to LAYERS in runner/docgen/architecture.py "
                         "(and run python -m runner.docgen.architecture)")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in sorted(graph.items()):
        layer = layer_of(unit_of(module))
        for target in sorted(targets):
            if layer_of(unit_of(target)) > layer:
                found.append(f"{module} ({LAYERS[layer][0]}) imports {target} "
                             f"({LAYERS[layer_of(unit_of(target))][0]})")
    return found


def test_imports_go_down_the_layers_only(graph):
    found = upward_imports(graph)
    assert not found, "imports into the same or a higher layer:\n" + "\n".join(found)


def test_an_upward_import_is_found_and_one_inside_a_layer_is_not():
    graph = {"runner.engine.execute": {"runner.llm.service"}, "runner.llm.service": {"runner.engine.observe"},
             "runner.engine.observe": set(), "runner.pipeline.loader": {"runner.engine.execute"},
             "runner.templating.sandbox": {"runner.text.sentences"}, "runner.text.sentences": set()}
    assert upward_imports(graph) == ["runner.pipeline.loader (language) imports runner.engine.execute (run)"]


def test_every_package_is_in_a_layer():
    units = {unit_of(name) for name in modules()}
    for unit in units:
        layer_of(unit)
    listed = {unit for _, _, layer in LAYERS for unit in layer}
    assert not listed - units, f"LAYERS names what is not in runner/: {sorted(listed - units)}"


def test_every_package_and_root_module_says_what_it_is():
    silent = [str(path.relative_to(PACKAGE.parent)) for _, _, units in LAYERS for unit in units
              if not docstring(path := unit_path(unit)).strip()]
    assert not silent, f"no docstring (ARCHITECTURE.md's table is made of them): {silent}"


def test_the_package_table_in_architecture_md_is_current():
    committed = (PACKAGE.parent / DOC_FILE).read_text(encoding="utf-8")
    assert committed == updated(committed), "ARCHITECTURE.md's package table is stale: " \
        "run python -m runner.docgen.architecture"


def test_a_stale_package_table_is_refused_and_rewritten(tmp_path, capsys):
    page = tmp_path / "ARCHITECTURE.md"
    page.write_text(f"# Architecture\n\n{BEGIN}\n| old |\n{END}\n\nThe rest.\n", encoding="utf-8")
    assert main(["--check", str(page)]) == 1
    assert "stale: run python -m runner.docgen.architecture" in capsys.readouterr().err
    assert main([str(page)]) == 0 and main(["--check", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == f"# Architecture\n\n{BEGIN}\n{render_table()}\n{END}\n\nThe rest.\n"


def test_few_modules_at_the_root_and_none_too_long():
    root = [p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"]
    assert len(root) <= MAX_ROOT_MODULES, sorted(root)
    long = {str(p.relative_to(PACKAGE.parent)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_package_of_the_llm_path_holds_more_than_twelve_modules():
    packages = [PACKAGE / "llm", *(p.parent for p in (PACKAGE / "llm").glob("*/__init__.py"))]
    crowded = {str(p.relative_to(PACKAGE.parent)): n for p in packages
               if (n := sum(1 for m in p.glob("*.py") if m.name != "__init__.py")) > MAX_PACKAGE_MODULES}
    assert not crowded, f"packages over {MAX_PACKAGE_MODULES} modules: {crowded}"


def test_no_import_circle(graph):
    found = cycles(graph)
    assert not found, "import circles:\n" + "\n".join(" -> ".join(circle) for circle in found)


def test_the_graph_sees_lazy_and_type_only_imports():
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\n"
                     "def f():\n    from b import c\n")
    assert sorted(n.names[0].name if isinstance(n, ast.Import) else n.module for n in _imports(tree)) == \
        ["a", "b", "typing"]


def test_a_circle_is_found_and_printed():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


# Tests use runner through its public names: no `from runner.x import _name`, no `_field` read
# on a module, class or object that came from runner (found by the name it was imported as).
TESTS = PACKAGE.parent / "tests"


def private_uses(tree: ast.AST) -> list[str]:
    from_runner: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "runner":
            for alias in node.names:
                if alias.name.startswith("_"):
                    found.append(f"line {node.lineno}: imports {node.module}.{alias.name}")
                from_runner.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            from_runner |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "runner"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            root: ast.AST = node.value
            while isinstance(root, (ast.Attribute, ast.Call, ast.Subscript)):
                root = root.func if isinstance(root, ast.Call) else root.value
            if isinstance(root, ast.Name) and root.id in from_runner:
                found.append(f"line {node.lineno}: reads {ast.unparse(node)}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setattr" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                and str(node.args[1].value).startswith("_") and isinstance(node.args[0], ast.Name) \
                and node.args[0].id in from_runner:
            found.append(f"line {node.lineno}: replaces {node.args[0].id}.{node.args[1].value}")
    return found


def test_tests_use_no_private_name_of_runner():
    found = [f"{path.relative_to(TESTS.parent)} {use}" for path in sorted(TESTS.rglob("*.py"))
             for use in private_uses(ast.parse(path.read_text(encoding="utf-8")))]
    assert not found, "tests reaching into runner's private names:\n" + "\n".join(found)


def test_a_private_use_is_found():
    tree = ast.parse("from runner.inputs import markdown_citations as m\nfrom runner.x import _y\n"
                     "import runner.z\nm._clean\nrunner.z.Thing()._field\nmonkeypatch.setattr(m, '_clean', f)\n"
                     "other._fine\n")
    assert private_uses(tree) == ["line 2: imports runner.x._y", "line 4: reads m._clean",
                                  "line 5: reads runner.z.Thing()._field", "line 6: replaces m._clean"]


def test_only_the_runtime_knows_the_llm_service_class(graph):
    """Steps, serve and the rest reach the LLM service through the engine's interface
    (runner/engine/services.py); only the Runtime, which makes it, imports the class."""
    importers = sorted(module for module, targets in graph.items()
                       if "runner.llm.service" in targets and unit_of(module) != "runner.llm")
    assert importers == ["runner.engine.context"]


def test_one_way_to_give_a_review():
    """Issue 61: `runner feedback`, view and serve each give a review through
    runner/tracing/feedback.py's `record_review`; only it makes a review (`review_of`)."""
    makers = sorted(name for name, path in modules().items()
                    for node in _imports(ast.parse(path.read_text(encoding="utf-8")))
                    if isinstance(node, ast.ImportFrom) and node.module == "runner.stores.reviews"
                    and any(alias.name == "review_of" for alias in node.names))
    assert makers == ["runner.tracing.feedback"]
