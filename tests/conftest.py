import os
import tempfile
from pathlib import Path

import pytest

# Deterministic and quiet: one thread, no tokenizers parallelism, no Hub access.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The results and figure caches (output/results_cache.py) in a folder of this test session, never
# the user's own.
os.environ.setdefault("TPUBENCH_CACHE_DIR", tempfile.mkdtemp(prefix="tpubench-test-cache-"))

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def tiny_workload() -> Path:
    return FIXTURES / "tiny_moe.yaml"


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    try:
        import torch
    except ImportError:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
