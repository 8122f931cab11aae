"""The fifteen architectures of the paper, and their sizing (docs/paper.md §1-§10).

```python
from fruit.models import ARCHITECTURES, build_model, choose_d, parameter_count_expr

model = build_model("Tf+Nd", vocab_size=68)          # d chosen for 200k parameters
logits = model(tokens)                               # (B, n) -> (B, n+1, V+1)
logits0, state = model.start(batch_size)             # incremental decoding
logits, state = model.step(state, next_tokens)
```

See docs/contracts.md §3 for the full interface.
"""

import importlib

from fruit.model_options import DEFAULT_OPTIONS
from fruit.models.registry import ARCHITECTURES, ArchSpec, build_model, parse_architecture

# Imported on first use: actions needs torch and sizing needs SymPy (about a second
# together), while `fruit report` and the report notebooks only need the names above.
_LAZY = {
    "ND_ACTION_KINDS": "fruit.models.actions",
    "nd_action_mass": "fruit.models.actions",
    "PAPER_VOCAB_SIZES": "fruit.models.sizing",
    "choose_d": "fruit.models.sizing",
    "parameter_count": "fruit.models.sizing",
    "parameter_count_expr": "fruit.models.sizing",
    "real_root": "fruit.models.sizing",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'fruit.models' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


def num_parameters(model) -> int:
    """Trainable parameters (frozen RNN biases and buffers excluded), as in docs/paper.md §10.4."""
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
