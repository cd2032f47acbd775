"""The run table of scenario `diffuse`: seconds per image with its stages, images/s, MFU per
denoising step, memory, load and compile, and joules per image where the sweep metered energy."""

from __future__ import annotations

from tpubench.scenarios.run_table import (
    energy_cells,
    energy_columns,
    human_bytes,
    measured,
    ms,
    number,
    p50_p99,
    percent,
    rate_with_ci,
    run_table,
    valid_cell,
)


def diffuse_table(outcomes: list, label):
    energy = energy_columns(outcomes, "joules_per_image", "J/image")
    table = run_table("tpubench run: diffusion", ("point", "s/image p50 / p99 ms", "images/s (95% CI)",
                                                  "text / denoise / VAE ms per image", "step p50 ms", "MFU/step",
                                                  "peak mem", "load s", "compile s", *energy, "valid"))
    for o, r, m in measured(table, outcomes, label):
        stages = " / ".join(ms(m.get(f"{s}_s_per_image")) for s in ("text_encode", "denoise", "vae_decode"))
        table.add_row(label(o.point), p50_p99(m, "image"), rate_with_ci(m, "images_per_s"), stages,
                      ms(m.get("denoise_step_p50_s")), percent(m.get("denoise_mfu")),
                      human_bytes(m.get("peak_memory_bytes")), number(r.timing.get("load_s"), ".2f"),
                      number(r.timing.get("compile_s"), ".2f"), *energy_cells(energy, r, "joules_per_image"),
                      valid_cell(r))
    return table
