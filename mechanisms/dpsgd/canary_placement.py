"""A DP-SGD audit's request for white-box gradient canaries (``GradientCanaries``) and where they go.

The flat coordinates of the trainable parameters that hold a Dirac canary, and the canary-free reference coordinates
that measure the noise the updates really carry (Nasr et al. 2023, "Tight Auditing of Differentially Private Machine
Learning", Dirac canaries; Steinke, Nasr, Jagielski 2023, §6). The canaries' tracking and scores:
``mechanisms.dpsgd.canaries``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class GradientCanaries:
    """A DP-SGD audit run's request: ``count`` Dirac gradient canaries drawn with ``seed``, raw norm ``norm``·C (>= 1).

    ``every_coordinate``: a canary at every trainable coordinate except a random ``REFERENCE_SHARE`` of each parameter
    tensor (at least one per tensor), which is kept free to measure that tensor's noise; ``count`` is then 0 and the
    model fixes how many there are (the default scatternet-linear: 38,707 of 39,700). ``included``: the canaries'
    inclusion, decided by the auditor (a multi-run design: one canary per run, its coin drawn outside the run); None:
    each included with probability ½ by a coin drawn with ``seed`` (one-run). ``public_size``: the record count n from
    which the run's Poisson rate q = 1/⌈n/b⌉, its steps T = epochs·⌈n/b⌉ and its expected batch B = int(n·q) are
    derived, fixed by the auditor before any inclusion coin is drawn (the one-run and multi-run theorems need the
    mechanism independent of the coins: with n = len(training set), adding one input canary could change q, T or B);
    None: the training set's size. ``count`` may be 0 when only ``public_size`` is asked for. ``final_model``: the
    hidden-state threat model (Cebere et al. 2024, "Tighter privacy auditing of DP-SGD in the hidden state threat
    model"; Steinke, Nasr, Jagielski 2023, §6): the canaries are inserted the same way, but scored from θ_T − θ_0 alone
    (``CanaryTracker.final_scores``), never from the intermediate updates.
    """

    count: int
    seed: int
    norm: float = 10.0
    included: tuple[bool, ...] | None = None
    public_size: int | None = None
    every_coordinate: bool = False
    final_model: bool = False

    def __post_init__(self) -> None:
        if self.count < (0 if self.public_size is not None or self.every_coordinate else 1) or self.norm < 1:
            raise ValueError(f"gradient canaries need count >= 1 (>= 0 with a public size) and norm >= 1, got "
                             f"{self.count}, {self.norm}")
        if self.every_coordinate and (self.count or self.included is not None):
            raise ValueError("every_coordinate places the canaries itself: count must be 0 and included None, got "
                             f"{self.count}, {self.included!r}")
        if self.public_size is not None and self.public_size < 1:
            raise ValueError(f"the public size must be >= 1, got {self.public_size}")
        if self.included is not None and len(self.included) != self.count:
            raise ValueError(f"included has {len(self.included)} coins for {self.count} gradient canaries")

    @property
    def active(self) -> bool:
        """Whether the request places any gradient canary."""
        return self.every_coordinate or self.count > 0


REFERENCE_COORDINATES = 1000  # coordinates without a canary, observed to estimate the noise the updates really carry
REFERENCE_SHARE = 0.025  # every_coordinate: the share of each tensor kept free of canaries (at least one coordinate)


def canary_positions(request: GradientCanaries, sizes: list[int], gen: torch.Generator) -> tuple[torch.Tensor, int]:
    """The observed flat coordinates (canaries first, then the canary-free references) and the number of canaries.

    ``count`` canaries: ``count`` + up to ``REFERENCE_COORDINATES`` random coordinates; ``every_coordinate``:
    round(``REFERENCE_SHARE``·s) references per tensor of size s (≥ 1), every other coordinate a canary, shuffled.

    Args:
        request: the audit's request.
        sizes: each trainable tensor's number of coordinates, in the optimizer's order.
        gen: the generator of the random placement (seeded with ``request.seed``).

    Returns:
        ``(flat, m)``: ``(m + refs,)`` int64 flat coordinates of the concatenated parameters, and m, the canaries.

    Raises:
        ValueError: more canaries than coordinates.
    """
    total = sum(sizes)
    if not request.every_coordinate:
        if request.count > total:
            raise ValueError(f"{request.count} gradient canaries need as many coordinates; the model has {total}")
        refs = min(REFERENCE_COORDINATES, total - request.count)
        return torch.randperm(total, generator=gen)[: request.count + refs], request.count
    canaries, refs, start = [], [], 0
    for s in sizes:
        r = s if s == 1 else max(1, min(s - 1, round(REFERENCE_SHARE * s)))
        order = torch.randperm(s, generator=gen) + start
        refs.append(order[:r])
        canaries.append(order[r:])
        start += s
    every = torch.cat(canaries)
    every = every[torch.randperm(every.numel(), generator=gen)]
    return torch.cat([every, *refs]), every.numel()
