"""Per-sample clipping for DP-SGD: the clipped sum Σ_i c_i g_i, c_i = min(1, C / (‖g_i‖₂ + 1e-6)) (Opacus' flat
clipping, Abadi et al. 2016), computed two ways:

- ``"vmap"``: ``torch.func`` ``vmap(grad(...))`` over ``functional_call`` (Subramani et al. 2021, "Enabling
  fast differentially private SGD via just-in-time compilation and vectorization"); any module
  ``torch.func`` can trace.
- ``"bk"``: book-keeping (Bu, Wang, Zha, Karypis 2023): one forward pass recording each layer's input,
  one backward pass for the gradients w.r.t. each layer's *output* only (no weight gradients), then
  per-sample norms in closed form (Linear: ‖a_i‖·‖g_i‖) or from per-sample weight gradients computed as one
  batched convolution per block (Conv2d: the batch becomes the conv groups), and the clipped sum as one
  weighted contraction. Supports ``nn.Linear``, ``nn.Conv2d`` (groups 1, zero padding),
  ``nn.GroupNorm`` and ``nn.LayerNorm``; any other module owning trainable parameters raises.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

FAST_MODES = ("bk", "vmap")  # fastest first
PerSampleLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``loss(output (B, K), target (B,)) -> (B,)`` per-sample losses."""

# Per-sample conv gradients are computed in blocks of ≤ 1 MiB (large temporaries cost page faults on every step:
# measured ~20 % of a cnn-small step, docs/performance.md) and kept for the clipped sum up to 128 MiB in all.
_BLOCK_FLOATS = 1 << 18
_KEEP_FLOATS = 1 << 25


def per_sample_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each example, ``(B, K), (B,) -> (B,)`` (nats)."""
    return F.cross_entropy(logits, target, reduction="none")


def clip_factors(sq_norms: torch.Tensor, max_grad_norm: float) -> torch.Tensor:
    """Opacus' flat clip factor ``min(1, C / (‖g_i‖ + 1e-6))`` from squared per-sample norms ``(B,)``."""
    return (max_grad_norm / (sq_norms.sqrt() + 1e-6)).clamp(max=1.0)


