"""poptorch's API as read from graphcore/poptorch's sources: the data the stand-in and the executor are
checked against (tests/execution/test_poptorch_api.py).

Each entry is a callable's signature, written as in poptorch's source with the annotations left out,
and the source file it was read from. Names are poptorch's: ``options._TrainingOptions`` is
``poptorch.options._TrainingOptions`` (reached as ``Options().Training``); the stand-in defines every
class at its top level. The files were read through the stored copy of the public repository
(`find_files`/`read_file`/`find_string` of the project's search tool); a stored version is named by
the tool's file-version id. ``commit`` is the revision cited, poptorch c2a8b177 (2023-09-29, version 3.4):
the files were read in that line's SDK 3.x generation. (The commit `find_files` lists for a path names
one stored version of it, for five of these files not the one read: docs/execution.md.)
"""

from __future__ import annotations

from typing import Dict, Tuple

REPOSITORY = "graphcore/poptorch"

SOURCES: Dict[str, Dict[str, str]] = {
    "options": {
        "path": "python/options.py",
        "commit": "c2a8b177",
        "version": "stored file 16981473939 (74,509 characters; has _TrainingOptions.setMeanAccumulationAndReplicationReductionStrategy)",
    },
    "optim": {
        "path": "python/optim.py",
        "commit": "c2a8b177",
        "version": "stored file 17033159313 (37,647 characters): torch-2.0 signatures (Adam has `fused`), "
                   "LAMB with max_weight_norm, the SDK 3.x generation",
    },
    "poplar_executor": {
        "path": "python/_poplar_executor.py",
        "commit": "c2a8b177",
        "version": "stored file 17056622640 (68,205 characters): dispatcher tracing, "
                   "ipu_state optimizer state, the SDK 3.x generation",
    },
    "init": {
        "path": "python/__init__.py",
        "commit": "c2a8b177",
        "version": "stored file 17020045343 (23,105 characters; trainingModel, inferenceModel, DataLoader)",
    },
    "ops": {
        "path": "python/ops.py",
        "commit": "c2a8b177",
        "version": "stored file 16984172619 (53,504 characters; BeginBlock(layer_to_call, ...), Block, removeBlocks)",
    },
    "enums": {
        "path": "python/enums.py",
        "commit": "c2a8b177",
        "version": "stored file 16989281062 (10,075 characters)",
    },
}

_OPTIONAL_DTYPES = ("accum_type=None, first_order_momentum_accum_type=None, second_order_momentum_accum_type=None")

