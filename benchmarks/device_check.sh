#!/usr/bin/env bash
# One call on a lent accelerator machine: `tpubench doctor` from this checkout, with the machine's
# own Python (whose torch build sees the device), writing result files and a readiness summary
# under results/accelerator (docs/first-hour.md#doctor). Not run by the tests: it needs the chip.
#
#   bash benchmarks/device_check.sh                       # the device the host has (cuda on a GPU)
#   PYTHON=/opt/venv/bin/python bash benchmarks/device_check.sh --device cuda
#
# Nothing is downloaded: random weights only, the Hub off. RUN_TIMEOUT_S bounds each workload run
# (default 240 s), so the whole check fits a 10-minute call.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
"$PY" -c "import torch, transformers; print('torch', torch.__version__, '| transformers', transformers.__version__, '| accelerator', torch.accelerator.current_accelerator())"
exec "$PY" -c "import sys; sys.argv[0] = 'tpubench'; from tpubench.cli import main; main()" \
    doctor --out results/accelerator --run-timeout-s "${RUN_TIMEOUT_S:-240}" "$@"
