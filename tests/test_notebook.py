"""notebooks/analysis.ipynb runs top to bottom on the committed results/ (as CI runs it), here on a
copy of them in which some points were measured again (TPUBENCH_RESULTS points the notebook at it),
so one run checks both the notebook and that repeated points are counted once.

The notebook is executed with nbclient on a `python3` kernel that is *this* interpreter: a
kernelspec pointing at sys.executable is written into a temporary JUPYTER_PATH, which Jupyter
searches before the user's and the system's kernel folders, so a fresh CI venv without any
installed kernelspec (or a machine whose system-wide `python3` kernel lacks tpubench) still runs
the notebook in the venv.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from helpers_repeats import REPO_RESULTS, repo_results_with_repeats

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

pytestmark = pytest.mark.slow   # starts a Jupyter kernel and runs the whole notebook

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "notebooks" / "analysis.ipynb"

# Appended to an in-memory copy of the notebook (the stored one stays clean): which interpreter ran
# it, and whether anything pulled in torch or JAX (the notebook must not need them).
PROBE = """\
import json, sys
print("PROBE " + json.dumps({"prefix": sys.prefix,
                             "heavy": sorted(m for m in ("torch", "jax", "transformers") if m in sys.modules)}))
"""


def _venv_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel_dir = tmp_path / "jupyter" / "kernels" / "python3"
    kernel_dir.mkdir(parents=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (tpubench test)", "language": "python",
            "metadata": {"debugger": False}}
    (kernel_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    # Keep the user's IPython profile (startup scripts, config) out of the run.
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")


def _outputs(cell) -> list:
    return cell.get("outputs", []) if cell.cell_type == "code" else []


def _text(output) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    data = output.get("data", {})
    return "".join(str(data.get(k, "")) for k in ("text/plain", "text/markdown", "text/html"))


@pytest.fixture(scope="module")
def repeats(tmp_path_factory) -> dict:
    """A copy of examples/results/ with 3 older runs of 2 points added (helpers_repeats), and its counts.
    The two points measured later on another machine were measured there without JAX installed
    (README's first command installs no JAX): their results record no jax version."""
    folder = tmp_path_factory.mktemp("results-repeated")
    found = repo_results_with_repeats(folder)
    without_jax = [c for c in found["copies"] if json.loads(c.read_bytes())["environment"].get("hostname") == "other-vm"]
    for copy in without_jax:
        data = json.loads(copy.read_bytes())
        data["environment"].pop("jax", None)
        copy.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return {"path": folder, "without_jax": without_jax, **found}


@pytest.fixture(scope="module")
def executed(tmp_path_factory, repeats):
    """The notebook after a full run on `repeats` (once for the module), and the run's wall time."""
    tmp_path = tmp_path_factory.mktemp("nb")
    with pytest.MonkeyPatch.context() as monkeypatch:
        _venv_kernel(tmp_path, monkeypatch)
        monkeypatch.setenv("TPUBENCH_RESULTS", str(repeats["path"]))
        nb = nbformat.read(NOTEBOOK, as_version=4)
        nb.cells.append(nbformat.v4.new_code_cell(PROBE, id="test-probe"))
        client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                         resources={"metadata": {"path": str(NOTEBOOK.parent)}})
        start = time.perf_counter()
        client.execute()           # raises CellExecutionError on the first cell that errors
        return nb, time.perf_counter() - start


def test_stored_notebook_is_clean():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, "store the notebook without outputs"


def test_notebook_runs_without_errors(executed):
    # How long it takes (a few seconds on 2 cores) is no test's claim: a busy host adds to it.
    nb, _ = executed
    errors = [o for c in nb.cells for o in _outputs(c) if o.get("output_type") == "error"]
    assert not errors, errors


def test_notebook_ran_in_this_interpreter_without_torch_or_jax(executed):
    nb, _ = executed
    probe = "".join(_text(o) for o in _outputs(nb.cells[-1]))
    assert probe.startswith("PROBE "), probe
    found = json.loads(probe.removeprefix("PROBE ").strip())
    assert Path(found["prefix"]) == Path(sys.prefix)
    assert found["heavy"] == []


def test_notebook_draws_figures(executed):
    nb, _ = executed
    svgs = [o["data"]["image/svg+xml"] for c in nb.cells for o in _outputs(c) if "image/svg+xml" in o.get("data", {})]
    # 3 workloads x (cost bars + Pareto) + latency + batch-size plot: the report's charts, drawn by vl-convert.
    assert len(svgs) >= 8, len(svgs)
    for svg in svgs:
        svg = "".join(svg) if isinstance(svg, list) else svg
        assert svg.lstrip().startswith("<svg") and svg.count("<path") > 3


