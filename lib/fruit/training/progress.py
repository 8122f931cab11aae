"""The progress bar of a training run: a widget in JupyterLab, text elsewhere.

A text bar that is not on a terminal (a papermill kernel's stderr, a log file) becomes
one output per redraw: thousands per run, each saved and validated with the notebook by
papermill, so there it redraws only every ``TEXT_BAR_SECONDS``. A widget's redraw is a
message to the kernel's client: cheap, but under papermill, where nobody watches, 10 per
second cost a run about 3% of its time (``fruit run`` passes ``seconds``).
"""

from __future__ import annotations

import sys

TEXT_BAR_SECONDS = 30.0


def progress_bar(progress, total: int, seconds: float | None = None):
    """None for ``progress`` None/False; for True a tqdm bar over ``total`` examples that
    redraws at most every ``seconds`` (default: 0.1 for a widget or a terminal,
    ``TEXT_BAR_SECONDS`` otherwise); anything else (a tqdm-like object) as it is."""
    if progress is None or progress is False:
        return None
    if progress is not True:
        return progress
    try:  # a widget in JupyterLab when ipywidgets is there, else a text bar
        import ipywidgets  # noqa: F401
        from tqdm.auto import tqdm
    except ImportError:
        from tqdm import tqdm
    if seconds is None:
        seconds = 0.1 if is_widget(tqdm) or on_terminal() else TEXT_BAR_SECONDS
    return tqdm(total=total, unit="ex", desc="training", mininterval=seconds)


def is_widget(bar_class) -> bool:
    try:
        from tqdm.notebook import tqdm_notebook
    except ImportError:
        return False
    return issubclass(bar_class, tqdm_notebook)


def on_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
