"""``aifabric build`` without grafana-foundation-sdk (the ``telemetry`` extra): the
Prometheus files are written as usual, and the dashboards folder says what to install
instead of failing the build or leaving it silently empty."""

from __future__ import annotations

import sys

import pytest

from aifabric.telemetry.monitoring import render_monitoring
from tests._require import require_importorskip
from tests.configs.conftest import small_ctx


def test_without_the_sdk_the_build_says_what_to_install(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    # the 'with' half needs it
    require_importorskip("grafana_foundation_sdk", "grafana-foundation-sdk")
    ctx = small_ctx("hpn")
    with_sdk = dict(render_monitoring(ctx))
    # the package as absent as an uninstalled one: its import raises ModuleNotFoundError
    for name in [m for m in sys.modules if m.startswith(("grafana_foundation_sdk",
                                                         "aifabric.telemetry.dashboards"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "grafana_foundation_sdk", None)
    without = dict(render_monitoring(ctx))
    dash = {k for k in with_sdk if k.startswith("monitoring/grafana/dashboards/")}
    assert dash, "with the SDK the build writes dashboards"
    assert set(without) == (set(with_sdk) - dash) | {"monitoring/grafana/dashboards/MISSING.md"}
    assert "pip install 'aifabric[telemetry]'" in without[
        "monitoring/grafana/dashboards/MISSING.md"]
    for k in set(without) - {"monitoring/grafana/dashboards/MISSING.md"}:
        assert without[k] == with_sdk[k], k
