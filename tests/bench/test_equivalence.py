"""The fake-vs-real comparison run as fake against fake on the CPU: exact, so every count must be zero."""

from __future__ import annotations

import math

import pytest

from hot.bench import equivalence


def test_relative_differences() -> None:
    assert equivalence.relative_differences([2.0, 4.0], [2.002, 4.0]) == pytest.approx([1e-3, 0.0])
    assert equivalence.relative_differences([1.0], [1.0]) == [0.0]
    with pytest.raises(ValueError, match="equally long"):
        equivalence.relative_differences([1.0], [1.0, 2.0])


def test_equivalence_of_a_backend_with_itself_is_exact_on_the_cpu() -> None:
    r = equivalence.equivalence("cpu", steps=2, batch=8, backends=("fake", "fake"))
    assert [run["backend"] for run in r["runs"]] == ["fake", "fake"]
    assert len(r["runs"][0]["losses"]) == 2 and r["runs"][0]["losses"] == r["runs"][1]["losses"]
    assert all(math.isfinite(x) and x > 0 for x in r["runs"][0]["losses"])
    assert r["max_rel_loss_diff"] == 0.0 and r["passed"] is True and r["tolerance"] == 1e-3
    assert 0.0 <= r["runs"][0]["held_out_accuracy"] <= 1.0 and r["accuracy_diff"] == 0.0
    assert "order" in r["why_not_zero"]


def test_code_mismatches_counts_every_code_of_the_three_quantisers() -> None:
    found = equivalence.code_mismatches("cpu", 2 * 50, 32, 16, 50, backends=("fake", "fake"))
    rows = 2 * 4 * 8  # two samples of 50 positions: 4 blocks of 16, 8 kept rows each
    assert found == {"hq_grad_output": 0, "hla_grad_output": 0, "hla_input": 0, "elements": 100 * 32 + rows * (32 + 16)}


def test_code_mismatches_compare_both_backends_under_the_hash_asked_for(monkeypatch) -> None:
    """The hash reaches both backends' configs and the specs: the fake backend against itself agrees under either
    hash, and each backend's config is built with it."""
    from hot.bench import equivalence as eq

    made = []
    real_config = eq._config

    def recorded(backend, seed, options, rounding_hash):
        made.append(rounding_hash)
        return real_config(backend, seed, options, rounding_hash)

    monkeypatch.setattr(eq, "_config", recorded)
    found = eq.code_mismatches("cpu", 2 * 50, 32, 16, 50, backends=("fake", "fake"), rounding_hash="fmix32")
    assert made == ["fmix32", "fmix32"]
    assert {k: v for k, v in found.items() if k != "elements"} == {
        "hq_grad_output": 0, "hla_grad_output": 0, "hla_input": 0
    }  # fmt: skip
