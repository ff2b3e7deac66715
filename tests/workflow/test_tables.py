"""The table builder (hot tables) on synthetic results JSON: well-formed renderings, paper beside ours, checks shown."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from hot.commands import tables as cli
from hot.paper import paper_values
from hot.tables import plots
from hot.tables.common import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    REFERENCE_BACKEND_WARNING,
    SKIP,
    RunResult,
    accuracy_below,
    accuracy_within,
    run_result,
    student_t_two_sided,
    t_critical,
)
from hot.tables.table5 import evaluate

from .helpers import TABLES, WITHOUT_FIGURE, check_csv, check_latex, check_markdown


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


def _cell(
    tmp_path: Path, cell: str, top1: float | None, seeds: int = 3, step: float = 0.05, model: str = "vit_tiny_fmnist"
) -> dict[str, str]:
    """One cell's seeds, role to metrics file: final top-1 values ``step`` apart around ``top1`` (None: NaN). Cells of
    the same ``step`` differ by the same amount on every seed, so they are compared unpaired: by default
    u = t(2)·sqrt(2·0.05²/3) = 0.18 pp."""
    return {
        f"{cell}@s{s}": _metrics(
            tmp_path / cell.replace("/", "_") / f"s{s}" / "metrics.json",
            None if top1 is None else top1 + step * (s - (seeds - 1) / 2),
            model,
        )
        for s in range(seeds)
    }


def _result(tmp_path: Path, cell: str, *values: float | None) -> RunResult:
    """One cell read back from metrics files with these per-seed final top-1 values."""
    return run_result([Path(_metrics(tmp_path / cell / f"s{i}" / "metrics.json", v)) for i, v in enumerate(values)])


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
    if table not in WITHOUT_FIGURE:
        argv += ["--figure", str(out / "figures" / f"{table}.png")]
    assert cli.run(parser.parse_args(argv)) == 0
    check_markdown((out / f"{table}.md").read_text())
    check_csv((out / f"{table}.csv").read_text())
    check_latex((out / f"{table}.tex").read_text())
    if table != "table5":
        assert (out / "figures" / f"{table}.png").stat().st_size > 1000
    return json.loads((tmp_path / f"{table}.json").read_text())


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every figure the table builders save, kept for a look at what it draws."""
    saved: list = []
    save = plots._save

    def keep(fig, path: Path) -> None:
        saved.append(fig)
        save(fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    return saved


def _statuses(data: dict) -> dict[str, str]:
    return {c["name"]: c["status"] for c in data["checks"]}


def test_run_result_keeps_the_seeds(tmp_path: Path) -> None:
    result = _result(tmp_path, "hot", 82.7, 83.0, 83.3)
    assert result.values == [82.7, 83.0, 83.3] and result.seeds == 3
    assert result.top1 == pytest.approx(83.0) and result.std == pytest.approx(0.3)
    assert _result(tmp_path, "one", 83.0).std is None


# FP 90.00 ± 0.30 over 3 seeds against ours ± 0.30 over 3 seeds, unpaired: u = t(2)·sqrt(2·0.09/3) = 4.303·0.245
# = 1.05 pp (two seeds' ± 2 SE gave 0.49).
@pytest.mark.parametrize(
    ("ours", "expected"),
    [
        (90.1, PASS),  # d = −0.1: d + u = 0.95 ≤ 1
        (89.6, INCONCLUSIVE),  # d = 0.4: d + u = 1.45 > 1, passing with ± 2 SE
        (89.0, INCONCLUSIVE),  # d = 1.0: −0.05 ≤ 1 < 2.05
        (88.0, INCONCLUSIVE),  # d = 2.0: d − u = 0.95 ≤ 1, failing with ± 2 SE
        (87.5, FAIL),  # d = 2.5: d − u = 1.45 > 1
    ],
)
def test_accuracy_within_margin(tmp_path: Path, ours: float, expected: str) -> None:
    fp = _result(tmp_path, "fp", 89.7, 90.0, 90.3)
    check = accuracy_within("c", _result(tmp_path, "hot", ours - 0.3, ours, ours + 0.3), fp, 1.0, "HOT", "FP")
    assert check.status == expected, check.detail
    assert check.detail.startswith(f"HOT {ours:.2f} ± 0.30 (3 seeds) vs FP 90.00 ± 0.30 (3 seeds): ")
    assert check.detail.endswith(" ± 1.05 (95% t-interval, 2 df); margin 1 pp")


@pytest.mark.parametrize(
    ("ours", "expected"),
    [
        (86.5, PASS),  # d = 3.5: d − u = 2.45 ≥ 2
        (87.0, INCONCLUSIVE),  # d = 3.0: d − u = 1.95 < 2, passing with ± 2 SE
        (89.0, INCONCLUSIVE),  # d = 1.0: d + u = 2.05 ≥ 2, failing with ± 2 SE
        (89.5, FAIL),  # d = 0.5: d + u = 1.55 < 2
    ],
)
def test_accuracy_below_gap(tmp_path: Path, ours: float, expected: str) -> None:
    fp = _result(tmp_path, "fp", 89.7, 90.0, 90.3)
    check = accuracy_below("c", _result(tmp_path, "lora", ours - 0.3, ours, ours + 0.3), fp, 2.0, "LoRA", "FP")
    assert check.status == expected, check.detail
    assert check.detail.endswith(" ± 1.05 (95% t-interval, 2 df); required gap 2 pp")


def test_one_seed_is_inconclusive_and_a_missing_value_fails(tmp_path: Path) -> None:
    fp3 = _result(tmp_path, "fp3", 89.7, 90.0, 90.3)
    fp1 = _result(tmp_path, "fp1", 90.0)
    far = _result(tmp_path, "far", 49.7, 50.0, 50.3)
    for claim in (accuracy_within, accuracy_below):
        check = claim("c", far, fp1, 1.0, "HOT", "FP")  # 40 pp apart, yet one seed gives no spread
        assert check.status == INCONCLUSIVE and check.detail.endswith("spread unknown: 1 seed"), check.detail
        assert "FP 90.00 (1 seed)" in check.detail
        missing = claim("c", run_result([tmp_path / "absent.json"]), fp3, 1.0, "HOT", "FP")
        assert missing.status == FAIL and missing.detail.startswith("no value: HOT not run vs FP 90.00")
        no_data = tmp_path / "no_data.json"
        no_data.write_text(json.dumps({"status": "not run: imagenet1k not found at data/imagenet1k (how to get it)"}))
        skipped = claim("c", run_result([no_data]), fp3, 1.0, "HOT", "FP")  # the data, not the method, was missing
        assert skipped.status == SKIP and "imagenet1k not found" in skipped.detail, skipped.detail
    diverged = _result(tmp_path, "nan", None, None)  # training failed: below any accuracy
    assert accuracy_within("c", fp3, diverged, 1.0, "HOT", "LBP-WHT").status == PASS
    assert accuracy_below("c", diverged, fp3, 20.0, "LoRA", "FP").status == PASS
    assert accuracy_within("c", diverged, fp3, 1.0, "HOT", "FP").status == FAIL


def test_table1_shows_a_failed_check_and_the_missing_gpu(tmp_path: Path) -> None:
    runs = {}
    for m, acc, seeds, step in (("fp", 90.0, 3, 0.2), ("hot", 89.5, 3, 0.4), ("hot_abc", 80.0, 3, 0.2)):
        runs.update(_cell(tmp_path, m, acc, seeds=seeds, step=step))
    runs.update(_cell(tmp_path, "hot_abc_lqs", 89.9, seeds=1))
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
    assert status["HOT + ABC + LQS accuracy within 1 pp of FP"] == INCONCLUSIVE  # one seed: spread unknown
    assert status["HOT + ABC backward faster than FP"] == SKIP
    md = (tmp_path / "tables" / "table1.md").read_text()
    assert "✗ FAIL" in md and "? inconclusive" in md and "not measured: no GPU" in md
    # per-seed differences 0.7, 0.5, 0.3: the t-interval of their mean is ± t(2) · 0.2 / √3 = 4.303 · 0.115
    detail = (
        "HOT 89.50 ± 0.40 (3 seeds) vs FP 90.00 ± 0.20 (3 seeds): "
        "0.50 pp below ± 0.50 (95% t-interval, 2 df, paired by seed)"
    )
    assert detail + "; margin 1 pp" in md
    assert (
        "Verdict: FAIL: memory of HOT + ABC (accounting); HOT + ABC accuracy within 1 pp of FP — 1 inconclusive" in md
    )
    assert "93.20 / 89.50" in md  # the paper's value beside ours
    assert "fashion_mnist[5–9] · vit_tiny_fmnist · 2 ep × ≤30 batches · cpu" in md
    csv_rows = check_csv((tmp_path / "tables" / "table1.csv").read_text())
    assert csv_rows[1]["accuracy_paper"] == "93.20" and csv_rows[1]["accuracy_ours"] == "89.50"
    assert csv_rows[0]["checks"].startswith("FAIL") and csv_rows[0]["checks"].endswith("1 inconclusive")


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
    runs = {}
    for r, a in {16: 80.0, 8: 79.8, 4: 78.0, 2: 75.0, 1: 60.0}.items():
        runs.update(_cell(tmp_path, f"r{r}", a))
    data = _build(tmp_path, "table2", {**runs, "gbops": str(gbops)})
    status = _statuses(data)
    assert all(v == PASS for k, v in status.items()), status
    assert {
        "r=8 within 1 pp of r=16",
        "accuracy does not rise from r=8 to r=4 (noise 0.5 pp)",
        "accuracy does not rise from r=2 to r=1 (noise 0.5 pp)",
        "accuracy falls sharply below r=4 (≥ 2 pp)",
    } <= set(status)
    assert data["rows"][0]["accuracy"] == [76.35, pytest.approx(80.0)]  # mean of three seeds
    assert "mean of 3 seeds" in " ".join(data["scale"])


def test_table2_rank_claim_fails_when_accuracy_rises(tmp_path: Path) -> None:
    runs = {}
    for r, a in {16: 80.0, 8: 70.0, 4: 75.0, 2: 75.0, 1: 79.0}.items():
        runs.update(_cell(tmp_path, f"r{r}", a))
    status = _statuses(_build(tmp_path, "table2", runs))  # no gbops input: those checks fail, not crash
    assert status["accuracy does not rise from r=8 to r=4 (noise 0.5 pp)"] == FAIL
    assert status["accuracy does not rise from r=4 to r=2 (noise 0.5 pp)"] == PASS
    assert status["accuracy does not rise from r=2 to r=1 (noise 0.5 pp)"] == FAIL
    assert status["accuracy falls sharply below r=4 (≥ 2 pp)"] == FAIL
    assert status["r=8 within 1 pp of r=16"] == FAIL
    assert status["GBOPs at r=16"] == FAIL


def test_table2_one_seed_and_no_rank_below_4(tmp_path: Path) -> None:
    runs = {}
    for r, a in {16: 80.0, 8: 70.0, 4: 60.0}.items():
        runs.update(_cell(tmp_path, f"r{r}", a, seeds=1))
    status = _statuses(_build(tmp_path, "table2", runs, {"rank_drop_pp": 5}))
    assert status["r=8 within 1 pp of r=16"] == INCONCLUSIVE  # 10 pp apart, but one seed says nothing of the noise
    assert status["accuracy does not rise from r=8 to r=4 (noise 0.5 pp)"] == INCONCLUSIVE
    assert status["accuracy falls sharply below r=4 (≥ 5 pp)"] == SKIP


def test_table3_lora_gap(tmp_path: Path) -> None:
    runs = {}
    for k, a in {"f0d0": 90.0, "f0d1": 60.0, "f1d0": 89.8}.items():
        runs.update(_cell(tmp_path, k, a))
    runs.update(_cell(tmp_path, "f1d1", 69.9, step=0.6))
    status = _statuses(_build(tmp_path, "table3", runs, {"lora_gap_pp": 20}))
    assert list(status.values()) == [PASS, PASS, INCONCLUSIVE]  # f1d1: 19.90 ± 0.40 pp below, the gap 20 inside


def test_table4_maps_rows_and_shows_nan(tmp_path: Path) -> None:
    runs = {}
    for model, accs in (("resnet_tiny_fmnist", (90, 80, 88, 85, 89.5)), ("vit_tiny_fmnist", (85, None, 80, 70, 84.8))):
        for m, a in zip(("fp", "int4", "luq", "lbp_wht", "hot"), accs, strict=True):
            runs.update(_cell(tmp_path, f"fmnist/{model}/{m}", a, model=model))
    data = _build(
        tmp_path,
        "table4",
        runs,
        {"paper_rows": {"fmnist/resnet_tiny_fmnist": "cifar10/resnet18"}, "accuracy_margin_pp": 1.0},
    )
    rows = {r["row"]: r for r in data["rows"]}
    assert rows["fmnist/resnet_tiny_fmnist"]["fp"] == [95.23, pytest.approx(90)]
    assert rows["fmnist/vit_tiny_fmnist"]["paper_row"] == "—"  # no paper row of that name
    assert rows["fmnist/vit_tiny_fmnist"]["fp"] == [None, pytest.approx(85)]
    assert "NaN" in (tmp_path / "tables" / "table4.md").read_text()
    assert all(c["status"] == PASS for c in data["checks"]), data["checks"]
    assert "fmnist/vit_tiny_fmnist: HOT at least LBP-WHT (within 0.5 pp)" in _statuses(data)
    assert "rows are not reproduced" in data["notes"][0]


def _provenance(
    path: Path, method: str, backend: str | None = None, reason: str | None = None, gpu: bool = False
) -> str:
    """A metrics file that says which backend and GPU computed it (as hot train writes them)."""
    _metrics(path, 80.0)
    metrics = json.loads(path.read_text())
    metrics["config"].update(method=method, hot={"backend": backend} if backend else {})
    if reason:
        metrics["config"]["backend_reason"] = reason
    metrics["device"] = "cuda:0" if gpu else "cpu"
    metrics["environment"] = {"gpu": "NVIDIA H100 80GB HBM3"}  # seen, but used only where device is cuda
    path.write_text(json.dumps(metrics))
    return str(path)


def test_every_table_says_which_backend_and_gpu_computed_its_cells(tmp_path: Path) -> None:
    fallback = "auto: fake, the hot-kernels extension is unusable (not run: no CUDA GPU)"
    runs = {
        "fp@s0": _provenance(tmp_path / "fp.json", "fp"),
        "hot@s0": _provenance(tmp_path / "hot.json", "hot", reason=fallback),
        "hot_abc@s0": _provenance(tmp_path / "abc.json", "hot_abc", reason=fallback),
    }
    data = _build(tmp_path, "table1", runs)
    line = (
        f"cells: {REFERENCE_BACKEND_WARNING} (hot, hot_abc): no quantisation on CPU (fp); "
        f"fake backend ({fallback}) on CPU (hot, hot_abc)"
    )
    assert line in data["scale"]
    assert line in (tmp_path / "tables" / "table1.md").read_text()
    # fake because configured so (no backend_reason): no warning
    fake = {"hot@s0": _provenance(tmp_path / "fake.json", "hot")}
    assert "cells: fake backend on CPU" in _build(tmp_path, "table1", fake)["scale"]
    real = {f"r{r}@s0": _provenance(tmp_path / f"r{r}.json", "hot", "real", gpu=True) for r in (8, 4)}
    data = _build(tmp_path, "table2", real)
    assert data["scale"][-1] == "cells: real backend on NVIDIA H100 80GB HBM3"
    assert "real backend on NVIDIA H100 80GB HBM3" in (tmp_path / "tables" / "table2.csv").read_text()
    data = _build(tmp_path, "table4", {"fmnist/vit_tiny_fmnist/hot@s0": real["r8@s0"]})
    assert data["scale"][-1] == "cells: real backend on NVIDIA H100 80GB HBM3"
    # backend auto (the library's default): what ran, as metrics record it, not the config's "auto"
    auto = json.loads(Path(real["r8@s0"]).read_text())
    auto["config"]["hot"] = {"backend": "auto"}
    auto["hot_backends"] = ["real"]
    (tmp_path / "auto.json").write_text(json.dumps(auto))
    data = _build(tmp_path, "table2", {"r8@s0": str(tmp_path / "auto.json")})
    assert data["scale"][-1] == "cells: real backend on NVIDIA H100 80GB HBM3"


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


def test_latency_figure_draws_the_committed_measurement_where_this_run_has_none(tmp_path: Path, figures: list) -> None:
    paper = paper_values()["latency_figure"]["rows"]
    lat = tmp_path / "lat.json"
    lat.write_text(json.dumps({"status": "not measured: no GPU"}))
    committed = tmp_path / "latency_h100.json"
    rows = [
        {"model": r["model"], "layer": r["layer"], "scale": 1, "fp32_us": 20.0 + i, "hot_us": 70.0 + i}
        for i, r in enumerate(paper)
    ]
    committed.write_text(json.dumps({"status": "measured", "environment": {"gpu": "NVIDIA H100"}, "rows": rows}))
    data = _build(tmp_path, "latency_figure", {"latency": str(lat), "committed_latency": str(committed)})
    # the table and its check are this run's: nothing measured here
    assert data["checks"][0]["status"] == SKIP and data["rows"][0]["hot"][1] == "not measured: no GPU"
    assert any("committed measurement latency_h100.json (NVIDIA H100)" in note for note in data["notes"])
    (ax,) = figures[-1].axes
    handles, labels = ax.get_legend_handles_labels()
    assert labels[2:] == [
        "FP32 (committed latency_h100.json, NVIDIA H100)",
        "HOT (committed latency_h100.json, NVIDIA H100)",
    ]
    assert [bar.get_height() for bar in handles[3]] == [70.0 + i for i in range(len(paper))]
    # a run that measured draws its own numbers, not the committed ones
    lat.write_text(json.dumps({"status": "measured", "environment": {"gpu": "NVIDIA A100"}, "rows": rows[:2]}))
    data = _build(tmp_path, "latency_figure", {"latency": str(lat), "committed_latency": str(committed)})
    assert not any("committed" in note for note in data["notes"])
    labels = figures[-1].axes[0].get_legend_handles_labels()[1]
    assert labels[2:] == ["FP32 (ours, NVIDIA A100)", "HOT (ours, NVIDIA A100)"]


def test_accuracy_curves_are_the_mean_and_spread_of_each_cell(tmp_path: Path, figures: list) -> None:
    runs = {**_cell(tmp_path, "fp", 90.0, step=1.0), **_cell(tmp_path, "hot", 85.0, seeds=1)}
    _build(tmp_path, "table1", runs)
    (ax,) = figures[-1].axes
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["fp (mean ± std, 3 seeds)", "hot (mean, 1 seed)"]  # one entry a cell, not one a seed
    fp_line, hot_line = ax.get_lines()
    # _metrics: epoch e of a run ending at v is v − (2 − e); the seeds end at 89, 90, 91
    assert list(fp_line.get_xdata()) == [1, 2] and list(fp_line.get_ydata()) == pytest.approx([89.0, 90.0])
    assert list(hot_line.get_ydata()) == pytest.approx([84.0, 85.0])
    (band,) = ax.collections  # ± one sample std (1.0) around fp's mean; one seed has no band
    ys = band.get_paths()[0].vertices[:, 1]
    assert min(ys) == pytest.approx(88.0) and max(ys) == pytest.approx(91.0)
    assert plots.mean_curve(_result(tmp_path, "one", 80.0))[-1] == (2, 80.0, None, 1)


def test_table2_figure_is_accuracy_against_rank_beside_the_papers_points(tmp_path: Path, figures: list) -> None:
    paper = paper_values()["table2"]["rows"]
    runs = {}
    for r, a in {16: 80.0, 8: 79.8, 4: 78.0}.items():
        runs.update(_cell(tmp_path, f"r{r}", a, step=0.5))
    _build(tmp_path, "table2", runs)
    (ax,) = figures[-1].axes
    assert ax.get_xscale() == "log" and ax.get_xlabel().startswith("HLA rank")
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["paper (Table 2, efficientformer_l1)", "ours (mean ± std, 3 seeds)"]
    theirs, ours = ax.get_lines()[0], ax.get_lines()[1]
    assert list(theirs.get_xdata()) == sorted(r["rank"] for r in paper)
    assert list(theirs.get_ydata()) == [r["accuracy"] for r in sorted(paper, key=lambda r: r["rank"])]
    assert list(ours.get_xdata()) == [4, 8, 16] and list(ours.get_ydata()) == pytest.approx([78.0, 79.8, 80.0])


def test_memory_figure_tolerance(tmp_path: Path) -> None:
    assert all(
        c["status"] == PASS
        for c in _build(tmp_path, "memory_figure", {"memory": _memory(tmp_path / "m.json")})["checks"]
    )
    data = _build(tmp_path, "memory_figure", {"memory": _memory(tmp_path / "m.json", scale=1.05)})
    assert all(c["status"] == FAIL for c in data["checks"])


def test_keep_ratio_claims(tmp_path: Path) -> None:
    runs = _cell(tmp_path, "fp", 90.0)
    for keep, hla, drop in ((0.5, 89.5, 80.0), (0.9, 89.9, 88.0)):
        runs.update(_cell(tmp_path, f"hla_filter/{keep:g}", hla))
        runs.update(_cell(tmp_path, f"grad_dropout/{keep:g}", drop, step=0.6))
    data = _build(tmp_path, "keep_ratio_sweep", runs)
    assert [c["status"] for c in data["checks"]] == [PASS, PASS, SKIP]
    data = _build(tmp_path, "keep_ratio_sweep", runs, {"dropout_gap_pp": 9.5})  # 9.50 ± 0.18 pp: the gap inside
    assert [c["status"] for c in data["checks"]] == [PASS, INCONCLUSIVE, SKIP]


@pytest.mark.parametrize(
    ("df", "t"),  # Student's t table, two-sided 95 %
    [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (9, 2.262), (29, 2.045), (1000, 1.962)],
)
def test_t_critical_is_students_quantile(df: int, t: float) -> None:
    assert t_critical(df) == pytest.approx(t, abs=5e-4)
    assert student_t_two_sided(t_critical(df), df) == pytest.approx(0.95, abs=1e-9)
    assert student_t_two_sided(1.0, 1) == pytest.approx(0.5)  # Cauchy: P(|T| ≤ 1) = 2·atan(1)/π
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_critical(0)


def test_two_seeds_give_one_degree_of_freedom(tmp_path: Path) -> None:
    """Two seeds leave one degree of freedom: the interval is t(1) = 12.7 standard errors wide, not 2."""
    fp = _cell(tmp_path, "fp", 85.0, seeds=2, step=2.0)  # 84, 86
    hot = _cell(tmp_path, "hot", 83.5, seeds=2, step=2.2)  # 82.4, 84.6: 1.6 and 1.4 pp below FP
    data = _build(tmp_path, "table1", {**fp, **hot}, {"accuracy_margin_pp": 2.0})
    check = next(c for c in data["checks"] if c["name"] == "HOT accuracy within 2 pp of FP")
    assert check["status"] == INCONCLUSIVE, check  # ± 2 SE (0.20) passed it
    assert "1.50 pp below ± 1.27 (95% t-interval, 1 df, paired by seed)" in check["detail"]  # 12.706 · 0.1414 / √2


def test_equal_differences_on_every_seed_are_not_a_zero_spread(tmp_path: Path) -> None:
    """Two seeds 1.50 pp apart on both: a zero spread of the differences is the accuracies' resolution, so the
    seeds are compared unpaired (Welch, min(n) − 1 degrees of freedom)."""
    fp = _cell(tmp_path, "fp", 84.7, seeds=2, step=2.6)  # 83.4, 86.0
    hot = _cell(tmp_path, "hot", 83.2, seeds=2, step=2.6)  # 81.9, 84.5
    data = _build(tmp_path, "table1", {**fp, **hot}, {"accuracy_margin_pp": 2.0})
    check = next(c for c in data["checks"] if c["name"] == "HOT accuracy within 2 pp of FP")
    assert check["status"] == INCONCLUSIVE, check  # ± 2 SE gave "1.50 ± 0.00: pass"
    # u = t(1) · sqrt(1.84²/2 + 1.84²/2) = 12.706 · 1.838
    assert "1.50 pp below ± 23.36 (95% t-interval, 1 df);" in check["detail"]


def test_runs_of_the_same_seeds_are_compared_seed_by_seed(tmp_path: Path) -> None:
    """A seed fixes the initial weights and the batch order: a difference that every seed shows is no noise,
    however much the seeds differ from each other."""
    fp = _cell(tmp_path, "fp", 85.0, seeds=3, step=3.0)  # 82, 85, 88
    hot = _cell(tmp_path, "hot", 84.0, seeds=3, step=2.9)  # 81.1, 84, 86.9: 0.9, 1.0, 1.1 pp below FP
    data = _build(tmp_path, "table1", {**fp, **hot}, {"accuracy_margin_pp": 1.5})
    assert _statuses(data)["HOT accuracy within 1.5 pp of FP"] == PASS
    # ± t(2) · 0.1 / √3
    text = json.dumps(data["checks"], ensure_ascii=False)
    assert "1.00 pp below ± 0.25 (95% t-interval, 2 df, paired by seed)" in text
    # the same numbers without seed names cannot be paired: the seed spread decides
    unpaired = accuracy_within(
        "c", _result(tmp_path, "h", 81.1, 84.0, 86.9), _result(tmp_path, "f", 82.0, 85.0, 88.0), 1.5, "HOT", "FP"
    )
    assert unpaired.status == INCONCLUSIVE and "paired" not in unpaired.detail


def test_hla_blocking_ablation(tmp_path: Path) -> None:
    runs = {**_cell(tmp_path, "fp", 84.0), **_cell(tmp_path, "spatial", 83.5), **_cell(tmp_path, "paper", 65.0)}
    runs.update(_cell(tmp_path, "official", 83.9))
    data = _build(tmp_path, "hla_blocking", runs)
    assert [c["status"] for c in data["checks"]] == [PASS, PASS]
    assert [row["blocking"] for row in data["rows"]][1:] == [
        "4×4 windows of the grid, prefix exact (spatial)",
        "16 consecutive positions (paper)",
        "T & -T consecutive positions (official)",
    ]
    assert data["rows"][2]["top1"] == [None, pytest.approx(65.0)]  # no paper value: the paper leaves it open
    runs.update(_cell(tmp_path, "spatial", 80.0))  # 4 pp below FP, well outside the spread
    assert _build(tmp_path, "hla_blocking", runs)["checks"][0]["status"] == FAIL
    only_spatial = {k: v for k, v in runs.items() if not k.startswith(("paper", "official"))}
    assert _build(tmp_path, "hla_blocking", only_spatial)["checks"][1]["status"] == SKIP


def test_table4_skips_the_lbp_wht_claim_where_it_was_not_run(tmp_path: Path) -> None:
    runs = {**_cell(tmp_path, "fmnist/vit_tiny_fmnist/fp", 80.0), **_cell(tmp_path, "fmnist/vit_tiny_fmnist/hot", 79.8)}
    status = _statuses(_build(tmp_path, "table4", runs, {"accuracy_margin_pp": 1.0}))
    assert status == {
        "fmnist/vit_tiny_fmnist: HOT within 1 pp of FP": PASS,
        "fmnist/vit_tiny_fmnist: HOT at least LBP-WHT (within 0.5 pp)": SKIP,
    }


def test_missing_runs_are_shown_not_raised(tmp_path: Path) -> None:
    data = _build(tmp_path, "table3", {"f0d0@s0": str(tmp_path / "absent.json")})
    assert all(c["status"] == FAIL for c in data["checks"])
    assert "not run" in (tmp_path / "tables" / "table3.md").read_text()


@pytest.mark.parametrize("table", TABLES)
def test_every_table_is_titled_as_hot_tables_names_it(table: str) -> None:
    """One title per table (hot.tables.TABLES): the rendered table's and the workflow report's caption."""
    import importlib

    assert importlib.import_module(f"hot.tables.{table}").build({}, {}).title == TABLES[table]


def test_summary_lists_every_check(tmp_path: Path) -> None:
    inputs = {}
    for table in TABLES:
        data = {
            "title": table,
            "scale": ["x | y"],
            "checks": [
                {"name": f"{table} ok", "status": PASS, "detail": ""},
                {"name": f"{table} bad", "status": FAIL, "detail": "d"},
                {"name": f"{table} noisy", "status": INCONCLUSIVE, "detail": "d"},
                {"name": f"{table} elsewhere", "status": SKIP, "detail": "d"},
                {"name": f"{table} noisier", "status": INCONCLUSIVE, "detail": "d"},
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
    n = len(TABLES)
    assert f"{n} checks pass, {n} fail, {2 * n} inconclusive, {n} skipped" in text
    assert "95% Student's t-interval over the seeds" in text  # what inconclusive means, as the checks decide it
    assert "| [table1](table1.md) | x \\| y | 1 | 1 | 2 | 1 |" in text
    assert "kernels: not built: no GPU" in text
    assert (
        text.index("✗ FAIL: table1 bad") < text.index("? inconclusive: table1 noisy") < text.index("✓ pass: table1 ok")
    )


def _summary(tmp_path: Path, scales: dict[str, list[str]], tests: dict) -> str:
    inputs = []
    for table, scale in scales.items():
        (tmp_path / f"{table}.json").write_text(json.dumps({"title": table, "scale": scale, "checks": []}))
        inputs.append(f"--input={table}={tmp_path / f'{table}.json'}")
    (tmp_path / "tests.json").write_text(json.dumps(tests))
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    argv = ["summary", *inputs, f"--input=kernel_tests={tmp_path / 'tests.json'}", "--out-dir", str(tmp_path / "out")]
    assert cli.run(parser.parse_args(argv)) == 0
    return (tmp_path / "out" / "summary.md").read_text()


def test_summary_says_loudly_where_hot_ran_on_the_reference_backend(tmp_path: Path) -> None:
    fallback = f"cells: {REFERENCE_BACKEND_WARNING} (hot): fake backend (auto: …) on NVIDIA H100"
    tests = {"status": "failed: 1 failed: test_x; log results/logs/kernel_tests.log", "failed_tests": ["a::test_x"]}
    text = _summary(tmp_path, {"table1": ["x", fallback], "table2": ["x", "cells: real backend on GPU"]}, tests)
    warning = f"**{REFERENCE_BACKEND_WARNING}** (kernel tests: {tests['status']}), in table1: "
    assert warning in text and text.index(warning) < text.index("| table |")
    assert f"- kernel tests: {tests['status']}" in text
    text = _summary(tmp_path, {"table2": ["x", "cells: real backend on GPU"]}, {"status": "passed"})
    assert REFERENCE_BACKEND_WARNING not in text
