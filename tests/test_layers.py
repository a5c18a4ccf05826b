"""The house rule: relrep_hf's imports only point down its layers, and never in a circle.

Each folder of the package (and each module at its top) is listed once, in its layer (bottom
up). A module may import from its own layer or any layer below; an import from a higher layer, a
folder or top-level module missing from the list, or a circle of imports (within a layer) fails
this test. Every import counts: those inside functions and under ``TYPE_CHECKING`` too, since
each is a dependency a reader must follow. docs/modules.md is the module map of the same
layers: each module named by its path in its layer's section, and each path named there a
module. Sizes are kept readable too: no module over `MAX_LINES` lines, no function (method or
nested function) over `MAX_FUNCTION_LINES`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "relrep_hf"

LAYERS: dict[str, tuple[str, ...]] = {
    "foundations": ("utils",),
    "math": ("functional",),
    "encoding": ("encoding",),
    # the artifacts, and the two features that span them: the way back and migration
    "artifacts": ("models", "translation", "migration"),
    # the trainers, and the anchor methods (one folder each) that fit with them
    "training": ("training", "anchors"),
    "evaluation": ("evaluation",),
    "publishing": ("publishing",),
    # (the old paths that saved artifacts record are rows of utils/deprecated_import.py)
    "entry points": ("pipeline", "cli", "commands", "__init__"),
}
MAX_TOP_LEVEL_MODULES = 8
# a layer's folder a reader can take in at a glance (the old paths re-exported count too)
# (commands: one module per command, as transformers' commands/; rollback, cleanup and reembed
# (issue #46) made 13)
MAX_FOLDER_MODULES = {"training": 10, "evaluation": 10, "commands": 13}
MAX_LINES = 600  # a file that holds one idea (issue #36); functions stay short
MAX_FUNCTION_LINES = 80


def _layer_of() -> dict[str, int]:
    """Folder (or top-level module) -> its layer's number, bottom up."""
    index: dict[str, int] = {}
    for number, places in enumerate(LAYERS.values()):
        for place in places:
            assert place not in index, f"{place} is listed in two layers"
            index[place] = number
    return index


def _modules() -> dict[str, Path]:
    """Module key -> its files: ``folder.module`` for each module of a layer's folder (a
    sub-package inside it counts as one module), ``folder`` for its ``__init__``, and the name
    of each module at the top of the package."""
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.iterdir()):
        if path.suffix == ".py":
            found[path.stem] = path
        elif path.is_dir() and (path / "__init__.py").is_file():
            found[path.name] = path / "__init__.py"
            for inner in sorted(path.iterdir()):
                if inner.suffix == ".py" and inner.stem != "__init__":
                    found[f"{path.name}.{inner.stem}"] = inner
                elif inner.is_dir() and (inner / "__init__.py").is_file():
                    found[f"{path.name}.{inner.name}"] = inner
    return found


def _place(module: str) -> str:
    """The folder (layer) a module key belongs to."""
    return module.split(".")[0]


def _files(path: Path) -> Iterator[Path]:
    """A module's source files, with the ``.pyi`` stubs of lazy packages (their imports count)."""
    if path.is_dir():
        yield from sorted([*path.rglob("*.py"), *path.rglob("*.pyi")])
    else:
        yield from [path, *[s for s in [path.with_suffix(".pyi")] if s.is_file()]]


def _imports(path: Path, modules: set[str] = frozenset()) -> set[str]:
    """The relrep_hf modules (keys of `_modules`) that the files of one module import, anywhere.

    ``from relrep_hf import Name`` of a name that is not a module reads the package's
    ``__init__`` (the top layer).
    """
    names: set[str] = set()
    for file in _files(path):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                if node.module == "relrep_hf" and any(a.name not in modules for a in node.names):
                    names.add("__init__")
            else:
                continue
            for target in targets:
                parts = target.split(".")
                if parts[0] != "relrep_hf" or len(parts) < 2:
                    continue
                if ".".join(parts[1:3]) in modules:
                    names.add(".".join(parts[1:3]))
                elif parts[1] in modules:
                    names.add(parts[1])
    return names


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: {
            other for other in _imports(path, set(modules)) if other in modules and other != name
        }
        for name, path in modules.items()
    }


def test_every_module_has_one_layer():
    layer = _layer_of()
    unlisted = sorted(m for m in _modules() if _place(m) not in layer)
    assert not unlisted, f"put these modules in a layer's folder (tests/test_layers.py): {unlisted}"


