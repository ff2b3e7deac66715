"""hot.bench.latency_ab without a GPU: a clear error, nothing written."""

from __future__ import annotations

import pytest
import torch

from hot.bench import latency_ab


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_without_a_gpu_it_says_so_and_writes_nothing(tmp_path) -> None:
    out = tmp_path / "ab.json"
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        latency_ab.main(str(out))
    assert not out.exists()
