"""Running the workflow's snakemake from tests, and checking the well-formedness of rendered tables."""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
from pathlib import Path

from hot.tables import TABLES, WITHOUT_FIGURE

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
FIGURES = tuple(t for t in TABLES if t not in WITHOUT_FIGURE)


def snakemake(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The project's snakemake in the repo root, `hot` on PATH, without any workflow profile (isolated); ``env``:
    variables set for it."""
    env = {**os.environ, **(env or {}), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [str(BIN / "snakemake"), "--workflow-profile", "none", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def check_markdown(text: str) -> None:
    """Every pipe table in the text: a header, a separator, rows of the header's width."""
    lines = text.splitlines()
    assert lines and lines[0].startswith("# "), "no title"
    i = 0
    tables = 0
    while i < len(lines):
        if lines[i].startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(lines[i])
                i += 1
            width = len(_md_cells(block[0]))
            assert len(block) >= 2 and re.fullmatch(r"\|(---\|)+", block[1]), f"bad separator: {block[:2]}"
            assert len(_md_cells(block[1])) == width
            for row in block[2:]:
                assert len(_md_cells(row)) == width, f"row width {len(_md_cells(row))} != {width}: {row}"
            tables += 1
        i += 1
    assert tables >= 1, "no table"


def _md_cells(row: str) -> list[str]:
    assert row.startswith("|") and row.endswith("|"), row
    return re.split(r"(?<!\\)\|", row[1:-1])


def check_csv(text: str) -> list[dict[str, str]]:
    rows = list(csv.reader(io.StringIO(text)))
    assert len(rows) >= 2, "no data rows"
    assert all(len(r) == len(rows[0]) for r in rows), "ragged CSV"
    assert len(set(rows[0])) == len(rows[0]), "duplicate column names"
    return list(csv.DictReader(io.StringIO(text)))


def check_latex(text: str) -> None:
    for env in ("table", "tabular"):
        assert text.count(rf"\begin{{{env}}}") == text.count(rf"\end{{{env}}}") == 1, env
    body = re.sub(r"\\[{}&%$#_]", "", text)  # escaped specials do not count
    depth = 0
    for ch in body:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0, "unbalanced braces"
    assert depth == 0, "unbalanced braces"
    spec = re.search(r"\\begin\{tabular\}\{([lcr]+)\}", text)
    assert spec, "no tabular column spec"
    ncol = len(spec.group(1))
    inside = body.split(r"\begin{tabular}")[1].split(r"\end{tabular}")[0]
    for line in inside.splitlines():
        if line.rstrip().endswith(r"\\") and r"\multicolumn" not in line:
            assert line.count("&") == ncol - 1, f"{line.count('&') + 1} cells, expected {ncol}: {line}"
