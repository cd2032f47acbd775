"""Import-time log lines a user cannot act on (issue 50): torchao's "Failed to load ..._C_*.so" and
torch's pytree "register_constant() ... deprecated", which every `run` printed after the dev
install, are dropped by their own words where tpubench imports the libraries; everything else
those loggers say still reaches the user, and no warning filter is touched."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys
import warnings

import pytest

from tpubench.models.library_noise import quiet_library_noise

MXFP8 = ("Failed to load /venv/lib/python3.11/site-packages/torchao/_C_mxfp8.cpython-310-x86_64-linux-gnu.so: "
         "Could not load this library: /venv/lib/python3.11/site-packages/torchao/_C_mxfp8.cpython-310-x86_64-linux-gnu.so")
PYTREE = ("%s is an Enum subclass and is now natively supported by torch.compile as an opaque value type. Calling "
          "register_constant() on Enum subclasses is deprecated and will be an error in a future release.")


def test_only_the_unactionable_lines_are_dropped(caplog):
    quiet_library_noise()
    quiet_library_noise()   # idempotent: one filter per logger
    assert sum(type(f).__name__ == "_DropUnactionable" for f in logging.getLogger("torchao").filters) == 1
    with caplog.at_level(logging.INFO):
        logging.getLogger("torchao").warning(MXFP8)
        logging.getLogger("torch.utils._pytree").warning(PYTREE, "<enum 'KernelPreference'>")
        kept = ["Skipping import of cpp extensions due to incompatible torch version. Please upgrade to torch >= 2.11.0",
                "Failed to load the model config"]          # no .so: not the kernel-library line
        for text in kept:
            logging.getLogger("torchao").warning(text)
        logging.getLogger("torch.utils._pytree").warning("some other pytree warning")
        logging.getLogger("torchao.quantization").warning(MXFP8)   # a child logger is not the import-time one
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [*kept, "some other pytree warning", MXFP8]
    assert not any("register_constant" in m for m in messages)


def test_no_warning_filter_is_changed():
    before = list(warnings.filters)
    quiet_library_noise()
    assert warnings.filters == before


PROBE = """
import sys
if sys.argv[1] == "tpubench":
    import tpubench.models.torch_models   # where tpubench imports transformers
import transformers.quantizers             # imports torchao when it is installed
"""


@pytest.mark.slow
def test_the_real_libraries_are_quiet_after_tpubench_imports_them():
    if importlib.util.find_spec("torchao") is None:
        pytest.skip("torchao is not installed: nothing prints these lines")

    def stderr(who: str) -> str:
        return subprocess.run([sys.executable, "-c", PROBE, who], capture_output=True, text=True, check=True).stderr

    bare = stderr("bare")
    noisy = [w for w in ("Failed to load", "register_constant()") if w in bare]
    if not noisy:
        pytest.skip("this torchao and torch print none of these lines here")
    quiet = stderr("tpubench")
    assert not [w for w in noisy if w in quiet], quiet
