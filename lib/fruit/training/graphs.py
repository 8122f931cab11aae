"""The training step as CUDA graphs: captured once per batch shape, replayed after.

On a GPU the stack models are bound by kernel launches, not arithmetic: a Tf+Nd step
queues about 6,600 small kernels, most of them the dVPDA's per-position updates, each
launched by one CPU thread (docs/cluster.md). A CUDA graph records the kernels of one
step (forward, backward, clipping, Adam) once, and replays them with one launch.

What a graph needs, and how it is met here:

- Fixed shapes and addresses. Batches are strings of similar lengths padded to the
  longest (`fruit.batching`), so a run sees a few dozen shapes (B, n): one graph for
  each, made the first time the shape comes, with its own static buffers for the tokens
  and targets that each step copies in. The graphs share one memory pool; only scratch
  lives there (parameters, gradients' consumers, Adam's state and the loss they hand
  out are outside or rewritten whole by every replay), and replays never overlap.
- No waiting for the device inside the step: `objective.update_without_sync` (the loss
  is read after the step; a nan/inf loss skips Adam's update on the device).
- Adam's state exists before the first capture (made here as Adam would make it), and
  the optimiser is marked ``capturable`` (the fused update is the same kernel).
- The learning rate is a number inside the graphs: when the plateau schedule changes
  it, the graphs are dropped and made again.
- The random streams: before each capture one forward and backward pass warms the
  libraries up (on a side stream, as PyTorch asks) with the CPU and CUDA random states
  put back afterwards and no optimiser step, so the warm-up changes nothing. A graph's
  dropout draws from the CUDA generator, which each replay advances, so checkpoints
  keep the state a resumed run continues from.

Two kinds of model are known not to replay, and take the ``eager`` step instead
(`cannot_capture`): a model that says so in a ``not_capturable`` attribute, as the plain
RNN and LSTM do (cuDNN keeps its own dropout state, which a graph cannot advance, and
restoring the random state makes it re-seed that state by reading the device); and, on
CUDA, the counter-based dropout (``FRUIT_COUNTER_DROPOUT=1``: its seed is drawn on the
CPU once per call, which a graph would replay unchanged). Any other capture that fails
ends the run with one line naming the cause and ``FRUIT_STEP=eager`` (a failed capture
can leave PyTorch's allocator and generator in states it does not promise to recover
from). The CPU has no graphs: there `EagerReplay` stands in, calling the step instead
of replaying it, so the bookkeeping above is tested without a GPU
(tests/test_training_steps.py); the CUDA tests compare real graphs with the eager step.
"""

from __future__ import annotations

import torch

from fruit.errors import FruitError
from fruit.training.objective import token_losses, update_without_sync


def cannot_capture(model, device: torch.device) -> str | None:
    """Why ``model``'s training step on ``device`` cannot be replayed as a CUDA graph, or
    None: a model says so itself in a ``not_capturable`` attribute (the plain RNN and
    LSTM, `fruit.models.recurrent.RecurrentLM`), and the counter-based dropout cannot be
    replayed on CUDA (see the module's docstring). The CPU's stand-in replays anything."""
    from fruit.kernels.dropout import counter_based

    if device.type != "cuda":
        return None
    if counter_based(device):
        return (
            "the counter-based dropout (FRUIT_COUNTER_DROPOUT=1) draws its seed on the CPU, "
            "which a graph would replay unchanged"
        )
    return getattr(model, "not_capturable", None)


class EagerReplay:
    """The stand-in for CUDA graphs on the CPU: 'capturing' keeps the function, a
    replay calls it."""

    def reset(self) -> None:
        pass

    def warm_up(self, fn) -> None:
        fn()

    def capture(self, fn):
        return fn


class CudaGraphs:
    """Capture into CUDA graphs sharing one memory pool (`torch.cuda.graph`)."""

    def __init__(self):
        self.pool = None

    def reset(self) -> None:
        self.pool = None  # the old graphs' memory goes with them

    def warm_up(self, fn) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)

    def capture(self, fn):
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.current_stream()
        try:
            with torch.cuda.graph(graph, pool=self.pool):
                fn()
        except BaseException:
            # a failed capture_end leaves the capture's side stream current
            torch.cuda.set_stream(stream)
            raise
        return graph.replay


