"""Per-sample clipping for DP-SGD.

The clipped sum Σ_i c_i g_i, c_i = min(1, C / (‖g_i‖₂ + 1e-6)) (Opacus' flat clipping, Abadi et al. 2016), computed two
ways:.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from mechanisms.dpsgd.bk_layers import LAYERS

FAST_MODES = ("bk", "vmap")  # fastest first
PerSampleLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``loss(output (B, classes), target (B,)) -> (B,)`` per-sample losses."""


def per_sample_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``(B,)`` cross-entropy (nats) of logits ``(B, classes)`` against class indices ``(B,)``."""
    return F.cross_entropy(logits, target, reduction="none")


def clip_factors(sq_norms: torch.Tensor, max_grad_norm: float) -> torch.Tensor:
    """``(B,)`` factors ``min(1, C / (‖g_i‖ + 1e-6))`` from squared norms ``(B,)``, as Opacus clips (Abadi et al.)."""
    return (max_grad_norm / (sq_norms.sqrt() + 1e-6)).clamp(max=1.0)


def observe_clipped(clipper, sq_norms: torch.Tensor, factors: torch.Tensor) -> None:
    """In audit runs (``clipper.observe_norms``), keep the largest clipped norm c_i·‖g_i‖ in ``largest_clipped``."""
    if getattr(clipper, "observe_norms", False) and sq_norms.numel():
        m = (factors * sq_norms.sqrt()).max().detach()
        old = getattr(clipper, "largest_clipped", None)
        clipper.largest_clipped = m if old is None else torch.maximum(old, m)


def _trainable(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


class VmapClipper:
    """Per-sample clipped gradient sum with ``torch.func.vmap(grad(...))`` (any traceable module).

    Args:
        model: the module (its trainable parameters are the ones differentiated; buffers are read).
        loss_fn: per-sample loss ``(B, classes), (B,) -> (B,)``.
        chunk_size: samples per vmap chunk (``None``: the whole batch at once).
    """

    name = "vmap"

    def __init__(self, model: nn.Module, loss_fn: PerSampleLoss = per_sample_cross_entropy,
                 chunk_size: int | None = None) -> None:
        from torch.func import functional_call, grad_and_value, vmap

        self.model = model
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.names = [n for n, _ in named]
        self.params = [p for _, p in named]

        def one(params, buffers, x, y):  # x: (K, ...) one record's K views (K = 1 without augmentation)
            out = functional_call(model, (params, buffers), (x,))
            return loss_fn(out, y.expand(len(x))).mean()

        self._per_sample = vmap(grad_and_value(one), in_dims=(None, None, 0, 0), chunk_size=chunk_size)

    def clipped_sum(self, x: torch.Tensor, y: torch.Tensor, *, max_grad_norm: float, augmult: int = 1
                    ) -> tuple[dict[nn.Parameter, torch.Tensor], torch.Tensor]:
        """Σ_i c_i g_i and the per-record losses of a batch holding K consecutive views of each record.

        g_i is the mean of record i's views' gradients (De et al. 2022). ``x``: ``(B·K, ...)``, ``y``: ``(B,)``.
        Returns each trainable parameter's clipped sum (its shape) and ``(B,)`` detached losses (nats); raises
        ValueError when len(x) ≠ K·len(y) or K < 1.
        """
        b = _records(x, y, augmult)
        params = {n: p.detach() for n, p in zip(self.names, self.params, strict=True)}
        buffers = dict(self.model.named_buffers())
        grads, losses = self._per_sample(params, buffers, x.reshape(b, augmult, *x.shape[1:]), y)
        flat = [grads[n].reshape(b, -1) for n in self.names]
        sq = torch.stack([g.pow(2).sum(1) for g in flat], dim=1).sum(1)
        c = clip_factors(sq, max_grad_norm)
        observe_clipped(self, sq, c)
        return {p: (c @ g).view_as(p) for p, g in zip(self.params, flat, strict=True)}, losses.detach()

    def close(self) -> None:
        """Nothing to release (kept for symmetry with ``BookKeepingClipper``)."""


def _records(x: torch.Tensor, y: torch.Tensor, augmult: int) -> int:
    """The number of records B in a batch of ``x (B·K, ...)`` views and ``y (B,)`` labels, K = ``augmult``.

    Raises:
        ValueError: K < 1, or len(x) ≠ K·len(y).
    """
    if augmult < 1 or len(x) != augmult * len(y):
        raise ValueError(f"a batch of {len(x)} views for {len(y)} labels does not hold augmult = {augmult} views "
                         "of each record")
    return len(y)


class BookKeepingClipper:
    """Per-sample clipped gradient sum by book-keeping (Bu et al. 2023).

    Forward hooks record each layer's input and output; one ``autograd.grad`` w.r.t. the outputs; closed-form per-layer
    norms and sums.

    Args:
        model: a module whose trainable parameters all live in ``nn.Linear``, ``nn.Conv2d`` (groups 1,
            integer zero padding), ``nn.GroupNorm`` or ``nn.LayerNorm`` layers, each called once per forward.
        loss_fn: per-sample loss ``(B, classes), (B,) -> (B,)``.

    Raises:
        ValueError: for a module type (or Conv2d option) it does not support, or a parameter shared
            between layers; use ``"vmap"`` or an Opacus mode for such models.
    """

    name = "bk"

    def __init__(self, model: nn.Module, loss_fn: PerSampleLoss = per_sample_cross_entropy) -> None:
        self.model, self.loss_fn = model, loss_fn
        self.params = _trainable(model)
        self.layers: list[nn.Module] = []
        seen: set[int] = set()
        for name, mod in model.named_modules():
            own = [p for p in mod.parameters(recurse=False) if p.requires_grad]
            if not own:
                continue
            if type(mod) not in LAYERS:
                raise ValueError(f"grad_sample_mode 'bk' does not support {type(mod).__name__} ({name or 'model'}); "
                                 "use 'vmap' or 'hooks'")
            if isinstance(mod, nn.Conv2d) and (mod.groups != 1 or mod.padding_mode != "zeros"
                                               or isinstance(mod.padding, str)):
                raise ValueError(f"grad_sample_mode 'bk' supports Conv2d with groups=1 and integer zero padding "
                                 f"only ({name}); use 'vmap' or 'hooks'")
            if any(id(p) in seen for p in own):
                raise ValueError(f"grad_sample_mode 'bk' does not support parameters shared between layers ({name})")
            seen.update(id(p) for p in own)
            self.layers.append(mod)
        self._records: dict[nn.Module, tuple[torch.Tensor, torch.Tensor, int, int]] = {}
        self._active = False
        # an in-place op (ReLU(inplace=True), ``out += identity``) on a recorded output would redirect its
        # gradient: with such modules the layers hand a copy downstream and keep the original
        self._copy = any(getattr(m, "inplace", False) for m in model.modules())
        self._handles = [m.register_forward_hook(self._record) for m in self.layers]

    def _record(self, module: nn.Module, inputs: tuple, output: torch.Tensor) -> torch.Tensor | None:
        if not self._active:
            return None
        if module in self._records:
            raise ValueError(f"grad_sample_mode 'bk': {type(module).__name__} called twice in one forward; "
                             "use 'vmap' or 'hooks'")
        a = inputs[0].detach()
        self._records[module] = (a, output, a._version, output._version)
        return output.clone() if self._copy else None

    def clipped_sum(self, x: torch.Tensor, y: torch.Tensor, *, max_grad_norm: float, augmult: int = 1
                    ) -> tuple[dict[nn.Parameter, torch.Tensor], torch.Tensor]:
        """As ``VmapClipper.clipped_sum``, from one backward pass (book-keeping).

        Raises:
            ValueError: as ``VmapClipper.clipped_sum``; also a layer called twice in one forward, or its input or
                output modified in place after it ran.
        """
        b = _records(x, y, augmult)
        self._records.clear()
        self._active = True
        try:
            views = self.loss_fn(self.model(x), y.repeat_interleave(augmult) if augmult > 1 else y)
            losses = views.reshape(b, augmult).mean(1) if augmult > 1 else views
        finally:
            self._active = False
        used = [m for m in self.layers if m in self._records]
        for m in used:
            a, out, va, vo = self._records[m]
            if a._version != va or out._version != vo:
                raise ValueError(f"grad_sample_mode 'bk': the input or output of a {type(m).__name__} was "
                                 "modified in place after the layer ran; use 'vmap' or 'hooks'")
        outs = [self._records[m][1] for m in used]
        gouts = torch.autograd.grad(losses.sum(), outs, allow_unused=True)
        parts, sq = [], torch.zeros(b, dtype=losses.dtype, device=losses.device)
        for m, go in zip(used, gouts, strict=True):
            if go is None:
                continue
            s, total = LAYERS[type(m)](m, self._records[m][0], go, augmult)
            sq = sq + s
            parts.append(total)
        self._records.clear()
        c = clip_factors(sq, max_grad_norm)
        observe_clipped(self, sq, c)
        sums: dict[nn.Parameter, torch.Tensor] = {}
        for total in parts:
            sums.update(total(c))
        for p in self.params:  # a layer not reached by the loss contributes zero gradient
            if p not in sums:
                sums[p] = torch.zeros_like(p)
        return sums, losses.detach()

    def close(self) -> None:
        """Remove the forward hooks (the model is left as it was built)."""
        for h in self._handles:
            h.remove()
        self._handles = []


def make_clipper(mode: str, model: nn.Module, loss_fn: PerSampleLoss = per_sample_cross_entropy):
    """A ``VmapClipper`` (``"vmap"``) or ``BookKeepingClipper`` (``"bk"``) on ``model``; ValueError for another mode."""
    if mode == "vmap":
        return VmapClipper(model, loss_fn)
    if mode == "bk":
        return BookKeepingClipper(model, loss_fn)
    raise ValueError(f"fast grad_sample_mode {mode!r} not in {FAST_MODES}")


