"""Talking to SkyPilot: find a Python that has it, run one request through `sky_bridge.py` there.

SkyPilot may be installed in this environment (`pip install "tpubench[launch]"`) or on its own
(`pipx install skypilot`, `uv tool install skypilot`: `sky` on PATH), which keeps this environment's
transformers: SkyPilot pins click<8.2, newer huggingface_hub needs click>=8.4.2. The bridge runs in
its own process group and is stopped by it, also on Ctrl-C.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Callable

from tpubench.errors import ExternalFailure, UserError
from tpubench.launch.sky_bridge import MARK

PYTHON_ENV = "TPUBENCH_SKYPILOT_PYTHON"
INSTALL_HINT = ('SkyPilot is not installed: pip install "tpubench[launch]", or install it on its own '
                '(pipx install skypilot) and keep `sky` on PATH, or set TPUBENCH_SKYPILOT_PYTHON')
BRIDGE = Path(__file__).with_name("sky_bridge.py")
# SkyPilot encodes its spinner updates as these lines when its output is not a terminal.
_RICH_PAYLOAD = "<sky-payload>"


def find_python() -> str | None:
    """The interpreter that can `import sky`: $TPUBENCH_SKYPILOT_PYTHON, this one, or the one in
    the shebang of `sky` on PATH."""
    explicit = os.environ.get(PYTHON_ENV)
    if explicit:
        return explicit
    if importlib.util.find_spec("sky") is not None:
        return sys.executable
    sky = shutil.which("sky")
    if sky:
        try:
            first = Path(sky).read_bytes()[:512].split(b"\n", 1)[0].decode()
        except OSError:
            return None
        if first.startswith("#!") and "python" in first:
            interpreter = first[2:].strip().split()[0]
            if Path(interpreter).is_file():
                return interpreter
    return None


def require_python() -> str:
    python = find_python()
    if python is None:
        raise UserError(INSTALL_HINT)
    return python


def call(request: dict, *, on_line: Callable[[str], None] | None = None, python: str | None = None,
         what: str = "SkyPilot") -> dict:
    """Run one bridge request; SkyPilot's output lines go to `on_line`; its error is one line."""
    from tpubench.processes import start_in_new_group, stop_group

    python = python or require_python()
    tail: deque[str] = deque(maxlen=20)
    result = None
    try:
        process = start_in_new_group([python, str(BRIDGE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1)
    except OSError as exc:
        raise UserError(f"cannot run SkyPilot's Python {python}: {exc}", field=PYTHON_ENV) from None
    try:
        process.stdin.write(json.dumps(request))
        process.stdin.close()
        for line in process.stdout:
            line = line.rstrip("\n")
            if line.startswith(MARK):
                result = json.loads(line[len(MARK):])
            elif line.strip() and not line.startswith(_RICH_PAYLOAD):
                tail.append(line)
                if on_line:
                    on_line(line)
        process.wait()
    finally:
        if process.poll() is None:
            stop_group(process, 5)
    if result is None:
        last = tail[-1] if tail else f"exit code {process.returncode}"
        raise ExternalFailure(f"{what}: SkyPilot's Python ended without an answer ({last})")
    if "error" in result:
        raise ExternalFailure(f"{what}: {result['error']}")
    return result
