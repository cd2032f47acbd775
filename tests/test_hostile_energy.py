"""Energy verdicts and idle floors (issue 32): a result always says whether its energy was measured,
modelled, invalid or unavailable and why; a modelled TPU draws an idle floor; older result files
(`"energy": {}`) still load."""

from __future__ import annotations

import json

import pytest
from helpers_synthetic import make_result

from tpubench.hardware.energy_sources import TPU_IDLE_FRACTION, ModelledSource, find_source
from tpubench.measure.energy import EnergyMeter
from tpubench.output.frames import flatten, load_results
from tpubench.records.energy_verdict import NOT_RECORDED, reason_of, verdict_of, with_verdict
from tpubench.records.result import write_result


@pytest.mark.parametrize("why_not, status, reason", [
    ("no RAPL powercap (/sys/class/powercap does not exist on this host)", "ok",
     "no RAPL powercap (/sys/class/powercap does not exist on this host)"),
    ("--no-energy", "ok", "not asked for (--no-energy)"),
    (None, "failed", "the point failed before a timed window was metered"),
    (None, "skipped", "the point skipped before a timed window was metered"),
    (None, "ok", "this point's measurement metered no window"),
])
def test_a_run_without_energy_says_unavailable_and_why(why_not, status, reason):
    assert with_verdict({}, why_not=why_not, status=status) == {"verdict": "unavailable", "reason": reason}


def test_a_figure_says_measured_modelled_or_invalid():
    measured = {"method": "measured", "valid": True, "energy_j": 10.0, "reasons": []}
    assert with_verdict(measured, why_not=None, status="ok")["verdict"] == "measured"
    assert with_verdict({**measured, "method": "modelled"}, why_not=None, status="ok")["verdict"] == "modelled"
    broken = {**measured, "valid": False, "energy_j": None, "reasons": ["sampling_gap_exceeded"],
              "notes": ["3.20 s between readings (limit 3 s)"]}
    out = with_verdict(broken, why_not=None, status="ok")
    assert out["verdict"] == "invalid" and out["reason"].startswith("sampling_gap_exceeded; 3.20 s")
    assert out["reasons"] == ["sampling_gap_exceeded"]   # the figure's own fields are kept


def test_an_older_result_with_empty_energy_still_loads(tmp_path):
    r = make_result()
    assert r.energy == {}                     # what every result before the verdict wrote
    path = write_result(r, tmp_path)
    data = json.loads(path.read_bytes())
    assert data["energy"] == {}
    df = load_results(tmp_path)
    assert len(df) == 1 and df["energy_verdict"].iloc[0] == "unavailable"
    assert df["energy_why_not"].iloc[0] == NOT_RECORDED
    # An older figure (no verdict stored) reads as its method.
    r.energy = {"method": "modelled", "valid": True, "energy_j": 5.0}
    assert verdict_of(r.energy) == "modelled" and reason_of(r.energy) == ""
    assert flatten(r)["energy_verdict"] == "modelled" and flatten(r)["energy_why_not"] is None


def test_the_verdict_round_trips_through_a_result_file(tmp_path):
    r = make_result()
    r.energy = with_verdict({}, why_not="--no-energy", status="ok")
    row = load_results(write_result(r, tmp_path))
    assert row["energy_verdict"].iloc[0] == "unavailable"
    assert row["energy_why_not"].iloc[0] == "not asked for (--no-energy)"


class _Duty:
    """Two TPU chips, one idle and one fully busy."""

    def __call__(self):
        return [0.0, 1.0]


def test_a_modelled_tpu_draws_its_idle_floor_at_zero_duty():
    # Google's TPU v4: 90 W idle, 192 W max: an idle chip draws 90/192 of the figure, a busy one all of it.
    assert TPU_IDLE_FRACTION == pytest.approx(90 / 192)
    source = ModelledSource(192.0, 2, "--chip-power-w", duty=_Duty(), idle_fraction=TPU_IDLE_FRACTION,
                            idle_source="TPU v4 idle/max")
    assert source.read().watts == pytest.approx((90.0, 192.0))
    assert source.idle_power_w == pytest.approx([90.0, 90.0])
    # Without a floor (a chip whose idle power nobody published) it is the duty cycle alone, and says so.
    bare = ModelledSource(192.0, 2, "--chip-power-w", duty=_Duty())
    assert bare.read().watts == pytest.approx((0.0, 192.0)) and bare.idle_power_w is None
    assert "no idle floor known" in bare.detail


def test_a_modelled_tpu_meter_reports_its_idle_floor_and_the_energy_above_it():
    class Monitoring:
        def list_supported_metrics(self):
            return ["duty_cycle_pct"]

        def get_metric(self, name):
            class Metric:
                def data(self):
                    return ["100.0"]
            return Metric()

    source, _ = find_source("tpu", chips=1, chip_power_w=200.0, tpumonitoring=Monitoring())
    meter = EnergyMeter(source, interval_s=0.01)
    assert meter.idle == pytest.approx([200.0 * 90 / 192])   # no idle spell measured for a model
    with meter.window():
        pass
    energy = meter.result
    assert energy.valid and energy.idle_power_w == pytest.approx([93.75])
    assert energy.energy_above_idle_j == pytest.approx(energy.energy_j - 93.75 * energy.window_s)
    # A flattened row carries the idle watts of the point's devices, for a budget's idle floor.
    r = make_result(accelerator="TPU v6 lite", device="tpu")
    r.energy = with_verdict(energy.as_dict(), why_not=None, status="ok")
    row = flatten(r)
    assert row["energy_verdict"] == "modelled" and row["idle_power_w"] == pytest.approx(93.75)
