"""compare verdicts on synthetic pairs, numerics parity verdicts, and the export round-trip."""

import sys

import pandas as pd
import pytest
from helpers_cli import run_cli
from helpers_synthetic import make_result, write_results

from tpubench.cli import main
from tpubench.measure.numerics import compare_numerics
from tpubench.output.compare import compare_metrics, compare_results, slower_than
from tpubench.output.frames import EXPORT_COLUMNS, load_results


def fingerprint(logits, tokens, std=1.0, identical=True):
    return {"greedy_tokens": tokens, "logits_sample_ids": list(range(len(logits))), "logits_sample": logits,
            "top_ids": [0], "top_values": [logits[0]], "logits_mean": 0.0, "logits_std": std,
            "weights_identical_across_devices": identical}


def with_numerics(r, **kw):
    r.numerics = fingerprint(**kw)
    return r


def pair(e2e_a, e2e_b, rel=0.02):
    return make_result(e2e_s=e2e_a, rel_half_width=rel).metrics, make_result(e2e_s=e2e_b, rel_half_width=rel).metrics


def verdicts(a, b):
    return {m.metric: m.verdict for m in compare_metrics(a, b)}


def test_clearly_faster_slower_and_tie():
    # E2E 2.0 s -> 1.0 s: output tokens/s doubles, ratio 2 ± 2*sqrt(2)*0.02 = 2 ± 0.057
    faster = verdicts(*pair(2.0, 1.0))
    assert faster["output_tokens_per_s"] == "faster" and faster["e2e_mean_s"] == "faster"
    slower = verdicts(*pair(1.0, 2.0))
    assert slower["output_tokens_per_s"] == "slower" and slower["e2e_mean_s"] == "slower"
    # 1% apart with 5% CIs on each side: tie
    tie = verdicts(*pair(2.0, 1.98, rel=0.05))
    assert tie["output_tokens_per_s"] == "tie within noise"
    (m,) = [m for m in compare_metrics(*pair(2.0, 1.0)) if m.metric == "output_tokens_per_s"]
    assert m.ratio == pytest.approx(2.0) and m.half_width == pytest.approx(2 * (2 * 0.02**2) ** 0.5)


def test_numerics_agree_disagree_not_comparable():
    base = [1.0, -2.0, 0.5, 3.0]
    a = with_numerics(make_result(dtype="float32"), logits=base, tokens=[1, 2, 3])
    b = with_numerics(make_result(dtype="float32"), logits=[x + 1e-5 for x in base], tokens=[1, 2, 3])
    assert compare_numerics(a, b).verdict == "agree"
    perturbed = with_numerics(make_result(dtype="float32"), logits=[x + 0.01 for x in base], tokens=[1, 2, 3])
    p = compare_numerics(a, perturbed)
    assert p.verdict == "disagree" and p.max_abs_delta == pytest.approx(0.01)
    other_tokens = with_numerics(make_result(dtype="float32"), logits=base, tokens=[1, 2, 4])
    assert compare_numerics(a, other_tokens).verdict == "disagree"
    # bf16: within 0.25 * logits std and same first token -> agree, even if later tokens split
    h = with_numerics(make_result(dtype="bfloat16"), logits=[x + 0.2 for x in base], tokens=[1, 5, 6], std=1.0)
    assert compare_numerics(a, h).verdict == "agree"
    h_far = with_numerics(make_result(dtype="bfloat16"), logits=[x + 0.3 for x in base], tokens=[1, 5, 6], std=1.0)
    assert compare_numerics(a, h_far).verdict == "disagree"
    other_shape = with_numerics(make_result(dtype="float32", batch_size=2), logits=base, tokens=[1, 2, 3])
    assert compare_numerics(a, other_shape).verdict == "not comparable"
    device_init = with_numerics(make_result(dtype="float32"), logits=base, tokens=[1, 2, 3], identical=False)
    assert compare_numerics(a, device_init).verdict == "not comparable"


def test_folders_match_by_point_and_fail_if_slower(tmp_path, monkeypatch, capsys):
    write_results(tmp_path / "a", [dict(batch_size=1, e2e_s=2.0), dict(batch_size=8, e2e_s=2.0)])
    write_results(tmp_path / "b", [dict(batch_size=1, e2e_s=2.0), dict(batch_size=8, e2e_s=4.0),
                                   dict(batch_size=64, e2e_s=1.0)])
    from tpubench.records.result import read_results

    comps, unmatched = compare_results(read_results(tmp_path / "a"), read_results(tmp_path / "b"))
    assert len(comps) == 2 and len(unmatched) == 1
    assert [c.label.split()[2] for c in slower_than(comps, 10)] == ["b8"]
    monkeypatch.setattr(sys, "argv", ["tpubench", "compare", str(tmp_path / "a"), str(tmp_path / "b"),
                                      "--fail-if-slower", "10"])
    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == 1
    assert "slower" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["tpubench", "compare", str(tmp_path / "a"), str(tmp_path / "a"),
                                      "--fail-if-slower", "10"])
    main()  # identical runs: no exit