def test_few_modules_at_the_top_and_none_too_long():
    top = [p.name for p in PACKAGE.iterdir() if p.suffix == ".py"]
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"modules at the top of relrep_hf/: {sorted(top)}"
    for folder, most in MAX_FOLDER_MODULES.items():
        inside = sorted(p.stem for p in (PACKAGE / folder).glob("*.py") if p.stem != "__init__")
        assert len(inside) <= most, f"{len(inside)} modules in relrep_hf/{folder}/: {inside}"
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def _long_functions(path: Path, root: Path = PACKAGE) -> list[str]:
    """``file:function:lines`` of each function (methods and nested ones too) of one file that
    is longer than `MAX_FUNCTION_LINES`."""
    return [
        f"{path.relative_to(root).as_posix()}:{node.name}:{lines}"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (lines := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES
    ]


def test_no_function_too_long():
    long = [found for path in sorted(PACKAGE.rglob("*.py")) for found in _long_functions(path)]
    assert not long, (
        f"functions over {MAX_FUNCTION_LINES} lines (split each into well-named steps): "
        + ", ".join(long)
    )


def test_the_function_length_rule_can_fail(tmp_path):
    """Methods and nested functions are measured too, each named with its length."""
    body = "".join(f"            x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    source = tmp_path / "m.py"
    source.write_text(
        "class C:\n    def short(self):\n        pass\n\n"
        f"    def outer(self):\n        def inner():\n{body}"
    )
    found = _long_functions(source, tmp_path)
    assert sorted(found) == [
        f"m.py:inner:{MAX_FUNCTION_LINES + 1}",
        f"m.py:outer:{MAX_FUNCTION_LINES + 2}",
    ]


def test_imports_only_point_down():
    layer, names = _layer_of(), list(LAYERS)
    upward = sorted(
        f"{module} ({names[layer[_place(module)]]}) imports {other} ({names[layer[_place(other)]]})"
        for module, imported in _graph().items()
        for other in imported
        if layer[_place(other)] > layer[_place(module)]
    )
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def test_no_circle():
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for other in sorted(graph[module]):
            if state.get(other) == 1:
                circle = [*path[path.index(other) :], other]
                pytest.fail("circle of imports: " + " -> ".join(circle))
            if other not in state:
                visit(other)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_the_rule_can_fail(tmp_path):
    """The reader sees an import inside a function, and a from-import of a submodule."""
    source = tmp_path / "m.py"
    source.write_text(
        "def f():\n    from relrep_hf import cli\n    import relrep_hf.publishing.hub\n"
        "from relrep_hf import AnchorSet\n"
    )
    assert _imports(source, {"cli", "publishing.hub"}) == {"cli", "publishing.hub", "__init__"}


ARCHITECTURE = PACKAGE.parent / "docs" / "modules.md"  # the module map (architecture.md draws it)
DOC_PATH = re.compile(r"`([\w/]+\.py)`")
OUTSIDE = ("benchmarks/", "scripts/", "tests/")  # paths a section names above the package


def _module_paths() -> list[str]:
    """Every module of the package by its path under relrep_hf/, but a layer folder's own
    ``__init__.py`` (the folder is the layer's unit; its public names are in the public API)."""
    paths = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")]
    return sorted(p for p in paths if not re.fullmatch(r"\w+/__init__\.py", p))


def _layer_sections(text: str) -> list[str]:
    """The numbered sections (``## 7. Entry points``, ...), top down."""
    return [s for s in text.split("\n## ")[1:] if re.match(r"\d+\. ", s)]


def _map_problems(text: str, modules: list[str]) -> list[str]:
    """What a module map (``text``) gets wrong: each of ``modules`` (paths under relrep_hf/)
    must be named, as `path.py`, in its layer's section, and each path named there must be a
    module."""
    layer, problems = _layer_of(), []
    sections = _layer_sections(text)[::-1]  # bottom up, as LAYERS
    for module in modules:
        number = layer.get(module.split("/")[0].removesuffix(".py"))
        if number is None or number >= len(sections) or f"`{module}`" not in sections[number]:
            problems.append(f"{module} is not named in its layer's section")
    named = {
        path
        for section in sections
        for path in DOC_PATH.findall(section)
        if not path.startswith(OUTSIDE)
    }
    problems += [f"{path} is named but is no module" for path in sorted(named - set(modules))]
    return problems


def test_architecture_doc_is_the_module_map():
    """docs/modules.md has a section per layer, top down, naming each of its modules by its
    path, and no module that is gone."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    sections = _layer_sections(text)
    assert len(sections) == len(LAYERS), "one numbered section per layer"
    for section, name in zip(sections, reversed(LAYERS), strict=True):
        assert name.split(",")[0].lower() in section.splitlines()[0].lower(), section[:40]
    assert _map_problems(text, _module_paths()) == []


def test_the_module_map_rule_can_fail():
    """A module the map forgets, one it names in the wrong layer, and one that is gone."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    modules = _module_paths()
    forgotten = text.replace("`utils/citation.py`", "`utils/citation`")
    assert _map_problems(forgotten, modules) == [
        "utils/citation.py is not named in its layer's section"
    ]
    gone = [m for m in modules if m != "utils/registry.py"]
    assert _map_problems(text, gone) == ["utils/registry.py is named but is no module"]
    moved = text.replace("- `utils/citation.py`", "- `utils/x.py`").replace(
        "- `cli.py`", "- `cli.py`, `utils/citation.py`"
    )
    assert "utils/citation.py is not named in its layer's section" in _map_problems(moved, modules)


def test_each_folder_has_its_tests_folder():
    """The tests mirror the package by folder (docs/architecture.md, "Tests"): `tests/X/` holds the
    tests of `relrep_hf/X/`."""
    tests = PACKAGE.parent / "tests"
    folders = [p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()]
    missing = [f for f in sorted(folders) if not list((tests / f).glob("test_*.py"))]
    assert missing == [], f"no tests/X/test_*.py for these folders of relrep_hf/: {missing}"


BENCHMARK_TESTS = ("benchmarks", "scripts")  # the tests of the programs beside the package


def _top_packages(path: Path) -> set[str]:
    """The top-level packages a file imports, anywhere in it."""
    tops: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            tops.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.add(node.module.split(".")[0])
    return tops


def _test_placement_problems(tests: Path, folders: set[str]) -> list[str]:
    """Test modules outside a folder of the package's (or of the programs beside it), and tests
    of the package that import the benchmarks (their shared helpers live in tests/fixtures/)."""
    problems = []
    for path in sorted(tests.rglob("test_*.py")):
        parts = path.relative_to(tests).parts
        where = parts[0] if len(parts) > 1 else ""
        if where and where not in folders and where not in BENCHMARK_TESTS:
            problems.append(f"tests/{'/'.join(parts)} is in no folder of relrep_hf/")
        if where != "benchmarks" and "benchmarks" in _top_packages(path):
            problems.append(f"tests/{'/'.join(parts)} imports benchmarks/")
    return problems


def test_each_test_module_is_where_its_package_is():
    """No test module among the fixtures, and only tests/benchmarks/ imports the benchmarks."""
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert _test_placement_problems(PACKAGE.parent / "tests", folders) == []


def test_the_test_placement_rule_can_fail(tmp_path):
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "test_server.py").write_text("def test_x():\n    pass\n")
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "test_io.py").write_text("def f():\n    from benchmarks import common\n")
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "test_common.py").write_text("import benchmarks.common\n")
    assert _test_placement_problems(tmp_path, {"utils"}) == [
        "tests/fixtures/test_server.py is in no folder of relrep_hf/",
        "tests/utils/test_io.py imports benchmarks/",
    ]


