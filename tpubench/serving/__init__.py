"""Serving benchmark core: an OpenAI-compatible streaming client, the load generator and the metrics
(DESIGN.md section 15)."""
