"""The workflow's script: files (workflow/scripts/), their decisions tested without Snakemake."""

from __future__ import annotations

import importlib.util
import json
import subprocess
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


def test_backend_auto_is_real_where_the_kernels_passed_their_tests_else_fake_and_why(tmp_path: Path) -> None:
    settings = json.dumps({"method": "hot", "hot": {"hla_rank": 4}}, sort_keys=True)
    passed = _json(tmp_path / "passed.json", status="passed")
    resolved = json.loads(train.resolve_backend(settings, "auto", passed))
    assert resolved["hot"] == {"hla_rank": 4, "backend": "real"}
    assert resolved["backend_reason"] == "auto: the hot-kernels extension passed its tests"
    no_gpu = _json(tmp_path / "no_gpu.json", status="not run: no CUDA GPU")
    resolved = json.loads(train.resolve_backend(settings, "auto", no_gpu))
    assert resolved["hot"] == {"hla_rank": 4}  # fake: HOTConfig's default
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


_KERNEL_TESTS = """
import pytest

def test_fine():
    assert True

def test_broken():
    assert 1 == 2

class TestGroup:
    def test_raises(self):
        raise ValueError("bad binding")

@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    assert n == 1
"""


def test_failed_kernel_tests_are_named_from_pytests_junit_xml_and_log(tmp_path: Path) -> None:
    """pytest's own JUnit XML and short summary, for a session with three failures among five tests."""
    (tmp_path / "test_gemm.py").write_text(_KERNEL_TESTS)
    junit = tmp_path / "junit.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", str(tmp_path / "test_gemm.py"),
         f"--junitxml={junit}"], capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout
    expected = ["test_gemm::test_broken", "test_gemm::TestGroup::test_raises", "test_gemm::test_param[2]"]
    assert kernel_tests.failed_from_junit(junit) == expected
    assert kernel_tests.failed_from_junit(tmp_path / "absent.xml") is None
    from_log = kernel_tests.failed_from_log(done.stdout)
    assert sorted(from_log) == sorted(["test_gemm.py::test_broken", "test_gemm.py::TestGroup::test_raises",
                                       "test_gemm.py::test_param[2]"])  # fmt: skip
    status = kernel_tests.failure_status(expected, 1, "results/logs/kernel_tests.log")
    assert status == "failed: 3 failed: test_broken, test_raises, test_param[2]; log results/logs/kernel_tests.log"
    status = kernel_tests.failure_status([*expected, "test_gemm::test_more"], 1, "k.log")
    assert status == "failed: 4 failed: test_broken, test_raises, test_param[2], and 1 more; log k.log"
    assert kernel_tests.failure_status([], 2, "k.log") == (
        "failed: pytest exited with 2, no test reported failing; log k.log"
    )


def test_a_run_that_waits_for_failed_kernel_tests_names_them(tmp_path: Path) -> None:
    ready = _json(tmp_path / "ready.json", status="ready")
    status = "failed: 2 failed: test_a, test_b; log results/logs/kernel_tests.log"
    failed = _json(tmp_path / "failed.json", status=status, failed_tests=["x::test_a", "x::test_b"])
    assert train.skip_reason(ready, None, failed) == (
        "not run: kernel tests failed (2 failed: test_a, test_b; log results/logs/kernel_tests.log)"
    )
