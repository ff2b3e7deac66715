"""The workflow's script: files (workflow/scripts/), their decisions tested without Snakemake."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from .helpers import REPO


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"workflow_script_{name}", REPO / "workflow" / "scripts" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


train = _script("train")
kernels = _script("kernels")
kernel_tests = _script("kernel_tests")


def _json(path: Path, **values: object) -> str:
    path.write_text(json.dumps(values))
    return str(path)


def test_a_run_trains_when_its_data_base_run_and_kernels_are_there(tmp_path: Path) -> None:
    data = _json(tmp_path / "data.json", status="ready", found="data")
    base = _json(tmp_path / "base.json", final_top1=80.0)
    tests = _json(tmp_path / "tests.json", status="passed")
    assert train.skip_reason(data) is None
    assert train.skip_reason(data, base, tests) is None


def test_a_run_is_not_attempted_without_its_data_base_run_or_kernels(tmp_path: Path) -> None:
    ready = _json(tmp_path / "ready.json", status="ready")
    reason = "cifar100 not found at data/cifar100 (how to get it: …)"
    missing = _json(tmp_path / "missing.json", status="missing", reason=reason)
    assert train.skip_reason(missing) == f"not run: {reason}"
    base = _json(tmp_path / "base.json", status=f"not run: {reason}")
    assert train.skip_reason(ready, base) == f"not run: the run it starts from did not train (not run: {reason})"
    tests = _json(tmp_path / "tests.json", status="not run: no GPU")
    assert train.skip_reason(ready, None, tests) == "not measured: no GPU"
    failed = _json(tmp_path / "failed.json", status="failed: see the kernel_tests log")
    assert train.skip_reason(ready, None, failed) == "not measured: failed: see the kernel_tests log"


def test_backend_auto_is_real_where_the_kernels_passed_their_tests_else_fake_and_why(tmp_path: Path) -> None:
    settings = json.dumps({"method": "hot", "hot": {"hla_rank": 4}}, sort_keys=True)
    passed = _json(tmp_path / "passed.json", status="passed")
    resolved = json.loads(train.resolve_backend(settings, "auto", passed))
    assert resolved["hot"] == {"hla_rank": 4, "backend": "real"}
    assert resolved["backend_reason"] == "auto: the hot-kernels extension passed its tests"
    no_gpu = _json(tmp_path / "no_gpu.json", status="not run: no CUDA GPU")
    resolved = json.loads(train.resolve_backend(settings, "auto", no_gpu))
    assert resolved["hot"] == {"hla_rank": 4, "backend": "fake"}  # named: HOTConfig's default, auto, would choose
    assert resolved["backend_reason"] == "auto: fake, the hot-kernels extension is unusable (not run: no CUDA GPU)"
    for backend in ("fake", "real"):  # explicit: as configured (real without kernels is skipped by skip_reason)
        assert train.resolve_backend(settings, backend, no_gpu) == settings
    # what the script writes is a config hot train accepts
    from hot.train.config import TrainConfig

    assert TrainConfig.from_dict(resolved).backend_reason == resolved["backend_reason"]


def test_changed_settings_discard_the_checkpoint_unchanged_keep_it(tmp_path: Path) -> None:
    out = tmp_path / "run"
    train.write_settings(out, '{"epochs": 1}')
    (out / "checkpoint.pt").write_bytes(b"ckpt")
    train.write_settings(out, '{"epochs": 1}')
    assert (out / "checkpoint.pt").exists()
    train.write_settings(out, '{"epochs": 2}')
    assert not (out / "checkpoint.pt").exists()
    assert json.loads((out / "settings.json").read_text()) == {"epochs": 2}


@pytest.mark.parametrize("gpus", [0, 1, 4])
def test_a_run_takes_its_gpus_through_hot_slots(tmp_path: Path, gpus: int) -> None:
    argv = train.command(tmp_path, gpus)
    assert argv[: argv.index("--") + 1] == ["hot", "slots", "--gpus", str(gpus), "--job", str(tmp_path), "--"]
    rest = argv[argv.index("--") + 1 :]
    assert rest[-4:] == ["--out", str(tmp_path), "--config", str(tmp_path / "settings.json")]
    if gpus > 1:  # one torchrun job spanning exactly its slots
        assert rest[:5] == [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={gpus}"]
    else:
        assert rest[:2] == ["hot", "train"]


def test_kernels_build_where_a_gpu_is_visible_to_the_job(tmp_path: Path) -> None:
    source = tmp_path / "kernels"
    source.mkdir()
    assert kernels.not_built("auto", source, lambda: True) is None
    assert kernels.not_built("auto", source, lambda: False) == "not built: no GPU"
    assert kernels.not_built("always", source, lambda: False) is None
    assert kernels.not_built("never", source, lambda: True).startswith("not built: disabled in config")
    assert (
        kernels.not_built("auto", tmp_path / "absent", lambda: True)
        == f"not built: no {tmp_path / 'absent'}/ directory"
    )


def test_kernel_tests_run_only_on_a_built_extension_with_a_gpu() -> None:
    assert kernel_tests.not_run("built", lambda: True) is None
    assert kernel_tests.not_run("built", lambda: False) == "not run: no GPU"
    assert kernel_tests.not_run("not built: no GPU", lambda: True) == "not run: no GPU"
