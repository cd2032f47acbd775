"""What is measured, before any scenario: the workload's shared sections (model, scales, execution,
measurement, parallel) and the resolved run point."""
