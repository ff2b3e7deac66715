"""``hot``'s error reporting (hot.cli, hot.errors): one line naming the problem on stderr, exit 2 for bad input and 1
for a failed run, the traceback behind --debug."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hot.cli import main
from hot.errors import exit_code, one_line


def _error_line(capsys: pytest.CaptureFixture[str], command: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith(f"hot {command}: error: "), err
    return lines[-1]


@pytest.mark.parametrize("content", [None, "", '{"runs": {', "[1, 2]"], ids=["missing", "empty", "truncated", "list"])
def test_plan_on_missing_or_bad_json_is_one_line_naming_the_file(tmp_path, capsys, content):
    plan = tmp_path / "plan.json"
    if content is not None:
        plan.write_text(content)
    assert main(["plan", "--plan", str(plan), "--measured", str(tmp_path)]) == 2
    assert str(plan) in _error_line(capsys, "plan")


@pytest.mark.parametrize(
    "content", [None, "", '{"checks": [', '{"rows": []}'], ids=["missing", "empty", "truncated", "not_a_table"]
)
def test_tables_summary_on_missing_or_bad_json_is_one_line_naming_the_file(tmp_path, capsys, content):
    data = tmp_path / "table1.json"
    if content is not None:
        data.write_text(content)
    argv = ["tables", "summary", "--input", f"table1={data}", "--out-dir", str(tmp_path / "out")]
    assert main(argv) == 2
    assert str(data) in _error_line(capsys, "tables")
    assert not (tmp_path / "out" / "summary.md").exists()


@pytest.mark.parametrize("options", ["{", "[1]"])
def test_tables_bad_options_are_bad_input(tmp_path, capsys, options):
    assert main(["tables", "table1", "--options", options, "--out-dir", str(tmp_path)]) == 2
    assert "--options" in _error_line(capsys, "tables")


def test_debug_raises_with_the_traceback(tmp_path):
    with pytest.raises(ValueError, match=r"plan\.json"):
        main(["plan", "--debug", "--plan", str(tmp_path / "plan.json"), "--measured", str(tmp_path)])


def test_a_failed_run_is_exit_1_naming_the_error_type():
    assert exit_code(FloatingPointError("non-finite loss")) == 1 and exit_code(EOFError()) == 1
    assert exit_code(ValueError("x")) == 2 and exit_code(FileNotFoundError(2, "No such file", "x")) == 2
    assert one_line(EOFError()) == "EOFError"
    assert one_line(RuntimeError("CUDA error:\n  out of memory")) == "RuntimeError: CUDA error: out of memory"
    assert one_line(ValueError("lr must be\npositive")) == "lr must be positive"


def test_memory_out_csv_keeps_the_csv(tmp_path, capsys):
    out = tmp_path / "mem.csv"
    args = ["memory", "--model", "resnet18", "--batch-size", "2", "--num-classes", "10", "--image-size", "32"]
    assert main([*args, "--accounting", "paper", "--out", str(out)]) == 0
    assert out.read_text().startswith("accounting,")
    assert json.loads(out.with_suffix(".json").read_text())["command"] == "memory"


def test_memory_bad_input_is_one_line(tmp_path: Path, capsys):
    assert main(["memory", "--model", "resnet18", "--methods", "nope", "--out", str(tmp_path / "m.json")]) == 2
    assert "unknown method/accounting ['nope']" in _error_line(capsys, "memory")
