"""`tpubench doctor`: is this fresh machine ready to measure? (docs/first-hour.md)

`stack` reads what is installed and what the host has (no framework imported), `probe` runs the
device checks in a child process (fence, memory, compile, a 2-chip collective), `verdicts` judges
their figures (pure functions), and `command` runs it all, the smallest workload and the full model
at batch 1 included, and writes the result files and a readiness summary.
"""
