"""Under torchrun the native executor reduces gradients once per optimizer update, on the update's
last micro-batch, not on every accumulation micro-batch (counted with a DDP communication hook)."""

from __future__ import annotations

import textwrap

from tests.distributed.conftest import torchrun_worker

WORKER = textwrap.dedent('''
    import json, sys
    import torch
    from ipuflow.distributed import process_group
    from ipuflow.execution import NativeExecutor

    context = process_group.start("gloo", False)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)

    class Regression(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = model
        def forward(self, x, y):
            return {"loss": torch.nn.functional.mse_loss(self.linear(x).squeeze(-1), y)}

    regression = Regression()
    optimizer = torch.optim.SGD(regression.parameters(), lr=0.1)
    executor = NativeExecutor(regression, optimizer, device="cpu", replication_factor=2,
                              gradient_accumulation=4, device_iterations=3)
    reductions = []

    def counting_hook(state, bucket):
        reductions.append(bucket.index())
        work = torch.distributed.all_reduce(bucket.buffer().div_(context.world_size), async_op=True)
        return work.get_future().then(lambda future: future.value()[0])

    executor._group.module.register_comm_hook(None, counting_hook)
    # Micro-batch 2, 3 device iterations x 4 accumulation steps: this rank's 24 rows of a 48-row call.
    batch = {"x": torch.randn(24, 4), "y": torch.randn(24)}
    result = executor(batch)
    if context.rank == 0:
        with open(sys.argv[1], "w") as out:
            json.dump({"reductions": len(reductions), "updates": result.optimizer_updates, "samples": result.samples}, out)
    process_group.stop()
''')


def test_gradients_are_reduced_once_per_optimizer_update(tmp_path):
    counts = torchrun_worker(WORKER, tmp_path)
    # 12 micro-batches per rank, 3 updates: one (single-bucket) reduction per update.
    assert counts == {"reductions": 3, "updates": 3, "samples": 48}
