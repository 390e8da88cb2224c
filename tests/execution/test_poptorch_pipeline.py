"""Pipelines on the poptorch executor, against the stand-in: the accumulation rule poptorch applies to a
pipelined training program, blocks placed in the model (ipu_ops.BeginBlock), and recomputation
checkpoints on layers that return tuples."""

from __future__ import annotations

import sys
from typing import Dict, Tuple

import pytest
import torch

from ipuflow.config import ConfigurationError
from ipuflow.execution import PoptorchExecutor, ipu_ops
from tests.execution import fake_poptorch


pytestmark = pytest.mark.usefixtures("stand_in")


class Stack(torch.nn.Module):
    """Linear layers in a ModuleList and a head, for placement tests."""

    def __init__(self, layers: int = 4) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(layers))
        self.head = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Dict[str, torch.Tensor]:
        for layer in self.layers:
            x = layer(x)
        x = self.head(x)
        return {"out": x, "loss": torch.nn.functional.mse_loss(x, y)}


def _batch(rows: int) -> Dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return {"x": torch.randn(rows, 4, generator=generator), "y": torch.randn(rows, 4, generator=generator)}


def _sgd(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.01)


# -- the accumulation rule (poptorch popart_compiler/source/CompilerImpl.cpp numPipelineStages and
#    Compiler.cpp: "gradientAccumulation must be greater than or equal to the number of pipeline stages")


@pytest.mark.parametrize("replication_factor", [1, 2])
def test_a_training_pipeline_needs_accumulation_of_twice_its_stages_minus_one(replication_factor):
    model = Stack()
    with pytest.raises(ConfigurationError) as error:
        PoptorchExecutor(model, _sgd(model), pipeline_layers="layers", layers_per_ipu=[1, 1, 1, 1], gradient_accumulation=6,
                         replication_factor=replication_factor)
    assert error.value.key == "gradient_accumulation"
    message = str(error.value)
    assert "4 pipeline stages" in message and ">= 7" in message and "found 6" in message


def test_enough_accumulation_compiles_and_the_stand_in_records_the_placements():
    model = Stack()
    executor = PoptorchExecutor(model, _sgd(model), pipeline_layers="layers", layers_per_ipu=[1, 1, 1, 1], gradient_accumulation=7)
    executor(_batch(7))
    assert executor.poplar_executor.placements == [("Layer0", 0), ("Layer1", 1), ("Layer2", 2), ("Layer3", 3)]
    assert executor.poplar_executor.pipeline_stages == 7


def test_inference_has_no_accumulation_rule():
    # The inference executor runs the stages one after another (ShardedExecution): no rule applies.
    model = Stack()
    executor = PoptorchExecutor(model, training=False, pipeline_layers="layers", layers_per_ipu=[1, 1, 1, 1])
    assert executor(_batch(2)).outputs["out"].shape == (2, 4)
    model = Stack()
    training = PoptorchExecutor(model, _sgd(model), pipeline_layers="layers", layers_per_ipu=[2, 2], gradient_accumulation=3)
    assert training.inference_executor()(_batch(2)).outputs["out"].shape == (2, 4)


def test_layers_on_one_ipu_need_no_accumulation():
    model = Stack()
    PoptorchExecutor(model, _sgd(model), pipeline_layers="layers", layers_per_ipu=[4], recompute_checkpoint_every_layer=True)(_batch(1))


def _blocked(ipus: Tuple[int, ...]) -> torch.nn.Module:
    model = Stack(layers=len(ipus))
    for index, (layer, ipu) in enumerate(zip(model.layers, ipus)):
        fake_poptorch.BeginBlock(layer, f"B{index}", ipu_id=ipu)
    return model


