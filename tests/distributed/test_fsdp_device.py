"""`sharding: fsdp` shards on the device the executor put the model on. FSDP's own default mesh
follows torch's accelerator whenever one is present: on a one-GPU machine a CPU run's rank 1 then
asked for cuda:1 and died with "invalid device ordinal"."""

from __future__ import annotations

import textwrap

import pytest

from ipuflow.torch_features import FSDP2, torch_at_least
from tests.distributed.conftest import torchrun_worker

pytestmark = pytest.mark.skipif(not torch_at_least(FSDP2), reason="needs FSDP2 (torch >= 2.6)")

WORKER = textwrap.dedent('''
    import json, sys
    import torch
    from ipuflow.distributed import process_group
    from ipuflow.execution import NativeExecutor

    # What torch reports on a machine with a GPU, whatever device the executor was given.
    torch._C._get_accelerator = lambda: torch.device("cuda")
    context = process_group.start("gloo", False)
    torch.manual_seed(0)

    class Regression(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)])
        def forward(self, x, y):
            return {"loss": torch.nn.functional.mse_loss(self.layers[1](self.layers[0](x)).squeeze(-1), y)}

    model = Regression()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    executor = NativeExecutor(model, optimizer, device="cpu", replication_factor=2, sharding="fsdp")
    result = executor({"x": torch.randn(2, 4), "y": torch.randn(2)})
    meshes = sorted({parameter.device_mesh.device_type for parameter in model.parameters()})
    if context.rank == 0:
        with open(sys.argv[1], "w") as out:
            json.dump({"meshes": meshes, "updates": result.optimizer_updates}, out)
    process_group.stop()
''')


def test_fsdp_shards_on_the_executors_device_not_torchs_default_accelerator(tmp_path):
    assert torchrun_worker(WORKER, tmp_path) == {"meshes": ["cpu"], "updates": 1}
