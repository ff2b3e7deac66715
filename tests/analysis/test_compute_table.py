from pathlib import Path

from hot.paper import paper_values
from hot.tables import TABLES, compute

FIGURE = paper_values()["compute_figure"]


def test_compute_table_fp_passes_hot_misses_by_the_gw_gemm(tmp_path: Path) -> None:
    assert "compute" in TABLES
    table = compute.build({}, {}, tmp_path / "compute.png")
    assert (tmp_path / "compute.png").stat().st_size > 0
    status = {check.name: check.status for check in table.checks}
    for row in FIGURE["rows"]:
        assert status[f"FP TBOPs of {row['model']}"] == "pass"
        assert status[f"HOT TBOPs of {row['model']}"] == "FAIL"  # documented: +2.7-3.5% (docs/gbops.md)
    for row, paper in zip(table.rows, FIGURE["rows"], strict=True):
        paper_hot, ours_hot = row["hot"]
        assert paper_hot == paper["hot"] and ours_hot > paper_hot
        assert abs(row["hot_without_gw_gemm"] / paper_hot - 1) < 0.01
        assert row["ratio"][1] == row["fp"][1] / ours_hot
