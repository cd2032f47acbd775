"""Log lines libraries print at import that a tpubench user cannot act on, silenced where tpubench
imports the library, each by its own words: nothing else those loggers say is touched, and no
warning filter is changed.

- torchao (which transformers imports whenever it is installed, the `quant` and `dev` extras)
  tries every optional CUDA kernel library it ships and logs a WARNING per one that does not load:
  `Failed to load .../torchao/_C_mxfp8....so: ...` on any host without that GPU generation. The
  formats that need them are refused by tpubench before they run (models/quantization.py).
- torch's pytree logs a WARNING that torchao's own enums call the deprecated `register_constant()`
  (torch 2.13: "... is an Enum subclass and is now natively supported by torch.compile ...").

Every other record of those loggers passes (torchao's "Skipping import of cpp extensions due to
incompatible torch version" does: it names a version the user can change).
"""

from __future__ import annotations

import logging

# (logger, words of the records dropped): torchao's __init__ and torch/utils/_pytree.py.
_UNACTIONABLE = (
    ("torchao", ("Failed to load ",), (".so",)),
    ("torch.utils._pytree", ("register_constant() on Enum subclasses is deprecated",), ()),
)


class _DropUnactionable(logging.Filter):
    def __init__(self, starts_or_contains: tuple[str, ...], also: tuple[str, ...]):
        super().__init__()
        self.words, self.also = starts_or_contains, also

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:   # a record whose arguments do not format is not one of ours
            return True
        return not (any(w in text for w in self.words) and all(a in text for a in self.also))


def quiet_library_noise() -> None:
    """Install the filters once (a logger keeps its filters; getLogger before the library exists
    returns the very logger it will log to)."""
    for name, words, also in _UNACTIONABLE:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropUnactionable) for f in logger.filters):
            logger.addFilter(_DropUnactionable(words, also))


__all__ = ["quiet_library_noise"]
