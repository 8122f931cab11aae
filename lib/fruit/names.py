"""The architectures by name, and the parameter budget, as plain data (docs/paper.md §2,
§10.3).

``ARCHITECTURES`` is the registry: a name -> its description, which
``fruit.models.parse_architecture`` reads (docs/extending.md):

* ``Tf(k1,...,kL)``: a pre-norm transformer of L layers, layer i standard (``-``) or a
  stack-attention layer of stack kind ki (``Sup``, ``Nd``: ``fruit.models.stack_kinds``);
* ``RNN(k1,...)`` / ``LSTM(k1,...)``: a 3-layer controller driving one stack per kind
  listed (none: the plain network); ``+R`` after it feeds the readings to the output too.

The paper's fifteen come first; a new architecture is one more entry (its name names
its run folders). ``PAPER_ARCHITECTURES`` are the paper's, in the order of its table
rows: the paper's tables, bar charts and numbers exist for those only.

Profiles, training settings, the commands and reporting read these without importing
model code or torch; ``fruit.models`` builds the architectures they name.
"""

import re

from fruit.errors import check_name

# The base networks a description can name (fruit.models builds them).
TRANSFORMER_BASES = ("Tf",)
RECURRENT_BASES = ("RNN", "LSTM")

ARCHITECTURES: dict[str, str] = {
    # One stack layer replaces layer 3 of 5; two replace layers 2 and 4.
    "Tf": "Tf(-,-,-,-,-)",
    "Tf+Sup": "Tf(-,-,Sup,-,-)",
    "Tf+Sup+Sup": "Tf(-,Sup,-,Sup,-)",
    "Tf+Nd": "Tf(-,-,Nd,-,-)",
    "Tf+Nd+Nd": "Tf(-,Nd,-,Nd,-)",
    "RNN": "RNN()",
    "RNN+Sup": "RNN(Sup)",
    "RNN+Sup+R": "RNN(Sup)+R",
    "RNN+Nd": "RNN(Nd)",
    "RNN+Nd+R": "RNN(Nd)+R",
    "LSTM": "LSTM()",
    "LSTM+Sup": "LSTM(Sup)",
    "LSTM+Sup+R": "LSTM(Sup)+R",
    "LSTM+Nd": "LSTM(Nd)",
    "LSTM+Nd+R": "LSTM(Nd)+R",
    # Yours below, e.g. "Tf+Nd@4,5": "Tf(-,-,-,Nd,Nd)", "LSTM+Nd+Sup": "LSTM(Nd,Sup)".
}
for _name in ARCHITECTURES:  # each names a folder of run records
    check_name("architecture", _name)

# The paper's fifteen, in the order of its table rows.
PAPER_ARCHITECTURES = (
    "Tf",
    "Tf+Sup",
    "Tf+Sup+Sup",
    "Tf+Nd",
    "Tf+Nd+Nd",
    "RNN",
    "RNN+Sup",
    "RNN+Sup+R",
    "RNN+Nd",
    "RNN+Nd+R",
    "LSTM",
    "LSTM+Sup",
    "LSTM+Sup+R",
    "LSTM+Nd",
    "LSTM+Nd+R",
)

# Every model is sized to about this many trainable parameters (d from choose_d).
TARGET_PARAMS = 200_000

_DESCRIPTION = re.compile(r"^(?P<base>[A-Za-z]+)\((?P<parts>[^()]*)\)(?P<R>\+R)?$")


def split_description(description: str) -> tuple[str, tuple[str, ...], bool] | None:
    """``"LSTM(Nd,Sup)+R"`` -> ("LSTM", ("Nd", "Sup"), True); None when it is not of
    the form (the names are checked by ``fruit.models.parse_architecture``)."""
    match = _DESCRIPTION.match(description.replace(" ", ""))
    if match is None:
        return None
    parts = tuple(p for p in match["parts"].split(",") if p)
    return match["base"], parts, bool(match["R"])


def stacks_of(architecture: str) -> tuple[str, ...]:
    """The stack kinds a registered architecture uses, in order (none for unknown names)."""
    split = split_description(ARCHITECTURES.get(architecture, ""))
    return tuple(p for p in split[1] if p != "-") if split else ()