def test_notebook_budget_section_has_output(executed):
    nb, _ = executed
    budget_cells = [c for c in nb.cells if "budget" in c.get("metadata", {}).get("tags", [])]
    assert budget_cells
    for cell in budget_cells:
        assert _outputs(cell), f"budget cell produced no output:\n{cell.source}"
    text = "\n".join(_text(o) for c in budget_cells for o in _outputs(c))
    assert "monthly_usd" in text
    assert "Options, cheapest first" in text       # render_budget's markdown
    assert "n2-standard-48" in text


def _cell(nb, cell_id: str):
    return next(c for c in nb.cells if c.get("id") == cell_id)


def test_notebook_counts_repeated_points_once(executed, repeats):
    nb, _ = executed
    points, left_out = repeats["originals"], repeats["left_out"]
    text = "".join(_text(o) for o in _outputs(_cell(nb, "code-02")))
    assert f"results: {repeats['path']}" in text          # TPUBENCH_RESULTS was read
    loaded = "".join(_text(o) for o in _outputs(_cell(nb, "code-04")))
    assert f"{points} measured points" in loaded
    assert f"{left_out} older run(s) of points measured again left out" in loaded
    runs_cells = [c for c in nb.cells if "repeats" in c.get("metadata", {}).get("tags", [])]
    assert len(runs_cells) == 1 and 'keep="all"' in runs_cells[0].source
    runs = "".join(_text(o) for o in _outputs(runs_cells[0]))
    assert (f"{repeats['files']} result files for {points} measured points; "
            f"{repeats['repeated_points']} point(s) measured more than once") in runs


def test_notebook_reads_the_committed_results_unless_told_otherwise(monkeypatch, capsys):
    """The setup cell alone, in this process (no kernel): RESULTS defaults to the repo's examples/results/."""
    pytest.importorskip("IPython")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    setup = _cell(nb, "code-02")
    monkeypatch.chdir(NOTEBOOK.parent)
    monkeypatch.delenv("TPUBENCH_RESULTS", raising=False)
    namespace: dict = {}
    exec(compile(setup.source, "code-02", "exec"), namespace)
    assert namespace["RESULTS"] == REPO_RESULTS
    monkeypatch.setenv("TPUBENCH_RESULTS", str(REPO_RESULTS / "missing"))
    with pytest.raises(AssertionError, match="no results folder"):
        exec(compile(setup.source, "code-02", "exec"), {})


def test_notebook_handles_results_without_a_jax_version(executed, repeats):
    # The latest torch environment has no jax version: the batch-size cell joins the environment's
    # columns into one label, which failed on the missing value under pandas 3.
    import tpubench

    assert repeats["without_jax"]
    loaded = tpubench.load_results(repeats["path"])
    assert loaded["jax_version"].isna().any()
    nb, _ = executed
    text = "".join(_text(o) for o in _outputs(_cell(nb, "code-19")))
    assert "b8_vs_b1" in text


def test_batch_size_cell_takes_a_point_measured_again_under_a_new_tpubench(tmp_path, monkeypatch):
    """A point measured again on the same host and versions but under another tpubench version (a
    new environment_key: a result of its own to load_results) gave the batch-size cell two rows of
    one batch size, and unstack failed: "Index contains duplicate entries, cannot reshape". The
    cells it needs run here in this process (no kernel), the latest run of the point is the one kept."""
    pytest.importorskip("IPython")
    import shutil

    for f in sorted(REPO_RESULTS.glob("*.json")):
        shutil.copy2(f, tmp_path / f.name)
    again = json.loads(sorted(REPO_RESULTS.glob("*.json"))[0].read_bytes())
    again.update(environment_key=again["environment_key"] + "-next", started_at="2026-12-03T00:00:00+00:00")
    again["environment"]["tpubench"] = "0.1.1"
    again["metrics"]["output_tokens_per_s"] *= 2   # so the row kept can be told apart
    (tmp_path / "again.json").write_text(json.dumps(again), encoding="utf-8")
    monkeypatch.setenv("TPUBENCH_RESULTS", str(tmp_path))
    monkeypatch.chdir(NOTEBOOK.parent)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    namespace: dict = {}
    for cell_id in ("code-02", "code-04", "code-07", "code-08", "code-19"):
        source = _cell(nb, cell_id).source.replace("display(", "(lambda *a, **k: None)(")
        exec(compile(source, cell_id, "exec"), namespace)
    by_batch, od = namespace["by_batch"], namespace["od"]
    assert not od.duplicated(["workload", "backend", "batch_size"]).any()
    assert (tmp_path / "again.json").as_posix() in set(od["file"].map(lambda p: Path(p).as_posix()))
    assert by_batch["b8_vs_b1"].notna().any()
