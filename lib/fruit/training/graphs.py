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

A model whose step cannot be captured (an operation that waits for the device, say) is
said once through ``warn`` and trained on with the ``eager`` step; the parameters are
untouched by a failed capture. The CPU has no graphs: there `EagerReplay` stands in,
calling the step instead of replaying it, so the bookkeeping above is tested without a
GPU (tests/test_training_steps.py); the CUDA tests compare real graphs with the eager
step.
"""

from __future__ import annotations

import torch

from fruit.training.objective import token_losses, update_without_sync


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
        with torch.cuda.graph(graph, pool=self.pool):
            fn()
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
            state = optimizer.state[p]
            if len(state) == 0:
                # fused Adam keeps its step count as a float32 scalar on the device
                state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                if group["amsgrad"]:
                    state["max_exp_avg_sq"] = torch.zeros_like(p)


class GraphedUpdates:
    """``graphed(tokens, targets)`` (CPU tensors from `objective.batch_tensors`) takes
    one optimiser step and returns the loss (0-dim, on the device; read it after)."""

    def __init__(self, model, optimizer, clip_norm: float, warn=None, backend=None):
        self.model, self.optimizer, self.clip_norm = model, optimizer, clip_norm
        self.device = next(model.parameters()).device
        self.backend = backend or (CudaGraphs() if self.device.type == "cuda" else EagerReplay())
        self.warn = warn or (lambda message: None)
        self.found_inf = torch.zeros((), dtype=torch.float32, device=self.device)
        self.loss = torch.zeros((), dtype=torch.float32, device=self.device)  # outside the pool
        self.shapes: dict[tuple, _Shape] = {}
        self.lr = None
        self.failed = False  # a capture failed: eager steps from then on
        if self.device.type == "cuda":
            for group in optimizer.param_groups:
                group["capturable"] = True  # the fused kernel is the same; the check passes
        init_adam_state(optimizer)

    def __call__(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if self.failed:
            return self._eager(tokens, targets)
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
            except Exception as e:  # noqa: BLE001 - any failure: fall back, said once
                self.failed = True
                self.shapes.clear()
                self.backend.reset()
                first = str(e).splitlines()[0] if str(e) else ""
                self.warn(
                    f"the training step could not be captured as a CUDA graph "
                    f"({type(e).__name__}: {first}); training on with the eager step "
                    "(FRUIT_STEP=eager says the same without trying)"
                )
                return self._eager(tokens, targets)
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

    def _eager(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        tokens = tokens.to(self.device, non_blocking=True)
        targets = targets.to(self.device, non_blocking=True)
        return update_without_sync(
            self.model, self.optimizer, tokens, targets, self.clip_norm, self.found_inf
        )