def _fast_tests(path: Path) -> list[str]:
    """The test functions of a test module that ``-m "not slow"`` keeps (read, not imported)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module_marks = [
        ast.unparse(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(getattr(t, "id", "") == "pytestmark" for t in node.targets)
    ]
    if any("mark.slow" in mark for mark in module_marks):
        return []
    return [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and node.name.startswith("test_")
        and not any("mark.slow" in ast.unparse(d) for d in node.decorator_list)
    ]


def test_the_fast_loop_covers_every_folder():
    """``python -m pytest -m "not slow"`` (README) runs tests of every folder of relrep_hf/."""
    tests = PACKAGE.parent / "tests"
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    uncovered = [
        f for f in folders if not any(_fast_tests(path) for path in (tests / f).glob("test_*.py"))
    ]
    assert uncovered == [], f"only slow tests for these folders of relrep_hf/: {uncovered}"


def test_the_fast_loop_rule_can_fail(tmp_path):
    whole = tmp_path / "test_whole.py"
    whole.write_text("import pytest\npytestmark = [pytest.mark.slow]\ndef test_a():\n    pass\n")
    some = tmp_path / "test_some.py"
    some.write_text(
        "import pytest\n@pytest.mark.slow\ndef test_a():\n    pass\n"
        "class TestB:\n    def test_b(self):\n        pass\n"
    )
    assert _fast_tests(whole) == [] and _fast_tests(some) == ["test_b"]
