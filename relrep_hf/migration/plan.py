"""What a store's rewrite carries, and what it cannot: the plan shown before a migration writes.

A store kind's ``plan(out, dim)`` lists, for one rewrite, what the new store carries over
(columns, indexes, row-level security, triggers, comments), what stays on the input only (a
new table's input keeps its triggers), what would be lost silently (a foreign key pointing at
the old table, partitioning, a view that keeps reading the backup) and what cannot be done at
all (a generated column COPY cannot fill, a vector index over its dimension limit).
`StorePlan.check` refuses the last kind always and the third unless ``force`` names it;
``relrep-hf migrate --plan`` prints the plan and writes nothing, and every run prints it first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["StorePlan", "StorePlanError"]


class StorePlanError(ValueError):
    """The rewrite would lose something of the store's silently, or cannot be done; nothing
    was written."""


@dataclass
class StorePlan:
    """One rewrite's plan: ``store`` (its description) into ``out``, and four lists of
    phrases (what is carried, kept on the input only, would be dropped, cannot be done)."""

    store: str
    out: str
    in_place: bool
    carried: list[str] = field(default_factory=list)
    input_only: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The plan as the command line prints it."""
        where = "in place (the old one kept as a backup)" if self.in_place else "as a new store"
        lines = [f"Plan: {self.store} rewritten into {self.out} {where}."]
        sections = (
            ("carried", self.carried),
            ("kept on the input only", self.input_only),
            ("NOT carried (refused unless --force)", self.dropped),
            ("cannot be done", self.blocked),
        )
        for title, items in sections:
            lines += [f"  {title}:"] + [f"    - {item}" for item in items] if items else []
        return "\n".join(lines)

    def check(self, *, force: bool = False) -> None:
        """Raise `StorePlanError` naming what cannot be done, or, unless ``force``, what
        would be dropped silently."""
        if self.blocked:
            raise StorePlanError(
                f"{self.store}: cannot be migrated as it is: {'; '.join(self.blocked)}. Nothing "
                "was written."
            )
        if self.dropped and not force:
            raise StorePlanError(
                f"{self.store}: the migration would not carry {'; '.join(self.dropped)}. "
                "Nothing was written. Carry them yourself afterwards and pass force=True "
                "(--force) to migrate without them, or migrate into a new name."
            )
