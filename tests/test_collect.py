"""`tpubench collect`: results of simulated remote runs merged into the local folder, one copy per
point and environment; launched jobs' states and a failed job's log tail through the SkyPilot
bridge (scripted SDK), bucket folders through the cloud CLI (a scripted `gcloud` on PATH)."""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from pathlib import Path

import pytest
from fake_skypilot import write_fake_sky
from helpers_cli import run_cli

from tpubench.launch import skypilot
from tpubench.launch.collect import fetch_command, merge_results
from tpubench.output.frames import load_results
from tpubench.records.result import RunResult, read_results, write_result

REPO = Path(__file__).resolve().parents[1]


def result(point: str, env: str, started: str, tok_s: float = 100.0) -> RunResult:
    return RunResult(point={"workload": "w", "batch_size": 1}, point_key=point, environment_key=env, backend="torch",
                     device="cuda", started_at=started, finished_at=started, metrics={"output_tokens_per_s": tok_s})


T0, T1, T2, T3 = (f"2026-12-0{d}T10:00:00+00:00" for d in (1, 2, 3, 4))


def test_two_remote_runs_merge_without_duplicates(tmp_path):
    a, b, local = tmp_path / "a", tmp_path / "b", tmp_path / "results"
    first = write_result(result("p1", "h100", T1), a)
    write_result(result("p2", "h100", T1), a)
    (b / first.name).parent.mkdir(parents=True)
    (b / first.name).write_bytes(first.read_bytes())      # the same file seen twice (uploaded again)
    write_result(result("p1", "h100", T0), b)              # an older run of p1 on the same environment
    write_result(result("p1", "tpu", T2), b)               # p1 on another machine: another environment
    (b / "broken.json").write_text("{")
    warnings = []
    summary = merge_results([a, b], local, warn=warnings.append)
    assert (summary.found, len(summary.added), summary.already_here, summary.older_copies) == (5, 3, 0, 2)
    assert any("broken.json" in w for w in warnings)
    copied = {(r.point_key, r.environment_key): (r.started_at, f.name) for f, r in read_results(local)}
    assert copied == {("p1", "h100"): (T1, first.name), ("p2", "h100"): (T1, copied[("p2", "h100")][1]),
                      ("p1", "tpu"): (T2, copied[("p1", "tpu")][1])}
    assert (local / first.name).read_bytes() == first.read_bytes()   # copied byte for byte, same name

    # Collecting again adds nothing; an older run is never added; a newer one is, beside the older.
    again = merge_results([a, b], local, warn=warnings.append)
    assert (len(again.added), again.already_here) == (0, 3)
    c = tmp_path / "c"
    write_result(result("p2", "h100", T0), c)
    write_result(result("p1", "h100", T3, tok_s=120.0), c)
    newer = merge_results([c], local)
    assert (len(newer.added), newer.already_here) == (1, 1)
    df = load_results(local)
    assert len(df) == 3 and df.attrs["older_runs_left_out"] == 1
    row = df[(df.point_key == "p1") & (df.device == "cuda") & (df.started_at == T3)]
    assert len(row) == 1 and int(row["older_runs"].iloc[0]) == 1


def test_results_land_on_mounts_without_hard_links(monkeypatch, tmp_path):
    """Bucket mounts (gcsfuse, goofys) refuse link(); older kernels say ENOSYS: rename instead."""
    def no_links(src, dst):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(os, "link", no_links)
    path = write_result(result("p1", "h100", T1), tmp_path)
    assert read_results(tmp_path)[0][1].point_key == "p1" and path.exists()


