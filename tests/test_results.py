import datetime
import json
import subprocess

import pytest
import torch

from hot import results


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "checkpoint.pt"
    target.write_bytes(b"old")

    def disk_full(f):
        f.write(b"half a checkpoint")
        raise OSError("No space left on device")

    with pytest.raises(OSError, match="No space"):
        results.write_atomic(target, disk_full)
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"] and target.read_bytes() == b"old"


def test_json_and_torch_files_are_written_whole_and_readable_by_others(tmp_path):
    out = tmp_path / "deep" / "metrics.json"
    results.write_json_atomic(out, {"b": 1, "a": [1.5, "é"]}, sort_keys=True)
    assert out.read_text(encoding="utf-8") == '{\n  "a": [\n    1.5,\n    "é"\n  ],\n  "b": 1\n}\n'
    assert out.stat().st_mode & 0o777 == 0o644
    model = tmp_path / "model.pt"
    results.write_atomic(model, lambda f: torch.save({"w": torch.arange(3)}, f))
    assert torch.equal(torch.load(model)["w"], torch.arange(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep", "model.pt"]


def test_csv_has_the_first_rows_keys_as_header(tmp_path):
    out = tmp_path / "rows.csv"
    results.write_csv_atomic(out, [{"layer": "qkv", "us": 1.5}, {"layer": "fc1", "us": 2}])
    assert out.read_text() == "layer,us\nqkv,1.5\nfc1,2\n"
    results.write_csv_atomic(tmp_path / "none.csv", [])
    assert not (tmp_path / "none.csv").exists()


def test_only_temporaries_of_dead_writers_are_removed(tmp_path, capsys):
    finished = subprocess.Popen(["true"])
    finished.wait()
    stale, live, other = (
        tmp_path / f".metrics.json.tmp{finished.pid}",
        tmp_path / ".metrics.json.tmp1",  # pid 1 always runs
        tmp_path / ".notes.tmpx",
    )
    for path in (stale, live, other):
        path.write_bytes(b"partial")
    results.remove_stale_temporaries(tmp_path)
    assert not stale.exists() and live.exists() and other.exists()
    assert f"a partial write by process {finished.pid}" in capsys.readouterr().err


def test_environment_names_versions_and_the_kernels_status():
    env = results.environment()
    assert env["torch"] == torch.__version__ and env["python"].count(".") == 2
    assert env["gpu"] == (torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
    assert env["hot_kernels"] == "available" or env["hot_kernels"].startswith("unavailable: backend 'real' needs")
    json.dumps(env)  # it goes into results files as is
    assert ("gpu_capability" in env) == torch.cuda.is_available()


def test_git_revision_and_tracked_files_of_a_checkout(tmp_path):
    def git(*arguments: str) -> None:
        subprocess.run(
            ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *arguments], check=True
        )

    git("init", "-q")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "kept.json").write_text("1")
    (tmp_path / "sub" / "new.json").write_text("2")
    git("add", "sub/kept.json")
    git("commit", "-q", "-m", "one")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert results.git_revision(tmp_path / "sub") == {"commit": head.strip(), "dirty": False}  # untracked: clean
    assert results.git_toplevel(tmp_path / "sub").resolve() == tmp_path.resolve()
    assert results.git_tracked(tmp_path / "sub") == {(tmp_path / "sub" / "kept.json").resolve()}
    (tmp_path / "sub" / "kept.json").write_text("3")
    assert results.git_revision(tmp_path)["dirty"] is True
    outside = tmp_path.parent / f"{tmp_path.name}-not-a-checkout"
    outside.mkdir()
    assert results.git_revision(outside) == {"commit": None, "dirty": None}
    assert results.git_toplevel(outside) is None and results.git_tracked(outside) is None


def test_environment_records_the_commit_and_the_date():
    env = results.environment()
    assert env["git_commit"] == results.git_revision()["commit"] and "git_dirty" in env
    recorded = datetime.datetime.fromisoformat(env["date"])
    assert recorded.tzinfo is not None
    assert abs((datetime.datetime.now(datetime.UTC) - recorded).total_seconds()) < 60
