"""A servable copy of the workload's model, made here with nothing downloaded: random weights from
the workload's config and seed, saved with `save_pretrained`, and a tokenizer built on the spot.

The tokenizer is a word-level one over generated words (`bado`, `kife`, ...), one word per token,
split on whitespace, with exactly the model's `vocab_size` entries. So a prompt of n words is n
tokens, to the token, and `prompt_of_length` can make prompts of any exact length. Every id decodes
to a visible word (none is special), so a streamed completion carries text with each token.

The model has no EOS token (config, generation config and tokenizer): generation always runs to
`max_tokens`. That is how the output length is exact on `transformers serve`, which refuses
`ignore_eos` (HTTP 422).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import random
from pathlib import Path
from types import SimpleNamespace

from tpubench.errors import UserError
from tpubench.models.library_noise import quiet_library_noise

# transformers, imported where a model is built, imports torchao: its unactionable log lines go.
quiet_library_noise()

# Written next to the weights: what was built, and the name the server will report for it.
MANIFEST = "tpubench_demo.json"
# Consonant-vowel syllables: 70 one-syllable words, 4,900 of two, 343,000 of three, ...
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
# Concatenates the messages' contents with spaces: a chat prompt is as many tokens as its words.
_CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }} {% endfor %}"


def words(count: int) -> list[str]:
    """`count` distinct lowercase words, shortest first, always the same ones."""
    out: list[str] = []
    for length in itertools.count(1):
        for combo in itertools.product(_SYLLABLES, repeat=length):
            if len(out) == count:
                return out
            out.append("".join(combo))
    return out  # pragma: no cover - itertools.count never ends


def build_tokenizer(vocab_size: int):
    """A `PreTrainedTokenizerFast` with exactly `vocab_size` word tokens and no special token."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 2:
        raise UserError(f"vocab_size {vocab_size} is too small for a tokenizer", field="model.config.vocab_size")
    # Id 0 stands for any unknown word; it is an ordinary word otherwise (no special token at all,
    # so nothing is skipped when decoding and every generated token shows as text).
    vocab = {word: i for i, word in enumerate(["<unk>", *words(vocab_size - 1)])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, clean_up_tokenization_spaces=False)
    tokenizer.chat_template = _CHAT_TEMPLATE
    return tokenizer


def _spec(workload_model: dict, seed: int) -> dict:
    dtype = workload_model.get("dtype") or "float32"
    if isinstance(dtype, (list, tuple)):
        dtype = dtype[0]
    return {"family": workload_model.get("family"), "config": dict(workload_model.get("config") or {}),
            "dtype": dtype, "seed": int(workload_model.get("seed", seed))}


def build_demo_model(workload_model: dict, folder: Path, *, seed: int = 0) -> Path:
    """The workload's model (random weights from its config and seed) and a made-up tokenizer,
    saved in `folder`; returns the folder (absolute), which is also the name `transformers serve`
    reports for it. A folder that already holds the same build is reused as it is.

    `workload_model` is the workload's `model` block dumped (family, dtype, config, ...); a `seed`
    key in it wins over the argument.
    """
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig
    from transformers.utils import logging as hf_logging

    from tpubench.models.torch_models import hf_config

    if not workload_model or not workload_model.get("family"):
        raise UserError("building a model to serve needs the workload's model block (family and config)",
                        field="model")
    spec = _spec(workload_model, seed)
    identity = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:16]
    folder = Path(folder).resolve()
    manifest = folder / MANIFEST
    if manifest.is_file():
        try:
            if json.loads(manifest.read_text()).get("identity") == identity:
                return folder
        except (OSError, ValueError):
            pass

    config = hf_config(SimpleNamespace(family=spec["family"], model_config=spec["config"]))
    # No EOS anywhere: generation runs to max_tokens (transformers serve refuses ignore_eos).
    for name in ("eos_token_id", "bos_token_id", "pad_token_id"):
        if hasattr(config, name):
            setattr(config, name, None)
    dtype = getattr(torch, spec["dtype"])
    torch.manual_seed(spec["seed"])
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.generation_config = GenerationConfig(eos_token_id=None, bos_token_id=None, pad_token_id=None,
                                               do_sample=False)
    folder.mkdir(parents=True, exist_ok=True)
    hf_logging.disable_progress_bar()
    model.save_pretrained(folder)
    build_tokenizer(config.vocab_size).save_pretrained(folder)
    manifest.write_text(json.dumps({"identity": identity, "served_name": str(folder), **spec,
                                    "vocab_size": config.vocab_size}, indent=2, default=str) + "\n")
    return folder


