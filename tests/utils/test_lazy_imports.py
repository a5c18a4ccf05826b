"""`lazy_attributes`: a package's names imported on first use, stored, and listed by dir();
`stub_names`: those names read from the package's ``__init__.pyi``."""

import pytest

from relrep_hf.utils.lazy_imports import lazy_attributes, stub_names


def test_a_lazy_name_is_imported_once_then_stored():
    namespace = {"present": 1}
    getattr_, dir_ = lazy_attributes("pkg", namespace, {"dumps": "json"})
    import json

    assert getattr_("dumps") is json.dumps
    assert namespace["dumps"] is json.dumps  # later accesses skip the package's __getattr__
    assert dir_() == ["dumps", "present"]


def test_an_unknown_name_is_an_attribute_error_naming_the_package():
    getattr_, _ = lazy_attributes("pkg.sub", {}, {"dumps": "json"})
    with pytest.raises(AttributeError, match="module 'pkg.sub' has no attribute 'missing'"):
        getattr_("missing")


def test_the_packages_use_it():
    import relrep_hf
    import relrep_hf.encoding
    import relrep_hf.publishing.hub

    for package in (relrep_hf, relrep_hf.encoding, relrep_hf.publishing.hub):
        assert set(package.__all__) <= set(dir(package))
        with pytest.raises(AttributeError, match=f"module {package.__name__!r} has no attribute"):
            package.no_such_name  # noqa: B018


def test_a_stub_lists_each_name_with_its_module(tmp_path):
    (tmp_path / "__init__.pyi").write_text(
        "# comment\n__version__: str\n"
        "from json import dumps as dumps, loads as loads\nfrom os.path import join as join\n"
    )
    names = stub_names(str(tmp_path / "__init__.py"))
    assert names == {"dumps": "json", "loads": "json", "join": "os.path"}
    getattr_, _ = lazy_attributes("pkg", {}, names)
    import os.path

    assert getattr_("join") is os.path.join


def test_a_missing_stub_is_an_import_error_that_says_to_reinstall(tmp_path):
    with pytest.raises(ImportError, match=r"__init__\.pyi is missing.*reinstall relrep-hf"):
        stub_names(str(tmp_path / "__init__.py"))


@pytest.mark.parametrize("package", ["", ".encoding", ".evaluation", ".functional", ".translation"])
def test_each_lazy_package_exports_exactly_its_stub(package):
    import importlib

    module = importlib.import_module(f"relrep_hf{package}")
    names = stub_names(module.__file__)
    assert names and module.__all__ == sorted(names)
    for name, source in names.items():  # each line of the stub names where the name lives
        assert getattr(module, name) is getattr(importlib.import_module(source), name)