class _Shape:
    """One batch shape's static inputs and its replay."""

    def __init__(self, tokens: torch.Tensor, targets: torch.Tensor):
        self.tokens, self.targets = tokens, targets  # (B, n), (B, n+1) on the device
        self.replay = None


def init_adam_state(optimizer: torch.optim.Adam) -> None:
    """Adam's per-parameter state as its first step would make it (step 0, zero moments),
    for parameters that have none yet, so that no capture allocates it."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if not p.requires_grad or optimizer.state.get(p):  # Adam never steps a frozen one
                continue  # (and looking one up in optimizer.state would add an entry)
            state = optimizer.state[p]
            # fused Adam keeps its step count as a float32 scalar on the device
            state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = torch.zeros_like(p)


class GraphedUpdates:
    """``graphed(tokens, targets)`` (CPU tensors from `objective.batch_tensors`) takes
    one optimiser step and returns the loss (0-dim, on the device; read it after)."""

    def __init__(self, model, optimizer, clip_norm: float, backend=None):
        self.model, self.optimizer, self.clip_norm = model, optimizer, clip_norm
        self.device = next(model.parameters()).device
        self.backend = backend or (CudaGraphs() if self.device.type == "cuda" else EagerReplay())
        self.found_inf = torch.zeros((), dtype=torch.float32, device=self.device)
        self.loss = torch.zeros((), dtype=torch.float32, device=self.device)  # outside the pool
        self.shapes: dict[tuple, _Shape] = {}
        self.lr = None
        if self.device.type == "cuda":
            for group in optimizer.param_groups:
                group["capturable"] = True  # the fused kernel is the same; the check passes
        init_adam_state(optimizer)

    def __call__(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        lr = tuple(group["lr"] for group in self.optimizer.param_groups)
        if lr != self.lr:  # the plateau schedule changed the rate the graphs hold
            self.shapes.clear()
            self.backend.reset()
            self.lr = lr
        key = (tuple(tokens.shape), tuple(targets.shape))
        shape = self.shapes.get(key)
        if shape is None:
            shape = _Shape(tokens.to(self.device, copy=True), targets.to(self.device, copy=True))
            try:
                shape.replay = self._capture(shape)
            except Exception as e:  # noqa: BLE001 - any failure: one line, the run ends
                cause = e.__context__ or e  # capture_end's own error hides the first one
                first = str(cause).splitlines()[0] if str(cause) else ""
                raise FruitError(
                    f"the training step could not be captured as a CUDA graph of shape "
                    f"{key[0]} ({type(cause).__name__}: {first}); FRUIT_STEP=eager trains "
                    "it without graphs"
                ) from e
            self.shapes[key] = shape
        else:
            shape.tokens.copy_(tokens, non_blocking=True)
            shape.targets.copy_(targets, non_blocking=True)
        shape.replay()
        return self.loss

    def _step(self, shape: _Shape) -> None:
        loss = update_without_sync(
            self.model, self.optimizer, shape.tokens, shape.targets, self.clip_norm,
            self.found_inf,
        )  # fmt: skip
        self.loss.copy_(loss)

    def _warm_up(self, shape: _Shape) -> None:
        """A forward and backward pass of this shape that leaves no trace: no optimiser
        step, the random states put back, the gradients dropped."""
        devices = [self.device] if self.device.type == "cuda" else []
        self.optimizer.zero_grad(set_to_none=True)  # not into the last graph's gradients
        with torch.random.fork_rng(devices=devices):
            self.model.train()
            self.backend.warm_up(
                lambda: token_losses(self.model, shape.tokens, shape.targets).mean().backward()
            )
        self.optimizer.zero_grad(set_to_none=True)

    def _capture(self, shape: _Shape):
        self._warm_up(shape)
        return self.backend.capture(lambda: self._step(shape))
