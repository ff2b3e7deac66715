import json
import math

import pytest

from hot.bench.variant_accuracy import main, parse_variant, summarise


def test_a_variant_is_a_name_and_its_settings():
    assert parse_variant("spec=") == ("spec", [])
    assert parse_variant("fmix32=hot.rounding_hash=fmix32,epochs=2") == (
        "fmix32",
        ["hot.rounding_hash=fmix32", "epochs=2"],
    )
    assert parse_variant("b=exclude=[head, fc],hot.rounding_hash=fmix32") == (
        "b",
        ["exclude=[head, fc]", "hot.rounding_hash=fmix32"],
    )
    for bad in ("spec", "=epochs=2"):
        with pytest.raises(ValueError, match="NAME="):
            parse_variant(bad)


def test_the_summary_is_each_variants_mean_and_spread_and_the_difference_with_its_standard_error():
    summary = summarise({"a": [80.0, 82.0, 84.0], "b": [81.0, 81.0, 84.0]})
    assert summary["a"]["mean"] == 82.0 and summary["a"]["std"] == 2.0
    assert summary["b"]["mean"] == 82.0 and math.isclose(summary["b"]["std"], 3**0.5)
    diff = summary["b"]["minus_a"]
    assert diff["diff_pp"] == 0.0 and math.isclose(diff["standard_error_pp"], ((4 + 3) / 3) ** 0.5)
    assert summarise({"a": [80.0], "b": [81.0]})["b"]["minus_a"] == {"diff_pp": 1.0, "standard_error_pp": None}
    paired = summarise({"a": [80.0], "b": [81.0], "c": [90.0], "d": [92.0]}, {"d": "c"})
    assert paired["b"]["minus_a"]["diff_pp"] == 1.0 and paired["d"]["minus_c"]["diff_pp"] == 2.0
    assert "minus_a" not in paired["c"] and "minus_a" not in paired["d"]  # a reference is compared with nothing


def test_bad_arguments_stop_with_what_is_wrong(tmp_path):
    out = str(tmp_path / "x.json")
    with pytest.raises(SystemExit, match=r"--against names no variant \['z'\]"):
        main([out, "a=", "b=", "--against", "b=z"])
    with pytest.raises(SystemExit, match="--seeds takes a non-negative integer, got 'x'"):
        main([out, "a=", "b=", "--seeds", "x"])
    with pytest.raises(SystemExit, match="at least two variants"):
        main([out, "a="])


def test_two_variants_train_side_by_side_and_report_every_run(tmp_path):
    """The whole path on the CPU: synthetic data, the fake backend, two batches a run; the second variant's option
    reaches its runs (their metrics record the config)."""
    cpu = "device=cpu,hot.backend=fake,synthetic=true,max_train_batches=2,test_subset=64,batch_size=32"
    out = tmp_path / "acc.json"
    main([str(out), "--seeds", "2", "--epochs", "1", f"spec={cpu}", f"fmix32={cpu},hot.rounding_hash=fmix32"])
    result = json.loads(out.read_text())
    assert [(r["variant"], r["seed"], r["returncode"]) for r in result["runs"]] == [
        ("spec", 0, 0), ("spec", 1, 0), ("fmix32", 0, 0), ("fmix32", 1, 0)
    ]  # fmt: skip
    assert all(0 <= r["final_top1"] <= 100 for r in result["runs"])
    assert [r["hot"].get("rounding_hash") for r in result["runs"]] == [None, None, "fmix32", "fmix32"]
    assert all(
        (tmp_path / "acc_runs" / f"{r['variant']}-s{r['seed']}" / "metrics.json").exists() for r in result["runs"]
    )
    assert set(result["summary"]) == {"spec", "fmix32"} and "minus_spec" in result["summary"]["fmix32"]
