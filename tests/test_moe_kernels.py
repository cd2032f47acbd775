"""The JAX twin's experts arms as kernels (issue 20, item 3): gather, ragged_dot and tokamax agree
with each other and with torch's eager / grouped_mm / batched_mm on the CPU, Tokamax's
implementation is chosen per platform and never falls back, a missing tokamax skips the point."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from tpubench.errors import Unavailable
from tpubench.models.jax_experts import INSTALL_HINT, import_tokamax, tokamax_implementation

FIXTURES = Path(__file__).parent / "fixtures"


def _workload(tmp_path: Path, routing="natural", experts="eager", **model) -> Path:
    data = yaml.safe_load((FIXTURES / "tiny_moe.yaml").read_text())
    data["model"]["routing"] = routing
    data["model"]["experts_implementation"] = experts
    data["model"]["config"].update(model)
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _point(tmp_path, routing="natural", batch=2, input_length=6, output_length=4, **model):
    from tpubench.run.sweep import expand
    from tpubench.run.workload import load_workload

    point = next(p for p in expand(load_workload(_workload(tmp_path, routing, **model))) if p.batch_size == batch)
    return replace(point, input_length=input_length, output_length=output_length)


def _no_tokamax(monkeypatch):
    monkeypatch.setitem(sys.modules, "tokamax", None)   # `import tokamax` now raises ModuleNotFoundError


# ----------------------------------------------------------------------------- choices, pure


def test_the_platform_chooses_tokamax_implementation():
    assert tokamax_implementation("cpu") == "xla"
    assert tokamax_implementation("tpu") == "mosaic"
    assert tokamax_implementation("gpu") == "mosaic"
    with pytest.raises(Unavailable, match="no Tokamax ragged_dot implementation is chosen for JAX platform rocm"):
        tokamax_implementation("rocm")


def test_missing_tokamax_is_unavailable_with_the_install_hint(monkeypatch):
    _no_tokamax(monkeypatch)
    with pytest.raises(Unavailable) as exc:
        import_tokamax()
    assert str(exc.value) == f"experts implementation tokamax needs the tokamax package ({INSTALL_HINT})"


def test_the_kernel_record_names_package_and_version():
    jax = pytest.importorskip("jax")
    tokamax = pytest.importorskip("tokamax")
    from tpubench.models.jax_experts import kernel_record

    assert kernel_record("tokamax", "xla") == {"arm": "tokamax", "implementation": "xla", "package": "tokamax",
                                              "version": tokamax.__version__}
    assert kernel_record("ragged_dot") == {"arm": "ragged_dot", "implementation": "jax.lax.ragged_dot_general",
                                           "package": "jax", "version": jax.__version__}
    assert kernel_record("gather")["implementation"] == "gather"


# ----------------------------------------------------------------------------- the MoE block alone


def _moe_layer(seed=0, E=6, K=2, D=16, I=8, N=10):
    import jax.numpy as jnp

    from tpubench.models import jax_twin

    rng = np.random.default_rng(seed)
    cfg = jax_twin.TwinConfig(arch="qwen3_moe", vocab_size=8, hidden_size=D, num_layers=1, num_heads=2,
                              num_kv_heads=1, head_dim=8, intermediate_size=8, rms_norm_eps=1e-6,
                              rope_theta=1e4, num_experts=E, top_k=K, moe_intermediate_size=I,
                              norm_topk_prob=True, moe_layers=(True,))
    lp = {"router": rng.standard_normal((E, D), np.float32),
          "w_gate_up": rng.standard_normal((E, 2 * I, D), np.float32) / 4,
          "w_down": rng.standard_normal((E, D, I), np.float32) / 4}
    x = rng.standard_normal((2, N // 2, D), np.float32)
    return cfg, {k: jnp.asarray(v) for k, v in lp.items()}, jnp.asarray(x)


@pytest.mark.slow   # builds MoE blocks in torch and JAX
def test_every_twin_formulation_of_the_moe_block_agrees():
    """Same weights, same tokens: gather, ragged_dot, dense and tokamax (xla) give the same output
    and pick the same experts; a scheduled routing (the uniform/hot/... tables) too."""
    pytest.importorskip("tokamax")
    from tpubench.models import jax_twin

    cfg, lp, x = _moe_layer()
    table = np.array([[0, 1], [2, 3], [4, 5], [5, 0]], np.int32)   # a round-robin schedule, 4 tokens long
    for sched in (None, table):
        outs = {impl: jax_twin._moe(cfg, lp, x, impl, sched, 3) for impl in ("gather", "ragged_dot", "dense", "tokamax")}
        ref, ref_experts = outs["gather"]
        if sched is not None:   # the schedule won every token's top-k, starting at offset 3
            expect = table[(3 + np.arange(10)) % 4]
            np.testing.assert_array_equal(np.sort(np.asarray(ref_experts), -1), np.sort(expect, -1))
        for impl, (out, experts) in outs.items():
            np.testing.assert_allclose(np.asarray(out), np.asarray(ref), atol=1e-5, rtol=1e-5, err_msg=impl)
            np.testing.assert_array_equal(np.asarray(experts), np.asarray(ref_experts), err_msg=impl)


@pytest.mark.slow   # compiles and runs an MoE layer through JAX
def test_tokamax_runs_the_implementation_it_is_given(monkeypatch):
    """The implementation reaches tokamax as a one-element tuple (no fallback list), and a Pallas
    kernel that cannot run here raises instead of running xla."""
    tokamax = pytest.importorskip("tokamax")
    from tpubench.models import jax_twin

    cfg, lp, x = _moe_layer()
    seen = []
    real = tokamax.ragged_dot_general
    monkeypatch.setattr(tokamax, "ragged_dot_general",
                        lambda *a, implementation, **kw:
                        seen.append(implementation) or real(*a, implementation=implementation, **kw))
    jax_twin._moe(cfg, lp, x, "tokamax")
    assert seen == [("xla",), ("xla",)]   # gate_up and down
    with pytest.raises(NotImplementedError, match="Not supported on cpu"):
        jax_twin._moe(replace(cfg, tokamax_implementation="mosaic"), lp, x, "tokamax")


# ----------------------------------------------------------------------------- the JAX session


def _session(point):
    from tpubench.backends import get_backend
    from tpubench.scenarios.generate.measure import make_prompt

    be = get_backend("jax")
    prompt = make_prompt(0, point.batch_size, point.input_length, point.model_config["vocab_size"])
    return be.session(be.build(point), point, prompt)


def test_a_tokamax_point_without_tokamax_is_skipped_before_compiling(tmp_path, monkeypatch):
    pytest.importorskip("jax")
    from tpubench.backends import jax as jax_backend
    from tpubench.scenarios.generate.measure import make_prompt

    point = replace(_point(tmp_path), experts_implementation="tokamax")
    be = jax_backend.JaxBackend()
    built = be.build(point)
    _no_tokamax(monkeypatch)
    compiles = jax_backend._compiles["count"]
    with pytest.raises(Unavailable, match=r"needs the tokamax package \(pip install 'tpubench\[tokamax\]'\)"):
        be.session(built, point, make_prompt(0, 2, 6, point.model_config["vocab_size"]))
    assert jax_backend._compiles["count"] == compiles   # refused before any step was lowered


def test_a_tokamax_kernel_that_cannot_run_here_is_a_skip_not_a_fallback(tmp_path, monkeypatch):
    """The CPU made to ask for the Pallas kernel: Tokamax refuses, the point is skipped naming it."""
    pytest.importorskip("tokamax")
    from tpubench.models import jax_experts

    monkeypatch.setitem(jax_experts.TOKAMAX_IMPLEMENTATIONS, "cpu", "mosaic")
    point = replace(_point(tmp_path), experts_implementation="tokamax")
    with pytest.raises(Unavailable) as exc:
        _session(point)
    assert str(exc.value) == ("experts implementation tokamax: Tokamax's mosaic ragged_dot cannot run this point "
                              "on cpu: Not supported on cpu.")


@pytest.mark.slow   # six builds and three JAX compiles per routing: ~15 s a case on the shared CPU
@pytest.mark.parametrize("routing", ["uniform", "natural"])
def test_every_experts_arm_agrees_numerically_on_the_cpu(tmp_path, routing):
    """torch eager / grouped_mm / batched_mm and the twin's gather / ragged_dot / tokamax: same
    weights, same routing, the same logits after prefill and after the last decode step, and the
    same greedy tokens; each JAX session says which kernel ran."""
    pytest.importorskip("tokamax")
    import jax

    from tpubench.backends import get_backend
    from tpubench.scenarios.generate.measure import make_prompt, run_iteration

    point = _point(tmp_path, routing, batch=2, input_length=6, output_length=4,
                   num_experts=8, num_experts_per_tok=2, num_hidden_layers=2)
    prompt = make_prompt(0, 2, 6, point.model_config["vocab_size"])
    logits, kernels = {}, {}
    for backend, arm in (("torch", "eager"), ("torch", "grouped_mm"), ("torch", "batched_mm"),
                         ("jax", "gather"), ("jax", "ragged_dot"), ("jax", "tokamax")):
        arm_point = replace(point, experts_implementation=arm)
        be = get_backend(backend)
        session = be.session(be.build(arm_point), arm_point, prompt)
        with session:
            it, first = run_iteration(session, 4, capture_first_logits=True)
            logits[arm] = (session.logits_to_host(first), session.logits_to_host(session.last_logits),
                           session.tokens_to_host(it.tokens))
        if backend == "jax":
            kernels[arm] = session.experts_kernel
            diagnostics = session.compile_diagnostics()
            assert diagnostics["jax_moe_decode"] == arm
            assert diagnostics["jax_moe_prefill"] == ("tokamax" if arm == "tokamax" else "ragged_dot")
    ref = logits["eager"]
    for arm, (first, last, tokens) in logits.items():
        np.testing.assert_allclose(first, ref[0], atol=2e-4, rtol=1e-4, err_msg=arm)
        np.testing.assert_allclose(last, ref[1], atol=2e-4, rtol=1e-4, err_msg=arm)
        assert tokens == ref[2], arm
    assert kernels["tokamax"]["implementation"] == "xla" and kernels["tokamax"]["package"] == "tokamax"
    assert kernels["ragged_dot"] == {"arm": "ragged_dot", "implementation": "jax.lax.ragged_dot_general",
                                     "package": "jax", "version": jax.__version__}
    assert kernels["gather"]["implementation"] == "gather"


@pytest.mark.slow   # a whole `tpubench run`: two builds and compiles
def test_a_jax_run_of_ragged_dot_and_tokamax_gives_two_ok_results(tmp_path, monkeypatch, capsys):
    pytest.importorskip("tokamax")
    from helpers_cli import run_cli

    data = yaml.safe_load((FIXTURES / "tiny_moe.yaml").read_text())
    data["model"]["experts_implementation"] = ["ragged_dot", "tokamax"]
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "res"
    code, text, err = run_cli(monkeypatch, capsys, "run", str(path), "--backend", "jax", "--scale", "small",
                              "--out", str(out))
    assert code == 0, text + err
    results = [json.loads(f.read_text()) for f in sorted(out.glob("*.json"))]
    by_arm = {r["point"]["experts_implementation"]: r for r in results}
    assert sorted(by_arm) == ["ragged_dot", "tokamax"]
    for arm, r in by_arm.items():
        assert r["status"] == "ok", (arm, r.get("error"))
        assert r["moe"]["kernel"]["arm"] == arm
    assert by_arm["tokamax"]["moe"]["kernel"]["implementation"] == "xla"
