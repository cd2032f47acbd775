"""What scenario `diffuse` refuses in a workload after the schema accepted it, per scale, as
FieldProblem (the loader turns it into file:line and field): keys a family's components do not
have, schedulers of another kind of model, shapes the components cannot connect, and resolutions
the latent grid cannot divide."""

from __future__ import annotations

import difflib

from tpubench.scenarios import FieldProblem
from tpubench.scenarios.diffuse import families, sweep
from tpubench.scenarios.diffuse.schema import check_call_pixels, check_component_value, check_scale_values
from tpubench.workload_spec.sections import FULL_SCALE, as_list


def _hint(key: str, allowed) -> str:
    guess = difflib.get_close_matches(key, list(allowed), n=1)
    return f"; did you mean '{guess[0]}'?" if guess else f"; allowed: {', '.join(sorted(allowed))}"


def _known_keys(name: str, comp: str) -> set:
    fam = families.family(name)
    return set(fam["components"][comp]["config"]) | set(fam["small"].get(comp, {}))


def _check_overrides(name: str, overrides: dict, where: tuple) -> None:
    comps = families.component_names(name)
    for comp, config in overrides.items():
        if comp not in comps:
            raise FieldProblem(where + (comp,), f"{name} has no component '{comp}'{_hint(comp, comps)}")
        if not isinstance(config, dict):
            raise FieldProblem(where + (comp,), f"expected a mapping of config keys, got {config!r}")
        known = _known_keys(name, comp)
        fam = families.family(name)
        for key, value in config.items():
            if key not in known:
                raise FieldProblem(where + (comp, key), f"unknown key '{key}' for {name}'s {comp}{_hint(key, known)}")
            default = fam["components"][comp]["config"].get(key, fam["small"].get(comp, {}).get(key))
            check_component_value(where + (comp, key), key, value, default)


def latent_multiple(name: str, config: dict) -> int:
    """Pixels a side must be a multiple of: the VAE's downsampling, times Flux's 2x2 packing, SD3's
    patch or the SDXL UNet's own downsampling."""
    vae = 2 ** (len(config["vae"]["block_out_channels"]) - 1)
    if name == "flux":
        return vae * 2
    if name == "sd3":
        return vae * int(config["transformer"].get("patch_size", 2))
    return vae * 2 ** (len(config["unet"]["block_out_channels"]) - 1)


def _check_shapes(name: str, config: dict) -> str | None:
    latent = int(config["vae"]["latent_channels"])
    den = families.denoiser(name)
    want = latent * 4 if name == "flux" else latent
    got = int(config[den]["in_channels"])
    if got != want:
        why = " (Flux packs 2x2 latent patches)" if name == "flux" else ""
        return f"{den}.in_channels is {got}, but the VAE's {latent} latent channels need {want}{why}"
    return None


def check_scale(workload, scale: str) -> None:
    scen = workload.scenario
    name = scen.pipeline
    own = sweep.scale_config(workload, scale)
    cfg_loc = ("scales", scale, "config")
    _check_overrides(name, scen.components, ("scenario", "components"))
    for key in own:
        if key in families.SCALE_KEYS:
            continue
        if key not in families.component_names(name):
            allowed = [*families.component_names(name), *families.SCALE_KEYS]
            raise FieldProblem(cfg_loc + (key,), f"unknown key '{key}' for a {name} scale{_hint(key, allowed)}")
    _check_overrides(name, {k: v for k, v in own.items() if k not in families.SCALE_KEYS}, cfg_loc)
    if own.get("preset", "full") not in families.PRESETS:
        raise FieldProblem(cfg_loc + ("preset",), f"preset is one of {', '.join(families.PRESETS)}, "
                                                  f"got {own['preset']!r}")
    check_scale_values(own, cfg_loc)
    axes = sweep.sweep_axes(workload, scale)
    over = workload.scales[scale].scenario if scale != FULL_SCALE else None
    check_call_pixels(axes["resolution"], axes["batch_size"],
                      ("scales", scale, "scenario", "batch_size") if over and over.batch_size
                      else ("scenario", "images_per_prompt"), scale)
    fam = families.family(name)
    for s in as_list(scen.scheduler):
        if s != "default" and s not in fam["schedulers"]:
            raise FieldProblem(("scenario", "scheduler"), f"scheduler '{s}' does not fit {name} "
                                                          f"(it takes: default, {', '.join(fam['schedulers'])})")
    if scen.weights == "pretrained":
        return   # a pretrained pipeline brings its own configs
    config = sweep.components(workload, scale)
    problem = _check_shapes(name, config)
    if problem:
        raise FieldProblem(cfg_loc if scale != FULL_SCALE else ("scenario", "components"),
                           f"{problem} (scale '{scale}')")
    multiple = latent_multiple(name, config)
    for r in sweep.sweep_axes(workload, scale)["resolution"]:
        if r % multiple:
            loc = cfg_loc + ("resolution",) if "resolution" in own else ("scenario", "resolution")
            raise FieldProblem(loc, f"{r} px is not a multiple of {multiple}, which {name}'s latent grid needs "
                                    f"(scale '{scale}')")
