"""The JAX twin's experts arms: which kernel each one runs on which platform, and the record of it.

`gather` and `ragged_dot` are JAX's own (an einsum over gathered expert weights;
`jax.lax.ragged_dot_general`). `tokamax` runs the same grouped matmuls as `ragged_dot` through
Tokamax's `ragged_dot_general`, with the implementation chosen for the platform: `xla` on the CPU
(Tokamax's reference, the XLA ragged dot; no Pallas kernel runs there) and `mosaic`, the Pallas
kernel, on TPU (the megablox grouped matmul) and NVIDIA GPU (the sm90/sm100 Mosaic GPU kernels).

The implementation is passed to Tokamax alone, by name: given one implementation Tokamax raises
when that kernel cannot run the shapes or the device rather than trying the next, so a point never
runs `xla` under the Pallas kernel's name. The JAX backend turns that refusal, and a missing
tokamax package, into a skipped point with the reason (errors.Unavailable).

Nothing here imports jax or tokamax until an arm is actually built.
"""

from __future__ import annotations

from tpubench.errors import Unavailable

TOKAMAX = "tokamax"
INSTALL_HINT = "pip install 'tpubench[tokamax]'"
# JAX platform (jax.default_backend()) -> the Tokamax ragged_dot implementation the arm runs there.
TOKAMAX_IMPLEMENTATIONS = {"cpu": "xla", "tpu": "mosaic", "gpu": "mosaic"}
# What JAX's own arms call: the record's "implementation".
_JAX_OPS = {"gather": "gather", "ragged_dot": "jax.lax.ragged_dot_general"}


def tokamax_implementation(platform: str) -> str:
    """The Tokamax ragged_dot implementation the `tokamax` arm runs on JAX `platform`."""
    try:
        return TOKAMAX_IMPLEMENTATIONS[platform]
    except KeyError:
        raise Unavailable(f"experts implementation {TOKAMAX}: no Tokamax ragged_dot implementation is chosen "
                          f"for JAX platform {platform} (cpu: xla; tpu and gpu: mosaic)") from None


def import_tokamax():
    """The tokamax module, or Unavailable with the install hint when it cannot be imported."""
    try:
        import tokamax
    except ImportError as exc:
        # A missing package says so; a broken install (one of its own imports failing) says what broke.
        broken = "" if exc.name == TOKAMAX else f"; importing it failed: {type(exc).__name__}: {exc}"
        raise Unavailable(f"experts implementation {TOKAMAX} needs the tokamax package ({INSTALL_HINT}){broken}") \
            from None
    # Tokamax reads its options as absl flags and, on first use, parses sys.argv for them when no
    # absl app has: tpubench's own command line (--out ...) would be refused as unknown flags. The
    # flags keep their defaults (heuristic kernel configs, no autotuning), as for any library caller.
    from absl import flags

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    return tokamax


def kernel_record(arm: str, implementation: str | None = None) -> dict:
    """What the result says ran for the twin's experts arm `arm` (gather, ragged_dot or tokamax
    with its Tokamax `implementation`): the arm, the kernel, the package and its version."""
    if arm == TOKAMAX:
        return {"arm": TOKAMAX, "implementation": implementation, "package": "tokamax",
                "version": import_tokamax().__version__}
    import jax

    return {"arm": arm, "implementation": _JAX_OPS[arm], "package": "jax", "version": jax.__version__}


def cannot_run(implementation: str, platform: str, exc: BaseException) -> Unavailable:
    """The skip reason when Tokamax refuses `implementation` here (its NotImplementedError), in one line."""
    why = " ".join(str(exc).split()) or type(exc).__name__
    return Unavailable(f"experts implementation {TOKAMAX}: Tokamax's {implementation} ragged_dot cannot run "
                       f"this point on {platform}: {why}")
