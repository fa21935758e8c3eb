"""What the ``opacus-canary`` observer patches in Opacus during a plug-in's ``fit``.

What the ``opacus-canary`` observer (``attacks.canaries.opacus.observer``) patches in Opacus for the length of a
plug-in's ``fit``, and the parameter-continuity trail it keeps at every private step's boundaries (issue 54).

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from attacks.canaries.opacus.phases import AuditRefused
from bench.core.plain import unwrap
from mechanisms.dpsgd.continuity import ParameterTrail


class OpacusPatches(contextlib.AbstractContextManager):
    """The patches of Opacus and the parameter trail (module docstring).

    A subclass gives ``_rows(x)`` (a training batch reached the model; None: the rows seen so far are dropped) and
    ``_step(opt)`` (the observed ``pre_step``), and calls ``_begin(opt, params)`` where a private step starts.

    Args:
        post: the mechanism's declared post-processing (``mechanisms.post_processing.declared``): the EMA's decay or
            None, its first-iterate convention, the names of the unverified declarations.
    """

    error: AuditRefused | None = None

    def __init__(self, post: tuple[float | None, str, list[str]] = (None, "step", [])) -> None:
        decay, first, unverified = post
        self.ema = None if decay is None else (decay, first)
        self.unverified = tuple(unverified)
        self.trail: ParameterTrail | None = None

    def _rows(self, x: torch.Tensor | None) -> None:
        raise NotImplementedError

    def _step(self, opt: Any) -> bool:
        raise NotImplementedError

    def __enter__(self) -> OpacusPatches:
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer

        self._saved = (GradSampleModule.forward, DPOptimizer.pre_step, DPOptimizer.step, DPOptimizer.zero_grad)
        forward, _, step, zero_grad = self._saved
        obs = self

        def observed_forward(module, *args, **kwargs):
            if torch.is_grad_enabled() and args and isinstance(args[0], torch.Tensor):
                if obs.trail is None:  # the trained module, followed from its first training forward
                    obs.trail = ParameterTrail(unwrap(module), ema=obs.ema, unverified=obs.unverified)
                obs._rows(args[0])
            return forward(module, *args, **kwargs)

        def observed_pre_step(opt, closure=None):
            if obs.error is not None:
                raise obs.error
            try:
                return obs._step(opt)
            except AuditRefused as exc:
                obs.error = exc
                raise

        def observed_step(opt, closure=None):
            out = step(opt, closure)
            if obs.trail is not None and obs.trail.open:  # a private step ended: what it left
                obs.trail.end()
            return out

        def observed_zero_grad(opt, *args, **kwargs):
            obs._rows(None)
            return zero_grad(opt, *args, **kwargs)

        GradSampleModule.forward = observed_forward
        DPOptimizer.pre_step, DPOptimizer.step, DPOptimizer.zero_grad = (observed_pre_step, observed_step,
                                                                          observed_zero_grad)
        return self

    def __exit__(self, *exc: object) -> None:
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer

        GradSampleModule.forward, DPOptimizer.pre_step, DPOptimizer.step, DPOptimizer.zero_grad = self._saved

    def _begin(self, opt: Any, params: list[torch.Tensor]) -> None:
        """A private step of ``opt`` over ``params`` starts: the trail reads what it finds.

        Raises:
            AuditRefused: the previous private step was not seen to end (an optimizer that overrides ``step``).
        """
        if self.trail is None:
            return
        try:
            self.trail.begin(params)
        except RuntimeError:
            raise AuditRefused(f"opacus-canary: the loop's {type(opt).__name__} took a private step that never "
                               "returned through DPOptimizer.step (a subclass that overrides step); the audit reads "
                               "the parameters each step leaves there") from None

    def continuity(self, model: Any = None) -> dict[str, Any] | None:
        """The parameter trail's record of ``model`` (None: the module now), or None without a training forward."""
        if self.trail is None:
            return None
        return self.trail.finish(None if model is None else unwrap(model))
