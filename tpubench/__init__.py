"""tpubench: measure one PyTorch workload on TPU, GPU, Trainium, JAX and CPU, then price it per token."""

from tpubench.version import __version__

__all__ = ["__version__", "load_requests", "load_results"]


def load_results(paths, *, warn=None, keep="latest"):
    """Load result files or folders into a tidy pandas DataFrame, one row per run point.

    A point measured several times counts once: keep="latest" (the default) keeps its most recent
    result, keep="all" every file; the `older_runs` column and df.attrs["older_runs_left_out"] say
    how many older runs there are (see tpubench.output.frames.load_results).

    Imported lazily so that `import tpubench` stays cheap (no pandas, torch or jax).
    """
    from tpubench.output.frames import load_results as _load

    return _load(paths, warn=warn, keep=keep)


def load_requests(paths, *, warn=None, keep="latest"):
    """Every request of serve results as a pandas DataFrame, one row per request (see
    tpubench.output.frames.load_requests)."""
    from tpubench.output.frames import load_requests as _load

    return _load(paths, warn=warn, keep=keep)
