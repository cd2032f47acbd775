"""Building a Diffusers pipeline for a point of scenario `diffuse`: random weights from the
family's written-out component configs (families.json) with tokenizers built here, or a
pretrained pipeline from a Hub id or a local folder. Imports torch, transformers and diffusers:
only the measurement uses it.

Random weights are drawn on the host from the point's seed, then moved to the device, so the
same seed gives the same weights on every device (the numerics fingerprints can be compared).
The tokenizers are word-level over a fixed vocabulary (the prompt words of prompts.py): a random
text encoder only needs ids in range, and nothing is downloaded.
"""

from __future__ import annotations

import contextlib
import importlib

from tpubench.errors import UserError
from tpubench.models.library_noise import quiet_library_noise
from tpubench.scenarios.diffuse import families
from tpubench.scenarios.diffuse.prompts import WORDS

# transformers, imported where a model is built, imports torchao: its unactionable log lines go.
quiet_library_noise()

SPECIAL = ("<pad>", "<s>", "</s>", "<unk>")   # ids 0..3: pad, bos, eos, unknown

SCHEDULER_CLASSES = {
    "flow_match_euler": "FlowMatchEulerDiscreteScheduler",
    "flow_match_heun": "FlowMatchHeunDiscreteScheduler",
    "euler": "EulerDiscreteScheduler",
    "euler_ancestral": "EulerAncestralDiscreteScheduler",
    "ddim": "DDIMScheduler",
    "dpmpp_2m": "DPMSolverMultistepScheduler",
}
# The default scheduler config of a random pipeline (a pretrained one brings its own).
_FLOW_CONFIG = {"num_train_timesteps": 1000, "shift": 3.0, "use_dynamic_shifting": False}
_FLUX_CONFIG = {"num_train_timesteps": 1000, "shift": 3.0, "use_dynamic_shifting": True, "base_shift": 0.5,
                "max_shift": 1.15, "base_image_seq_len": 256, "max_image_seq_len": 4096}
_SDXL_CONFIG = {"num_train_timesteps": 1000, "beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear",
                "steps_offset": 1, "timestep_spacing": "leading", "prediction_type": "epsilon"}


def torch_dtype(name: str):
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def build_tokenizer(max_length: int, vocab_size: int):
    """A word-level fast tokenizer over SPECIAL + WORDS (ids below `vocab_size`), padding to
    `max_length` with <pad> and wrapping a prompt in <s> ... </s> as CLIP's does."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = list(SPECIAL) + [w for w in WORDS if w not in SPECIAL]
    vocab = {w: i for i, w in enumerate(words[:vocab_size])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=max_length, pad_token="<pad>",
                                   bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def _component(spec: dict, config: dict):
    """A component with random weights (the caller has seeded torch)."""
    library, name = spec["class"].split(":")
    if library == "transformers":
        import transformers

        cfg_class = getattr(transformers, spec["config_class"])
        # The tokenizers here use pad 0, bos 1, eos 2 (CLIP's pooled output then takes the
        # highest id's position, its legacy rule for eos id 2).
        ids = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
        if spec["config_class"] == "T5Config":
            ids = {"pad_token_id": 0, "eos_token_id": 2, "decoder_start_token_id": 0}
        return getattr(transformers, name)(cfg_class(**{**ids, **config}))
    diffusers = importlib.import_module("diffusers")
    return getattr(diffusers, name)(**config)


def default_scheduler(family: str, name: str):
    import diffusers

    fam = families.family(family)
    name = fam["default_scheduler"] if name == "default" else name
    config = _FLUX_CONFIG if family == "flux" else _FLOW_CONFIG if fam["flow_matching"] else _SDXL_CONFIG
    return getattr(diffusers, SCHEDULER_CLASSES[name])(**config)


def swap_scheduler(pipe, family: str, name: str, original):
    """The pipeline's scheduler for a point: the one it was built with ('default'), or another
    class made from that one's config."""
    import diffusers

    if name == "default":
        return original
    return getattr(diffusers, SCHEDULER_CLASSES[name]).from_config(original.config)


def build_pipeline(point, device):
    """The point's pipeline on `device` in the point's dtype, from random weights drawn on the host
    from the seed, or pretrained."""
    import diffusers
    import torch

    p = point.params
    fam = families.family(point.family)
    dtype = torch_dtype(point.dtype)
    cls = getattr(diffusers, fam["pipeline"])
    if point.weights == "pretrained":
        source = point.hub_id or fam["hub_id"]
        try:
            pipe = cls.from_pretrained(source, torch_dtype=dtype)
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot load pipeline '{source}': {str(exc).splitlines()[0][:200]}",
                            field="scenario.hub_id") from None
        return pipe.to(device)
    torch.manual_seed(int(point.measurement.get("seed", 0)))
    parts = {}
    for comp, spec in fam["components"].items():
        parts[comp] = _component(spec, point.model_config[comp]).eval()
    for slot, length in p["tokenizer_lengths"].items():
        encoder = fam["tokenizers"][slot]["encoder"]
        parts[slot] = build_tokenizer(length, int(point.model_config[encoder]["vocab_size"]))
    parts["scheduler"] = default_scheduler(point.family, "default")
    extra = {"add_watermarker": False} if point.family == "sdxl" else {}
    pipe = cls(**parts, **extra)
    return pipe.to(device=device, dtype=dtype)


@contextlib.contextmanager
def quiet_diffusers():
    """Diffusers' and transformers' info chatter off while a pipeline is built (casting notes on
    random weights say nothing about the measurement)."""
    import diffusers.utils.logging as dlog
    import transformers.utils.logging as tlog

    before = dlog.get_verbosity(), tlog.get_verbosity()
    dlog.set_verbosity_error()
    tlog.set_verbosity_error()
    try:
        yield
    finally:
        dlog.set_verbosity(before[0])
        tlog.set_verbosity(before[1])
