"""The few HTTP requests tpubench makes to a server itself, outside the measured load (that is
serving/client.py): GET /v1/models to check it speaks OpenAI and to learn its model, the version it
reports, and the prefix-cache reset between load points. Each answers in one line when the server
does not (a UserError or a short "why"), never with a traceback.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.request

from tpubench.errors import UserError
from tpubench.serving.presets import RESET_PATHS

URL_CHECK_TIMEOUT_S = 5.0      # a running server must answer GET /v1/models within this
RESET_TIMEOUT_S = URL_CHECK_TIMEOUT_S   # a prefix-cache reset between load points (as `_why` words it)


def reset_prefix_cache_at(base_url: str, name: str) -> tuple[bool | None, str]:
    """Empty the prefix cache of the engine at `base_url`, a `name` stack (RunningServer.name), so
    the next load point meets a cold server.

    vLLM: POST /reset_prefix_cache, served only under VLLM_SERVER_DEV_MODE=1 (tpubench sets it
    on the vLLM servers it starts on a loopback host) and answering 200 with `"success": false`
    when it refuses; SGLang: POST /flush_cache, 400 while requests run (sources: vLLM's
    api_server dev endpoints, SGLang's native API docs). A stack not known tries both.
    Returns (True, the endpoint) when the engine says it did, (False, why) when it refused or
    lacks the endpoint, (None, why) when the stack offers no reset (transformers serve)."""
    if name == "transformers serve":
        return None, "transformers serve offers no prefix-cache reset"
    paths = [p for stack, p in RESET_PATHS if stack in name] or [p for _, p in RESET_PATHS]
    answers = []
    for path in paths:
        try:
            status, _, body = _post(base_url + path, timeout=RESET_TIMEOUT_S)
        except OSError as exc:   # no answer: a server that hangs is not asked twice
            return False, f"POST {path}: {_why(exc)}"
        if 200 <= status < 300 and _claims_success(body):
            return True, f"POST {path}"
        answers.append(f"POST {path} answered {status}" + (" (success: false)" if status < 300 else ""))
    hint = ("; vLLM serves it only with VLLM_SERVER_DEV_MODE=1 in the server's environment"
            if "vllm" in name or name == "unknown" else "")
    if name == "unknown" and all(" answered 404" in a or " answered 405" in a for a in answers):
        return None, "the server offers no known prefix-cache reset (" + "; ".join(answers) + ")"
    return False, "; ".join(answers) + hint


def models_listing(url: str) -> list:
    """GET {url}/v1/models: its `data` list, or a one-line UserError saying what went wrong."""
    target = f"{url}/v1/models"
    try:
        status, ctype, body = get(target, timeout=URL_CHECK_TIMEOUT_S)
    except OSError as exc:
        raise UserError(f"cannot reach {url}: {_why(exc)}", field="scenario.server.url") from None
    kind = (ctype or "no content type").split(";")[0].strip()
    if status != 200:
        hint = ": it wants an API key" if status in (401, 403) else ""
        raise UserError(f"{url} is not an OpenAI-compatible server: GET /v1/models answered {status} {kind}{hint}",
                        field="scenario.server.url")
    try:
        listing = json.loads(body)
    except ValueError:
        listing = None
    if not isinstance(listing, dict) or not isinstance(listing.get("data"), list):
        raise UserError(f"{url} is not an OpenAI-compatible server: GET /v1/models answered {status} {kind}, "
                        "not JSON with a data list", field="scenario.server.url")
    return listing["data"]


def first_model(base_url: str) -> str | None:
    try:
        status, _, body = get(f"{base_url}/v1/models", timeout=URL_CHECK_TIMEOUT_S)
        data = json.loads(body).get("data") if status == 200 else None
    except (OSError, ValueError, AttributeError):
        return None
    for item in data or []:
        if isinstance(item, dict) and item.get("id"):
            return str(item["id"])
    return None


def ask_version(base_url: str) -> str | None:
    """The version a server reports, if it does: vLLM's GET /version, SGLang's /get_server_info."""
    for path in ("/version", "/get_server_info"):
        try:
            status, _, body = get(base_url + path, timeout=2.0)
            if status == 200:
                version = json.loads(body).get("version")
                if isinstance(version, str) and version:
                    return version
        except (OSError, ValueError, AttributeError):
            continue
    return None


# ----------------------------------------------------------------------------- small helpers

def get(url: str, timeout: float) -> tuple[int, str, bytes]:
    """(status, content type, first 1 MiB of the body) of a GET; OSError when nothing answers."""
    return _request(url, timeout, urllib.request.Request(url, headers={"Accept": "application/json"}))


def _post(url: str, timeout: float) -> tuple[int, str, bytes]:
    """The same for an empty-bodied POST (a cache reset)."""
    return _request(url, timeout, urllib.request.Request(url, data=b"", method="POST",
                                                         headers={"Accept": "application/json"}))


def _request(url: str, timeout: float, request: urllib.request.Request) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read(1 << 20)
    except urllib.error.HTTPError as exc:
        try:
            body = exc.read(1 << 20)
        except OSError:
            body = b""
        return exc.code, exc.headers.get("Content-Type", "") if exc.headers else "", body
    except urllib.error.URLError as exc:
        reason = exc.reason
        raise reason if isinstance(reason, OSError) else OSError(str(reason)) from None
    except (ValueError, http.client.HTTPException) as exc:   # a malformed URL or a garbled answer
        raise OSError(str(exc) or type(exc).__name__) from None


def _claims_success(body: bytes) -> bool:
    """A 2xx reset answer is taken at its word unless its JSON says `"success": false` (vLLM)."""
    try:
        data = json.loads(body)
    except ValueError:
        return True
    return not (isinstance(data, dict) and data.get("success") is False)


def _why(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return f"no answer within {URL_CHECK_TIMEOUT_S:g} s"
    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror or exc})"
    if isinstance(exc, ConnectionResetError):
        return "connection reset"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text
