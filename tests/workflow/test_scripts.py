"""The workflow's script: files (workflow/scripts/), their decisions tested without Snakemake."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

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


@pytest.mark.parametrize(
    ("gpus", "share", "alone"), [(0, 1, False), (1, 1, True), (1, 4, False), (1, 4, True), (4, 1, False)]
)
def test_a_run_takes_its_gpus_through_hot_slots(tmp_path: Path, gpus: int, share: int, alone: bool) -> None:
    argv = train.command(tmp_path, gpus, share, alone)
    flag = ["--steps-alone"] if alone and share > 1 else []  # alone on a GPU of its own: nothing to ask
    slots = ["hot", "slots", "--gpus", str(gpus), "--jobs-per-gpu", str(share), *flag, "--job", str(tmp_path), "--"]
    assert argv[: argv.index("--") + 1] == slots
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


# ------------------------------------------------- the kernels rule: use what is there, rebuild what is stale


def test_a_build_covers_the_gpus_its_cubins_or_ptx_run_on(build_config: ModuleType) -> None:
    covers = build_config.covers
    default = ["8.0", "8.6", "8.9", "9.0"]
    assert covers(default, (9, 0)) and covers(default, (8, 9)) and covers(default, (8, 7))
    assert not covers(default, (10, 0)) and not covers(default, (12, 0)) and not covers(default, (7, 5))
    assert covers(["8.0"], (8, 6)) and not covers(["8.6"], (8, 0))  # a cubin runs on later minors of its major
    assert covers(["9.0a"], (9, 0)) and not covers(["9.0a"], (9, 1))  # arch-specific: that capability only
    assert covers(["8.0", "9.0a"], (8, 9))
    assert covers(["8.6+PTX"], (12, 0)) and not covers(["8.6+PTX"], (8, 0))  # PTX: any later capability


def _kernel_tree(root: Path) -> Path:
    for name, text in {
        "csrc/a.cu": "k",
        "hot_kernels/__init__.py": "",
        "setup.py": "s",
        "build_config.py": "b",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_source_hash_changes_with_the_sources_not_with_build_outputs(build_config: ModuleType, tmp_path: Path):
    root = _kernel_tree(tmp_path / "kernels")
    first = build_config.source_hash(root)
    for output in ("build/lib/x.o", "hot_kernels/__pycache__/x.pyc", "hot_kernels/_C.so", "x.egg-info/PKG-INFO",
                   f"hot_kernels/{build_config.BUILD_INFO}"):  # fmt: skip
        (root / output).parent.mkdir(parents=True, exist_ok=True)
        (root / output).write_text("out")
    assert build_config.source_hash(root) == first
    (root / "csrc" / "a.cu").write_text("k2")
    assert build_config.source_hash(root) != first
    (root / "csrc" / "a.cu").write_text("k")
    (root / "csrc" / "b.cuh").write_text("")
    assert build_config.source_hash(root) != first
    # the repository's own kernels/ hashes (the files the real build records)
    assert len(build_config.source_hash()) == 64


def _installed(where: Path, build: dict | None, broken: bool = False) -> None:
    """A stand-in ``hot_kernels`` package (as pip installs it: the package and its build record)."""
    package = where / "hot_kernels"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("raise ImportError('undefined symbol: _ZN3c10')\n" if broken else "")
    info = package / "build_info.json"
    info.unlink(missing_ok=True)
    if build is not None:
        info.write_text(json.dumps(build))


def _good_build(build_config: ModuleType, **changed: object) -> dict:
    import torch

    return {**build_config.build_info(["8.0", "9.0a"], True, torch.__version__, REPO / "kernels"), **changed}


def test_the_installed_build_is_probed_and_judged(
    build_config: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    sha = build_config.source_hash(REPO / "kernels")
    _installed(tmp_path, _good_build(build_config))
    found = kernels.probe(build_config.BUILD_INFO)
    assert found["location"] == str(tmp_path / "hot_kernels") and found["build"]["sources_sha256"] == sha
    assert kernels.unusable(found, sha, [(9, 0), (8, 0)], build_config) is None
    where = tmp_path / "hot_kernels"
    assert kernels.unusable(found, sha, [(8, 9), (12, 0)], build_config) == (
        f"the hot_kernels at {where} is compiled for 8.0;9.0a, not for this GPU's compute capability 12.0"
    )
    assert kernels.unusable(found, "0" * 64, [(9, 0)], build_config) == (
        f"the hot_kernels at {where} was built from other sources than kernels/ (stale)"
    )
    _installed(tmp_path, _good_build(build_config, torch="2.0.0"))
    assert "was built against torch 2.0.0, this is torch" in kernels.unusable(
        kernels.probe(build_config.BUILD_INFO), sha, [(9, 0)], build_config
    )
    _installed(tmp_path, None)
    assert kernels.unusable(kernels.probe(build_config.BUILD_INFO), sha, [(9, 0)], build_config) == (
        f"the hot_kernels at {where} records no build (build_info.json): what it was built from is unknown"
    )
    _installed(tmp_path, None, broken=True)
    found = kernels.probe(build_config.BUILD_INFO)
    assert found == {"error": "ImportError: undefined symbol: _ZN3c10"}
    assert kernels.unusable(found, sha, [], build_config) == (
        "hot_kernels does not import (ImportError: undefined symbol: _ZN3c10)"
    )


class _Pip:
    """``subprocess.run`` for the kernels script: ``pip install`` installs ``build`` (a stand-in for compiling it);
    everything else (the import probe) runs for real."""

    def __init__(self, where: Path, build: dict) -> None:
        self.where, self.build, self.calls = where, build, 0
        self.real = subprocess.run

    def __call__(self, argv: list[str], **kw: object) -> subprocess.CompletedProcess:
        if argv[1:4] == ["-m", "pip", "install"]:
            assert argv[-2:] == ["--no-build-isolation", "./kernels"] and kw["check"] is True
            self.calls += 1
            _installed(self.where, self.build)
            return subprocess.CompletedProcess(argv, 0)
        return self.real(argv, **kw)


def _kernels_rule(tmp_path: Path, mode: str = "auto") -> dict:
    out, log = tmp_path / "build.json", tmp_path / "kernels.log"
    smk = SimpleNamespace(params=SimpleNamespace(mode=mode), output=[str(out)], log=[str(log)], threads=2)
    kernels.main(smk)
    return json.loads(out.read_text())


@pytest.fixture
def gpu_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The kernels job on an H100 (compute capability 9.0) in the repository root, hot_kernels installed under the
    returned directory."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    monkeypatch.setattr(kernels, "gpu_visible", lambda: True)
    monkeypatch.setattr(kernels, "capabilities", lambda: [(9, 0)])
    monkeypatch.setattr(kernels, "read_only", lambda paths: [])
    return tmp_path / "site"


def test_a_usable_installed_build_is_recorded_built_without_pip(
    gpu_job: Path, build_config: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pip = _Pip(gpu_job, _good_build(build_config))
    monkeypatch.setattr(kernels.subprocess, "run", pip)
    _installed(gpu_job, _good_build(build_config))
    monkeypatch.setattr(kernels, "read_only", lambda paths: paths)  # a read-only image: nothing may be written
    record = _kernels_rule(tmp_path)
    assert pip.calls == 0
    assert record["status"] == "built" and record["installed"] == "as found"
    assert record["location"] == str(gpu_job / "hot_kernels")
    assert "is usable here as installed: not rebuilt" in (tmp_path / "kernels.log").read_text()


@pytest.mark.parametrize(
    ("installed", "reason"),
    [
        ({"sources_sha256": "0" * 64}, "was built from other sources than kernels/ (stale)"),
        ({"arch_list": ["8.0", "8.6"]}, "is compiled for 8.0;8.6, not for this GPU's compute capability 9.0"),
    ],
)
def test_a_stale_or_mismatched_build_is_rebuilt(
    gpu_job: Path, build_config: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, installed: dict,
    reason: str,
) -> None:  # fmt: skip
    pip = _Pip(gpu_job, _good_build(build_config))
    monkeypatch.setattr(kernels.subprocess, "run", pip)
    _installed(gpu_job, _good_build(build_config, **installed))
    record = _kernels_rule(tmp_path)
    assert pip.calls == 1
    assert record["status"] == "built" and record["installed"] == "rebuilt"
    assert record["reason"] == f"the hot_kernels at {gpu_job / 'hot_kernels'} {reason}"


def test_a_stale_build_that_cannot_be_rebuilt_is_named(
    gpu_job: Path, build_config: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pip = _Pip(gpu_job, _good_build(build_config))
    monkeypatch.setattr(kernels.subprocess, "run", pip)
    monkeypatch.setattr(kernels, "read_only", lambda paths: paths[:1])
    _installed(gpu_job, _good_build(build_config, sources_sha256="0" * 64))
    site = kernels.install_targets(Path("kernels"))[0]
    expected = (
        f"not built: the hot_kernels at {gpu_job / 'hot_kernels'} was built from other sources than kernels/ "
        f"(stale); it cannot be rebuilt here: {site} read-only"
    )
    assert _kernels_rule(tmp_path) == {"status": expected}
    with pytest.raises(SystemExit, match="kernels: not built: the hot_kernels at"):
        _kernels_rule(tmp_path, mode="always")
    # not installed at all, on a GPU the arch list does not cover: named before any build
    _installed(gpu_job, None, broken=True)
    monkeypatch.setattr(kernels, "capabilities", lambda: [(12, 0)])
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0")
    status = _kernels_rule(tmp_path)["status"]
    assert status.startswith("not built: hot_kernels does not import (ImportError: undefined symbol")
    assert status.endswith(
        "a build for TORCH_CUDA_ARCH_LIST=8.0;9.0 would not run on compute capability 12.0 (add it to "
        "TORCH_CUDA_ARCH_LIST)"
    )
    assert pip.calls == 0


def test_a_rebuild_that_still_does_not_fit_is_named(
    gpu_job: Path, build_config: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip installed, but the import finds another, stale hot_kernels (e.g. earlier on PYTHONPATH)."""
    stale = _good_build(build_config, sources_sha256="0" * 64)
    monkeypatch.setattr(kernels.subprocess, "run", _Pip(gpu_job, stale))
    _installed(gpu_job, stale)
    status = _kernels_rule(tmp_path)["status"]
    assert (
        status == f"not built: rebuilt, but the hot_kernels at {gpu_job / 'hot_kernels'} was built from other "
        "sources than kernels/ (stale)"
    )