def test_training_results_compare_by_training_throughput(tmp_path):
    from helpers_synthetic import write_train_results

    from tpubench.records.result import read_results

    # Step 1.0 s -> 1.25 s at 8 x 1024 tokens: 8192 -> 6553.6 tokens/s, ratio 0.8 +- 0.8*sqrt(2)*0.02.
    write_train_results(tmp_path / "a", [dict(step_s=1.0)])
    write_train_results(tmp_path / "b", [dict(step_s=1.25, accelerator="TPU v6e lite", device="tpu")])
    (comp,), unmatched = compare_results(read_results(tmp_path / "a"), read_results(tmp_path / "b"))
    by_name = {m.metric: m for m in comp.metrics}
    assert unmatched == [] and comp.label == "synthetic_train full train b8 i1024 bfloat16: torch:cuda -> torch:tpu"
    assert by_name["train_tokens_per_s"].ratio == pytest.approx(0.8)
    assert by_name["train_tokens_per_s"].verdict == "slower" and by_name["step_mean_s"].verdict == "slower"
    assert comp.headline() is by_name["train_tokens_per_s"]
    assert slower_than([comp], 10) == [comp] and slower_than([comp], 25) == []


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_round_trip(tmp_path, monkeypatch, capsys, fmt):
    write_results(tmp_path / "r", [dict(batch_size=1), dict(batch_size=8, status="failed", error="OOM")])
    out = tmp_path / f"t.{fmt}"
    monkeypatch.setattr(sys, "argv", ["tpubench", "export", str(tmp_path / "r"), "--to", fmt, "--out", str(out)])
    main()
    back = pd.read_csv(out) if fmt == "csv" else pd.read_parquet(out)
    assert list(back.columns)[: len(EXPORT_COLUMNS)] == EXPORT_COLUMNS
    assert len(back) == 2 and set(back["status"]) == {"ok", "failed"}
    assert (back["schema_version"] == 1).all()
    original = load_results(tmp_path / "r").set_index("batch_size")
    again = back.set_index("batch_size")
    assert again.loc[1, "output_tokens_per_s"] == pytest.approx(original.loc[1, "output_tokens_per_s"])


# ----------------------------------------------------------------------------- like with like


def compare_folders(tmp_path, a_specs, b_specs, writer=None):
    from helpers_synthetic import write_serve_results

    from tpubench.records.result import read_results

    writer = writer or write_serve_results
    writer(tmp_path / "a", a_specs)
    writer(tmp_path / "b", b_specs)
    return compare_results(read_results(tmp_path / "a"), read_results(tmp_path / "b"))


def test_one_chip_against_four_is_compared_per_chip(tmp_path, monkeypatch, capsys):
    # B serves the same point on 4 chips at twice A's total tokens/s (3000 tokens in 5 s vs 10 s):
    # 600 vs 300 tok/s in total is 150 vs 300 per chip, 0.5x, and that is the verdict.
    (comp,), unmatched = compare_folders(tmp_path, [dict(chips=1, window_s=10.0)], [dict(chips=4, window_s=5.0)])
    by_name = {m.metric: m for m in comp.metrics}
    assert unmatched == [] and comp.basis == "per chip" and "(per chip: 1 vs 4 chips)" in comp.label
    assert "output_tokens_per_s" not in by_name            # the total's 2x is never shown as a verdict
    head = comp.headline()
    assert head.metric == "output_tokens_per_s_per_chip"
    assert (head.a, head.b, head.ratio) == (pytest.approx(300.0), pytest.approx(150.0), pytest.approx(0.5))
    assert head.verdict == "slower" and by_name["ttft_mean_s"].ratio == pytest.approx(1.0)
    assert slower_than([comp], 10) == [comp]
    code, out, err = run_cli(monkeypatch, capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b"),
                             "--fail-if-slower", "10")
    assert code == 1 and "per chip: 1 vs 4 chips" in out and "output_tokens_per_s_per_chip x0.500" in out


def test_same_chips_compare_totals(tmp_path):
    (comp,), _ = compare_folders(tmp_path, [dict(chips=4, window_s=10.0)], [dict(chips=4, window_s=5.0)])
    assert comp.basis == "total" and comp.headline().metric == "output_tokens_per_s"
    assert comp.headline().ratio == pytest.approx(2.0) and comp.headline().verdict == "faster"


