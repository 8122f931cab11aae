"""The learning curve of one run, drawn from its log.csv (what train.ipynb shows).

Left: validation cross-entropy per token at each checkpoint; right: the training loss
per string, with the learning rate (the plateau schedule's halvings) on a second axis.
Built without pyplot (``matplotlib.figure.Figure``), so nothing global is touched; a
script saves the figure, a notebook shows ``as_png(figure)`` with IPython's ``Image``.
"""

from __future__ import annotations


def learning_curve(log, title: str = ""):
    """log: ``fruit.training.read_log``'s DataFrame (columns of ``LOG_COLUMNS``) ->
    a ``matplotlib.figure.Figure`` with the two panels above."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.5))
    left, right = fig.subplots(1, 2)
    seen = log["examples_seen"]
    left.plot(seen, log["validation_cross_entropy"], "o-", label="validation (per token)")
    left.set_xlabel("training examples seen")
    left.set_ylabel("cross-entropy (nats)")
    left.legend()
    right.plot(seen, log["train_loss"], "o-", color="C1", label="training loss (per string)")
    right.set_xlabel("training examples seen")
    right.legend()
    rate = right.twinx()
    rate.step(seen, log["learning_rate"], where="post", color="C2", alpha=0.6)
    rate.set_ylabel("learning rate")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def as_png(figure, dpi: int = 100) -> bytes:
    """The figure as PNG bytes (for ``IPython.display.Image``)."""
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
