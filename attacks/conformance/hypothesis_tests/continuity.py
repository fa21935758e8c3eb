"""Parameter continuity: the model released is the model the private steps produced (issue 54).

The accountant's ε covers what the private steps write; an update that no private step makes (an ordinary optimizer
step on the members after the private epochs or between two of them, a module swapped for the trained one) is not
covered, and the released model's privacy is then unbounded. The audit run records a digest of every parameter and
buffer at each private step's boundaries (``mechanisms.dpsgd.continuity.ParameterTrail``); this test reads that
record. Exact: a differing checksum is a change, so the p-value is 0 when any change is unexplained and 1 otherwise,
and a correct mechanism is never flagged (a checksum collision can only hide a change). One test per audit run, fixed
by the design.
"""

from __future__ import annotations

from typing import Any

from attacks.conformance.hypothesis_tests import conformance_record

__all__ = ["CONTINUITY", "continuity_test", "describe_changes"]

CONTINUITY = "parameter continuity (the released model is the private steps' output)"
SHOWN = 4  # tensor names shown per change in the test's name


def describe_changes(changes: list[dict[str, Any]], more: int = 0) -> str:
    """The unexplained changes in words: ``"0.weight, 0.bias changed after the last private step"``.

    Args:
        changes: ``[{"when", "tensors"}]`` in the order seen.
        more: changes beyond those listed.

    Returns:
        One phrase, changes of the same tensors grouped (``"between private steps 3 and 4, 6 and 7"``).
    """
    grouped: dict[tuple[str, ...], list[str]] = {}
    for c in changes:
        grouped.setdefault(tuple(c["tensors"]), []).append(str(c["when"]))
    parts = []
    for tensors, whens in grouped.items():
        names = ", ".join(tensors[:SHOWN]) + (f" and {len(tensors) - SHOWN} more" if len(tensors) > SHOWN else "")
        between = [w.removeprefix("between private steps ") for w in whens if w.startswith("between private steps ")]
        other = [w for w in whens if not w.startswith("between private steps ")]
        when = other + ([f"between private steps {', '.join(between[:3])}" + (" …" if len(between) > 3 else "")]
                        if between else [])
        parts.append(f"{names} changed {'; '.join(when)}")
    return "; ".join(parts) + (f" (and {more} more changes)" if more else "")


def continuity_test(record: dict[str, Any] | None) -> dict[str, Any]:
    """The parameter-continuity conformance test of one audit run.

    Args:
        record: ``ParameterTrail.finish``'s record (None: the run gave none; p = 1 with the reason).

    Returns:
        A ``conformance_record``: quantity ``parameter continuity``, measured the number of unexplained changes
        (tensor × occasion), certified 0; p-value 0 where any, else 1; exact. Its name says which tensors changed
        and when.
    """
    if record is None:
        return conformance_record(CONTINUITY, "parameter continuity", certified=0.0, measured=None, n=0, p_value=1.0,
                                  alternative="greater", validity="exact", reason="the run recorded no digests")
    changes, more = list(record.get("changes") or []), int(record.get("more_changes") or 0)
    count = sum(len(c["tensors"]) for c in changes) + more
    name = CONTINUITY if not count else f"parameter continuity: {describe_changes(changes, more)}"
    tensors = record.get("tensors") or {}
    return conformance_record(name, "parameter continuity", certified=0.0, measured=float(count),
                              n=int(record.get("steps", 0)) * max(sum(int(v) for v in tensors.values()), 1),
                              p_value=0.0 if count else 1.0, alternative="greater", validity="exact",
                              statistic=float(count), changes=changes, returned=record.get("returned"),
                              verified=record.get("verified", []), unverified=record.get("unverified", []),
                              notes=record.get("notes", []), tensors=tensors)
