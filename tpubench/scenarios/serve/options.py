"""The run option of scenario `serve`: `tpubench run --server-url URL` points a workload at a running server."""

from __future__ import annotations

from pydantic import ValidationError

from tpubench.errors import UserError
from tpubench.scenarios.serve.schema import Server


def with_server_url(workload, url: str):
    old = workload.scenario.server
    try:
        server = Server(url=url, model=old.model, hardware=old.hardware, tokenizer=old.tokenizer)
    except ValidationError as exc:
        raise UserError(exc.errors()[0]["msg"].removeprefix("Value error, "), field="--server-url") from None
    return workload.model_copy(update={"scenario": workload.scenario.model_copy(update={"server": server})})