def test_chips_unknown_on_one_side_compares_latency_only(tmp_path):
    (comp,), _ = compare_folders(tmp_path, [dict(chips=1)], [dict(chips=None)])
    assert comp.headline() is None and "chips unknown" in comp.label
    assert {m.metric for m in comp.metrics} == {"ttft_mean_s", "tpot_mean_s", "e2e_mean_s"}


def test_different_loads_never_pair_and_are_listed(tmp_path, monkeypatch, capsys):
    # Concurrency 8 against 1 would read "4x faster"; 16 against 8 "slower": neither is a pair.
    comps, unmatched = compare_folders(tmp_path, [dict(concurrency=1, window_s=40.0), dict(concurrency=8, window_s=10.0)],
                                       [dict(concurrency=8, window_s=10.0), dict(concurrency=16, window_s=80.0),
                                        dict(request_rate=4.0, window_s=80.0)])
    assert [c.label.split()[2] for c in comps] == ["c8"]
    assert sorted(u.split(" (")[1] for u in unmatched) == ["synthetic full c1 i1024 o128)",
                                                           "synthetic full c16 i1024 o128)",
                                                           "synthetic full rate 4/s i1024 o128)"]
    assert sum(u.startswith("only in A: ") for u in unmatched) == 1
    code, out, _ = run_cli(monkeypatch, capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b"),
                           "--fail-if-slower", "10")
    assert code == 0, out                 # judged on the matched c8 pair only, which ties
    assert out.count("unmatched only in") == 3


def test_two_files_of_different_points_are_refused_with_the_difference(tmp_path, monkeypatch, capsys):
    from helpers_synthetic import write_serve_results

    (a,) = write_serve_results(tmp_path / "a", [dict(concurrency=1, window_s=40.0)])
    (b,) = write_serve_results(tmp_path / "b", [dict(concurrency=8, window_s=10.0)])
    code, out, err = run_cli(monkeypatch, capsys, "compare", str(a), str(b))
    assert code == 2 and err.count("\n") == 1
    assert "no matching successful runs" in err and "params.load.concurrency: 1 vs 8" in err


def test_generate_layouts_and_lengths_never_pair():
    from tpubench.output.compare import match_key

    def result(**point):
        r = make_result(chips=point.pop("chips", 1))
        r.point.update(point)
        return r

    base = result()
    assert match_key(base) == match_key(result(tensor_parallel=1, matmul_precision="highest"))  # defaults
    assert match_key(base) == match_key(result(measurement={"min_seconds": 9}, compile_options={"mode": "x"}))
    for other in (result(tensor_parallel=4, chips=4), result(expert_parallel=2, chips=2), result(output_length=64),
                  result(matmul_precision="high"), result(model_config={"hidden_size": 64})):
        assert match_key(base) != match_key(other)


def test_training_settings_are_part_of_the_point(tmp_path):
    from helpers_synthetic import write_train_results

    comps, unmatched = compare_folders(tmp_path, [dict(gradient_accumulation=1)], [dict(gradient_accumulation=4)],
                                       writer=write_train_results)
    assert comps == [] and "params.gradient_accumulation: 1 vs 4" in unmatched[-1]


def test_numerics_pairs_across_layouts_and_lists_what_it_leaves():
    base = [1.0, -2.0, 0.5, 3.0]

    def result(tp, name):
        r = with_numerics(make_result(chips=tp, dtype="float32"), logits=base, tokens=[1, 2, 3])
        r.point["tensor_parallel"] = tp
        return (f"{name}.json", r)

    one, two, four = result(1, "a-tp1"), result(2, "a-tp2"), result(4, "b-tp4")
    # A sharded run is checked against the unsharded one; a performance compare never pairs them.
    comparisons, unmatched = compare_results([one], [four], numerics_only=True)
    assert [(c.a_file, c.b_file) for c in comparisons] == [("a-tp1.json", "b-tp4.json")]
    assert comparisons[0].numerics.verdict == "agree" and unmatched == []
    assert compare_results([one], [four])[0] == []
    # The same layout is preferred where A has it, and what is left unpaired is listed, not dropped.
    comparisons, unmatched = compare_results([one, two], [result(2, "b-tp2")], numerics_only=True)
    assert [(c.a_file, c.b_file) for c in comparisons] == [("a-tp2.json", "b-tp2.json")]
    assert len(unmatched) == 1 and unmatched[0].startswith("only in A: a-tp1.json")
