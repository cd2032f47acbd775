"""A sweep where one point fails and the run is interrupted, then resumed: nothing lost, nothing twice."""

import pytest

from tpubench.records.result import read_results
from tpubench.run.runner import SilentReporter, run_sweep

pytestmark = pytest.mark.slow   # a real sweep of tiny models


class InterruptAt(SilentReporter):
    def __init__(self, index):
        self.index = index

    def point_started(self, index, point):
        if index == self.index:
            raise KeyboardInterrupt


@pytest.fixture
def sweep_workload(tmp_path, tiny_workload):
    text = tiny_workload.read_text() + "execution:\n  mode: [eager, compile]\n  compile_options: {backend: no_such_backend}\n"
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return path


def test_failure_interrupt_resume(tmp_path, sweep_workload):
    out = tmp_path / "results"
    # points: (b1, eager), (b1, compile: fails), (b2, eager), (b2, compile: fails)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep_workload, scale="full", out_dir=out, reporter=InterruptAt(2))
    first = {r.point_key: r for _, r in read_results(out)}
    assert len(first) == 2
    statuses = sorted((r.point["batch_size"], r.point["execution_mode"], r.status) for r in first.values())
    assert statuses == [(1, "compile", "failed"), (1, "eager", "ok")]
    failed = next(r for r in first.values() if r.status == "failed")
    assert "no_such_backend" in failed.error and not failed.validity.valid
    assert not list(out.glob(".tmp-*"))

    outcomes = run_sweep(sweep_workload, scale="full", out_dir=out, resume=True)
    assert [o.skipped for o in outcomes] == [True, True, False, False]
    after = [r for _, r in read_results(out)]
    assert len(after) == 4 and len({r.point_key for r in after}) == 4   # nothing measured twice
    for key, r in first.items():                                          # nothing lost or rewritten
        assert any(a.point_key == key and a.finished_at == r.finished_at for a in after)

    again = run_sweep(sweep_workload, scale="full", out_dir=out, resume=True, retry_failed=True)
    assert [o.skipped for o in again] == [True, False, True, False]
