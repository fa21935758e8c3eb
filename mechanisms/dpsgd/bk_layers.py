"""Book-keeping's per-layer rules.

(Bu, Wang, Zha, Karypis 2023, "Differentially private optimization on large model at small cost".) From a layer's
recorded input ``a`` and the gradient ``g`` of the loss w.r.t. its output, each record's squared gradient norm over the
layer's parameters, ``(B,)``, and a function ``total(c)`` giving the layer's clipped sum Σ_i c_i g_i for clip factors
``c (B,)``.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# Per-sample conv gradients are computed in blocks of ≤ 1 MiB (large temporaries cost page faults on every step:
# measured ~20 % of a cnn-small step, docs/performance.md) and kept for the clipped sum up to 128 MiB in all.
_BLOCK_FLOATS = 1 << 18
_KEEP_FLOATS = 1 << 25


def _sq(t: torch.Tensor) -> torch.Tensor:
    """Per-sample squared norm of ``(B, ...)`` as ``(B,)`` (one fused reduction)."""
    return torch.linalg.vector_norm(t.reshape(len(t), -1), dim=1).square()


def _linear(m: nn.Linear, a: torch.Tensor, g: torch.Tensor, k: int = 1):
    b = len(a) // k  # records; a record's K views are consecutive rows, summed below as a sequence
    want_w, want_b = m.weight.requires_grad, m.bias is not None and m.bias.requires_grad
    if a.dim() == 2 and k == 1:  # one row per sample: ‖g_i a_iᵀ‖ = ‖g_i‖·‖a_i‖, nothing materialised
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


def _views_first(t: torch.Tensor, k: int) -> torch.Tensor:
    """``(B·K, C, H, W)`` with K consecutive views per record as ``(K, B·C, H, W)``.

    View k of every record in one batch row, the records' channels side by side (a copy only when K > 1).
    """
    b, c = len(t) // k, t.shape[1]
    return t.reshape(b, k, c, *t.shape[2:]).transpose(0, 1).reshape(k, b * c, *t.shape[2:])


def _conv_weight_grads(m: nn.Conv2d, a: torch.Tensor, g: torch.Tensor, k: int = 1) -> torch.Tensor:
    """Per-record weight gradients of a groups-1 Conv2d as one batched convolution.

    Per-record weight gradients ``(B, Cout, Cin·kh·kw)`` of a groups-1 Conv2d from its input ``a (B·K, ...)`` and
    output gradient ``g (B·K, ...)`` (K consecutive views per record), as one batched convolution kernel: the records
    become the conv groups, the K views its batch, over which the weight gradient sums.
    """
    n, cin, cout = a.shape[0], a.shape[1], g.shape[1]
    b = n // k
    kh, kw = m.kernel_size
    if cin == 1 and k == 1:  # W_b = x_b ⋆ g_b: a grouped conv with g_b as a dilated kernel (fastest for 1 channel)
        out = F.conv2d(a.reshape(1, b, *a.shape[2:]), g.reshape(b * cout, 1, *g.shape[2:]),
                       stride=m.dilation, padding=m.padding, dilation=m.stride, groups=b)
        return out[..., :kh, :kw].reshape(b, cout, kh * kw)
    # the weight gradient of the same conv applied with the records folded into groups is per record
    w = a.new_empty(b * cout, cin, kh, kw)
    gw = torch.ops.aten.convolution_backward(
        _views_first(g, k), _views_first(a, k), w, None, list(m.stride), list(m.padding), list(m.dilation),
        False, [0, 0], b, [False, True, False])[1]
    return gw.reshape(b, cout, cin * kh * kw)


def _conv2d(m: nn.Conv2d, a: torch.Tensor, g: torch.Tensor, k: int = 1):
    b = len(a) // k  # records, each with K consecutive views whose gradients add up
    want_w, want_b = m.weight.requires_grad, m.bias is not None and m.bias.requires_grad
    gb = g.sum((2, 3)).reshape(b, k, -1).sum(1) if want_b else None  # (B, Cout) per-record bias gradients
    sq = _sq(gb) if want_b else 0
    blocks: list[torch.Tensor] = []
    if want_w:  # per-record weight gradients in blocks of ≤ _BLOCK_FLOATS: kept, or only their norms
        per = m.weight.numel()
        step = max(1, (_BLOCK_FLOATS if a.device.type == "cpu" else _KEEP_FLOATS) // per)  # GPU: few launches
        keep = b * per <= _KEEP_FLOATS
        norms = []
        for i in range(0, b, step):
            views = slice(i * k, (i + step) * k)
            block = _conv_weight_grads(m, a[views], g[views], k).reshape(-1, per)
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
                    g * c.repeat_interleave(k).view(-1, 1, 1, 1), a, m.weight, None, list(m.stride), list(m.padding),
                    list(m.dilation), False, [0, 0], 1, [False, True, False])[1]
            out[m.weight] = w.view_as(m.weight)
        if want_b:
            out[m.bias] = c @ gb
        return out
    return sq, total


def _norm_layer(m: nn.GroupNorm | nn.LayerNorm, a: torch.Tensor, g: torch.Tensor, k: int = 1):
    b = len(a) // k  # records, each with K consecutive views whose gradients add up
    if isinstance(m, nn.GroupNorm):
        xhat = F.group_norm(a, m.num_groups, eps=m.eps)
        gw = (g * xhat).reshape(b, k, a.shape[1], -1).sum((1, 3))
        gb = g.reshape(b, k, a.shape[1], -1).sum((1, 3))
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


LAYERS = {nn.Linear: _linear, nn.Conv2d: _conv2d, nn.GroupNorm: _norm_layer, nn.LayerNorm: _norm_layer}