def test_the_stand_in_applies_poptorchs_pipeline_rules_at_compile():
    model = _blocked((0, 1))
    options = fake_poptorch.Options()
    options.Training.gradientAccumulation(2)
    executor = fake_poptorch.trainingModel(model, options, fake_poptorch.optim.SGD(model.parameters(), lr=0.01))
    with pytest.raises(RuntimeError, match=r"gradientAccumulation must be greater than or equal to the number of pipeline "
                                           r"stages \(3\) when using poptorch.PipelinedExecution"):
        executor.compile(**_batch(2))
    # Consecutive blocks on one IPU are one stage; inference needs device iterations >= stages.
    model = _blocked((0, 0, 1))
    with pytest.raises(RuntimeError, match=r"deviceIterations must be greater than or equal to the number of pipeline stages \(2\)"):
        fake_poptorch.inferenceModel(model, fake_poptorch.Options()).compile(**_batch(1))
    sharded = fake_poptorch.Options()
    sharded.setExecutionStrategy(fake_poptorch.ShardedExecution())
    fake_poptorch.inferenceModel(model, sharded).compile(**_batch(1))


# -- blocks placed in the model (poptorch python/ops.py BeginBlock, Block)


class HeadOnSecondIpu(Stack):
    """Places its own head on IPU 1 with ipu_ops.BeginBlock, when it is built."""

    def __init__(self) -> None:
        super().__init__(layers=2)
        ipu_ops.BeginBlock(self.head, "head", ipu_id=1)


def test_a_block_placed_in_the_model_before_poptorch_is_imported_is_honoured(monkeypatch):
    with monkeypatch.context() as patch:
        patch.delitem(sys.modules, "poptorch")  # the model is built before the executor imports poptorch
        model = HeadOnSecondIpu()
    executor = PoptorchExecutor(model, _sgd(model), ipus_per_replica=2, gradient_accumulation=3)
    executor(_batch(3))
    assert executor.poplar_executor.placements == [("head", 1)]
    assert executor.poplar_executor.pipeline_stages == 3


def test_a_model_block_counts_as_a_pipeline_stage_before_the_program_compiles():
    model = HeadOnSecondIpu()
    executor = PoptorchExecutor(model, _sgd(model), ipus_per_replica=2, gradient_accumulation=2)
    with pytest.raises(ConfigurationError, match="^gradient_accumulation: .*2 pipeline stages"):
        executor(_batch(2))
    assert not executor.is_compiled


class HeadRegisteredFirst(torch.nn.Module):
    """Registers its head (IPU 1) before its body (IPU 0), and runs the body first: two stages."""

    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Linear(4, 4)
        self.body = torch.nn.Linear(4, 4)
        ipu_ops.BeginBlock(self.head, "head", ipu_id=1)
        ipu_ops.BeginBlock(self.body, "body", ipu_id=0)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Dict[str, torch.Tensor]:
        x = self.head(self.body(x))
        return {"out": x, "loss": torch.nn.functional.mse_loss(x, y)}


def test_stages_are_counted_in_the_order_the_forward_pass_runs_them():
    # Issue 34, point 6: counted in registration order, this valid model was refused as
    # "3 pipeline stages (IPU 0 → 1 → 0)"; it runs IPU 0 then IPU 1, which poptorch compiles with 3.
    model = HeadRegisteredFirst()
    executor = PoptorchExecutor(model, _sgd(model), ipus_per_replica=2, gradient_accumulation=3)
    executor(_batch(3))
    assert executor.poplar_executor.placements == [("body", 0), ("head", 1)]
    assert executor.poplar_executor.pipeline_stages == 3


def test_model_blocks_and_placed_layers_both_reach_poptorch():
    model = HeadOnSecondIpu()  # poptorch (the stand-in) is imported: the block goes to it at once too
    executor = PoptorchExecutor(model, _sgd(model), pipeline_layers="layers", layers_per_ipu=[2, 0], gradient_accumulation=3)
    executor(_batch(3))
    assert executor.poplar_executor.placements == [("Layer0", 0), ("Layer1", 0), ("head", 1)]


