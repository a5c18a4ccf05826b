"""The one registry shape: register, refuse a taken name or attribute, look up, unregister."""

from dataclasses import dataclass

import pytest

from relrep_hf.utils.registry import Registry


@dataclass(frozen=True)
class Kind:
    name: str
    prefix: str = ""


def test_register_lookup_unregister():
    kinds = Registry("toy kind")
    kinds.register(Kind("a", "a:"))
    kinds.register(Kind("b"))
    assert list(kinds) == ["a", "b"] and kinds.lookup("a").prefix == "a:"
    assert kinds.unregister("a").name == "a" and list(kinds) == ["b"]
    with pytest.raises(ValueError, match=r"Unknown toy kind 'a'\. Registered: 'b'\."):
        kinds.lookup("a")


def test_a_taken_name_or_attribute_is_refused():
    kinds = Registry("toy kind")
    kinds.register(Kind("a", "a:"), prefix="a:")
    with pytest.raises(ValueError, match="toy kind 'a' is registered already"):
        kinds.register(Kind("a"))
    with pytest.raises(ValueError, match=r"prefix 'a:'"):
        kinds.register(Kind("c", "a:"), prefix="a:")
    kinds.register(Kind("d"), prefix="")  # an empty attribute never clashes
    assert list(kinds) == ["a", "d"]