def test_collect_command_merges_folders(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    write_result(result("p1", "h100", T1), tmp_path / "remote1")
    write_result(result("p1", "h100", T1), tmp_path / "remote2")   # same point, same time, another file name
    code, out, err = run_cli(monkeypatch, capsys, "collect", "remote1", "remote2", "--out", "results")
    assert code == 0, err
    assert "2 result(s) found, 1 added to results, 0 already there, 1 older cop(ies) left out" in out
    code, _, err = run_cli(monkeypatch, capsys, "collect", "missing")
    assert code == 2 and "missing: no such folder" in err


def test_fetch_commands_use_the_cloud_clis(monkeypatch, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("gcloud", "aws"):
        (bin_dir / tool).write_text("#!/bin/sh\n")
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert fetch_command("gs://b/p", tmp_path) == ["gcloud", "storage", "rsync", "--recursive", "gs://b/p", str(tmp_path)]
    assert fetch_command("s3://b/p", tmp_path)[:3] == ["aws", "s3", "sync"]
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    with pytest.raises(Exception, match="neither gcloud nor gsutil is on PATH"):
        fetch_command("gs://b/p", tmp_path)


FAKE_GCLOUD = """#!/bin/sh
# gcloud storage rsync --recursive gs://BUCKET/PATH DEST, served from $FAKE_BUCKETS/BUCKET/PATH
src="$4"; dest="$5"; path="${src#gs://}"
if [ ! -d "$FAKE_BUCKETS/$path" ]; then
  echo "ERROR: (gcloud.storage.rsync) The following URLs matched no objects or files: $src" >&2
  exit 1
fi
mkdir -p "$dest" && cp -R "$FAKE_BUCKETS/$path/." "$dest/"
"""


def fake_gcloud(monkeypatch, tmp_path: Path, buckets: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gcloud").write_text(FAKE_GCLOUD)
    (bin_dir / "gcloud").chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_BUCKETS", str(buckets))


@pytest.mark.slow   # subprocess CLIs
def test_collect_launches_brings_results_and_keeps_a_failed_jobs_log(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(monkeypatch, capsys, "launch", str(REPO / "workloads" / "qwen3_moe.yaml"), "--on", "H100:8",
                           "--on", "trn2.48xlarge", "--on", "tpu-v6e-8", "--expert-parallel", "8",
                           "--bucket", "gs://bkt/team", "--dry-run")
    assert code == 0, err
    (manifest_path,) = (tmp_path / "launch").glob("*/manifest.json")
    manifest = json.loads(manifest_path.read_text())
    launch_id = manifest["launch_id"]
    h100, trn2, tpu = manifest["targets"]
    # As `launch` records them: two jobs, and a target SkyPilot refused.
    manifest["dry_run"] = False
    h100["job_id"], trn2["job_id"] = 7, 8
    tpu["launch_error"] = "launching tpu-v6e-8: ResourcesUnavailableError: no capacity"
    manifest_path.write_text(json.dumps(manifest))

    buckets = tmp_path / "buckets"                 # what the H100 job wrote to its bucket folder
    write_result(result("p1", "h100", T1), buckets / "bkt" / "team" / launch_id / "H100-8")
    write_result(result("p2", "h100", T1), buckets / "bkt" / "team" / launch_id / "H100-8")
    fake_gcloud(monkeypatch, tmp_path, buckets)
    monkeypatch.setenv("PYTHONPATH", str(write_fake_sky(tmp_path / "fake")))
    monkeypatch.setenv(skypilot.PYTHON_ENV, sys.executable)
    monkeypatch.setenv("FAKE_SKY_STATES", json.dumps({"7": "SUCCEEDED", "8": "FAILED_SETUP"}))

    code, out, err = run_cli(monkeypatch, capsys, "collect")
    # The failed trn2 job wrote nothing to its bucket folder: nothing to fetch there, and that is no error.
    assert code == 0, err
    assert "H100:8" in out and "SUCCEEDED" in out and "FAILED_SETUP" in out and "NOT LAUNCHED" in out
    assert len(read_results(tmp_path / "results")) == 2
    log = tmp_path / "launch" / launch_id / "trn2.48xlarge.log"
    text = log.read_text()
    assert text.startswith("failure reason: exit code 1\n") and text.rstrip().endswith("CUDA out of memory")
    assert "torch.OutOfMemoryError: CUDA out of memory" in out           # the tail, printed
    assert "matched no objects" in out and "Traceback" not in err

    # Once the H100 job's bucket folder is out of reach, that is an error (exit 1); nothing is added twice.
    code, out, _ = run_cli(monkeypatch, capsys, "collect", "--launch-id", launch_id)
    assert code == 0 and len(read_results(tmp_path / "results")) == 2
    monkeypatch.setenv("FAKE_BUCKETS", str(tmp_path / "elsewhere"))
    code, out, _ = run_cli(monkeypatch, capsys, "collect", "--launch-id", launch_id)
    assert code == 1 and "SUCCEEDED (fetch failed)" in out
    code, _, err = run_cli(monkeypatch, capsys, "collect", "--launch-id", "nope")
    assert code == 2 and "no launch 'nope' under launch" in err

    # The jobs controller stopped (SkyPilot stops it when idle): states unknown, buckets fetched all the same.
    monkeypatch.setenv("FAKE_BUCKETS", str(buckets))
    monkeypatch.setenv("FAKE_SKY_CONTROLLER_DOWN", "1")
    write_result(result("p3", "h100", T2), buckets / "bkt" / "team" / launch_id / "H100-8")
    code, out, err = run_cli(monkeypatch, capsys, "collect")
    assert "job states not checked: reading the managed jobs' states: ClusterNotUpError: Jobs controller is not up." in err
    assert len(read_results(tmp_path / "results")) == 3
    assert code == 1 and "UNKNOWN (fetch failed)" in out    # trn2's folder is missing and its state unknown


def test_collect_after_a_dry_run_looks_for_tasks_launched_by_hand(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(monkeypatch, capsys, "launch", str(REPO / "workloads" / "qwen3_moe.yaml"), "--on", "H100:8",
                           "--on", "trn2.48xlarge", "--bucket", "gs://bkt", "--dry-run")
    assert code == 0, err
    (manifest_path,) = (tmp_path / "launch").glob("*/manifest.json")
    launch_id = json.loads(manifest_path.read_text())["launch_id"]
    write_result(result("p1", "h100", T1), tmp_path / "buckets" / "bkt" / launch_id / "H100-8")
    fake_gcloud(monkeypatch, tmp_path, tmp_path / "buckets")
    code, out, err = run_cli(monkeypatch, capsys, "collect")
    assert code == 0, err
    assert out.count("DRY RUN") == 3 and len(read_results(tmp_path / "results")) == 1
    assert "nothing fetched (job DRY RUN): trn2.48xlarge" in out   # two rows and this note
