"""Serving benchmark core: an OpenAI-compatible streaming client, the load generator and the metrics
(docs/scenarios/serve.md)."""
