"""The table builder (hot tables) on synthetic results JSON: well-formed renderings, paper beside ours, checks shown."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from hot.paper import paper_values
from hot.tables import cli
from hot.tables.common import FAIL, PASS, SKIP
from hot.tables.table5 import evaluate

from .helpers import TABLES, check_csv, check_latex, check_markdown


def _metrics(path: Path, top1: float | None, model: str = "vit_tiny_fmnist", epochs: int = 2) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    curve = [
        {"epoch": e + 1, "train_loss": 1.0, "test_loss": 1.0, "top1": (top1 or 0) - (epochs - 1 - e)}
        for e in range(epochs)
    ]
    path.write_text(
        json.dumps(
            {
                "epochs": curve,
                "final_top1": top1,
                "best_top1": top1,
                "wall_time_s": 1.0,
                "peak_memory_bytes": 1,
                "device": "cpu",
                "environment": {},
                "config": {
                    "model": model,
                    "dataset": "fashion_mnist",
                    "classes": [5, 6, 7, 8, 9],
                    "epochs": epochs,
                    "max_train_batches": 30,
                },
            }
        )
    )
    return str(path)


def _memory(path: Path, scale: float = 1.0) -> str:
    fig = paper_values()["memory_figure"]
    rows = [
        {"accounting": "paper", "method": m, **{f"{k}_gb": v * scale for k, v in fig[m].items()}}
        for m in ("fp", "hot_abc")
    ]
    rows.append({"accounting": "paper", "method": "hot", "total_gb": 17.5})
    rows.append({"accounting": "measured", "method": "fp", "total_gb": 99.0})
    path.write_text(json.dumps({"model": "vit_base_patch16_224", "batch_size": 256, "num_classes": 100, "rows": rows}))
    return str(path)


def _build(tmp_path: Path, table: str, inputs: dict[str, str], options: dict | None = None) -> dict:
    out = tmp_path / "tables"
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    argv = [
        table,
        *[f"--input={k}={v}" for k, v in inputs.items()],
        "--options",
        json.dumps(options or {}),
        "--out-dir",
        str(out),
        "--data-out",
        str(tmp_path / f"{table}.json"),
    ]
    if table != "table5":
        argv += ["--figure", str(out / "figures" / f"{table}.png")]
    assert cli.run(parser.parse_args(argv)) == 0
    check_markdown((out / f"{table}.md").read_text())
    check_csv((out / f"{table}.csv").read_text())
    check_latex((out / f"{table}.tex").read_text())
    if table != "table5":
        assert (out / "figures" / f"{table}.png").stat().st_size > 1000
    return json.loads((tmp_path / f"{table}.json").read_text())


def _statuses(data: dict) -> dict[str, str]:
    return {c["name"]: c["status"] for c in data["checks"]}


def test_table1_shows_a_failed_check_and_the_missing_gpu(tmp_path: Path) -> None:
    runs = {
        f"{m}@s0": _metrics(tmp_path / m / "metrics.json", acc)
        for m, acc in (("fp", 90.0), ("hot", 89.5), ("hot_abc", 80.0), ("hot_abc_lqs", 89.9))
    }
    latency = tmp_path / "latency.json"
    latency.write_text(json.dumps({"status": "not measured: no GPU"}))
    data = _build(
        tmp_path,
        "table1",
        {**runs, "memory": _memory(tmp_path / "mem.json"), "latency": str(latency)},
        {"accuracy_margin_pp": 1.0},
    )
    status = _statuses(data)
    assert status["HOT accuracy within 1 pp of FP"] == PASS
    assert status["HOT + ABC accuracy within 1 pp of FP"] == FAIL
    assert status["HOT + ABC backward faster than FP"] == SKIP
    md = (tmp_path / "tables" / "table1.md").read_text()
    assert "✗ FAIL" in md and "not measured: no GPU" in md
    assert "93.20 / 89.50" in md  # the paper's value beside ours
    assert "fashion_mnist[5–9] · vit_tiny_fmnist · 2 ep × ≤30 batches · cpu" in md
    csv_rows = check_csv((tmp_path / "tables" / "table1.csv").read_text())
    assert csv_rows[1]["accuracy_paper"] == "93.20" and csv_rows[1]["accuracy_ours"] == "89.50"
    assert csv_rows[0]["checks"].startswith("FAIL")


def test_table2_gbops_and_rank_claim(tmp_path: Path) -> None:
    paper = paper_values()["table2"]["rows"]
    gbops = tmp_path / "gbops.json"
    gbops.write_text(
        json.dumps(
            {
                "model": "efficientformer_l1",
                "rows": [{"rank": r["rank"], "total_gbops": r["gbops"] * 1.002} for r in paper],
            }
        )
    )
    accs = {16: 80.0, 8: 79.8, 4: 78.0, 2: 75.0, 1: 60.0}
    runs = {
        f"r{r}@s{s}": _metrics(tmp_path / f"r{r}s{s}" / "metrics.json", a + s) for r, a in accs.items() for s in (0, 1)
    }
    data = _build(tmp_path, "table2", {**runs, "gbops": str(gbops)})
    status = _statuses(data)
    assert all(v == PASS for k, v in status.items()), status
    assert data["rows"][0]["accuracy"] == [76.35, 80.5]  # mean of two seeds
    assert "mean of 2 seeds" in " ".join(data["scale"])


def test_table2_rank_claim_fails_when_accuracy_rises(tmp_path: Path) -> None:
    accs = {16: 80.0, 8: 70.0, 4: 75.0, 2: 75.0, 1: 79.0}
    runs = {f"r{r}@s0": _metrics(tmp_path / f"r{r}" / "metrics.json", a) for r, a in accs.items()}
    status = _statuses(_build(tmp_path, "table2", runs))  # no gbops input: those checks fail, not crash
    assert status["accuracy falls as r falls below 8"] == FAIL
    assert status["r=8 within 1 pp of r=16"] == FAIL
    assert status["GBOPs at r=16"] == FAIL


def test_table3_lora_gap(tmp_path: Path) -> None:
    accs = {"f0d0": 90.0, "f0d1": 60.0, "f1d0": 89.8, "f1d1": 85.0}
    runs = {f"{k}@s0": _metrics(tmp_path / k / "metrics.json", a) for k, a in accs.items()}
    status = _statuses(_build(tmp_path, "table3", runs, {"lora_gap_pp": 20}))
    assert list(status.values()) == [PASS, PASS, FAIL]


def test_table4_maps_rows_and_shows_nan(tmp_path: Path) -> None:
    runs = {}
    for model, accs in (("resnet_tiny_fmnist", (90, 80, 88, 85, 89.5)), ("vit_tiny_fmnist", (85, None, 80, 70, 84.8))):
        for m, a in zip(("fp", "int4", "luq", "lbp_wht", "hot"), accs, strict=True):
            runs[f"fmnist/{model}/{m}@s0"] = _metrics(tmp_path / model / m / "metrics.json", a, model)
    data = _build(
        tmp_path,
        "table4",
        runs,
        {"paper_rows": {"fmnist/resnet_tiny_fmnist": "cifar10/resnet18"}, "accuracy_margin_pp": 1.0},
    )
    rows = {r["row"]: r for r in data["rows"]}
    assert rows["fmnist/resnet_tiny_fmnist"]["fp"] == [95.23, 90]
    assert rows["fmnist/vit_tiny_fmnist"]["paper_row"] == "—"  # no paper row of that name
    assert rows["fmnist/vit_tiny_fmnist"]["fp"] == [None, 85]
    assert "NaN" in (tmp_path / "tables" / "table4.md").read_text()
    assert all(c["status"] == PASS for c in data["checks"])
    assert "rows are not reproduced" in data["notes"][0]


def test_table5_formulas() -> None:
    assert evaluate("4*L*I*O", {"L": 49, "I": 1792, "O": 448}) == 4 * 49 * 1792 * 448
    assert evaluate("2*L*O*log2(n)", {"L": 1, "O": 1, "n": 16}) == 8
    with pytest.raises(ValueError):
        evaluate("__import__('os')", {})


def test_table5_builds_with_no_inputs(tmp_path: Path) -> None:
    data = _build(tmp_path, "table5", {})
    assert len(data["rows"]) == 5 and len(data["checks"]) == 2


def test_latency_figure_measured_and_not(tmp_path: Path) -> None:
    lat = tmp_path / "lat.json"
    lat.write_text(json.dumps({"status": "not measured: no GPU"}))
    data = _build(tmp_path, "latency_figure", {"latency": str(lat)})
    assert data["checks"][0]["status"] == SKIP
    assert data["rows"][0]["hot"][1] == "not measured: no GPU"
    rows = [
        {
            "model": r["model"],
            "layer": r["layer"],
            "scale": scale,
            "fp32_us": 100.0 * scale,
            "bf16_us": 30.0 * scale,
            "lbp_wht_us": 90.0,
            "hot_us": 50.0 * scale,
        }
        for r in paper_values()["latency_figure"]["rows"]
        for scale in (1, 128)
    ]
    lat.write_text(json.dumps({"status": "measured", "environment": {"gpu": "NVIDIA H100"}, "rows": rows}))
    data = _build(tmp_path, "latency_figure", {"latency": str(lat)})
    assert data["checks"][0]["status"] == PASS and data["rows"][0]["speedup"][1] == 2.0
    assert "NVIDIA H100" in data["scale"][0]
    assert any("over BF16 is 0.60×" in note for note in data["notes"])


def test_memory_figure_tolerance(tmp_path: Path) -> None:
    assert all(
        c["status"] == PASS
        for c in _build(tmp_path, "memory_figure", {"memory": _memory(tmp_path / "m.json")})["checks"]
    )
    data = _build(tmp_path, "memory_figure", {"memory": _memory(tmp_path / "m.json", scale=1.05)})
    assert all(c["status"] == FAIL for c in data["checks"])


def test_keep_ratio_claims(tmp_path: Path) -> None:
    runs = {"fp@s0": _metrics(tmp_path / "fp" / "m.json", 90.0)}
    for keep, hla, drop in ((0.5, 89.5, 80.0), (0.9, 89.9, 88.0)):
        runs[f"hla_filter/{keep:g}@s0"] = _metrics(tmp_path / f"h{keep}" / "m.json", hla)
        runs[f"grad_dropout/{keep:g}@s0"] = _metrics(tmp_path / f"d{keep}" / "m.json", drop)
    data = _build(tmp_path, "keep_ratio_sweep", runs)
    assert [c["status"] for c in data["checks"]] == [PASS, PASS, SKIP]


def test_missing_runs_are_shown_not_raised(tmp_path: Path) -> None:
    data = _build(tmp_path, "table3", {"f0d0@s0": str(tmp_path / "absent.json")})
    assert all(c["status"] == FAIL for c in data["checks"])
    assert "not run" in (tmp_path / "tables" / "table3.md").read_text()


def test_summary_lists_every_check(tmp_path: Path) -> None:
    inputs = {}
    for table in TABLES:
        data = {
            "title": table,
            "scale": ["x | y"],
            "checks": [
                {"name": f"{table} ok", "status": PASS, "detail": ""},
                {"name": f"{table} bad", "status": FAIL, "detail": "d"},
            ],
        }
        (tmp_path / f"{table}.json").write_text(json.dumps(data))
        inputs[table] = str(tmp_path / f"{table}.json")
    (tmp_path / "k.json").write_text(json.dumps({"status": "not built: no GPU"}))
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    argv = [
        "summary",
        *[f"--input={k}={v}" for k, v in inputs.items()],
        f"--input=kernels={tmp_path / 'k.json'}",
        "--out-dir",
        str(tmp_path / "out"),
    ]
    assert cli.run(parser.parse_args(argv)) == 0
    text = (tmp_path / "out" / "summary.md").read_text()
    check_markdown(text)
    assert f"{len(TABLES)} checks pass, {len(TABLES)} fail" in text
    assert "kernels: not built: no GPU" in text
    assert text.index("✗ FAIL: table1 bad") < text.index("✓ pass: table1 ok")
