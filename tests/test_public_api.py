"""Our own programs on the public API (docs/architecture.md, "The public API").

The rule, one a reader can check by eye: an import of relrep_hf in ``benchmarks/`` or
``scripts/`` is public when it names `PUBLIC_PACKAGES` itself (``from relrep_hf.functional
import retrieval_metrics``, ``import relrep_hf.encoding``), never a module inside one. At least
80% of those imports are public, and a public one names only what its package's ``__all__``
exports. The rest (a study that patches a module's constant, a benchmark of an internal step)
import the module they need, in plain sight.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO / "docs" / "architecture.md"
PROGRAMS = ("benchmarks", "scripts")
PUBLIC_PACKAGES = (
    "relrep_hf",
    "relrep_hf.encoding",
    "relrep_hf.evaluation",
    "relrep_hf.functional",
    "relrep_hf.migration",
    "relrep_hf.translation",
)
MIN_PUBLIC = 0.8


@dataclass(frozen=True)
class Import:
    """One import statement of relrep_hf: where, what module, which names (``()``: a module)."""

    where: str
    module: str
    names: tuple[str, ...]

    @property
    def public(self) -> bool:
        return self.module in PUBLIC_PACKAGES


def relrep_imports(source: str, where: str) -> list[Import]:
    """Every import of relrep_hf in ``source`` (nested in functions too), in line order."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "relrep_hf":
                names = tuple(alias.name for alias in node.names)
                found.append(Import(f"{where}:{node.lineno}", node.module, names))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "relrep_hf":
                    found.append(Import(f"{where}:{node.lineno}", alias.name, ()))
    return sorted(found, key=lambda one: int(one.where.rsplit(":", 1)[1]))


def not_exported(imports: list[Import]) -> list[str]:
    """``where: package.name`` for each name a public import takes that its package does not
    export."""
    exported = {p: set(importlib.import_module(p).__all__) for p in PUBLIC_PACKAGES}
    return [
        f"{one.where}: {one.module}.{name}"
        for one in imports
        if one.public
        for name in one.names
        if name not in exported[one.module]
    ]


def public_share(imports: list[Import]) -> float:
    return sum(one.public for one in imports) / len(imports)


def program_imports() -> list[Import]:
    files = sorted(path for folder in PROGRAMS for path in (REPO / folder).rglob("*.py"))
    return [
        one
        for path in files
        for one in relrep_imports(path.read_text(), str(path.relative_to(REPO)))
    ]


def test_the_programs_import_the_public_api():
    imports = program_imports()
    private = "\n".join(f"{one.where}: {one.module}" for one in imports if not one.public)
    assert len(imports) > 50  # the programs were found
    assert public_share(imports) >= MIN_PUBLIC, f"under {MIN_PUBLIC:.0%} public:\n{private}"
    assert not_exported(imports) == [], "not in the package's __all__: export it, or import it"


def test_the_rule_counts_and_refuses():
    """The checks fail where they should: a module inside a package is private, a name the
    package does not export is named, and one public import of two is 50%."""
    source = (
        "from relrep_hf import AnchorSet\n"
        "def f():\n"
        "    from relrep_hf.functional.metrics import retrieval_metrics\n"
        "from relrep_hf.functional import no_such_name\n"
        "import relrep_hf.functional.regularization as regularization\n"
    )
    imports = relrep_imports(source, "toy.py")
    assert [one.public for one in imports] == [True, False, True, False]
    assert public_share(imports) == 0.5
    assert not_exported(imports) == ["toy.py:4: relrep_hf.functional.no_such_name"]


def test_every_public_name_resolves_and_the_docs_list_the_packages():
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        missing = [name for name in module.__all__ if not hasattr(module, name)]
        assert missing == [], f"{package} exports names it does not have"
    section = ARCHITECTURE.read_text().split("## The public API", 1)[1].split("\n## ", 1)[0]
    listed = [p for p in PUBLIC_PACKAGES if f"`{p}`" in section]
    assert listed == list(PUBLIC_PACKAGES), "docs/architecture.md's public API section"
