"""The prompts of scenario `diffuse`: words drawn from a fixed list by the point's seed, so every
run, backend and device encodes the same text (and random tokenizers map every word to an id)."""

from __future__ import annotations

import numpy as np

WORDS = tuple("""a an the of on in with under above beside photo painting drawing portrait landscape
city forest river mountain ocean desert village street garden castle bridge tower harbor island cat dog
horse bird fox owl dragon robot astronaut knight child woman man old young red blue green golden silver
black white purple orange bright dark misty sunny rainy snowy night dawn dusk morning evening light shadow
glass stone wooden metal paper neon soft sharp detailed cinematic watercolor oil sketch pastel vivid calm
stormy ancient modern futuristic quiet busy tiny giant floating flying sleeping running reading dancing
lantern flower tree cloud star moon sun boat train car house window door road field lake snow fire""".split())


def prompt_for(seed: int, words: int) -> str:
    """The prompt of a seed: `words` words from WORDS (a generator of its own: nothing else's draws move it)."""
    rng = np.random.default_rng(seed)
    return " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), size=words))
