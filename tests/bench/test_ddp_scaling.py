"""hot.bench.ddp_scaling's arguments, and its pieces run for real on the CPU (gloo, two processes, synthetic data)."""

from __future__ import annotations

import json

import pytest

from hot.bench import ddp_scaling


def test_parse_reads_settings_over_the_defaults(tmp_path) -> None:
    out, args = ddp_scaling.parse(
        [str(tmp_path / "o.json"), "gpus=4", "seeds=3,5", "parts=resume", 'override={"lr": 0.01}']
    )
    assert out == tmp_path / "o.json"
    assert (args["gpus"], args["seeds"], args["parts"], args["override"]) == (4, [3, 5], ["resume"], {"lr": 0.01})
    assert args["epochs"] == ddp_scaling.DEFAULTS["epochs"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "comes first"),
        (["gpus=2"], "comes first"),
        (["o.json", "nodes=2"], "key one of"),
        (["o.json", "parts=scaling,bench"], "['bench'] not among"),
        (["o.json", "gpus=two"], "gpus: 'two' is not an integer"),
        (["o.json", "override=[1]"], "override: '[1]' is not a JSON object"),
    ],
)
def test_bad_arguments_exit_2_naming_the_problem(argv, message, capsys) -> None:
    assert ddp_scaling.main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_scaling_and_resume_on_two_cpu_processes(tmp_path) -> None:
    """One process and two (gloo) train the same synthetic task; a one-process run killed after its first epoch's
    checkpoint resumes on two and ends with all three epochs recorded (the later epochs leave time to kill it)."""
    out = tmp_path / "ddp.json"
    override = {
        "device": "cpu",
        "synthetic": True,
        "max_train_batches": 2,
        "hot": {"backend": "fake"},
        "test_subset": 32,
    }
    argv = [
        str(out),
        "seeds=0",
        "epochs=3",
        "parts=scaling,resume",
        f"work={tmp_path / 'work'}",
        f"override={json.dumps(override)}",
    ]
    assert ddp_scaling.main(argv) == 0
    result = json.loads(out.read_text())
    assert [(r["gpus"], r["returncode"], r["world_size"]) for r in result["scaling"]] == [(1, 0, 1), (2, 0, 2)]
    assert result["resume"]["killed_after_checkpoint"] and result["resume"]["returncode"] == 0
    assert (result["resume"]["world_size"], result["resume"]["epochs"]) == (2, 3)