def _trainable(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


class VmapClipper:
    """Per-sample clipped gradient sum with ``torch.func.vmap(grad(...))`` (any traceable module).

    Args:
        model: the module (its trainable parameters are the ones differentiated; buffers are read).
        loss_fn: per-sample loss ``(B, K), (B,) -> (B,)``.
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

        def one(params, buffers, x, y):
            out = functional_call(model, (params, buffers), (x.unsqueeze(0),))
            return loss_fn(out, y.unsqueeze(0)).sum()

        self._per_sample = vmap(grad_and_value(one), in_dims=(None, None, 0, 0), chunk_size=chunk_size)

    def clipped_sum(self, x: torch.Tensor, y: torch.Tensor, *, max_grad_norm: float
                    ) -> tuple[dict[nn.Parameter, torch.Tensor], torch.Tensor]:
        """``({param: Σ_i c_i g_i}, per-sample losses (B,))`` for a batch ``x (B, ...)``, ``y (B,)``."""
        params = {n: p.detach() for n, p in zip(self.names, self.params, strict=True)}
        buffers = dict(self.model.named_buffers())
        grads, losses = self._per_sample(params, buffers, x, y)
        flat = [grads[n].reshape(len(x), -1) for n in self.names]
        sq = torch.stack([g.pow(2).sum(1) for g in flat], dim=1).sum(1)
        c = clip_factors(sq, max_grad_norm)
        return {p: (c @ g).view_as(p) for p, g in zip(self.params, flat, strict=True)}, losses.detach()

    def close(self) -> None:
        """Nothing to release (kept for symmetry with ``BookKeepingClipper``)."""


def _sq(t: torch.Tensor) -> torch.Tensor:
    """Per-sample squared norm of ``(B, ...)`` as ``(B,)`` (one fused reduction)."""
    return torch.linalg.vector_norm(t.reshape(len(t), -1), dim=1).square()


def _linear(m: nn.Linear, a: torch.Tensor, g: torch.Tensor):
    b = len(a)
    want_w, want_b = m.weight.requires_grad, m.bias is not None and m.bias.requires_grad
    if a.dim() == 2:  # one row per sample: ‖g_i a_iᵀ‖ = ‖g_i‖·‖a_i‖, nothing materialised
        gsq = torch.einsum("bi,bi->b", g, g)  # row-wise squared norms, no (B, d) temporary
        sq = (torch.einsum("bi,bi->b", a, a) * gsq if want_w else 0) + (gsq if want_b else 0)

        def total(c):
            gc = g * c[:, None]
            out = {m.weight: gc.t() @ a} if want_w else {}
            if want_b:
                out[m.bias] = gc.sum(0)
            return out
        return sq, total
    a3, g3 = a.reshape(b, -1, a.shape[-1]), g.reshape(b, -1, g.shape[-1])
    ps = torch.bmm(g3.transpose(1, 2), a3) if want_w else None
    gb = g3.sum(1) if want_b else None
    sq = (_sq(ps) if want_w else 0) + (_sq(gb) if want_b else 0)

    def total_seq(c):
        out = {m.weight: torch.einsum("b,boi->oi", c, ps)} if want_w else {}
        if want_b:
            out[m.bias] = c @ gb
        return out
    return sq, total_seq


def _conv_weight_grads(m: nn.Conv2d, a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Per-sample weight gradients ``(B, Cout, Cin·kh·kw)`` of a groups-1 Conv2d from its input ``a`` and
    output gradient ``g``, as one batched convolution kernel (the batch becomes the conv groups)."""
    b, cin, cout = a.shape[0], a.shape[1], g.shape[1]
    kh, kw = m.kernel_size
    if cin == 1:  # W_b = x_b ⋆ g_b: a grouped conv with g_b as a dilated kernel (fastest for 1 input channel)
        out = F.conv2d(a.reshape(1, b, *a.shape[2:]), g.reshape(b * cout, 1, *g.shape[2:]),
                       stride=m.dilation, padding=m.padding, dilation=m.stride, groups=b)
        return out[..., :kh, :kw].reshape(b, cout, kh * kw)
    # the weight gradient of the same conv applied with the batch folded into groups is per sample
    w = a.new_empty(b * cout, cin, kh, kw)
    gw = torch.ops.aten.convolution_backward(
        g.reshape(1, b * cout, *g.shape[2:]), a.reshape(1, b * cin, *a.shape[2:]), w, None, list(m.stride),
        list(m.padding), list(m.dilation), False, [0, 0], b, [False, True, False])[1]
    return gw.reshape(b, cout, cin * kh * kw)


def _conv2d(m: nn.Conv2d, a: torch.Tensor, g: torch.Tensor):
    b = len(a)
    want_w, want_b = m.weight.requires_grad, m.bias is not None and m.bias.requires_grad
    gb = g.sum((2, 3)) if want_b else None  # (B, Cout) per-sample bias gradients
    sq = _sq(gb) if want_b else 0
    blocks: list[torch.Tensor] = []
    if want_w:  # per-sample weight gradients in blocks of ≤ _BLOCK_FLOATS: kept, or only their norms
        per = m.weight.numel()
        step = max(1, (_BLOCK_FLOATS if a.device.type == "cpu" else _KEEP_FLOATS) // per)  # GPU: few launches
        keep = b * per <= _KEEP_FLOATS
        norms = []
        for i in range(0, b, step):
            block = _conv_weight_grads(m, a[i : i + step], g[i : i + step]).reshape(-1, per)
            norms.append(_sq(block))
            if keep:
                blocks.append(block)
        sq = sq + torch.cat(norms)

    def total(c):
        out = {}
        if want_w:
            if blocks:
                w = sum(c[i * step : (i + 1) * step] @ block for i, block in enumerate(blocks))
            else:  # too large to keep: the clipped sum is the ordinary weight gradient of c-scaled output grads
                w = torch.ops.aten.convolution_backward(
                    g * c.view(-1, 1, 1, 1), a, m.weight, None, list(m.stride), list(m.padding),
                    list(m.dilation), False, [0, 0], 1, [False, True, False])[1]
            out[m.weight] = w.view_as(m.weight)
        if want_b:
            out[m.bias] = c @ gb
        return out
    return sq, total


def _norm_layer(m: nn.GroupNorm | nn.LayerNorm, a: torch.Tensor, g: torch.Tensor):
    b = len(a)
    if isinstance(m, nn.GroupNorm):
        xhat = F.group_norm(a, m.num_groups, eps=m.eps)
        gw = (g * xhat).reshape(b, a.shape[1], -1).sum(2)
        gb = g.reshape(b, a.shape[1], -1).sum(2)
    else:
        xhat = F.layer_norm(a, m.normalized_shape, eps=m.eps)
        gw = (g * xhat).reshape(b, -1, *m.normalized_shape).sum(1)
        gb = g.reshape(b, -1, *m.normalized_shape).sum(1)
    per = {}
    if m.weight is not None and m.weight.requires_grad:
        per[m.weight] = gw.reshape(b, *m.weight.shape)
    if m.bias is not None and m.bias.requires_grad:
        per[m.bias] = gb.reshape(b, *m.bias.shape)
    sq = sum(_sq(v) for v in per.values())

    def total(c):
        return {p: torch.einsum("b,b...->...", c, v) for p, v in per.items()}
    return sq, total


_LAYERS = {nn.Linear: _linear, nn.Conv2d: _conv2d, nn.GroupNorm: _norm_layer, nn.LayerNorm: _norm_layer}


class BookKeepingClipper:
    """Per-sample clipped gradient sum by book-keeping (Bu et al. 2023): forward hooks record each layer's
    input and output; one ``autograd.grad`` w.r.t. the outputs; closed-form per-layer norms and sums.

    Args:
        model: a module whose trainable parameters all live in ``nn.Linear``, ``nn.Conv2d`` (groups 1,
            integer zero padding), ``nn.GroupNorm`` or ``nn.LayerNorm`` layers, each called once per forward.
        loss_fn: per-sample loss ``(B, K), (B,) -> (B,)``.

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
            if type(mod) not in _LAYERS:
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

    def clipped_sum(self, x: torch.Tensor, y: torch.Tensor, *, max_grad_norm: float
                    ) -> tuple[dict[nn.Parameter, torch.Tensor], torch.Tensor]:
        """``({param: Σ_i c_i g_i}, per-sample losses (B,))`` for a batch ``x (B, ...)``, ``y (B,)``."""
        self._records.clear()
        self._active = True
        try:
            losses = self.loss_fn(self.model(x), y)
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
        parts, sq = [], torch.zeros(len(x), dtype=losses.dtype, device=losses.device)
        for m, go in zip(used, gouts, strict=True):
            if go is None:
                continue
            s, total = _LAYERS[type(m)](m, self._records[m][0], go)
            sq = sq + s
            parts.append(total)
        self._records.clear()
        c = clip_factors(sq, max_grad_norm)
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
    """The clipper for ``mode`` in ``FAST_MODES``. Raises ValueError for another mode or an unsupported model."""
    if mode == "vmap":
        return VmapClipper(model, loss_fn)
    if mode == "bk":
        return BookKeepingClipper(model, loss_fn)
    raise ValueError(f"fast grad_sample_mode {mode!r} not in {FAST_MODES}")


