"""What CLI start-up imports and does (issue 34: `--help` and `validate` within 0.3 s,
benchmarks/cli_startup.py): plain `--help` imports no rich; `validate` builds only its own kind's
scenario package, imports no numpy (its traffic files are read, no prompt drawn), and looks for no pydantic plugin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKLOADS = Path(__file__).resolve().parent.parent / "workloads"

PROBE = """
import contextlib, io, json, sys
from tpubench.cli import main
sys.argv = ['tpubench', *sys.argv[1:]]
code = 0
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit as exc:
        code = exc.code
print(json.dumps([code, sorted(sys.modules)]))
"""


def modules_after(*args: str) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True)
    code, modules = json.loads(done.stdout.strip().splitlines()[-1])
    return code, set(modules)


def test_help_imports_no_rich():
    code, modules = modules_after("--help")
    assert code == 0
    assert not {m for m in modules if m.split(".")[0] == "rich"}


def test_validate_imports_its_own_scenario_kind_only_and_no_rich():
    code, modules = modules_after("validate", str(WORKLOADS / "serve_local.yaml"))
    assert code == 0
    kinds = {m.split(".")[2] for m in modules if m.startswith("tpubench.scenarios.") and m.count(".") >= 2}
    packages = {k for k in kinds if k in ("generate", "serve", "train", "diffuse")}
    assert packages == {"serve"}
    assert not {m for m in modules if m.split(".")[0] in ("rich", "torch", "jax", "transformers", "pandas")}


@pytest.mark.parametrize("workload", ["serve_vllm_local.yaml", "serve_trace.yaml"])
def test_validate_of_traffic_imports_no_numpy(workload):
    # A trace is read whole by validate (multi_turn names no file); neither draws a prompt, and
    # numpy (~90 ms) is imported only where prompts are drawn (serving/traffic/common.py).
    code, modules = modules_after("validate", str(WORKLOADS / workload))
    assert code == 0
    assert "numpy" not in modules


PLUGIN_PROBE = """
import importlib.metadata, json, os, sys
looked_up = []
entry_points = importlib.metadata.entry_points
def recording(**kwargs):
    looked_up.append(kwargs.get("group"))
    return entry_points(**kwargs)
importlib.metadata.entry_points = recording   # before pydantic's plugin loader binds it
from tpubench.cli import main
sys.argv = ['tpubench', *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
during = list(looked_up)
import pydantic
class Later(pydantic.BaseModel):   # a model built after validate: the user's plugins apply again
    x: int = 0
print(json.dumps([during, looked_up, os.environ.get("PYDANTIC_DISABLE_PLUGINS")]))
"""


@pytest.mark.parametrize("users_own", [None, "some_plugin"])
@pytest.mark.slow   # a subprocess CLI
def test_validate_looks_for_no_pydantic_plugin_and_restores_the_setting(users_own):
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if users_own:
        env["PYDANTIC_DISABLE_PLUGINS"] = users_own
    done = subprocess.run([sys.executable, "-c", PLUGIN_PROBE, "validate", str(WORKLOADS / "serve_local.yaml")],
                          capture_output=True, text=True, check=True, env=env)
    during, after, setting = json.loads(done.stdout.strip().splitlines()[-1])
    assert "pydantic" not in during
    assert after.count("pydantic") == 1     # the model built after it looked them up
    assert setting == users_own


EXIT_PROBE = """
import atexit, gc, sys
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0))   # runs last: after any freeze
from tpubench.cli import main
sys.argv = ['tpubench', *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize("args, frozen", [(("validate", str(WORKLOADS / "qwen3_moe.yaml")), True),
                                          (("validate", str(WORKLOADS / "missing.yaml")), True),
                                          (("--help",), False)])
@pytest.mark.slow   # a subprocess CLI
def test_validate_spares_its_process_the_collection_at_exit(args, frozen):
    done = subprocess.run([sys.executable, "-c", EXIT_PROBE, *args], capture_output=True, text=True)
    assert done.stdout.strip().splitlines()[-1] == f"frozen at exit: {frozen}"
