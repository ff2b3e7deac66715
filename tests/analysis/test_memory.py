import json

import pytest

from hot.analysis import memory
from hot.cli import main
from hot.paper import paper_values
from hot.train.models import create_model

VIT = "vit_base_patch16_224"


def _by_method(rows):
    return {row["method"]: row for row in rows}


@pytest.fixture(scope="module")
def figure_rows():
    figure = paper_values()["memory_figure"]
    return figure, _by_method(memory.paper_accounting(figure["model"], figure["batch_size"], 100, ["fp", "hot_abc"]))


@pytest.mark.parametrize("method", ["fp", "hot_abc"])
@pytest.mark.parametrize("part", ["weight", "gradient", "optimizer", "activation", "total"])
def test_paper_accounting_reproduces_memory_figure(figure_rows, method, part):
    figure, rows = figure_rows
    assert round(rows[method][f"{part}_gb"], 2) == figure[method][part]


def test_table1_is_the_paper_accounting_at_batch_128():
    """Supplement Table 1 states no batch; the authors' ViT-B script uses 128, and only 128 matches both rows."""
    published = {row["method"]: row["memory_gb"] for row in paper_values()["table1"]["rows"]}
    matches = {}
    for batch in (64, 128, 256):
        rows = _by_method(memory.paper_accounting(VIT, batch, 100, ["hot", "hot_abc"]))
        matches[batch] = all(abs(rows[m]["total_gb"] / published[m] - 1) <= 0.03 for m in ("hot", "hot_abc"))
    assert matches == {64: False, 128: True, 256: False}


def test_abc_bytes_per_element_is_half_a_byte():
    assert memory.abc_bytes_per_element(memory.preset("hot_abc")) == 0.5


@pytest.fixture(scope="module")
def resnet_measured():
    return {
        device: _by_method(memory.measured_accounting("resnet18", 2, 10, ["fp", "hot", "hot_abc"], device, 32))
        for device in ("cpu", "meta")
    }


def test_measured_abc_saves_fewer_bytes_than_fp_on_a_vit():
    rows = _by_method(memory.measured_accounting("vit_tiny_patch16_224", 2, 10, ["fp", "hot", "hot_abc"], "cpu"))
    assert rows["hot_abc"]["activation_bytes"] < rows["hot"]["activation_bytes"]
    # Without ABC, HOT keeps what FP keeps plus each layer's hash step (one int64) for its backward.
    layers = 12 * 4 + 2  # per block qkv, proj, fc1, fc2; the patch embedding and the head
    assert rows["hot"]["activation_bytes"] - rows["fp"]["activation_bytes"] == 8 * layers
    assert rows["fp"]["weight_bytes"] == rows["hot_abc"]["weight_bytes"] > 0


def test_measured_abc_on_3x3_convs_keeps_more_than_fp(resnet_measured):
    """ABC packs the im2col-unfolded input: k² = 9 columns per element at half a byte each (docs/memory.md)."""
    rows = resnet_measured["cpu"]
    assert rows["hot_abc"]["activation_bytes"] > rows["fp"]["activation_bytes"]


def test_measured_meta_counts_what_cpu_counts(resnet_measured):
    for method, row in resnet_measured["cpu"].items():
        assert resnet_measured["meta"][method]["activation_bytes"] == row["activation_bytes"]


def test_unknown_model_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(ValueError, match="model 'no_such_net' is not a timm model"):
        create_model("no_such_net", 10)
    out = tmp_path / "m.json"
    assert main(["memory", "--model", "no_such_net", "--out", str(out)]) == 2
    assert "is not a timm model" in capsys.readouterr().err
    assert not out.exists()


def test_cli_writes_json_and_csv_and_says_what_it_counts(tmp_path, capsys):
    out = tmp_path / "mem.json"
    args = ["memory", "--model", "resnet18", "--batch-size", "2", "--num-classes", "10", "--image-size", "32"]
    assert main([*args, "--methods", "fp,hot_abc", "--device", "cpu", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "one training step of 2 image(s); GB = 2^30 bytes" in printed
    assert "paper: the authors' accounting" in printed and "measured: what autograd saves" in printed
    payload = json.loads(out.read_text())
    assert payload["counted"]["per"] == "one training step of 2 image(s)"
    assert {(r["accounting"], r["method"]) for r in payload["rows"]} == {
        (a, m) for a in ("paper", "measured") for m in ("fp", "hot_abc")
    }
    assert payload["environment"]["torch"]
    assert out.with_suffix(".csv").read_text().startswith("accounting,")


def test_measured_under_bf16_autocast_keeps_what_autocast_saves():
    """Under bf16 autocast FP keeps the bf16 casts of each Linear's input and weight; HOT the input's cast
    only (it quantises W from the fp32 parameter), HOT+ABC codes instead."""
    methods = ["fp", "hot", "hot_abc"]
    fp32 = _by_method(memory.measured_accounting("vit_tiny_patch16_224", 2, 10, methods, "cpu"))
    bf16 = _by_method(memory.measured_accounting("vit_tiny_patch16_224", 2, 10, methods, "cpu", autocast="bf16"))
    assert bf16["fp"]["autocast"] == "bf16"
    saved = {method: row["activation_bytes"] for method, row in bf16.items()}
    assert saved["hot_abc"] < saved["hot"] < saved["fp"] < fp32["fp"]["activation_bytes"]


def test_autocast_on_meta_is_an_error():
    with pytest.raises(ValueError, match="meta device has no autocast"):
        memory.measured_accounting("vit_tiny_patch16_224", 2, 10, ["fp"], "meta", autocast="bf16")
    with pytest.raises(ValueError, match="--autocast must be one of"):
        memory.measured_accounting("vit_tiny_patch16_224", 2, 10, ["fp"], "cpu", autocast="fp8")


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--image-size", "-1"),
        ("--image-size", "0"),
        ("--batch-size", "0"),
        ("--num-classes", "0"),
        ("--num-classes", "x"),
    ],
)
def test_cli_refuses_bad_numbers_naming_the_flag(tmp_path, capsys, monkeypatch, flag, value):
    def no_model(*args, **kwargs):
        raise AssertionError("a model was built")

    monkeypatch.setattr(memory, "create_model", no_model)
    out = tmp_path / "m.json"
    with pytest.raises(SystemExit) as stopped:
        main(["memory", "--model", "resnet18", flag, value, "--out", str(out)])
    assert stopped.value.code == 2
    assert f"argument {flag}: must be a positive integer, got " in capsys.readouterr().err
    assert not out.exists()


def test_cli_image_size_the_model_cannot_take_is_one_line(tmp_path, capsys):
    out = tmp_path / "m.json"
    args = ["memory", "--model", "vit_tiny_patch16_224", "--image-size", "32", "--batch-size", "1"]
    assert main([*args, "--accounting", "paper", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--image-size 32 does not fit vit_tiny_patch16_224" in err, err
    assert not out.exists()


def test_help_states_the_defaults_and_what_is_counted(capsys):
    with pytest.raises(SystemExit):
        main(["memory", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for expected in ("(default: 256)", "(default: paper,measured)", "(default: meta)", "GB = 2^30 bytes"):
        assert expected in text
