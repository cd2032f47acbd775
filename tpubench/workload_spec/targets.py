"""How a chip one is deciding on is written (`tpubench estimate --on`, `report --on`, a workload's
`compare_on`): a chip or instance name, an optional chip count, and optionally after `@` the
precision to estimate it at, in `model.quantization`'s words (workload_spec/precision.py): e.g.
`tpu-v6e-8`, `H100:8`, `H100:8@fp8` (fp8 weights and activations, the cache in the model dtype),
`H100:8@fp8+kv_fp8` (and an fp8 KV cache), `H200:8@kv_fp8` (the model dtype's weights, an fp8
cache), `trn2`, `p5.48xlarge@int8_dynamic`.

Syntax only, no price table and no spec table: the workload loader checks each entry with it, and
tpubench.estimate.chips resolves the name against the tables when an estimate is made.
"""

from __future__ import annotations

import re

from tpubench.workload_spec.precision import canonical_quantization

_TARGET = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._ -]*?)(?::(?P<count>\d+))?(?:@(?P<quant>[A-Za-z0-9_+]+))?$")


def split_target(spec: str) -> tuple[str, int | None, str | None]:
    """(name, chip count or None, canonical quantisation or None) of a target; ValueError says what
    is wrong."""
    text = " ".join(str(spec).split())
    m = _TARGET.match(text)
    if not m:
        raise ValueError(f"'{spec}' is not a chip: write tpu-v6e-8, H100:8, trn2 or an instance type from the "
                         "price table, optionally @ a quantisation (H100:8@fp8, H100:8@fp8+kv_fp8)")
    quant = m.group("quant")
    if quant is not None:
        try:
            quant = canonical_quantization(quant)
        except ValueError as exc:
            raise ValueError(f"'{spec}' after @: {exc}") from None
    count = m.group("count")
    return m.group("name"), (int(count) if count is not None else None), quant


__all__ = ["split_target"]