SIGNATURES: Dict[str, Tuple[str, str]] = {
    # python/__init__.py
    "trainingModel": ("(model, options=None, optimizer=None)", "init"),
    "inferenceModel": ("(model, options=None)", "init"),
    "DataLoader.__init__": ("(self, options, dataset, batch_size=1, shuffle=False, num_workers=0, drop_last=True, "
                            "persistent_workers=None, auto_distributed_partitioning=True, mode=0, async_options=None, "
                            "**kwargs)", "init"),
    # python/ops.py
    "BeginBlock": ("(layer_to_call, user_id=None, ipu_id=None)", "ops"),
    "removeBlocks": ("(module)", "ops"),
    "Block.__init__": ("(self, user_id=None, ipu_id=None)", "ops"),
    "recomputationCheckpoint": ("(*tensors)", "ops"),
    "set_available_memory": ("(tensor, available_memory_proportion)", "ops"),
    "identity_loss": ("(x, reduction)", "ops"),
    # python/options.py
    "Options.__init__": ("(self)", "options"),
    "Options.autoRoundNumIPUs": ("(self, auto_round_num_ipus=True)", "options"),
    "Options.deviceIterations": ("(self, device_iterations)", "options"),
    "Options.replicationFactor": ("(self, replication_factor)", "options"),
    "Options.outputMode": ("(self, output_mode, output_return_period=None)", "options"),
    "Options.defaultOutputMode": ("(self)", "options"),
    "Options.randomSeed": ("(self, random_seed)", "options"),
    "Options.enableExecutableCaching": ("(self, path)", "options"),
    "Options.setAvailableMemoryProportion": ("(self, available_memory_proportion)", "options"),
    "Options.setExecutionStrategy": ("(self, strategy)", "options"),
    "Options.useOfflineIpuTarget": ("(self, ipu_version=2)", "options"),
    "Options.clone": ("(self)", "options"),
    "options._TrainingOptions.gradientAccumulation": ("(self, gradient_accumulation)", "options"),
    "options._TrainingOptions.accumulationAndReplicationReductionType": ("(self, reduction_type)", "options"),
    "options._TrainingOptions.setAutomaticLossScaling": ("(self, enabled)", "options"),
    "options._PrecisionOptions.enableStochasticRounding": ("(self, enabled)", "options"),
    "options._PrecisionOptions.setPartialsType": ("(self, dtype)", "options"),
    "options._TensorLocationOptions.setOptimizerLocation": ("(self, location)", "options"),
    "TensorLocationSettings.useOnChipStorage": ("(self, use=True)", "options"),
    "TensorLocationSettings.useReplicatedTensorSharding": ("(self, use=True)", "options"),
    "PipelinedExecution.__init__": ("(self, *args)", "options"),
    # python/_poplar_executor.py (PoplarExecutor; built by trainingModel/inferenceModel)
    "PoplarExecutor.compile": ("(self, *args, **kwargs)", "poplar_executor"),
    "PoplarExecutor.__call__": ("(self, *args, **kwargs)", "poplar_executor"),
    "PoplarExecutor.setOptimizer": ("(self, optimizer)", "poplar_executor"),
    "PoplarExecutor.copyWeightsToHost": ("(self)", "poplar_executor"),
    "PoplarExecutor.copyWeightsToDevice": ("(self)", "poplar_executor"),
    "PoplarExecutor.attachToDevice": ("(self)", "poplar_executor"),
    "PoplarExecutor.detachFromDevice": ("(self)", "poplar_executor"),
    "PoplarExecutor.isAttachedToDevice": ("(self)", "poplar_executor"),
    "PoplarExecutor.isCompiled": ("(self)", "poplar_executor"),
    "PoplarExecutor.destroy": ("(self)", "poplar_executor"),
    # python/optim.py
    "optim.Optimizer.state_dict": ("(self)", "optim"),
    "optim.Optimizer.load_state_dict": ("(self, state)", "optim"),
    "optim.Optimizer.get_state_dict": ("(self)", "optim"),
    "optim.Optimizer.set_state_dict": ("(self, state)", "optim"),
    "optim.Optimizer.has_state": ("(self)", "optim"),
    "optim.VariableAttributes.__init__": ("(self, variable_attributes, allowed_attributes)", "optim"),
    "optim.VariableAttributes.isConstant": ("(self, attr)", "optim"),
    "optim.LAMB.step": ("(self, closure=None)", "optim"),
    "optim.SGD.__init__": ("(self, params, lr, momentum=None, dampening=None, weight_decay=None, nesterov=None, "
                           "maximize=None, foreach=None, differentiable=None, loss_scaling=None, velocity_scaling=None, "
                           "use_combined_accum=None, accum_type=None, velocity_accum_type=None, max_grad_norm=None)", "optim"),
    "optim.Adam.__init__": ("(self, params, lr=None, betas=None, eps=None, weight_decay=None, amsgrad=None, foreach=None, "
                            "maximize=None, capturable=None, differentiable=None, fused=None, loss_scaling=None, "
                            f"{_OPTIONAL_DTYPES}, max_grad_norm=None)", "optim"),
    "optim.AdamW.__init__": ("(self, params, lr=None, betas=None, eps=None, weight_decay=None, amsgrad=None, maximize=None, "
                             "foreach=None, capturable=None, differentiable=None, fused=None, loss_scaling=None, "
                             f"bias_correction=None, {_OPTIONAL_DTYPES}, max_grad_norm=None)", "optim"),
    "optim.RMSprop.__init__": ("(self, params, lr=None, alpha=None, eps=None, weight_decay=None, momentum=None, centered=None, "
                               "foreach=None, maximize=None, differentiable=None, loss_scaling=None, "
                               f"{_OPTIONAL_DTYPES}, use_tf_variant=None)", "optim"),
    "optim.LAMB.__init__": ("(self, params, lr=None, betas=None, eps=None, weight_decay=None, bias_correction=None, "
                            f"loss_scaling=None, max_weight_norm=None, {_OPTIONAL_DTYPES})", "optim"),
}
"""Every poptorch callable the executor or the stand-in's public surface uses, with its signature."""

