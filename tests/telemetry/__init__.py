"""Telemetry tests: metric catalog, OpenMetrics of runs, exporter, alerts, dashboards."""
