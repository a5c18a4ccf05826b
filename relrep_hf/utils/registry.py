"""One shape for every extension point (anchor methods, encoder kinds, store kinds, migration
candidates): a named registry of entries, each one ``register_*`` call, as PEFT's
``register_peft_method``. A registry is a dict (name -> entry, in registration order), so
reading it is plain dict use; adding to it goes through `Registry.register`, which refuses a
name that is taken, and a lookup of an unknown name lists the registered ones.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Kind:
...     name: str
>>> kinds = Registry("toy kind")
>>> kinds.register(Kind("a")).name
'a'
>>> kinds.lookup("b")
Traceback (most recent call last):
...
ValueError: Unknown toy kind 'b'. Registered: 'a'.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

__all__ = ["Registry"]

Entry = TypeVar("Entry")


class Registry(dict, Generic[Entry]):
    """Entries of one kind of thing, by their ``name`` attribute."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def register(self, entry: Entry, **clashes: Any) -> Entry:
        """Add ``entry`` under ``entry.name``; a ValueError if the name is taken. ``clashes``:
        other attributes that must be unique too (e.g. ``prefix=entry.prefix``), ignored when
        None or empty."""
        name = getattr(entry, "name", None)
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"A {self.kind} entry has a non-empty string `name`; got "
                f"{type(entry).__name__} {entry!r:.60}. Pass the entry object itself, not its name."
            )
        taken = name in self
        for attribute, value in clashes.items():
            if value and any(getattr(other, attribute) == value for other in self.values()):
                taken = True
                name = f"{name} ({attribute} {value!r})"
        if taken:
            raise ValueError(
                f"The {self.kind} {name!r} is registered already: unregister it first or pick "
                "another name."
            )
        self[entry.name] = entry
        return entry

    def unregister(self, name: str) -> Entry:
        """Take ``name`` out (a ValueError if it is not registered) and return its entry."""
        return self.pop(self.lookup(name).name)

    def lookup(self, name: str) -> Entry:
        """The entry ``name``; a ValueError lists the registered names."""
        if name not in self:
            raise ValueError(
                f"Unknown {self.kind} {name!r}. Registered: {', '.join(map(repr, self))}."
            )
        return self[name]
