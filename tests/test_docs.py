"""The first screen and the files beside it: install lines, the presets named where they are listed, the licence and
citation, performance sentences from committed measurements, and no wording about the project's own history."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "lib"))
import config_schema

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
LATENCY = REPO / "kernels" / "results" / "latency_h100.json"
# What a user reads: the README, the docs, the configs and the files that explain the workflow and the environment.
USER_TEXT = sorted(
    {
        README,
        REPO / "config.yaml",
        REPO / "Snakefile",
        REPO / "tasks.sh",
        REPO / "paper_tables" / "README.md",
        REPO / "paper_tables" / "reference" / "README.md",
        *REPO.glob("docs/*.md"),
        *REPO.glob("config/*"),
        *REPO.glob(".test/config/*"),
        *REPO.glob("envs/*.sh"),
        *REPO.glob("docker/*"),
        *REPO.glob("profiles/**/*.yaml"),
        *REPO.glob("workflow/**/*.smk"),
        *REPO.glob("workflow/schemas/*.yaml"),
    }
)


def _words(text: str) -> str:
    """Line breaks as spaces, so that a sentence matches however it is wrapped."""
    return " ".join(text.split())


def _first_screen() -> str:
    """The README up to its library section."""
    text = README.read_text(encoding="utf-8")
    return text[: text.index("## Use HOT in your own training")]


def test_first_screen_installs_the_library_and_the_kernels_and_names_the_two_commands() -> None:
    screen = _first_screen()
    assert re.search(r"^pip install -e \.\s", screen, re.M)
    # the kernels build against the installed torch: the line kernels/pyproject.toml and setup.py prescribe
    kernels_line = "pip install --no-build-isolation ./kernels"
    assert kernels_line in (REPO / "kernels" / "pyproject.toml").read_text()
    assert kernels_line in (REPO / "kernels" / "setup.py").read_text()
    assert kernels_line in screen
    assert "bash tasks.sh main" in screen and "bash tasks.sh test" in screen
    assert "snakemake --cores" in screen and "docker run" in screen
    assert 'backend="auto"' in screen  # what the default backend does, before any code


@pytest.mark.parametrize("path", USER_TEXT, ids=lambda p: str(p.relative_to(REPO)))
def test_no_development_log_wording(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for pattern in (
        r"\(issue\b",  # "(issue: faster than bf16)"
        r"\bissue \d+",  # "for issue 14"
        r"\bcalls? (?:\w+ ){0,6}failed",  # "every device call of the last four sessions failed"
        r"\b(?:GPU|device) call",
        r"\bthe session\b|\blast \w+ sessions\b|\bfor \w+ sessions\b",
        r"when it was written",
        r"previous measurement",
        r"[Bb]efore this change",
    ):
        found = re.search(pattern, text)
        assert found is None, f"{path.relative_to(REPO)}: {text[max(0, found.start() - 60) : found.end() + 60]!r}"


@pytest.mark.parametrize("path", USER_TEXT, ids=lambda p: str(p.relative_to(REPO)))
def test_every_test_file_cited_exists(path: Path) -> None:
    for cited in re.findall(r"\btests/[\w/]+\.py\b", path.read_text(encoding="utf-8")):
        assert (REPO / cited).is_file(), f"{path.relative_to(REPO)} cites {cited}, which does not exist"


def test_every_preset_is_listed_where_presets_are_listed() -> None:
    presets = set(config_schema.presets())
    assert presets >= {"full", "embedded", "gpu", "smoke", "smoke_cpu"}
    line = next(line for line in (REPO / "config.yaml").read_text().splitlines() if line.startswith("preset:"))
    listed = line.split("#", 1)[1].split(":", 1)[0]
    assert {name.strip() for name in listed.split("|")} == presets
    guide = (REPO / "config" / "README.md").read_text(encoding="utf-8")
    rows = [row for row in guide.splitlines() if row.startswith("| `")]
    assert {re.match(r"\| `(\w+)`", row).group(1) for row in rows} == presets
    for row in rows:
        cost = row.rstrip(" |").rsplit(" | ", 1)[1]
        assert re.search(r"\d+(\.\d+)? min|not measured", cost), f"no cost, measured or 'not measured': {row}"


def test_licence_is_the_one_pyproject_declares() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "Copyright (c) 2026 the hot authors" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text


def test_citation_cites_this_software_and_the_paper() -> None:
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["license"] == project["license"] and str(cff["version"]) == project["version"]
    assert cff["authors"] == [{"name": "the hot authors"}]
    paper = cff["preferred-citation"]
    assert paper["title"] == "HOT: Hadamard-based Optimized Training" and paper["year"] == 2025
    assert [a["family-names"] for a in paper["authors"]] == ["Kim", "Shin", "Woo", "Park"]
    assert "CVPR" in paper["conference"]["name"]
    assert paper["url"] == "https://arxiv.org/abs/2503.21261"


def _latency_rows(scale: int) -> list[dict]:
    return [r for r in json.loads(LATENCY.read_text())["rows"] if r["scale"] == scale]


def _range(values: list[float]) -> str:
    return f"{min(values):.0f}–{max(values):.0f}"


def test_readme_latency_table_is_the_committed_measurement() -> None:
    """Each row of the README's per-layer table: the shape and the µs of kernels/results/latency_h100.json."""
    measured = {(r["layer"], r["L"], r["O"], r["I"]): r for r in _latency_rows(128) if r["model"].startswith("vit")}
    rows = re.findall(
        r"^\| (\w+) \((\d+), (\d+), (\d+)\) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|", README.read_text(), re.M
    )
    assert len(rows) == 4
    for layer, L, O, I, fp32, bf16, lbp, hot in rows:  # noqa: E741 (the paper's names)
        r = measured[(layer, int(L), int(O), int(I))]
        want = (round(r["fp32_us"]), round(r["bf16_us"]), round(r["lbp_wht_us"]), round(r["hot_us"]))
        assert (int(fp32), int(bf16), int(lbp), int(hot)) == want


