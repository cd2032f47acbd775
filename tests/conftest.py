import gc
import os
import sys
import tempfile
from pathlib import Path

import pytest

# Deterministic and quiet: one thread, no tokenizers parallelism, no Hub access.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One OpenBLAS thread (numpy's BLAS; set before numpy loads, which is why pyproject's addopts turns
# off jaxtyping's pytest plugin, the one plugin that imported numpy first). The tests' matrices are
# small, and on 2 cores two xdist workers' BLAS threads fight each other: the estimate's calibration
# (a few hundred small solves) took 0.6 to 1.6 s with them and 0.4 s with one. Subprocesses inherit it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# The results cache (output/results_cache.py) in a folder of this test session, never
# the user's own.
os.environ.setdefault("TPUBENCH_CACHE_DIR", tempfile.mkdtemp(prefix="tpubench-test-cache-"))

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def tiny_workload() -> Path:
    return FIXTURES / "tiny_moe.yaml"


class _TorchOnOneThread:
    """torch.set_num_threads(1) the moment torch is first imported, instead of importing torch (2 to
    3 s) in every test process whether or not a test there needs it: a meta path finder that finds
    torch with the finders after it and runs set_num_threads(1) right after torch's own module code."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                break
        else:
            return None
        exec_module = spec.loader.exec_module

        def exec_on_one_thread(module):
            exec_module(module)
            module.set_num_threads(1)

        spec.loader.exec_module = exec_on_one_thread
        return spec


if "torch" in sys.modules:
    sys.modules["torch"].set_num_threads(1)
else:
    sys.meta_path.insert(0, _TorchOnOneThread())


@pytest.fixture
def clock(monkeypatch):
    """A fake perf_counter for the measurement loop (see fakes.py)."""
    from fakes import install_clock

    return install_clock(monkeypatch)


WHOLLY_SLOW = "\npytestmark = pytest.mark.slow"


def pytest_ignore_collect(collection_path, config):
    """The fast tier (`-m "not slow"`) does not even import a module whose every test is slow
    (`pytestmark = pytest.mark.slow` at its top level): importing one may load torch, JAX and
    transformers, seconds the inner loop would spend for tests it then deselects."""
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    if (config.getoption("markexpr") or "").replace(" ", "") != 'notslow':
        return None
    return True if WHOLLY_SLOW in collection_path.read_text(encoding="utf-8") else None


# Test modules are kept as bytecode even where PYTHONDONTWRITEBYTECODE is set: pytest rewrites every
# assert of a test module on import, about 7 s of each xdist worker's start-up for this suite, and
# reads a rewritten module back from tests/__pycache__ (git-ignored) when one is there. Only while
# the test modules are collected; the setting is the user's again for the tests themselves.
_NO_BYTECODE = sys.dont_write_bytecode


def pytest_collection(session):
    sys.dont_write_bytecode = False


# The garbage collector's full collections walk every object the process tracks, and a test process
# holds pandas, pydantic and, once a test needs them, torch, JAX and transformers: about 0.3 s a
# collection, dozens of times a session. Whatever is alive once collection ends (and after a test
# that imported many modules) is frozen out of those walks (gc.freeze: still freed by reference
# counting, only no longer searched for cycles).
_FROZEN_AT_MODULES = [0]
_REFREEZE_AFTER = 200     # modules imported since the last freeze


def _freeze():
    gc.collect()
    gc.freeze()
    _FROZEN_AT_MODULES[0] = len(sys.modules)


def pytest_collection_finish(session):
    sys.dont_write_bytecode = _NO_BYTECODE
    _freeze()


def pytest_runtest_logfinish(nodeid, location):
    if len(sys.modules) - _FROZEN_AT_MODULES[0] >= _REFREEZE_AFTER:
        _freeze()
