"""tpubench: measure one PyTorch workload on TPU, GPU, Trainium, JAX and CPU, then price it per token."""

from tpubench.version import __version__

__all__ = ["__version__", "answer", "compare_published", "load_requests", "load_results"]


def load_results(paths, *, warn=None, keep="latest", include_published=False, shipped=False):
    """Load result files or folders into a tidy pandas DataFrame, one row per run point.

    A point measured several times counts once: keep="latest" (the default) keeps its most recent
    result, keep="all" every file; the `older_runs` column and df.attrs["older_runs_left_out"] say
    how many older runs there are (see tpubench.output.frames.load_results). Published results
    imported beside them (`tpubench import`) join as rows with source "published" only when
    `include_published=True`; with `shipped=True` too, so do the reference rows shipped with tpubench
    (docs/published.md#shipped).

    Imported lazily so that `import tpubench` stays cheap (no pandas, torch or jax).
    """
    from tpubench.output.frames import load_results as _load

    return _load(paths, warn=warn, keep=keep, include_published=include_published, shipped=shipped)


def load_requests(paths, *, warn=None, keep="latest"):
    """Every request of serve results as a pandas DataFrame, one row per request (see
    tpubench.output.frames.load_requests)."""
    from tpubench.output.frames import load_requests as _load

    return _load(paths, warn=warn, keep=keep)


def compare_published(paths, *, tolerance=0.10, warn=None, keep="latest"):
    """Your measured points beside the published results imported under `paths` (`tpubench
    import`): per point and matching published front (same model, lengths, accelerator and
    precision), the front's throughput per chip interpolated at the point's interactivity, the
    deviation and a verdict ("agrees within 10%", "differs by -35%: check your stack"); see
    tpubench.output.published.match."""
    from tpubench.output.frames import load_results as _load
    from tpubench.output.published import compare_published as _compare
    from tpubench.output.published import read_published

    return _compare(_load(paths, warn=warn, keep=keep), read_published(paths, warn=warn), tolerance)


def answer(paths, *, on=(), prices=None, plans=None, warn=None, shipped=True):
    """The report's answer table as a pandas DataFrame: per workload and purchase plan, every option
    (your measured points, estimates for the chips each workload's `compare_on` or `on` names,
    the nearest published rows) with its blended $/Mtok, interval and where its figure comes from
    (`source`: measured, estimate or published), and its table's verdict (`verdict_*` columns);
    see tpubench.output.report.answer. `prices` is a price table (money.pricing.load_prices; the
    shipped one when None)."""
    from tpubench.estimate.for_reports import estimates_for_report
    from tpubench.output.answer.assemble import frame
    from tpubench.output.report import build_report

    data = build_report(paths, prices=prices, plans=plans, warn=warn, include_shipped=shipped, on=list(on),
                        estimator=estimates_for_report)
    return frame(data.answer)
