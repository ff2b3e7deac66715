"""``paper_tables/summary.md``: every table's checks in one page, failed ones first in each table's list."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..results import load_json
from .common import FAIL, INCONCLUSIVE, PASS, REFERENCE_BACKEND_WARNING, SKIP, read_json
from .render import STATUS_MARK

ORDER = {FAIL: 0, INCONCLUSIVE: 1, PASS: 2, SKIP: 3}  # the order of the counts and of each table's list


def markdown(inputs: Mapping[str, Path]) -> str:
    """Roles: one table data JSON per table (role = table name); ``kernels`` and ``kernel_tests`` status JSON."""
    tables = {role: load_json(path) for role, path in inputs.items() if role not in ("kernels", "kernel_tests")}
    for role, data in tables.items():
        if not isinstance(data, dict) or not isinstance(data.get("checks"), list):
            raise ValueError(f"{inputs[role]}: not a table's data JSON (hot tables --data-out), for role {role!r}")
    counts = {status: 0 for status in ORDER}
    for data in tables.values():
        for check in data["checks"]:
            counts[check["status"]] = counts.get(check["status"], 0) + 1
    lines = [
        "# Reproduction summary",
        "",
        f"{counts[PASS]} checks pass, {counts[FAIL]} fail, {counts[INCONCLUSIVE]} inconclusive, {counts[SKIP]} skipped "
        "(inconclusive: the margin lies inside the accuracy difference's 95% Student's t-interval over the seeds, or "
        "only one seed was run; skipped: the measurement needs hardware this run did not have, or lies outside the "
        "sweep).",
        "",
    ]
    status = {role: _status(inputs[role]) for role in ("kernels", "kernel_tests") if role in inputs}
    fallback = [name for name, data in tables.items() if any(REFERENCE_BACKEND_WARNING in s for s in data["scale"])]
    if fallback:
        why = f" (kernel tests: {status['kernel_tests']})" if "kernel_tests" in status else ""
        lines += [
            f"**{REFERENCE_BACKEND_WARNING}**{why}, in {', '.join(fallback)}: their HOT cells are the reference's "
            "numbers, not the kernels' (`backend: auto` fell back; `backend: real` would not train them).",
            "",
        ]
    lines += [f"- {role.replace('_', ' ')}: {text}" for role, text in status.items()]
    lines += ["", "| table | reproduced at | pass | fail | inconclusive | skipped |", "|---|---|---|---|---|---|"]
    for name, data in tables.items():
        c = [sum(1 for k in data["checks"] if k["status"] == s) for s in (PASS, FAIL, INCONCLUSIVE, SKIP)]
        scale = "; ".join(data["scale"]).replace("|", "\\|")
        lines.append(f"| [{name}]({name}.md) | {scale} | {c[0]} | {c[1]} | {c[2]} | {c[3]} |")
    for data in tables.values():
        lines += ["", f"## {data['title']}", ""]
        for check in sorted(data["checks"], key=lambda k: ORDER.get(k["status"], len(ORDER))):
            mark = STATUS_MARK.get(check["status"], f"– {check['status']}")
            lines.append(f"- {mark}: {check['name']} — {check['detail']}")
    return "\n".join(lines) + "\n"


def _status(path: Path) -> str:
    status = read_json(path)
    return status if isinstance(status, str) else str(status.get("status", "?"))