@functools.lru_cache(maxsize=8)
def load_tokenizer(name_or_path: str):
    """`AutoTokenizer.from_pretrained` once per name (a local folder or a Hub id)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name_or_path)
    except Exception as exc:  # noqa: BLE001 - any failure to load is the same one-line error
        first = (str(exc).strip().splitlines() or [""])[0]
        raise UserError(f"cannot load the tokenizer {name_or_path!r} to make prompts of exact lengths "
                        f"({type(exc).__name__}: {first}); give server.tokenizer", field="scenario.server.tokenizer") from None


def prompt_of_length(tokenizer, n: int, seed: int) -> str:
    """A text whose encoding by `tokenizer` (special tokens included, as a server encodes a
    completions prompt) has exactly `n` tokens; the same text for the same seed. Two seeds draw
    their words independently, whatever the lengths: two texts share their first k words with a
    chance of 1 in (pool size)^k, so a longer one does not begin with a shorter one (as it did when
    the words were drawn in the same order for every length). `tokenizer` is a tokenizer object or
    a name to load. Raises ValueError if no such text was found.

    Words that are one token alone and after a space (a pool found once per tokenizer) are drawn
    from the seed and joined with spaces (exact for word-level, byte-level BPE and SentencePiece
    tokenizers alike); failing that, random ids are decoded and encoded again, trimmed or extended
    until the count is right."""
    if isinstance(tokenizer, (str, Path)):
        tokenizer = load_tokenizer(str(tokenizer))
    special = len(tokenizer("")["input_ids"])
    target = n - special
    if target < 0:
        raise ValueError(f"{n} tokens is fewer than the {special} special tokens this tokenizer adds")
    if target == 0:
        return ""
    rng = random.Random(seed)
    pool = _word_pool(tokenizer)
    if pool:
        text = " ".join(rng.choice(pool) for _ in range(target))
        if len(tokenizer(text)["input_ids"]) == n:
            return text

    ids = _ordinary_ids(tokenizer, target, rng)
    for _ in range(64):
        text = tokenizer.decode(ids, clean_up_tokenization_spaces=False)
        again = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(again) == target and len(tokenizer(text)["input_ids"]) == n:
            return text
        # Decoding and encoding again can merge or split tokens: trim or extend, and try again.
        ids = again[:target] if len(again) > target else again + _ordinary_ids(tokenizer, target - len(again), rng)
    raise ValueError(f"could not make a prompt of exactly {n} tokens with this tokenizer")


# Word pools found per tokenizer (by identity; the tokenizer is kept so its id stays its own).
_POOLS: dict[int, tuple[object, list[str]]] = {}
POOL_SIZE = 256


def word_pool(tokenizer) -> list[str]:
    """Words that are one token alone and one more after a space: texts of them joined by spaces
    are as many tokens as words, and concatenate token for token (serving/traffic/common.py)."""
    return _word_pool(tokenizer)


def _word_pool(tokenizer) -> list[str]:
    """Up to POOL_SIZE words that are one token alone and one more after a space; found once per
    tokenizer from a fixed seed (prompts differ by which words their own seeds draw)."""
    cached = _POOLS.get(id(tokenizer))
    if cached is not None and cached[0] is tokenizer:
        return cached[1]
    rng = random.Random(0)

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    pool: list[str] = []
    for i in _ordinary_ids(tokenizer, min(4 * len(tokenizer), 4000), rng):
        word = tokenizer.decode([i]).strip()
        if word.isascii() and word.isalpha() and word not in pool and count(word) == 1 \
                and count(f"{word} {word}") == 2:
            pool.append(word)
            if len(pool) == POOL_SIZE:
                break
    _POOLS[id(tokenizer)] = (tokenizer, pool)
    return pool


def _ordinary_ids(tokenizer, k: int, rng: random.Random) -> list[int]:
    """`k` token ids that are not special ones, sampled (a 150k-token vocabulary is not listed)."""
    skip = set(tokenizer.all_special_ids)
    size = len(tokenizer)
    out = []
    while len(out) < k:
        i = rng.randrange(size)
        if i not in skip:
            out.append(i)
    return out
