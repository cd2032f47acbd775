"""The run table of scenario `train`: step time, training throughput, MFU, loss, memory."""

from __future__ import annotations

from tpubench.scenarios.run_table import (
    MISSING,
    energy_cells,
    energy_columns,
    human_bytes,
    measured,
    ms,
    number,
    percent,
    rate_with_ci,
    run_table,
    valid_cell,
)


def train_table(outcomes: list, label):
    def label_as_run(point, result=None):
        """The point's label with the precision that ran (a float32 scale trains in fp32)."""
        text = label(point)
        ran = (getattr(result, "training", None) or {}).get("precision") if result is not None else None
        asked = point.params.get("precision")
        return text.replace(asked, ran, 1) if ran and asked and ran != asked else text

    energy = energy_columns(outcomes, "joules_per_train_token", "J/train token")
    table = run_table("tpubench run: training", ("point", "step p50 ms", "train tok/s (95% CI)", "tok/s per chip",
                                                 "MFU", "loss first → last", "peak mem", "compile s", *energy,
                                                 "valid"))
    for o, r, m in measured(table, outcomes, label):
        first, last = m.get("loss_first"), m.get("loss_last")
        loss = MISSING if first is None or last is None else f"{first:.3f} → {last:.3f}"
        table.add_row(label_as_run(o.point, r), ms(m.get("step_p50_s")), rate_with_ci(m, "train_tokens_per_s"),
                      number(m.get("train_tokens_per_s_per_chip"), ",.1f"), percent(m.get("mfu")), loss,
                      human_bytes(m.get("peak_memory_bytes")), number(r.timing.get("compile_s"), ".2f"),
                      *energy_cells(energy, r, "joules_per_train_token"), valid_cell(r))
    return table