def _ratio_range(values: list[float]) -> str:
    return f"{min(values):.2f}–{max(values):.2f}×"


def test_readme_speed_sentences_state_the_shapes_of_the_committed_measurement() -> None:
    """At the paper's per-sample shapes the README names how many layers HOT beats fp32 on, with the measured
    ratios and ranges, and states the 128x ratios from the same file."""
    per_sample = _latency_rows(1)
    assert len(per_sample) == 16
    faster = [r["fp32_us"] / r["hot_us"] for r in per_sample if r["hot_us"] < r["fp32_us"]]
    slower = [r["fp32_us"] / r["hot_us"] for r in per_sample if r["hot_us"] >= r["fp32_us"]]
    stated = f"HOT {_range([r['hot_us'] for r in per_sample])} µs, fp32 {_range([r['fp32_us'] for r in per_sample])} µs"
    text = _words(README.read_text(encoding="utf-8"))
    assert text.count(stated) == 2, stated  # the first screen and the kernels' section
    first = _words(_first_screen())
    assert f"is faster than fp32 on {len(faster)} of the 16 layers" in first
    assert f"{_ratio_range(faster)}) and slower on the other {len(slower)}" in first
    assert f"({_ratio_range(slower)}; {stated})" in first
    vit = [r["fp32_us"] / r["hot_us"] for r in _latency_rows(128) if r["model"].startswith("vit")]
    assert text.count(f"{min(vit):.1f}–{max(vit):.1f}× faster than fp32") == 2
    assert "beats fp32" not in text


def test_readme_states_the_gpu_time_of_the_committed_measurement() -> None:
    """The README's launch-hidden (device) times at the paper's shapes are the committed file's, and so is the count
    of layers where HOT beats fp32 by that measure."""
    per_sample = _latency_rows(1)

    def spread(key: str) -> str:
        return f"{min(r[key] for r in per_sample):.1f}–{max(r[key] for r in per_sample):.1f} µs"

    faster = sum(r["hot_device_us"] < r["fp32_device_us"] for r in per_sample)
    stated = (
        f"HOT takes {spread('hot_device_us')}, fp32 {spread('fp32_device_us')} and bf16 {spread('bf16_device_us')}, "
        f"and HOT is faster than fp32 on {faster} layers"
    )
    assert stated in _words(README.read_text(encoding="utf-8")), stated
    quantiser = [r["hot.hq_quant_w_device_us"] for r in per_sample]
    assert f"W's quantiser takes {min(quantiser):.0f}–{max(quantiser):.0f} µs" in _words(README.read_text())


def test_every_gpu_named_in_a_readme_measurement_has_a_committed_result() -> None:
    """A timing quoted from a GPU stands on a file of kernels/results/ measured on that GPU."""
    gpus = {json.loads(p.read_text()).get("environment", {}).get("gpu") for p in REPO.glob("kernels/results/*.json")}
    gpus |= {json.loads(p.read_text()).get("gpu") for p in REPO.glob("kernels/results/*.json")}
    for named in set(re.findall(r"\((?:NVIDIA )?([HB]\d{3})\)", README.read_text())):  # "38.9 ms (H200)"
        assert any(gpu and named in gpu for gpu in gpus), f"README quotes a measurement on {named}: none is committed"
