"""Parameter continuity of an audit run: the model released is the model the private steps produced (issue 54).

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import zlib
from typing import Any

import torch
from torch import nn

__all__ = ["EMA_ROUNDING", "ParameterTrail", "digest", "released_changes"]

EMA_ROUNDING = 8.0  # c in c·u·M·min(T, 1/(1 − d)): the rounding of a float EMA update is at most ~5·u·M per step
MAX_EVENTS = 20  # recorded change events (each with its tensors); any more are counted


def digest(t: torch.Tensor) -> tuple[tuple[int, ...], int]:
    """``(shape, crc32)`` of a tensor's bytes in its own dtype (read on the CPU; no copy of a contiguous CPU tensor)."""
    x = t.detach()
    if x.device.type != "cpu":
        x = x.cpu()
    if not x.is_contiguous():
        x = x.contiguous()
    if x.dtype in (torch.bfloat16, torch.bool) or x.dim() == 0 or x.is_complex():
        x = x.reshape(-1).view(torch.uint8)
    raw = x.numpy()
    return tuple(t.shape), zlib.crc32(raw)


def _tensors(module: nn.Module) -> dict[str, torch.Tensor]:
    """Every named parameter and buffer of ``module`` (buffers prefixed ``buffer:``)."""
    out = {name: p for name, p in module.named_parameters()}
    out.update({f"buffer:{name}": b for name, b in module.named_buffers()})
    return out


def _slots(module: nn.Module) -> list[tuple[str, dict, str]]:
    """``(name, the submodule's _parameters or _buffers, key)`` of every tensor ``_tensors`` names, in its order."""
    names = {id(t): n for n, t in _tensors(module).items()}
    slots, seen = [], set()
    for kind in ("_parameters", "_buffers"):
        for prefix, sub in module.named_modules():
            for key, t in getattr(sub, kind).items():
                name = ("buffer:" if kind == "_buffers" else "") + (f"{prefix}.{key}" if prefix else key)
                if t is not None and id(t) not in seen and names.get(id(t)) == name:
                    seen.add(id(t))
                    slots.append((name, getattr(sub, kind), key))
    return slots


