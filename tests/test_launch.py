"""`tpubench launch`: targets checked against the price table, plans and cost estimates on
hand-computed cases, task files parsed by SkyPilot's own `sky.Task.from_yaml`, and launching through
the SkyPilot bridge (against a scripted stand-in for SkyPilot's SDK: no cloud is ever touched)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from fake_skypilot import write_fake_sky
from helpers_cli import run_cli

from tpubench.errors import UserError
from tpubench.launch import skypilot
from tpubench.launch.plan import expected_hours, nodes_needed, plan_target
from tpubench.launch.targets import resolve_targets
from tpubench.launch.tasks import new_launch_id, package_spec
from tpubench.money.pricing import load_prices
from tpubench.run.overrides import with_layout
from tpubench.run.sweep import expand
from tpubench.run.workload import load_workload

REPO = Path(__file__).resolve().parents[1]
QWEN3_MOE = REPO / "workloads" / "qwen3_moe.yaml"


@pytest.fixture(scope="module")
def prices():
    return load_prices()


def sky_python() -> str:
    python = skypilot.find_python()
    if python is None:
        pytest.skip("SkyPilot is not installed here (.ci/run installs it into its own venv and sets "
                    "TPUBENCH_SKYPILOT_PYTHON)")
    return python


def sky_parse(files: list[Path]) -> list[dict]:
    """The tasks as SkyPilot itself reads them."""
    return skypilot.call({"op": "parse", "files": [str(f) for f in files]}, python=sky_python())["tasks"]


# ----------------------------------------------------------------------------- targets and prices


def test_targets_resolve_to_the_cheapest_priced_row(prices):
    tpu, h100, trn2 = resolve_targets(["tpu-v6e-8", "H100:8", "trn2.48xlarge"], prices)
    assert (tpu.accelerators, tpu.cloud, tpu.chips_per_node, tpu.device) == ("tpu-v6e-8", "gcp", 8, "tpu")
    assert tpu.priced_as["usd_per_hour"] == 21.6 and tpu.priced_as["region"] == "us-central1"
    # H100:8 is offered on gcp (43.06615/h, flagged: spot above on-demand, so set aside), aws (55.04)
    # and azure (98.32, flagged): the cheapest unflagged is priced, and no cloud is pinned (SkyPilot's
    # optimizer chooses too).
    assert (h100.accelerators, h100.cloud, h100.device) == ("H100:8", None, "cuda")
    assert h100.priced_as["instance_type"] == "p5.48xlarge" and h100.priced_as["usd_per_hour"] == 55.04
    # An instance type pins its cloud; trn2.48xlarge has a spot price only.
    assert (trn2.accelerators, trn2.cloud, trn2.chips_per_node, trn2.device) == ("Trainium2:16", "aws", 16, "neuron")
    assert trn2.priced_as["usd_per_hour"] is None and "spot $20.76/h" in trn2.note
    (spot,) = resolve_targets(["trn2.48xlarge"], prices, plan="spot")
    assert spot.priced_as["usd_per_hour"] == 20.7554 and spot.note == ""
    (aws,) = resolve_targets(["H100:8"], prices, cloud="aws")
    assert (aws.cloud, aws.priced_as["instance_type"], aws.priced_as["usd_per_hour"]) == ("aws", "p5.48xlarge", 55.04)
    # A region belongs to one cloud: it pins it, so SkyPilot launches where the estimate was priced.
    (east,) = resolve_targets(["H100:8"], prices, region="us-east-1")
    assert (east.cloud, east.region, east.priced_as["instance_type"]) == ("aws", "us-east-1", "p5.48xlarge")


@pytest.mark.parametrize("spec, message", [
    ("tpu-v6e-9", "unknown target 'tpu-v6e-9' (did you mean 'tpu-v6e-8'?)"),
    ("H10:8", "unknown target 'H10:8' (did you mean 'H100:8'?)"),
    ("trn2.48xlarg", "(did you mean 'trn2.48xlarge'?)"),
    ("H100:3", "no instance with 3 x H100 in the price table (priced counts: 8)"),
    ("H100:8:2", "is not a target"),
])
def test_a_bad_target_is_one_line_with_a_suggestion(prices, spec, message):
    with pytest.raises(UserError) as info:
        resolve_targets([spec], prices)
    assert message in info.value.one_line() and info.value.field == "--on"


def test_targets_filtered_by_cloud_and_region_and_no_duplicates(prices):
    with pytest.raises(UserError, match=r"'p5.48xlarge' has no price row in gcp"):
        resolve_targets(["p5.48xlarge"], prices, cloud="gcp")
    with pytest.raises(UserError, match=r"no price rows for cloud 'gpc' \(did you mean 'gcp'\?\)"):
        resolve_targets(["H100:8"], prices, cloud="gpc")
    with pytest.raises(UserError, match="same target"):
        resolve_targets(["H100:8", "h100:8"], prices)


# ----------------------------------------------------------------------------- plans and estimates


def test_estimate_is_setup_plus_bounded_points_times_price(tiny_workload, prices):
    w = load_workload(tiny_workload)
    (tpu,) = resolve_targets(["tpu-v6e-8"], prices)
    plan = plan_target(w, str(tiny_workload), tpu, remote_workload="$HOME/w.yaml", scale=None,
                       out_dir="/tpubench-results/x", run_args=[], setup_s=900)
    # 2 points (batch 1 and 2), eager, max_seconds 10: 900 + 2 * (10 + 120) = 1160 s.
    assert len(plan.points) == 2 and plan.num_nodes == 1
    assert plan.hours == pytest.approx(1160 / 3600)
    assert plan.usd == pytest.approx(1160 / 3600 * 21.6)          # $6.96
    assert plan.run_lines == ["tpubench run $HOME/w.yaml --device tpu --scale full --out /tpubench-results/x "
                              "--resume --no-price"]
    # Compile adds its allowance; an earlier wall time of the same point replaces the bound.
    points = expand(w, "full")
    compiled = [p.__class__(**{**p.to_dict(), "execution_mode": "compile"}) for p in points]
    assert expected_hours(compiled, 0, {})[0] == pytest.approx(2 * (10 + 120 + 300) / 3600)
    hours, basis = expected_hours(points, 100, {points[0].key(): 50.0})
    assert hours == pytest.approx((100 + 50 + 130) / 3600) and basis.startswith("1 of 2 point(s) from earlier runs")
    fixed = plan_target(w, str(tiny_workload), tpu, remote_workload="w", scale=None, out_dir="o", run_args=[], hours=2)
    assert (fixed.hours, fixed.usd, fixed.hours_basis) == (2, 43.2, "--hours")


def workload_with(tmp_path: Path, parallel: str) -> Path:
    path = tmp_path / "qwen3_moe.yaml"
    path.write_text(QWEN3_MOE.read_text() + f"parallel: {parallel}\n")
    return path


def test_layouts_wider_than_a_node_span_nodes_under_torchrun(prices, tmp_path):
    source = workload_with(tmp_path, "{expert: [1, 16]}")
    h100, tpu = resolve_targets(["H100:8", "tpu-v6e-8"], prices)
    plan = plan_target(load_workload(source), str(source), h100, remote_workload="$HOME/w.yaml", scale=None,
                       out_dir="/o", run_args=[])
    assert plan.num_nodes == 2 and len(plan.points) == 8
    assert plan.usd == pytest.approx(2 * 55.04 * plan.hours)       # two machines
    assert plan.run_lines[0] == 'MASTER_ADDR=$(echo "$SKYPILOT_NODE_IPS" | head -n1)'
    wide, narrow = plan.run_lines[2:4]
    assert wide.startswith('if [ "$SKYPILOT_NODE_RANK" -lt 2 ]; then python -m torch.distributed.run --nnodes=2 '
                           "--nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29500")
    assert "-m tpubench.cli run $HOME/w.yaml --device cuda" in wide and wide.endswith("--expert-parallel 16 || rc=$?; fi")
    assert narrow.startswith('if [ "$SKYPILOT_NODE_RANK" = 0 ]; then tpubench run') and "--expert-parallel 1 " in narrow
    with pytest.raises(UserError, match="a point needs 16 chips and tpu-v6e-8 has 8: choose a bigger slice"):
        nodes_needed(plan.points, tpu, "w.yaml")
    points = expand(load_workload(QWEN3_MOE), "full")
    with pytest.raises(UserError, match="a layout of 12 chips spans nodes of 8 .H100:8. unevenly: use a multiple of 8"):
        nodes_needed([replace(p, expert_parallel=12) for p in points], h100, "w.yaml")
    assert nodes_needed([replace(p, tensor_parallel=8) for p in points], h100, "w.yaml") == 1


FAKE_TOOL = """#!/bin/sh
echo "node $SKYPILOT_NODE_RANK: $(basename "$0") $*" >> "$CALLS"
case "$*" in *"$FAIL_ON"*) exit 3;; esac
"""


def test_multi_node_run_script_runs_each_layout_on_its_nodes(prices, tmp_path):
    """The generated run lines, executed by bash on two simulated nodes (tpubench and python are
    stand-ins that record their arguments): each node runs exactly its layouts, widest first, and
    a failed layout fails the job without skipping the others."""
    source = workload_with(tmp_path, "{expert: [1, 16]}")
    (h100,) = resolve_targets(["H100:8"], prices)
    plan = plan_target(load_workload(source), str(source), h100, remote_workload="$HOME/w.yaml", scale=None,
                       out_dir="/o", run_args=[])
    script = tmp_path / "run.sh"
    script.write_text("set -uo pipefail\n" + "\n".join(plan.run_lines) + "\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("tpubench", "python"):
        (bin_dir / tool).write_text(FAKE_TOOL)
        (bin_dir / tool).chmod(0o755)

    def node(rank: int, fail_on: str = "no-such-argument") -> tuple[int, list[str]]:
        calls = tmp_path / f"calls-{rank}-{fail_on}"
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "CALLS": str(calls), "FAIL_ON": fail_on,
               "SKYPILOT_NODE_RANK": str(rank), "SKYPILOT_NODE_IPS": "10.0.0.1\n10.0.0.2", "SKYPILOT_TASK_ID": "t1"}
        code = subprocess.run(["bash", str(script)], env=env).returncode
        return code, calls.read_text().splitlines() if calls.exists() else []

    code, calls = node(0)
    assert code == 0 and len(calls) == 2
    assert calls[0].startswith("node 0: python -m torch.distributed.run --nnodes=2 --nproc-per-node=8 "
                               "--rdzv-backend=c10d --rdzv-endpoint=10.0.0.1:29500 --rdzv-id=tpubench-t1-16 "
                               f"-m tpubench.cli run {tmp_path}/w.yaml --device cuda")
    assert calls[1].startswith(f"node 0: tpubench run {tmp_path}/w.yaml --device cuda") and "--expert-parallel 1" in calls[1]
    code, calls = node(1)
    assert code == 0 and len(calls) == 1 and "--expert-parallel 16" in calls[0]
    code, calls = node(0, fail_on="--expert-parallel 16")
    assert code == 3 and len(calls) == 2            # the 16-chip layout failed, the 1-chip one still ran


def test_a_model_that_fits_no_chip_of_the_target_is_refused_before_launch(prices):
    w = load_workload(QWEN3_MOE)   # 30.5B parameters in bf16: 56.9 GiB of weights
    (tpu,) = resolve_targets(["tpu-v6e-8"], prices)
    with pytest.raises(UserError, match=r"tpu-v6e-8: no point fits: .* need 56.9 GiB per chip, a TPU v6e chip has "
                                        r"32.0 GiB; shard it over at least 2 chips"):
        plan_target(w, str(QWEN3_MOE), tpu, remote_workload="w", scale=None, out_dir="o", run_args=[])
    sharded = plan_target(with_layout(w, expert=8), str(QWEN3_MOE), tpu, remote_workload="w", scale=None,
                          out_dir="o", run_args=["--expert-parallel", "8"])
    assert sharded.warnings == [] and sharded.num_nodes == 1


# ----------------------------------------------------------------------------- task files, SkyPilot's parser


def dry_run(monkeypatch, capsys, tmp_path, *extra) -> tuple[int, str, str, Path]:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(monkeypatch, capsys, "launch", str(QWEN3_MOE), "--on", "tpu-v6e-8", "--on", "H100:8",
                             "--on", "trn2.48xlarge", "--bucket", "gs://tpubench-test/team", "--expert-parallel", "8",
                             "--dry-run", *extra)
    folders = list((tmp_path / "launch").glob("*"))
    return code, out, err, (folders[0] if folders else None)


@pytest.mark.slow
def test_dry_run_writes_tasks_that_skypilot_parses(monkeypatch, capsys, tmp_path):
    code, out, err, folder = dry_run(monkeypatch, capsys, tmp_path)
    assert code == 0, err
    files = sorted(folder.glob("*.yaml"))
    assert [f.name for f in files] == ["H100-8.yaml", "tpu-v6e-8.yaml", "trn2.48xlarge.yaml"]
    launch_id = folder.name
    for f in files:
        assert f"sky jobs launch launch/{launch_id}/{f.name} --name" in out
    assert f"then: tpubench collect gs://tpubench-test/team/{launch_id}" in out
    # The estimate: tpu $21.60/h and H100 $55.04/h for 4 bounded points + setup; trn2 has no on-demand price.
    hours = (900 + 4 * (300 + 120)) / 3600
    assert f"${21.6 * hours:,.2f}" in out and f"${55.04 * hours:,.2f}" in out
    assert f"${(21.6 + 55.04) * hours:,.2f} + unpriced targets" in out
    assert "would need --yes: no price for trn2.48xlarge" in err

    manifest = json.loads((folder / "manifest.json").read_text())
    assert [t["results_url"] for t in manifest["targets"]] == [
        f"gs://tpubench-test/team/{launch_id}/{slug}" for slug in ("tpu-v6e-8", "H100-8", "trn2.48xlarge")]

    tasks = {Path(t["file"]).name: t for t in sky_parse(files)}
    expect = {"tpu-v6e-8.yaml": ({"tpu-v6e-8": 1}, "GCP", "tpu"), "H100-8.yaml": ({"H100": 8}, None, "cuda"),
              "trn2.48xlarge.yaml": ({"Trainium2": 16}, "AWS", "neuron")}
    for name, (accelerators, cloud, device) in expect.items():
        task = tasks[name]
        (res,) = task["resources"]
        assert (res["accelerators"], res["cloud"], res["use_spot"], task["num_nodes"]) == (accelerators, cloud, False, 1)
        slug = name[:-5]
        assert (f"tpubench run $HOME/tpubench-launch/qwen3_moe.yaml --device {device} --scale full "
                f"--out /tpubench-results/team/{launch_id}/{slug} --resume --no-price --expert-parallel 8") in task["run"]
        assert task["storage_mounts"] == {"/tpubench-results": "gs://tpubench-test"}
        assert list(task["file_mounts"]) == ["~/tpubench-launch/qwen3_moe.yaml"]
        assert task["workdir"] == str(REPO)   # this checkout is installed there with the device's extra
        extra = {"tpu": "tpu", "cuda": "cuda", "neuron": "neuron"}[device]
        assert f"python -m pip install -q -e '.[{extra}]'" in task["setup"]
    assert "--extra-index-url https://pip.repos.neuron.amazonaws.com" in tasks["trn2.48xlarge.yaml"]["setup"]


@pytest.mark.slow
def test_spot_multi_node_task_parses_with_its_node_count(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(monkeypatch, capsys, "launch", str(QWEN3_MOE), "--on", "H100:8", "--expert-parallel", "16",
                             "--bucket", "s3://tpubench-test", "--spot", "--install", "==0.1.0",
                             "--dry-run", "--tasks-dir", "tasks")
    assert code == 0, err
    (task,) = sky_parse(list((tmp_path / "tasks").glob("*/H100-8.yaml")))
    (res,) = task["resources"]
    assert (res["accelerators"], res["use_spot"], task["num_nodes"]) == ({"H100": 8}, True, 2)
    assert "python -m torch.distributed.run --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d" in task["run"]
    assert task["workdir"] is None and "python -m pip install -q 'tpubench[cuda]==0.1.0'" in task["setup"]
    assert task["storage_mounts"] == {"/tpubench-results": "s3://tpubench-test"}


@pytest.mark.slow
def test_skypilot_errors_come_through_as_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nresources:\n  accelerators: H100:eight\nrun: echo\n")
    with pytest.raises(skypilot.ExternalFailure) as info:
        skypilot.call({"op": "parse", "files": [str(bad)]}, python=sky_python(), what="reading bad.yaml")
    line = info.value.one_line()
    assert line.startswith("reading bad.yaml: ") and "\n" not in line and info.value.exit_code == 1


# ----------------------------------------------------------------------------- refusals before launching


def test_over_the_cost_limit_needs_yes(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(monkeypatch, capsys, "launch", str(QWEN3_MOE), "--on", "H100:8", "--bucket",
                             "gs://tpubench-test", "--max-cost", "10")
    assert code == 2
    assert "error: --yes: not launched: the estimate $39.45 is over the $10.00 limit (--max-cost)" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("args, message", [
    (["--on", "H100:8"], "--bucket: name the bucket results go to"),
    (["--on", "H100:8", "--bucket", "gs://Bad_Bucket"], "is not a bucket URL"),
    (["--on", "H100:8", "--bucket", "r2://bucket"], "is not a bucket URL"),
    (["--on", "tpu-v6e-8", "--bucket", "gs://bkt"], "tpu-v6e-8: no point fits"),
])
def test_bad_launch_input_is_one_line_exit_2(monkeypatch, capsys, tmp_path, args, message):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TPUBENCH_BUCKET", raising=False)
    code, _, err = run_cli(monkeypatch, capsys, "launch", str(QWEN3_MOE), "--dry-run", *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "launch").exists()


def test_launch_without_skypilot_says_how_to_install(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(skypilot.PYTHON_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))           # no `sky` on PATH
    monkeypatch.setattr(skypilot.importlib.util, "find_spec", lambda name: None)
    code, _, err = run_cli(monkeypatch, capsys, "launch", str(QWEN3_MOE), "--on", "H100:8", "--bucket", "gs://bkt", "--yes")
    assert code == 2 and 'SkyPilot is not installed: pip install "tpubench[launch]"' in err
    # --dry-run needs no SkyPilot.
    code, _, err = run_cli(monkeypatch, capsys, "launch", str(QWEN3_MOE), "--on", "H100:8", "--bucket", "gs://bkt",
                           "--dry-run")
    assert code == 0, err


def test_install_spec_carries_the_targets_extras():
    assert package_spec(["cuda"], None, REPO) == "-e '.[cuda]'"
    assert package_spec(["tpu", "serve"], None, None) == "'tpubench[tpu,serve]==0.1.0'"
    assert package_spec(["neuron"], "==0.2.0", REPO) == "'tpubench[neuron]==0.2.0'"
    assert package_spec([], "git+https://example.com/t.git@v1", None) == "'tpubench @ git+https://example.com/t.git@v1'"
    with pytest.raises(UserError, match="--install: 'tpubench\\[cuda\\]' is not a tpubench version"):
        package_spec(["cuda"], "tpubench[cuda]", None)


def test_launch_ids_are_unique_and_a_bad_tasks_dir_or_manifest_is_one_line(monkeypatch, capsys, tmp_path):
    assert new_launch_id("w") != new_launch_id("w")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("")
    code, _, err = run_cli(monkeypatch, capsys, "launch", str(QWEN3_MOE), "--on", "H100:8", "--bucket", "gs://bkt",
                           "--dry-run", "--tasks-dir", "a-file/launch")
    assert code == 2 and "cannot write here" in err and len(err.strip().splitlines()) == 1
    broken = tmp_path / "launch" / "x" / "manifest.json"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"launch_id": "x", "targets": [{"target": "H100:8"}]}')
    code, _, err = run_cli(monkeypatch, capsys, "collect")
    assert code == 2 and "manifest.json: not a tpubench launch manifest: missing targets[0].slug" in err


@pytest.mark.slow
def test_launch_stays_free_of_torch(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from tpubench.cli import main
        sys.argv = ["tpubench", "launch", {str(QWEN3_MOE)!r}, "--on", "H100:8", "--bucket", "gs://bkt",
                    "--dry-run", "--tasks-dir", {str(tmp_path)!r}]
        try:
            main()
        except SystemExit as exc:
            assert not exc.code, exc.code
        print(sorted(m for m in ("torch", "transformers", "jax") if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


# ----------------------------------------------------------------------------- launching (scripted SkyPilot SDK)


def test_launch_records_job_ids_and_skypilot_refusals(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(write_fake_sky(tmp_path / "fake")))
    monkeypatch.setenv(skypilot.PYTHON_ENV, sys.executable)
    code, out, err = run_cli(monkeypatch, capsys, "launch", str(QWEN3_MOE), "--on", "H100:8", "--on", "trn2.48xlarge",
                             "--bucket", "gs://bkt", "--yes")
    assert code == 0, err
    (manifest_path,) = (tmp_path / "launch").glob("*/manifest.json")
    manifest = json.loads(manifest_path.read_text())
    h100, trn2 = manifest["targets"]
    assert h100["job_id"] == 41 + len(h100["job_name"]) % 7 and f"H100:8: managed job {h100['job_id']}" in out
    assert trn2["job_id"] is None
    assert trn2["launch_error"] == ("launching trn2.48xlarge: ResourcesUnavailableError: Failed to acquire resources "
                                    "in all zones in us-east-2 Try other regions.")
    assert "warning: launching trn2.48xlarge: ResourcesUnavailableError" in err and "Traceback" not in err
    code, _, err = run_cli(monkeypatch, capsys, "launch", str(QWEN3_MOE), "--on", "trn2.48xlarge", "--bucket", "gs://bkt",
                           "--yes")
    assert code == 1 and "ResourcesUnavailableError" in err    # nothing launched at all
