"""`gpugen report`: GPU-hours per group and class from Prometheus. `usage.py` is pure (the period, the query, the
integration, usage against allocations), `prometheus_api.py` talks HTTP, `output.py` writes the table, CSV and chart."""
