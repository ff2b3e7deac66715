import json
import os
import re
import signal
import subprocess
import sys

import pytest
import torch
import yaml

from hot.cli import main
from hot.convert import hot_layers
from hot.train import NonFiniteError, TrainConfig, train
from hot.train import data as data_module
from hot.train import loop as loop_module
from hot.train import progress as progress_module
from hot.train import stopping as stopping_module
from hot.train.models import build_model

TIMES = ("time_s", "step_time_s")
# `hot train` with every step slowed down, so that a test's SIGTERM surely lands mid-epoch.
SLOW_HOT = """
import sys, time
from hot.cli import main
from hot.train import loop

step = loop._Run._step


def slow(*args):
    time.sleep(0.3)
    return step(*args)


loop._Run._step = slow
sys.exit(main(sys.argv[1:]))
"""


def _epochs(metrics: dict) -> list[dict]:
    return [{k: v for k, v in record.items() if k not in TIMES} for record in metrics["epochs"]]


def test_two_step_run_and_resume_after_kill_are_identical(tmp_path, tiny, monkeypatch, capsys):
    # HOT with ABC and LQS (decisions saved and reused), INT8 warm-up, mixup (numpy RNG): everything resume must carry.
    tiny.update(method="hot_abc_lqs", mixup=0.5, cutmix=0.5)
    config_file = tmp_path / "tiny.yaml"
    config_file.write_text(yaml.safe_dump({k: v for k, v in tiny.items() if k != "epochs"}))
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert main(["train", "--out", str(whole), "--config", str(config_file), "--set", "epochs=2"]) == 0
    for name in ("metrics.json", "checkpoint.pt", "model.pt", "lqs.json"):
        assert (whole / name).is_file(), name

    save = loop_module._Run._checkpoint

    def save_then_die(self, *args):
        save(self, *args)
        raise KeyboardInterrupt  # killed right after the first epoch's checkpoint

    monkeypatch.setattr(loop_module._Run, "_checkpoint", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        train(TrainConfig.from_dict(tiny), killed)
    assert not (killed / "metrics.json").exists()
    monkeypatch.setattr(loop_module._Run, "_checkpoint", save)
    capsys.readouterr()
    assert main(["train", "--out", str(killed), "--config", str(config_file), "--set", "epochs=2"]) == 0
    assert f"resuming from {killed / 'checkpoint.pt'}: epoch 1, batch 1 (of 1), step 1\n" in capsys.readouterr().err

    a, b = (json.loads((d / "metrics.json").read_text()) for d in (whole, killed))
    assert _epochs(a) == _epochs(b)
    assert [r["gx_bits"] for r in a["epochs"]] == [8, 4]
    assert a["final_top1"] == b["final_top1"] and a["lqs"] == b["lqs"]
    assert json.loads((whole / "lqs.json").read_text()) == a["lqs"]
    # The patch embedding never computes g_x (its input needs no gradient), so LQS has nothing to decide there.
    assert a["lqs"].pop("patch_embed.proj") is None and set(a["lqs"].values()) <= {"per_token", "per_tensor"}
    wa, wb = (torch.load(d / "model.pt", weights_only=True)["state_dict"] for d in (whole, killed))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    steps = torch.load(killed / "checkpoint.pt", weights_only=True)["model"]["blocks.0.attn.qkv._extra_state"]
    assert steps[0].item() == 2  # one forward per training step; evaluation does not count
    assert a["config"]["method"] == "hot_abc_lqs" and a["environment"]["torch"] == torch.__version__


def test_resume_refuses_another_config(tmp_path, tiny):
    tiny["epochs"] = 1
    train(TrainConfig.from_dict(tiny), tmp_path)
    with pytest.raises(ValueError, match=r"keys \['lr'\] differ.*--no-resume"):
        train(TrainConfig.from_dict({**tiny, "lr": 0.5}), tmp_path)
    assert train(TrainConfig.from_dict({**tiny, "lr": 0.5}), tmp_path, resume=False)["config"]["lr"] == 0.5


def test_lora_trains_adapters_and_head_only(tmp_path, tiny):
    tiny.update(method="lora_hot_frozen", epochs=1, lora={"rank": 2})
    config = TrainConfig.from_dict(tiny)
    torch.manual_seed(config.seed)
    before = build_model(config, 10, 1)
    trainable = {n for n, p in before.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_" in n or ".modules_to_save." in n for n in trainable)
    hot_names = [name for name, _ in hot_layers(before)]
    assert hot_names and all(name.endswith(".base_layer") for name in hot_names)

    metrics = train(config, tmp_path)
    assert metrics["trainable_parameters"] == sum(p.numel() for p in before.parameters() if p.requires_grad)
    after = torch.load(tmp_path / "model.pt", weights_only=True)["state_dict"]
    start = before.state_dict()
    frozen = [k for k in after if k.endswith(".base_layer.weight")]
    adapters = [k for k in after if ".lora_B." in k]
    assert frozen and all(torch.equal(after[k], start[k]) for k in frozen)
    assert any(not torch.equal(after[k], start[k]) for k in adapters)


def test_fine_tuning_starts_from_a_pretraining_run(tmp_path, tiny):
    tiny["epochs"] = 1
    train(TrainConfig.from_dict({**tiny, "classes": [0, 1, 2, 3, 4]}), tmp_path / "pre")
    pre = torch.load(tmp_path / "pre" / "model.pt", weights_only=True)["state_dict"]
    config = TrainConfig.from_dict({**tiny, "classes": [5, 6, 7], "init": str(tmp_path / "pre" / "model.pt")})
    model = build_model(config, 3, 1)
    state = model.state_dict()
    assert torch.equal(state["blocks.1.mlp.fc1.weight"], pre["blocks.1.mlp.fc1.weight"])
    assert state["head.weight"].shape == (3, 64)  # a new head for the new class count
    assert train(config, tmp_path / "fine")["num_classes"] == 3


def test_init_path_must_exist(tiny):
    with pytest.raises(FileNotFoundError, match=r"init: .*missing\.pt"):
        build_model(TrainConfig.from_dict({**tiny, "init": "missing.pt"}), 10, 1)


def test_timm_weights_offline_say_how_to_fetch(tiny):
    # The local cache has no resnet18 weights and the hub is never asked: the error says how to get them.
    config = TrainConfig.from_dict({**tiny, "model": "resnet18", "init": "timm"})
    with pytest.raises(RuntimeError, match="HF_HUB_CACHE"):
        build_model(config, 10, 1)


def _poisoned(monkeypatch, poison):
    build = loop_module.build_model

    def build_and_poison(*args):
        model = build(*args)
        poison(model)
        return model

    monkeypatch.setattr(loop_module, "build_model", build_and_poison)


def test_nan_gradient_names_the_parameter_and_step(tmp_path, tiny, monkeypatch):
    def poison(model):
        model.get_parameter("blocks.1.mlp.fc1.weight").register_hook(lambda g: g * float("nan"))

    _poisoned(monkeypatch, poison)
    with pytest.raises(NonFiniteError, match=r"'blocks\.1\.mlp\.fc1\.weight'.*epoch 1, step 0"):
        train(TrainConfig.from_dict(tiny), tmp_path)


def test_nan_loss_stops_the_run(tmp_path, tiny, monkeypatch):
    _poisoned(monkeypatch, lambda model: model.head.register_forward_hook(lambda mod, args, out: out * float("inf")))
    with pytest.raises(NonFiniteError, match=r"non-finite loss .* epoch 1, step 0"):
        train(TrainConfig.from_dict(tiny), tmp_path)


def test_compiled_training_equals_eager_training(tmp_path, tiny):
    """torch_compile: the same epochs, the same model (aot_eager runs eager's kernels around the HOT ops)."""
    tiny.update(method="hot_abc_lqs", epochs=1)
    eager = train(TrainConfig.from_dict(tiny), tmp_path / "eager")
    compiled = train(TrainConfig.from_dict({**tiny, "torch_compile": "aot_eager"}), tmp_path / "compiled")
    assert _epochs(eager) == _epochs(compiled) and eager["lqs"] == compiled["lqs"]
    wa, wb = (torch.load(tmp_path / d / "model.pt", weights_only=True)["state_dict"] for d in ("eager", "compiled"))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_unknown_torch_compile_backend_is_named():
    with pytest.raises(ValueError, match="torch_compile"):
        TrainConfig(torch_compile="tensorrt")


def _same_run(a_dir, b_dir):
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (a_dir, b_dir))
    assert _epochs(a) == _epochs(b) and a["lqs"] == b["lqs"]
    wa, wb = (torch.load(d / "model.pt", weights_only=True)["state_dict"] for d in (a_dir, b_dir))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.fixture
def six_batches(tiny):
    # Six batches an epoch (mixup drops none), HOT with LQS and mixup (numpy RNG) as state a resume must carry.
    tiny.update(method="hot_abc_lqs", mixup=0.5, cutmix=0.5, batch_size=8, train_subset=48, test_subset=16)
    tiny["max_train_batches"] = None
    return tiny


def test_sigterm_stops_after_a_step_and_the_resume_ends_as_an_uninterrupted_run(tmp_path, six_batches, capsys):
    config_file = tmp_path / "tiny.yaml"
    config_file.write_text(yaml.safe_dump(six_batches))
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    env = {k: v for k, v in os.environ.items() if k != progress_module.PROGRESS_ENV}
    args = ["train", "--out", str(stopped), "--config", str(config_file)]
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_HOT, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    seen = []
    for line in proc.stderr:  # a pipe, not a terminal: progress comes as lines
        seen.append(line)
        if line.startswith("epoch 1/2: batch "):
            proc.send_signal(signal.SIGTERM)
            break
    err = "".join(seen) + proc.stderr.read()  # through the same buffer as the lines above
    assert proc.wait(timeout=300) == 143, err
    assert re.search(r"^epoch 1/2: batch 1/6 \(16%\), loss \d+\.\d{4}, [0-9.e-]+ s/batch$", err, re.M), err
    stop_line = r"^stopped by SIGTERM at (epoch \d, batch (\d) \(of 6\), step \d+); checkpoint: (.*) \("
    found = re.search(stop_line, err, re.M)
    assert found and found[3] == str(stopped / "checkpoint.pt"), err
    saved = torch.load(stopped / "checkpoint.pt", weights_only=True)
    assert saved["epoch"] == 0 and saved["in_epoch"]["batch"] == int(found[2]) < 6  # mid-epoch, as the test meant
    assert not (stopped / "metrics.json").exists()

    capsys.readouterr()
    assert main(args) == 0
    assert f"resuming from {stopped / 'checkpoint.pt'}: {found[1]}\n" in capsys.readouterr().err
    train(TrainConfig.from_dict(six_batches), whole)
    _same_run(whole, stopped)


def test_sigint_mid_epoch_with_in_process_augmentation_resumes_exactly(tmp_path, six_batches, monkeypatch, capsys):
    get, step = data_module.ImageTensorDataset.__getitem__, loop_module._Run._step

    def augmented(self, i):  # draws the global RNG while loading, as CIFAR's augmentation does without workers
        x, y = get(self, i)
        return x + 0.05 * torch.rand(x.shape), y

    def interrupted_at_step_8(self, x, y, epoch, index, global_step):
        loss = step(self, x, y, epoch, index, global_step)
        if global_step == 7:
            os.kill(os.getpid(), signal.SIGINT)
        return loss

    monkeypatch.setattr(data_module.ImageTensorDataset, "__getitem__", augmented)
    config = TrainConfig.from_dict(six_batches)
    train(config, tmp_path / "whole")
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(loop_module._Run, "_step", interrupted_at_step_8)
    with pytest.raises(stopping_module.Stopped) as stop:
        train(config, tmp_path / "stopped")
    assert stop.value.code == 130 and (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    monkeypatch.setattr(loop_module._Run, "_step", step)
    capsys.readouterr()
    train(config, tmp_path / "stopped")
    assert "resuming from " in capsys.readouterr().err  # epoch 2, batch 2 (of 6), step 8
    _same_run(tmp_path / "whole", tmp_path / "stopped")


def test_stale_temporary_checkpoints_are_removed_at_start(tmp_path, tiny, capsys):
    finished = subprocess.Popen(["true"])
    finished.wait()
    stale, live, other = (
        tmp_path / f".checkpoint.pt.tmp{finished.pid}",
        tmp_path / ".checkpoint.pt.tmp1",  # pid 1 always runs
        tmp_path / ".notes.tmpx",
    )
    for path in (stale, live, other):
        path.write_bytes(b"partial")
    train(TrainConfig.from_dict({**tiny, "epochs": 1}), tmp_path)
    assert not stale.exists() and live.exists() and other.exists()
    err = capsys.readouterr().err
    assert f"removed {stale}: a partial write by process {finished.pid}, which no longer runs" in err


def test_progress_lines_every_tenth_of_an_epoch(capsys, monkeypatch):
    monkeypatch.delenv(progress_module.PROGRESS_ENV, raising=False)
    assert progress_module.progress_mode(main=True) == "lines"  # stderr is captured, not a terminal
    progress = progress_module.Progress("lines", 0, 3, 25, 0)
    for done in range(1, 26):
        progress.update(done, 2.5)
    lines = capsys.readouterr().err.splitlines()
    assert [int(re.match(r"epoch 1/3: batch (\d+)/25 ", line)[1]) for line in lines] == [
        3, 5, 8, 10, 13, 15, 18, 20, 23, 25
    ]  # fmt: skip
    monkeypatch.setenv(progress_module.PROGRESS_ENV, "bars")
    with pytest.raises(ValueError, match="HOT_PROGRESS='bars'"):
        progress_module.progress_mode(main=True)


def _cli_train(tmp_path, settings: dict, *extra: str) -> int:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(settings))
    return main(["train", "--out", str(tmp_path / "out"), "--config", str(config), *extra])


def _last_error_line(capsys, command: str = "train") -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"hot {command}: error: "), err
    return line


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"model": "no_such_net"}, "model 'no_such_net' is not a timm model"),
        ({"lr": float("nan")}, "lr must be a positive finite number"),
        ({"classes": [3]}, "classes must name at least two classes"),
        ({"dataset": "cifar10", "data_dir": "__missing__"}, "cifar10"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(tmp_path, tiny, capsys, change, problem):
    if change.get("data_dir") == "__missing__":
        change = {**change, "data_dir": str(tmp_path / "no_data")}
    assert _cli_train(tmp_path, {**tiny, **change}) == 2
    assert problem in _last_error_line(capsys)


def test_cli_set_nan_lr_is_refused(tmp_path, tiny, capsys):
    assert _cli_train(tmp_path, tiny, "--set", "lr=.nan") == 2
    assert "lr must be a positive finite number, got nan" in _last_error_line(capsys)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a CUDA device")
def test_cli_device_cuda_without_one_is_bad_input(tmp_path, tiny, capsys):
    assert _cli_train(tmp_path, {**tiny, "device": "cuda"}) == 2
    assert "torch sees no CUDA device" in _last_error_line(capsys)


def test_cli_changed_config_and_empty_checkpoint_on_resume(tmp_path, tiny, capsys):
    tiny["epochs"] = 1
    assert _cli_train(tmp_path, tiny) == 0
    assert _cli_train(tmp_path, {**tiny, "lr": 0.5}) == 2
    assert "keys ['lr'] differ" in _last_error_line(capsys)
    checkpoint = tmp_path / "out" / "checkpoint.pt"
    checkpoint.write_bytes(b"")
    assert _cli_train(tmp_path, tiny) == 2
    assert f"{checkpoint} is not a readable checkpoint (EOFError" in _last_error_line(capsys)
    assert _cli_train(tmp_path, tiny, "--no-resume") == 0


def test_cli_non_finite_loss_is_a_failed_run_exit_1(tmp_path, tiny, monkeypatch, capsys):
    _poisoned(monkeypatch, lambda model: model.head.register_forward_hook(lambda mod, args, out: out * float("inf")))
    assert _cli_train(tmp_path, tiny) == 1
    line = _last_error_line(capsys)
    assert "NonFiniteError: non-finite loss" in line and "--debug" in line
    with pytest.raises(NonFiniteError):
        _cli_train(tmp_path, tiny, "--debug")


def test_a_fresh_start_removes_an_earlier_runs_results(tmp_path, tiny, monkeypatch):
    """--no-resume: an earlier run's metrics, model and checkpoint go before the new run starts, so a new run that
    fails leaves none of them to be taken for its own."""
    tiny["epochs"] = 1
    out = tmp_path / "out"
    assert train(TrainConfig.from_dict(tiny), out)["hot_backends"] == ["fake"]  # auto, on the CPU
    assert {p.name for p in out.iterdir()} >= {"metrics.json", "model.pt", "checkpoint.pt"}
    _poisoned(monkeypatch, lambda model: model.head.register_forward_hook(lambda mod, args, out: out * float("inf")))
    with pytest.raises(NonFiniteError):
        train(TrainConfig.from_dict(tiny), out, resume=False)
    assert not any((out / name).exists() for name in ("metrics.json", "model.pt", "checkpoint.pt", "lqs.json"))


def test_a_second_run_into_the_same_out_fails_at_once(tmp_path, tiny, capsys):
    import fcntl

    out = tmp_path / "out"
    out.mkdir()
    with open(out / "train.lock", "a") as held:  # what a running hot train holds
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert _cli_train(tmp_path, tiny) == 2
        assert f"another hot train is writing into {out}" in _last_error_line(capsys)
    assert not (out / "metrics.json").exists()
    tiny["epochs"] = 1
    assert _cli_train(tmp_path, tiny) == 0  # released: the next run goes ahead


def test_a_run_sharing_its_gpu_computes_under_the_steps_lock_with_the_same_results(tiny, tmp_path, monkeypatch):
    # Synthetic data draws no augmentation, so making the capped epoch's batches first changes nothing
    tiny.update(train_subset=64, batch_size=16, max_train_batches=2)
    alone = train(TrainConfig(**tiny), tmp_path / "alone")
    held = []
    real = loop_module.steps_alone

    def recording():
        held.append(os.environ.get("HOT_GPU_STEPS_LOCK"))
        return real()

    monkeypatch.setenv("HOT_GPU_STEPS_LOCK", str(tmp_path / "gpu0.steps.lock"))
    monkeypatch.setattr(loop_module, "steps_alone", recording)
    shared = train(TrainConfig(**tiny), tmp_path / "shared")
    assert held == [str(tmp_path / "gpu0.steps.lock")] * tiny["epochs"]  # once an epoch
    assert (tmp_path / "gpu0.steps.lock").exists()
    for key in ("train_loss", "test_loss", "top1"):
        assert [e[key] for e in shared["epochs"]] == [e[key] for e in alone["epochs"]]


def test_evaluation_reads_the_device_once_and_gives_the_per_batch_sums(monkeypatch):
    # The sums stay on the device and are read once: the same float64 additions as per-batch Python floats.
    torch.manual_seed(0)
    net = torch.nn.Linear(6, 5)
    batches = [(torch.randn(n, 6), torch.randint(0, 5, (n,))) for n in (7, 7, 3)]
    run = loop_module._Run.__new__(loop_module._Run)
    run.net, run.device, run.config = net, torch.device("cpu"), TrainConfig(device="cpu")
    run.place = type("Single", (), {"sum": staticmethod(lambda values, device: values)})()
    monkeypatch.setattr(run, "_test_loader", lambda: batches, raising=False)
    reads = []
    item, tolist = torch.Tensor.item, torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "item", lambda t: reads.append("item") or item(t))
    monkeypatch.setattr(torch.Tensor, "tolist", lambda t: reads.append("tolist") or tolist(t))
    loss, top1 = run._evaluate()
    assert reads == ["tolist"]
    monkeypatch.undo()
    expected_loss, expected_correct = 0.0, 0.0
    with torch.no_grad():
        for x, y in batches:
            logits = net(x).float()
            expected_loss += torch.nn.functional.cross_entropy(logits, y, reduction="sum").item()
            expected_correct += (logits.argmax(1) == y).sum().item()
    assert loss == expected_loss / 17 and top1 == 100.0 * expected_correct / 17


def test_a_finished_run_without_keep_checkpoint_leaves_model_and_metrics_only(tmp_path, tiny):
    kept, dropped = tmp_path / "kept", tmp_path / "dropped"
    first = train(TrainConfig(**tiny), kept)
    second = train(TrainConfig(**tiny, keep_checkpoint=False), dropped)
    assert (kept / "checkpoint.pt").is_file() and not (dropped / "checkpoint.pt").exists()
    assert (dropped / "model.pt").is_file()
    assert json.loads((dropped / "metrics.json").read_text())["final_top1"] is not None
    assert _epochs(first) == _epochs(second)  # the same training
    # a checkpoint written with keep_checkpoint true resumes under false (the key changes no result)
    assert _epochs(train(TrainConfig(**tiny, keep_checkpoint=False), kept)) == _epochs(first)
    assert not (kept / "checkpoint.pt").exists()
