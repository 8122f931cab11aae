"""The fifteen architectures of the paper, and their sizing (models.md §1-§10).

```python
from fruit.models import ARCHITECTURES, build_model, choose_d, parameter_count_expr

model = build_model("Tf+Nd", vocab_size=68)          # d chosen for 200k parameters
logits = model(tokens)                               # (B, n) -> (B, n+1, V+1)
logits0, state = model.start(batch_size)             # incremental decoding
logits, state = model.step(state, next_tokens)
```

See docs/contracts.md §3 for the full interface.
"""

from fruit.models.actions import ND_ACTION_KINDS, nd_action_mass
from fruit.models.registry import (
    ARCHITECTURES,
    DEFAULT_OPTIONS,
    ArchSpec,
    build_model,
    parse_architecture,
)
from fruit.models.sizing import (
    PAPER_VOCAB_SIZES,
    choose_d,
    parameter_count,
    parameter_count_expr,
    real_root,
)


def num_parameters(model) -> int:
    """Trainable parameters (frozen RNN biases and buffers excluded), as in models.md §10.4."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


__all__ = [
    "ARCHITECTURES",
    "DEFAULT_OPTIONS",
    "ND_ACTION_KINDS",
    "PAPER_VOCAB_SIZES",
    "ArchSpec",
    "build_model",
    "choose_d",
    "nd_action_mass",
    "num_parameters",
    "parameter_count",
    "parameter_count_expr",
    "parse_architecture",
    "real_root",
]
