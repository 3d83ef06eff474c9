"""Grafana: the dashboard builder (ops.grafana.dashboard) and what Compose provisions."""
