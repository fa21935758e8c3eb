"""privbench's own auditors: the run-level check restricted to one kind of evidence each.

privbench's own auditors, each the run-level check (``attacks.analysis.privacy_bugs.check.privacy_bugs``, the decision
behind exit status 3) restricted to one kind of evidence, with its own Bonferroni family: the white-box canaries' valid
ε lower bounds, the black-box canaries', the hidden-state (final model) canaries', the crafted black-box audit's (an
auditor-chosen initial model, ``attacks.canaries.crafted``), the release audits', the conformance tests alone (issue 38:
the run measured against its certified mechanism), and everything together (``privbench``, what a main job decides).
"""

from __future__ import annotations

from collections.abc import Callable

from bench.zoo.api import Auditor, AuditorInput, Verdict, register_auditor

WHITE_BOX = {"dpsgd": ("canary",), "opacus-example": ("opacus-canary",)}
BLACK_BOX = {"dpsgd": ("canary",), "opacus-example": ("opacus-canary",), "dpmix": ("canary",),
             "local-gaussian": ("canary",)}
RELEASE = {"dpmix": ("dpmix-canary",), "local-gaussian": ("local-canary",)}
HIDDEN = {"dpsgd": ("canary-final",), "opacus-example": ("opacus-canary-final",)}
# the crafted black-box audit (attacks.canaries.crafted): DP-SGD only here; the example Opacus loop has the hook
# (examples/opacus_plugin.py) but trains each run alone, calibrating σ every time (~3 s a run: minutes per zoo run)
CRAFTED = {"dpsgd": ("multi-run-crafted",)}
CONFORMANCE = {"dpsgd": ("canary",), "opacus-example": ("opacus-canary",), "dpmix": ("dpmix-canary",),
               "local-gaussian": ("local-canary",)}
ALL = {m: tuple(dict.fromkeys(WHITE_BOX.get(m, ()) + BLACK_BOX.get(m, ()) + RELEASE.get(m, ())
                              + CONFORMANCE.get(m, ()))) for m in CONFORMANCE}


def _keep(records: Callable[[str, object], bool], *, bounds: bool, conformance: bool
          ) -> Callable[[AuditorInput], Verdict]:
    """A judge: the run-level check on the target with only the attack records ``records(name, record)`` keeps.

    Their ε lower bounds (and certified-curve tests) kept where ``bounds``, their conformance tests where
    ``conformance``.
    """

    def judge(inp: AuditorInput) -> Verdict:
        from attacks.analysis.privacy_bugs.check import privacy_bugs

        target = inp.target
        kept = {}
        for name, record in target.attacks.items():
            if not records(name, record):
                continue
            update: dict[str, object] = {}
            if not conformance:
                update["conformance"] = None
            if not bounds:
                update["audit"] = record.audit.model_copy(update={"bounds": [], "one_run": None})
            kept[name] = record.model_copy(update=update)
        if not kept:
            return Verdict(False, None, "no record of this auditor's attacks in the run")
        run = target.model_copy(update={"attacks": kept})
        bugs, _, m = privacy_bugs([run])
        values = [b.lower_bound for b in bugs if b.lower_bound is not None]
        best = max((b.audit.epsilon_lb for b in kept.values() if bounds), default=None)
        if bugs:
            first = bugs[0]
            why = f"{first.attack}: {first.method}" + (f" ({first.test})" if first.test else "")
            return Verdict(True, max(values) if values else best, f"refuted over {m} comparisons: {why}")
        return Verdict(False, best, f"no comparison of {m} refutes the certified ε")

    return judge


def _named(*names: str) -> Callable[[str, object], bool]:
    return lambda name, record: name in names


register_auditor(Auditor(
    name="privbench-whitebox", threat_model="white-box", source="privbench", mechanisms=tuple(WHITE_BOX),
    attacks=WHITE_BOX, judge=_keep(_named("canary-whitebox", "opacus-canary", "opacus-canary-dirac"), bounds=True,
                                   conformance=False),
    description="Dirac gradient canaries scored from every noisy update (Nasr et al. 2023; one-run, Steinke et al. "
                "2023): valid ε lower bounds above the certified ε"))
register_auditor(Auditor(
    name="privbench-blackbox", threat_model="black-box", source="privbench", mechanisms=tuple(BLACK_BOX),
    attacks=BLACK_BOX, judge=_keep(_named("canary"), bounds=True, conformance=False),
    description="input canaries scored by the final model's loss (one-run, Steinke et al. 2023): valid ε lower "
                "bounds above the certified ε"))
register_auditor(Auditor(
    name="privbench-release", threat_model="black-box", source="privbench", mechanisms=tuple(RELEASE),
    attacks=RELEASE, judge=_keep(_named("dpmix-canary", "local-canary"), bounds=True, conformance=False),
    description="canaries through the release itself (DPMix's attained pair; local noise's antipodal pairs): "
                "valid ε lower bounds above the certified ε"))
register_auditor(Auditor(
    name="privbench-hidden-state", threat_model="hidden-state", source="privbench", mechanisms=tuple(HIDDEN),
    attacks=HIDDEN, judge=_keep(_named("canary-final", "opacus-canary-final", "opacus-canary-final-dirac"),
                                bounds=True, conformance=False),
    description="gradient canaries read from θ_T − θ_0 only (Cebere et al. 2024): valid ε lower bounds above the "
                "certified ε"))
register_auditor(Auditor(
    name="privbench-crafted", threat_model="black-box-crafted", source="privbench", mechanisms=tuple(CRAFTED),
    attacks=CRAFTED, judge=_keep(_named("multi-run-crafted"), bounds=True, conformance=False),
    description="R runs from an auditor-chosen initial model with one crafted canary, the final model's outputs only "
                "(Annamalai & De Cristofaro 2024; multi-run): valid ε lower bounds and the certified curve"))
register_auditor(Auditor(
    name="privbench-conformance", threat_model="conformance", source="privbench", mechanisms=tuple(CONFORMANCE),
    attacks=CONFORMANCE, judge=_keep(lambda name, record: True, bounds=False, conformance=True),
    description="the parameters the accountant assumes, measured on the mechanism's own code path in the audit "
                "run and tested against the declared ones, and the certified ε against the declared mechanism's by "
                "the conformance code's own accountants (issues 38, 45; attacks/conformance/)"))
register_auditor(Auditor(
    name="privbench", threat_model="all", source="privbench", mechanisms=tuple(ALL), attacks=ALL,
    judge=_keep(lambda name, record: True, bounds=True, conformance=True),
    description="every audit and conformance test together: what exit status 3 of a main job decides"))
