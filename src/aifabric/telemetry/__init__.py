"""Operate: the fabric's telemetry for Prometheus and Grafana.

- :mod:`~aifabric.telemetry.catalog`: every metric's name, type, unit, labels and help,
  and the label values of a fabric port (shared by every producer);
- :mod:`~aifabric.telemetry.openmetrics`: a finished simulation as OpenMetrics text with
  timestamps (``aifabric metrics RUN_DIR``), for ``promtool tsdb create-blocks-from``;
- :mod:`~aifabric.telemetry.monitoring` (with :mod:`~aifabric.telemetry.alerts` and
  :mod:`~aifabric.telemetry.dashboards`): ``monitoring/`` of ``aifabric build``.

This layer may import sim/, routing/, lab/ and configs/; they never import it (the
commands that write a build pass :func:`~aifabric.telemetry.monitoring.render_monitoring`
to :func:`aifabric.configs.build.write_build` as an ``extra`` renderer). Heavy
dependencies (prometheus-client, grafana-foundation-sdk: the ``telemetry`` extra) are
imported lazily where they are used.
"""

from aifabric.telemetry.catalog import CATALOG, Metric, by_name, port_labels

__all__ = ["CATALOG", "Metric", "by_name", "port_labels"]
