"""`lazy_attributes`: a package's names imported on first use, stored, and listed by dir()."""

import pytest

from relrep_hf.utils.lazy_imports import lazy_attributes


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