PROPERTIES: Dict[str, str] = {
    "Options.Training": "options",
    "Options.Precision": "options",
    "Options.TensorLocations": "options",
    "PoplarExecutor.options": "poplar_executor",
    "PoplarExecutor.model": "poplar_executor",
    "PoplarExecutor.rng_state": "poplar_executor",
}

SUBCLASSES: Dict[str, Tuple[str, str]] = {
    "ShardedExecution": ("PipelinedExecution", "options"),
    "optim.SGD": ("optim.Optimizer", "optim"),
    "optim.Adam": ("optim.Optimizer", "optim"),
    "optim.AdamW": ("optim.Optimizer", "optim"),
    "optim.RMSprop": ("optim.Optimizer", "optim"),
    "optim.LAMB": ("optim.Optimizer", "optim"),
}

ENUMS: Dict[str, Dict[str, int]] = {
    "OutputMode": {"Final": 0, "EveryN": 1, "All": 2, "Sum": 3, "Default": 4},
    "ReductionType": {"Sum": 0, "Mean": 1, "NoReduction": 2},
    "AutoStage": {"SameAsIpu": 0, "AutoIncrement": 1},
    "DataLoaderMode": {"Sync": 0, "Async": 1, "AsyncRebatched": 2},
}
"""From python/enums.py."""

OPTIMIZER_GROUP_ATTRIBUTES: Dict[str, Tuple[str, ...]] = {
    "SGD": ("lr", "momentum", "dampening", "weight_decay", "nesterov", "velocity_scaling"),
    "Adam": ("lr", "betas", "eps", "weight_decay", "amsgrad"),
    "AdamW": ("lr", "betas", "weight_decay", "eps", "amsgrad"),
    "RMSprop": ("lr", "momentum", "weight_decay", "alpha", "eps", "centered"),
    "LAMB": ("lr", "weight_decay", "betas", "eps", "max_weight_norm"),
}
"""Each poptorch optimizer's `_group_vars` (python/optim.py): the attributes a parameter group may set."""

EXECUTOR_USES = frozenset({
    "trainingModel", "inferenceModel", "BeginBlock", "removeBlocks", "recomputationCheckpoint", "identity_loss",
    "Options.__init__", "Options.autoRoundNumIPUs", "Options.deviceIterations", "Options.replicationFactor",
    "Options.outputMode", "Options.randomSeed", "Options.enableExecutableCaching", "Options.setAvailableMemoryProportion",
    "Options.setExecutionStrategy", "Options.useOfflineIpuTarget", "options._TrainingOptions.gradientAccumulation",
    "options._TrainingOptions.accumulationAndReplicationReductionType", "options._TrainingOptions.setAutomaticLossScaling",
    "options._PrecisionOptions.enableStochasticRounding", "options._PrecisionOptions.setPartialsType",
    "options._TensorLocationOptions.setOptimizerLocation", "TensorLocationSettings.useOnChipStorage",
    "TensorLocationSettings.useReplicatedTensorSharding", "PipelinedExecution.__init__",
    "PoplarExecutor.compile", "PoplarExecutor.__call__", "PoplarExecutor.setOptimizer", "PoplarExecutor.copyWeightsToHost",
    "PoplarExecutor.copyWeightsToDevice", "PoplarExecutor.attachToDevice", "PoplarExecutor.detachFromDevice",
    "PoplarExecutor.isAttachedToDevice", "PoplarExecutor.isCompiled", "PoplarExecutor.destroy",
    "optim.Optimizer.state_dict", "optim.Optimizer.load_state_dict", "optim.SGD.__init__", "optim.Adam.__init__",
    "optim.AdamW.__init__", "optim.RMSprop.__init__", "optim.LAMB.__init__",
})
"""The callables ipuflow's poptorch executor (ipuflow/execution/poptorch.py: identity_loss marks the
training loss) and IPU ops
(ipuflow/execution/ipu_ops.py: identity_loss, set_available_memory, BeginBlock, Block) call; the
proxy test checks that the executor calls exactly these (ShardedExecution counts as PipelinedExecution)."""

IPU_OPS_USES = frozenset({"identity_loss", "set_available_memory", "recomputationCheckpoint", "BeginBlock", "Block.__init__"})
"""What ipuflow/execution/ipu_ops.py forwards to poptorch when the executor has imported it."""
