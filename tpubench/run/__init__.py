"""Running a workload: its file (schema, loading, errors with file:line), the sweep it expands to, the
run-time overrides, and the runner that measures every point and writes it."""
