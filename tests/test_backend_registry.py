"""A new encoder backend is its module (a class of the `Backend` protocol) and one entry in
`bench.encode.backends.BACKENDS`: the options accept its name, the encoder runs its batches through it and records
it, with nothing else changed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

TOY_MODULE = '''
from bench.encode.backends.torch_eager import TorchBackend

CALLS = []


class ToyBackend(TorchBackend):
    """torch, counting the batches it runs."""

    @property
    def name(self) -> str:
        return "toy"

    def pooled(self, batch):
        CALLS.append(len(batch["input_ids"]))
        return super().pooled(batch)
'''

SCRIPT = '''
import sys
import numpy as np
import bench.encode.backends as backends
backends.BACKENDS["toy"] = "toy_backend_module:ToyBackend"  # the one line

from bench.encode.encoder import Encoder
import toy_backend_module

texts = ["a cat sat", "the dog ran far away", "one more sentence here"]
toy = Encoder.load(sys.argv[1], backend="toy", device="cpu", precision="fp32", use_cache=False, show_progress=False)
plain = Encoder.load(sys.argv[1], backend="torch", device="cpu", precision="fp32", use_cache=False, show_progress=False)
same = np.allclose(toy.encode(texts), plain.encode(texts), atol=1e-6)
print(toy.describe()["backend"], len(toy_backend_module.CALLS) > 0, same)
'''


def test_a_new_backend_is_one_module_and_one_entry_in_the_registry(tiny_model_dir, tmp_path):
    (tmp_path / "toy_backend_module.py").write_text(TOY_MODULE)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tiny_model_dir)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["toy", "True", "True"]