def test_a_model_block_on_an_ipu_the_replica_does_not_have_is_a_configuration_error():
    model = HeadOnSecondIpu()
    with pytest.raises(ConfigurationError, match="^ipus_per_replica: .*'head'.*IPU 1"):
        PoptorchExecutor(model, _sgd(model), gradient_accumulation=3)


def test_a_model_block_on_a_layer_that_pipeline_layers_places_is_a_configuration_error():
    model = Stack(layers=2)
    ipu_ops.BeginBlock(model.layers[1], "mine", ipu_id=1)
    with pytest.raises(ConfigurationError, match="^pipeline_layers: .*'mine'"):
        PoptorchExecutor(model, _sgd(model), pipeline_layers="layers", layers_per_ipu=[1, 1], gradient_accumulation=3)


class ScopedHead(Stack):
    """Runs its head inside an ipu_ops.Block scope on IPU 1."""

    def __init__(self) -> None:
        super().__init__(layers=1)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Dict[str, torch.Tensor]:
        x = self.layers[0](x)
        with ipu_ops.Block("scoped", ipu_id=1):
            x = self.head(x)
            loss = torch.nn.functional.mse_loss(x, y)
        return {"out": x, "loss": loss}


def test_a_block_scope_in_forward_is_checked_before_the_program_compiles():
    # Issue 34, point 6: scopes were not pre-checked; poptorch itself refused the compile.
    model = ScopedHead()
    executor = PoptorchExecutor(model, _sgd(model), gradient_accumulation=2, ipus_per_replica=2, pipeline_layers="layers",
                                layers_per_ipu=[1, 0])
    with pytest.raises(ConfigurationError, match=r"^gradient_accumulation: .*2 pipeline stages \(IPU 0 → 1\).*>= 3"):
        executor(_batch(2))
    model = ScopedHead()
    executor = PoptorchExecutor(model, _sgd(model), gradient_accumulation=3, pipeline_layers="layers", layers_per_ipu=[1])
    with pytest.raises(ConfigurationError, match=r"^ipus_per_replica: .*'scoped' on IPU 1"):
        executor(_batch(3))


def test_a_block_scope_in_forward_reaches_poptorch():
    model = ScopedHead()
    executor = PoptorchExecutor(model, _sgd(model), gradient_accumulation=3, ipus_per_replica=2, pipeline_layers="layers",
                                layers_per_ipu=[1, 0])
    executor(_batch(3))
    assert executor.poplar_executor.placements == [("Layer0", 0), ("scoped", 1)]


# -- recomputation checkpoints (poptorch python/ops.py recomputationCheckpoint takes tensors or one tuple/list)


class TupleLayer(torch.nn.Module):
    """Returns (hidden, None, (aux,)) as transformers' layers return tuples."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, None, Tuple[torch.Tensor]]:
        hidden = self.linear(x)
        return hidden, None, (hidden.sum(-1),)


class TupleStack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(TupleLayer() for _ in range(3))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Dict[str, torch.Tensor]:
        for layer in self.layers:
            x, _, _ = layer(x)
        return {"out": x, "loss": torch.nn.functional.mse_loss(x, y)}


def test_layers_returning_tuples_are_checkpointed():
    model = TupleStack()
    executor = PoptorchExecutor(model, _sgd(model), pipeline_layers="layers", layers_per_ipu=[2, 1], gradient_accumulation=3,
                                recompute_checkpoint_every_layer=True)
    executor(_batch(3))
    # Every layer but the last: its hidden state and the auxiliary tensor.
    assert executor.poplar_executor.recomputation_checkpoints == 4


def test_the_stand_ins_checkpoint_takes_what_poptorchs_takes():
    a, b = torch.ones(2), torch.zeros(2)
    assert fake_poptorch.recomputationCheckpoint(a) is a
    assert fake_poptorch.recomputationCheckpoint(a, b) == (a, b)
    assert fake_poptorch.recomputationCheckpoint([a, b]) == [a, b]
    with pytest.raises(ValueError, match="All inputs must be tensors"):
        fake_poptorch.recomputationCheckpoint((a, None))