class ParameterTrail:
    """The digests of a trained module at every private step's boundaries (module docstring).

    Args:
        module: the trained module (its innermost one: wrappers add no tensor of their own).
        ema: the declared EMA's ``(decay, first)`` (``mechanisms.post_processing.declared``), or None.
        unverified: the names of declared post-processing taken on the mechanism's word (``pruning``,
            ``quantisation``).
    """

    def __init__(self, module: nn.Module, *, ema: tuple[float, str] | None = None,
                 unverified: tuple[str, ...] = ()) -> None:
        self.module, self.ema_decl, self.unverified = module, ema, unverified
        self.slots = _slots(module)  # where each named tensor lives (read there at every boundary: cheap)
        self.kind: dict[str, str] = {}  # name -> trainable / frozen / buffer, fixed at the first private step
        self.fixed: set[str] = set()  # the names of the tensors no private step updates
        self.last = self._read()  # name -> (digest, dtype, device): the start, then what the last step left
        self.found: dict[str, tuple[Any, torch.dtype, torch.device]] = {}
        self.steps, self.open = 0, False
        self.events: list[dict[str, Any]] = []
        self.more = 0  # change events beyond MAX_EVENTS
        self.notes: list[str] = []
        self.ema: dict[str, torch.Tensor] = {}
        self.peak: dict[str, float] = {}  # the largest |value| of each float tensor's iterates (the EMA's bound)

    def _current(self) -> dict[str, torch.Tensor]:
        """The trained module's named tensors, read from their slots (a tensor put in place of another is seen)."""
        return {n: t for n, where, key in self.slots if (t := where.get(key)) is not None}

    def _read(self) -> dict[str, tuple[Any, torch.dtype, torch.device]]:
        return self._read_of(self._current())

    def _change(self, when: str, names: list[str]) -> None:
        if not names:
            return
        order = {n: i for i, n in enumerate(self.last)}  # the module's order
        if len(self.events) < MAX_EVENTS:
            self.events.append({"when": when, "tensors": sorted(names, key=lambda n: (order.get(n, len(order)), n))})
        else:
            self.more += 1

    @staticmethod
    def _differ(old: dict, new: dict, among: set[str] | None = None) -> list[str]:
        keys = (set(old) | set(new)) if among is None else among
        return [n for n in keys if n not in old or n not in new or old[n][0] != new[n][0]]

    def begin(self, trainable: list[torch.Tensor]) -> None:
        """A private step starts: the parameters it finds must be those the last one left.

        Or, before the first step, those at the start.

        Args:
            trainable: the tensors the private step updates (the optimizer's parameters).

        Raises:
            RuntimeError: the previous private step was never seen to end (an optimizer whose ``step`` was not
                observed).
        """
        if self.open:
            raise RuntimeError("the previous private step was not seen to end")
        if not self.kind:
            ids = {id(p) for p in trainable}
            self.kind = {n: ("buffer" if n.startswith("buffer:") else "trainable" if id(t) in ids else "frozen")
                         for n, t in self._current().items()}
            self.fixed = {n for n, k in self.kind.items() if k != "trainable"}
            if self.ema_decl is not None and self.ema_decl[1] == "initial":
                self._average(first=True)
        self.found = self._read()
        when = "before the first private step" if self.steps == 0 else \
            f"between private steps {self.steps} and {self.steps + 1}"
        self._change(when, self._differ(self.last, self.found))
        self.open = True

    def end(self) -> None:
        """A private step ended: what it left; a tensor it does not update (frozen, a buffer) must not have moved."""
        self.open, self.steps = False, self.steps + 1
        self.last = self._read()
        if self.fixed:
            self._change(f"during private step {self.steps} (not a tensor it updates)",
                         self._differ(self.found, self.last, self.fixed & set(self.found) & set(self.last)))
        if self.ema_decl is not None:
            self._average(first=self.steps == 1 and self.ema_decl[1] == "step")

    def _average(self, *, first: bool) -> None:
        """One step of the declared EMA over the current iterate, in float64 (the first: a copy)."""
        d = self.ema_decl[0] if self.ema_decl else 0.0
        for n, t in self._current().items():
            if not t.is_floating_point():
                continue
            x = t.detach().double()
            self.peak[n] = max(self.peak.get(n, 0.0), float(x.abs().max()) if x.numel() else 0.0)
            if first or n not in self.ema:
                self.ema[n] = x.clone()
            else:
                self.ema[n].mul_(d).add_(x, alpha=1 - d)

    def _same(self, name: str, t: torch.Tensor) -> bool:
        """Whether ``t`` holds exactly the values the last private step left under ``name``.

        A device move noted; a dtype move only where lossless.
        """
        want, dtype, device = self.last[name]
        x = t.detach()
        if x.device != device:
            self.notes.append(f"{name}: moved from {device} to {x.device} (values compared, unchanged by a move)")
        if x.dtype != dtype:
            back = x.to(dtype)
            if not torch.equal(back.to(x.dtype), x):
                return False  # values the trained dtype cannot hold: something was added
            self.notes.append(f"{name}: cast from {dtype} to {x.dtype} (lossless: checked both ways)")
            x = back
        return bool(digest(x) == want)

    def _average_matches(self, name: str, t: torch.Tensor) -> bool:
        """Whether ``t`` is the declared EMA of ``name``'s iterates within the rounding bound (module docstring)."""
        if name not in self.ema:
            return False
        d, x = self.ema_decl[0] if self.ema_decl else 0.0, t.detach().double().cpu()
        dtype = self.last[name][1]
        u = torch.finfo(dtype).eps / 2 if dtype.is_floating_point else 0.0
        bound = EMA_ROUNDING * u * self.peak.get(name, 0.0) * min(self.steps, 1 / (1 - d))
        gap = float((x - self.ema[name].cpu()).abs().max()) if x.numel() else 0.0
        return x.shape == self.ema[name].shape and gap <= bound

    def finish(self, returned: nn.Module | None) -> dict[str, Any]:
        """Compare the returned model with the last private step's output (or with the declared EMA of the iterates).

        And give the record the conformance test reads.

        Args:
            returned: the innermost module the mechanism returned (None: compare the trained module as it is now).

        Returns:
            A JSON-able record with the keys ``steps``, ``tensors`` (``trainable``, ``frozen``, ``buffer``),
            ``changes`` (each ``when`` and ``tensors``), ``more_changes``, ``returned``, ``verified``,
            ``unverified``, ``notes`` and ``released`` (each tensor's shape and CRC-32 as returned:
            ``released_changes`` compares a later copy with it).
        """
        got = _tensors(self.module if returned is None else returned)
        same_module = returned is None or returned is self.module
        averaged = self.ema_decl is not None and self.steps > 0
        changed, declared = [], []
        for n in sorted(set(got) | set(self.last)):
            if n not in got or n not in self.last:
                changed.append(n)
            elif averaged and got[n].is_floating_point():
                if not self._average_matches(n, got[n]):
                    changed.append(n)
            elif not self._same(n, got[n]):
                changed.append(n)
        if changed and self.unverified and set(changed) <= set(self.last) and set(changed) <= set(got):
            declared, changed = changed, []
        trained_now = _tensors(self.module)
        if same_module:
            self._change("after the last private step", changed)
        elif set(got) != set(self.last) or not self._differ(self.last, self._read_of(trained_now)):
            self._change("in the returned module, not the trained one", changed)
        else:
            self._change("after the last private step (returned as a copy)", changed)
        counts = {k: sum(v == k for v in self.kind.values()) for k in ("trainable", "frozen", "buffer")}
        decay, first = self.ema_decl if self.ema_decl else (None, "")
        return {"steps": self.steps, "tensors": counts, "changes": self.events, "more_changes": self.more,
                "returned": "the trained module" if same_module else "another module",
                "verified": [f"EMA (decay {decay:g}, first {first}) of the {self.steps} iterates, within "
                             f"rounding {EMA_ROUNDING:g}·u·M·min(T, 1/(1 − d))"] if averaged and decay else [],
                "unverified": [f"declared {u} of {', '.join(declared)}: not verified" for u in self.unverified]
                if declared else [], "notes": sorted(set(self.notes)),
                "released": {n: [list(d[0]), d[1]] for n, (d, _, _) in self._read_of(got).items()}}

    @staticmethod
    def _read_of(tensors: dict[str, torch.Tensor]) -> dict[str, tuple[Any, torch.dtype, torch.device]]:
        return {n: (digest(t), t.dtype, t.device) for n, t in tensors.items()}


def released_changes(record: dict[str, Any], module: nn.Module) -> dict[str, Any]:
    """``record`` (``ParameterTrail.finish``'s) plus a change if ``module`` differs from what the trail saw returned.

    That change is "after the audit run's training returned": the mechanism's code updated the model outside its loop.
    """
    if not record.get("released"):
        return record
    now = {n: [list(d[0]), d[1]] for n, (d, _, _) in ParameterTrail._read_of(_tensors(module)).items()}
    was = record["released"]
    changed = [n for n in (*was, *(n for n in now if n not in was)) if now.get(n) != was.get(n)]
    if not changed:
        return record
    return {**record, "changes": [*record.get("changes", []), {"when": "after the audit run's training returned",
                                                                "tensors": changed}]}
