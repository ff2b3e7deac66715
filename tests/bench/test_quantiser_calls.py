"""hot.bench.quantiser_calls: every quantiser called once at a ViT-B layer's shape (for a profiler to read)."""

import torch

from hot.bench import quantiser_calls


def test_calls_each_quantiser_on_the_cpu_reference(monkeypatch):
    called = []
    from hot.backends.reference import ReferenceBackend

    for name in ("hla_quantize", "hq_quantize_grad_output", "hq_quantize_weight", "quantize_grad_output"):
        original = getattr(ReferenceBackend, name)

        def spy(self, *args, _name=name, _original=original, **kwargs):
            called.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(ReferenceBackend, name, spy)
    # one image of 197 tokens: the layer's O and I at the smallest L
    assert quantiser_calls.call_quantisers("proj", batch=1, device="cpu", backend="fake") == 5
    # warm-up and profiled round; quantize_grad_output calls the separate quantisers on the fake backend
    assert called.count("quantize_grad_output") == 4  # as training calls it, then the fused one
    assert called.count("hq_quantize_weight") == 2
    assert called.count("hq_quantize_grad_output") == 6  # per tensor directly, and inside both quantize_grad_output
    assert called.count("hla_quantize") == 6  # x, then g_y inside both quantize_grad_output


def test_main_refuses_unknown_layers_and_a_missing_gpu(monkeypatch, capsys):
    assert quantiser_calls.main(["nope"]) == 2
    assert "unknown layer nope" in capsys.readouterr().err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert quantiser_calls.main(["fc1"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err
