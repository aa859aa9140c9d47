"""``aifabric.api.build_fabric(spec, *, file=None)``: the one guarded build of every
command: a fabric over the memory limit is refused before anything is built, and its
problems name the spec's file (the path given, or ``file``)."""

from __future__ import annotations

import pytest

import aifabric as af
from aifabric import guard
from aifabric.api import build_fabric
from tests.conftest import EXAMPLES

SPEC = EXAMPLES / "hpn-pod.yaml"


@pytest.fixture
def tiny_limit():
    guard.set_limit("1M")  # far below any fabric of the example
    yield
    guard.set_limit(None)


def test_a_path_is_loaded_and_builds_the_same_fabric():
    f = build_fabric(EXAMPLES / "single-tor-dcn.yaml")
    g = af.build_fabric(af.load_spec(EXAMPLES / "single-tor-dcn.yaml"))
    assert (f.n_nodes, f.n_links) == (g.n_nodes, g.n_links) and f.n_links > 0


@pytest.mark.parametrize("given, file, named", [
    ("path", None, str(SPEC)),
    ("path", "other.yaml", "other.yaml"),
    ("spec", "mine.yaml", "mine.yaml"),
    ("spec", None, None),
])
def test_refused_over_the_limit_naming_the_file(tiny_limit, given, file, named):
    spec = SPEC if given == "path" else af.load_spec(SPEC)
    with pytest.raises(af.SpecError) as exc:
        build_fabric(spec, file=file)
    assert {p.file for p in exc.value.problems} == {named}
    assert "needs about" in str(exc.value) and "--max-memory" in str(exc.value)
