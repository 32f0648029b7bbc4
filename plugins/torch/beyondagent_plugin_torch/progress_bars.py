"""transformers' per-file progress bars, hidden for a routine load (a tiny model, a cached conversion).

Its own module: the model loader (`models.py`) and what it builds models with (`tiny.py`,
`gguf_convert.py`) all use it, and `models.py` imports those, so it cannot live in either.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def quiet_progress_bars() -> Iterator[None]:
    """Hide transformers' per-file progress bars ("Loading weights") for a tiny or routine load."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()
