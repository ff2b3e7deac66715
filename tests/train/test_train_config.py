import pytest

from hot.train import TrainConfig, load_config
from hot.train.recipes import RECIPES


def test_files_merge_left_to_right_then_set(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("model: resnet_tiny_fmnist\nhot: {hla_rank: 4, keep_ratio: 0.7}\nlr: 1e-3\n")
    b.write_text("hot: {hla_rank: 2}\nepochs: 3\n")
    config = load_config([a, b], ["hot.keep_ratio=0.9", "lr=2e-4", "classes=[5, 6]", "amp=true"])
    assert config.model == "resnet_tiny_fmnist" and config.epochs == 3
    assert config.hot == {"hla_rank": 2, "keep_ratio": 0.9}
    assert config.lr == 2e-4 and config.classes == (5, 6) and config.amp is True
    assert config.hot_config().hla_rank == 2


def test_recipe_fills_what_is_not_given():
    config = TrainConfig.from_dict({"recipe": "vit_finetune_official", "model": "vit_base_patch16_224"})
    assert (config.lr, config.eps, config.seed, config.mixup, config.scheduler) == (
        2.5e-5, 1e-11, 2024, 0.8, "cosine_restarts",
    )  # fmt: skip
    assert config.scheduler_args == {"T_0": 20, "T_mult": 2, "eta_min": 1e-6}
    assert TrainConfig.from_dict({"recipe": "vit_finetune_official", "seed": 1}).seed == 1
    # A scheduler given without arguments does not inherit the recipe's scheduler's arguments.
    assert TrainConfig.from_dict({"recipe": "resnet_pretrain", "scheduler": "cosine"}).scheduler_args == {}
    pretrain = TrainConfig.from_dict({"recipe": "resnet_pretrain"})
    assert (pretrain.optimizer, pretrain.lr, pretrain.epochs, pretrain.int8_warmup_epochs) == ("sgd", 0.1, 200, 25)
    assert all(RECIPES[name]["int8_warmup_epochs"] == 25 for name in RECIPES if name.endswith("_pretrain")
               and not name.startswith("embedded"))  # fmt: skip


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"modle": "x"}, r"unknown TrainConfig key\(s\) \['modle'\]"),
        ({"epochs": 0}, "epochs must be an integer >= 1, got 0"),
        ({"lr": "fast"}, "lr must be a positive finite number"),
        ({"dataset": "mnist"}, "dataset must be one of"),
        ({"method": "hot4"}, "method must be one of"),
        ({"recipe": "nope"}, "recipe must be one of"),
        ({"hot": {"hla_rnk": 4}}, r"hot: unknown HOTConfig key\(s\) \['hla_rnk'\]"),
        ({"hot": {"hla_rank": 17}}, "hot: hla_rank must be an integer in 1..16"),
        ({"method": "fp", "hot": {"hla_rank": 4}}, "no effect with method 'fp'"),
        ({"method": "lora_hot_frozen", "lora": {"on_frozen": False}}, "lora.on_frozen=False contradicts"),
        ({"lora": {"rank": 4, "alpah": 8}}, r"unknown lora key\(s\) \['alpah'\]"),
        ({"classes": [1, 1]}, "classes must be distinct"),
        ({"label_smoothing": 1.0}, "label_smoothing must be in"),
        ({"amp": "yes"}, "amp must be true or false"),
        ({"lora": {}, "exclude": ["head"]}, "exclude applies without LoRA only"),
        # wrong shapes are ValueErrors too (not a TypeError inside the check)
        ({"classes": 5}, "classes must be a non-empty list of integer class ids, got 5"),
        ({"exclude": "head"}, "exclude must be a list of module names, got 'head'"),
        ({"lora": 5}, "lora must be null or a mapping"),
    ],
)
def test_invalid_values_name_the_key(values, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig.from_dict(values)


def test_set_needs_key_and_value():
    with pytest.raises(ValueError, match="--set expects KEY=VALUE"):
        load_config([], ["epochs"])
    with pytest.raises(ValueError, match=r"--set epochs=\[1: line 1, column 3: expected ',' or ']'"):
        load_config([], ["epochs=[1"])


def test_methods_map_to_hot_configs():
    assert TrainConfig(method="fp").hot_config() is None
    assert TrainConfig(method="lora").hot_config() is None
    assert TrainConfig(method="hla_filter", hot={"keep_ratio": 0.7}).hot_config().keep_ratio == 0.7
    assert TrainConfig(method="hot_abc_lqs", seed=3).hot_config().seed == 3  # rounding hash follows the run's seed
    both = TrainConfig(method="lora_hot_both").lora_settings()
    assert both["on_frozen"] and both["on_decomposed"] and both["rank"] == 8


def test_cli_reports_config_errors(capsys, tmp_path):
    from hot.cli import main

    assert main(["train", "--out", str(tmp_path), "--set", "epochs=-1"]) == 2
    assert "epochs must be an integer >= 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"epochs: [1, 2\nlr: 3\n", "line 2, column 3: expected ',' or ']', but got ':'"),
        (b"epochs: 1\n\tlr: 3\n", "line 2, column 1: found character '\\t' that cannot start any token"),
        (b"- epochs\n- lr\n", "a config file must hold a mapping of keys, got list"),
        (b"epochs: 1\n\xff\n", "not UTF-8 text (byte 0xff at offset 10)"),
        (b"epochs: 1\n\x01\n", "unacceptable character #x0001 at offset 10"),
        (None, "No such file or directory"),
    ],
)
def test_cli_unreadable_config_file_is_one_line_naming_it(capsys, tmp_path, content, problem):
    from hot.cli import main

    path = tmp_path / "bad.yaml"
    if content is not None:
        path.write_bytes(content)
    assert main(["train", "--out", str(tmp_path / "out"), "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"hot train: error: {path}: {problem}"), err
    assert not (tmp_path / "out").exists()
