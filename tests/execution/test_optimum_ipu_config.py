"""`"executor": {"type": "poptorch", "ipu_config": FILE}` on real optimum-graphcore ipu_config.json files.

The files in tests/fixtures/ipu_config are copies of Graphcore's own (see the README there). The
poptorch module is the stand-in (tests/execution/fake_poptorch.py); what is checked is how each key
reaches `poptorch.Options`, the placement and the batching plan.
"""

import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Dict

import pytest
import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.config.from_params import config_parameters
from ipuflow.execution import PoptorchExecutor, StepExecutor
from ipuflow.execution.optimum_ipu_config import IPU_CONFIG_KEYS
from tests.execution import fake_poptorch

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ipu_config"

# optimum-graphcore's IPUConfig.__init__ arguments, from optimum/graphcore/ipu_configuration.py at
# huggingface/optimum-graphcore@04d0a1ca86dfd3a8b3387929fb52f0e43cc767c8, then the keyword arguments
# it pops from **kwargs (two deprecated, one unsupported) and the version stamps save_pretrained writes.
IPU_CONFIG_ARGUMENTS = (
    "replication_factor", "inference_replication_factor", "gradient_accumulation_steps", "layers_per_ipu",
    "inference_layers_per_ipu", "ipus_per_replica", "inference_ipus_per_replica", "optimizer_state_offchip",
    "replicated_tensor_sharding", "matmul_proportion", "inference_matmul_proportion", "enable_half_partials",
    "embedding_serialization_factor", "inference_embedding_serialization_factor",
    "serialized_embedding_splits_per_ipu", "inference_serialized_embedding_splits_per_ipu",
    "projection_serialization_factor", "inference_projection_serialization_factor",
    "serialized_projection_splits_per_ipu", "inference_serialized_projection_splits_per_ipu",
    "recompute_checkpoint_every_layer", "device_iterations", "inference_device_iterations", "output_mode", "seed",
    "auto_loss_scaling", "executable_cache_dir", "explicit_ir_inference", "parallelize_kwargs",
    "inference_parallelize_kwargs",
)
IPU_CONFIG_POPPED_KWARGS = ("sharded_execution_for_inference", "enable_half_first_order_momentum", "execute_encoder_on_cpu_for_generation")
SAVED_METADATA = ("optimum_version", "transformers_version")


@pytest.fixture(autouse=True)
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "poptorch", fake_poptorch)


class Encoder(torch.nn.Module):
    """Twelve linear layers in a ModuleList (a BERT-base-sized stack of layers for placement)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(12))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Dict[str, torch.Tensor]:
        for layer in self.layers:
            x = layer(x)
        return {"out": x, "loss": torch.nn.functional.mse_loss(x, y)}


def build(config: dict, model: torch.nn.Module = None, **extras) -> PoptorchExecutor:
    model = model or Encoder()
    params = Params({"type": "poptorch", **config}, history="trainer.executor.")
    return StepExecutor.from_params(params, model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), **extras)


def fixture(name: str) -> str:
    return str(FIXTURES / name)


def test_every_ipuconfig_key_has_a_decision_and_every_mapped_key_is_an_executor_key():
    assert set(IPU_CONFIG_KEYS) == set(IPU_CONFIG_ARGUMENTS) | set(IPU_CONFIG_POPPED_KWARGS) | set(SAVED_METADATA)
    executor_keys = set(config_parameters(PoptorchExecutor, PoptorchExecutor.__init__))
    for key, rule in IPU_CONFIG_KEYS.items():
        assert rule.mapped or rule.reason, key  # refused or ignored keys say why
        if rule.mapped:
            assert rule.executor_key in executor_keys, key


def test_a_minimal_real_file_sets_the_cache_and_one_ipu():
    executor = build({"ipu_config": fixture("t5_encoder_ipu_config.json")})
    options = executor.poptorch_options
    assert options.called("enableExecutableCaching") == [("./exe_cache",)]
    assert options.called("setAvailableMemoryProportion") == [({"IPU0": 0.2},)]
    assert executor.batch_size_factor == 1


def test_inference_defaults_are_ipuconfigs_not_the_training_values():
    # IPUConfig's inference_device_iterations and inference_replication_factor default to 1, whatever
    # the training values (ipuflow's own default is the training value).
    executor = build({"ipu_config": fixture("t5_encoder_ipu_config.json"), "device_iterations": 4, "replication_factor": 2})
    assert executor.batch_size_factor == 8
    assert executor.inference_executor().batch_size_factor == 1
    written = build({"ipu_config": fixture("t5_encoder_ipu_config.json"), "device_iterations": 4, "inference_device_iterations": 2})
    assert written.inference_executor().batch_size_factor == 2


def test_serialised_embeddings_are_refused_naming_the_key_and_the_file():
    with pytest.raises(ConfigurationError) as error:
        build({"ipu_config": fixture("summarization_ipu_config.json"), "pipeline_layers": "layers"})
    message = str(error.value)
    assert "embedding_serialization_factor" in message and "summarization_ipu_config.json" in message
    assert "comes from 'embedding_serialization_factor' in trainer.executor.ipu_config" in message


def test_a_four_ipu_pipeline_file_maps_every_key_and_the_block_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # compiling writes the stand-in's executable to ./exe_cache
    executor = build({"ipu_config": fixture("summarization_ipu_config.json"), "pipeline_layers": "layers",
                      "embedding_serialization_factor": 1})
    options = executor.poptorch_options
    assert options.called("replicationFactor") == [(4,)]
    assert options.called("deviceIterations") == [(1,)]
    assert options.called("Training.gradientAccumulation") == [(16,)]
    assert options.called("setAvailableMemoryProportion") == [({"IPU0": 0.05, "IPU1": 0.2, "IPU2": 0.2, "IPU3": 0.25},)]
    assert options.called("enableExecutableCaching") == [("./exe_cache",)]
    assert options.called("Precision.setPartialsType") == [(torch.half,)]
    (settings,) = options.called("TensorLocations.setOptimizerLocation")[0]
    assert settings.on_chip is False and settings.replicated_tensor_sharding is True
    assert executor.batch_size_factor == 4 * 16
    inference = executor.inference_executor().poptorch_options
    assert inference.called("deviceIterations") == [(5,)] and inference.called("replicationFactor") == [(4,)]
    # layers_per_ipu [0, 4, 4, 4]: nothing on IPU0 (the embedding's in optimum), four layers on each other IPU.
    executor.compile({"x": torch.zeros(64, 4), "y": torch.zeros(64, 4)})
    assert [layer.poptorch_block[1] for layer in executor.model.layers] == [1] * 4 + [2] * 4 + [3] * 4


def test_keys_in_the_executor_block_and_the_trainer_win_over_the_file():
    path = fixture("summarization_ipu_config.json")
    base = {"ipu_config": path, "pipeline_layers": "layers", "embedding_serialization_factor": 1}
    # 7: the file's four pipeline stages need 2 × 4 − 1 in training.
    from_block = build({**base, "gradient_accumulation": 7, "matmul_proportion": 0.2})
    assert from_block.poptorch_options.called("Training.gradientAccumulation") == [(7,)]
    assert from_block.poptorch_options.called("setAvailableMemoryProportion") == [({f"IPU{i}": 0.2 for i in range(4)},)]
    # trainer.num_gradient_accumulation_steps reaches the executor as an injected argument.
    from_trainer = build(base, gradient_accumulation=8)
    assert from_trainer.poptorch_options.called("Training.gradientAccumulation") == [(8,)]


def test_per_pod_values_take_the_default_and_deprecated_keys_are_ignored(caplog):
    with caplog.at_level(logging.INFO, logger="ipuflow.execution.optimum_ipu_config"):
        executor = build({"ipu_config": fixture("hubert_base_ipu_config.json"), "pipeline_layers": "layers"})
    options = executor.poptorch_options
    assert options.called("replicationFactor") == [(1,)]
    assert options.called("Training.gradientAccumulation") == [(512,)]
    assert executor.inference_executor().poptorch_options.called("deviceIterations") == [(4,)]
    assert "ignoring 'enable_half_first_order_momentum'" in caplog.text
    assert "using the \"default\" entry 1" in caplog.text


def test_per_pod_values_without_a_default_are_refused(tmp_path):
    path = tmp_path / "ipu_config.json"
    path.write_text(json.dumps({"replication_factor": {"pod4": 1, "pod16": 4}}))
    with pytest.raises(ConfigurationError, match="'replication_factor' gives per-pod values"):
        build({"ipu_config": str(path)})


def test_training_arguments_in_the_file_are_refused_all_named():
    with pytest.raises(ConfigurationError) as error:
        build({"ipu_config": fixture("trainer_test_ipu_config.json")})
    message = str(error.value)
    for key in ("dataloader_workers", "async_dataloader", "weight_decay", "layer_norm_eps", "attention_probs_dropout_prob", "mask_tokens"):
        assert f"'{key}'" in message
    assert "trainer_test_ipu_config.json" in message and "not optimum-graphcore IPUConfig keys" in message


def test_a_proportion_list_shorter_than_the_pipeline_is_refused_as_ipuconfig_does():
    path = fixture("language_modeling_ipu_config.json")
    with pytest.raises(ConfigurationError) as error:
        build({"ipu_config": path, "pipeline_layers": "layers"})
    message = str(error.value)
    assert message.startswith("trainer.executor.matmul_proportion: has 1 entries, but there are 4 IPUs per replica")
    assert "comes from 'matmul_proportion' in trainer.executor.ipu_config" in message
    executor = build({"ipu_config": path, "pipeline_layers": "layers", "matmul_proportion": 0.25})
    assert executor.poptorch_options.called("setAvailableMemoryProportion") == [({f"IPU{i}": 0.25 for i in range(4)},)]


@pytest.mark.parametrize("key, value, accepted", [
    ("explicit_ir_inference", False, True), ("explicit_ir_inference", True, False),
    ("parallelize_kwargs", {}, True), ("parallelize_kwargs", {"use_cache": True}, False),
    ("projection_serialization_factor", 1, True), ("projection_serialization_factor", 5, False),
    ("serialized_embedding_splits_per_ipu", None, True), ("serialized_embedding_splits_per_ipu", [3, 1], False),
    ("execute_encoder_on_cpu_for_generation", True, False),
])
def test_keys_supported_only_when_off(tmp_path, key, value, accepted):
    path = tmp_path / "ipu_config.json"
    path.write_text(json.dumps({key: value}))
    if accepted:
        build({"ipu_config": str(path)})
    else:
        with pytest.raises(ConfigurationError, match=f"'{key}' is .* but only .* is supported: "):
            build({"ipu_config": str(path)})


def test_output_mode_seed_and_auto_loss_scaling_map(tmp_path):
    path = tmp_path / "ipu_config.json"
    path.write_text(json.dumps({"output_mode": "all", "seed": 42, "auto_loss_scaling": True}))
    options = build({"ipu_config": str(path), "precision": "fp16"}).poptorch_options
    assert options.called("outputMode") == [(fake_poptorch.OutputMode.All, None)]
    assert options.called("randomSeed") == [(42,)]
    assert options.called("Training.setAutomaticLossScaling") == [(True,)]
    path.write_text(json.dumps({"output_mode": "default"}))  # poptorch's default: final in training
    assert build({"ipu_config": str(path)}).poptorch_options.called("outputMode") == [(fake_poptorch.OutputMode.Final, None)]


def test_wrongly_typed_values_name_the_file_key(tmp_path):
    path = tmp_path / "ipu_config.json"
    path.write_text(json.dumps({"gradient_accumulation_steps": 0}))
    with pytest.raises(ConfigurationError, match=r"trainer.executor.gradient_accumulation: .*comes from 'gradient_accumulation_steps'"):
        build({"ipu_config": str(path)})


def test_relative_paths_are_read_from_the_working_directory(tmp_path, monkeypatch):
    shutil.copy(FIXTURES / "t5_encoder_ipu_config.json", tmp_path / "ipu_config.json")
    monkeypatch.chdir(tmp_path)
    assert build({"ipu_config": "ipu_config.json"}).poptorch_options.called("enableExecutableCaching") == [("./exe_cache",)]
    with pytest.raises(ConfigurationError, match=r"trainer.executor.ipu_config \(missing.json\): no such file \(resolved to .*missing.json\)"):
        build({"ipu_config": "missing.json"})


def test_bad_files_are_configuration_errors(tmp_path):
    path = tmp_path / "ipu_config.json"
    path.write_text("{not json")
    with pytest.raises(ConfigurationError, match="cannot be read as an IPUConfig JSON file"):
        build({"ipu_config": str(path)})
    path.write_text("[1, 2]")
    with pytest.raises(ConfigurationError, match="expected a JSON object of IPUConfig keys, found list"):
        build({"ipu_config": str(path)})


def test_ipu_config_given_in_python_says_how_to_use_it():
    model = Encoder()
    with pytest.raises(ConfigurationError, match="read when the executor is built from a config"):
        PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), ipu_config=fixture("t5_encoder_ipu_config.json"))


def test_the_shipped_example_reads_its_ipu_config_from_the_repository_root(monkeypatch):
    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    block = Params.from_file(str(root / "configs" / "quickstart_ipu.jsonnet")).as_dict()["trainer"]["executor"]
    executor = build({key: value for key, value in block.items() if key != "type"})
    options = executor.poptorch_options
    assert options.called("deviceIterations") == [(4,)] and options.called("Training.gradientAccumulation") == [(2,)]
    assert options.called("randomSeed") == [(42,)] and options.called("enableExecutableCaching") == [("./exe_cache",)]
    assert options.called("setAvailableMemoryProportion") == [({"IPU0": 0.3},)]
    assert executor.batch_size_factor == 8 and executor.inference_executor().batch_size_factor == 4


def test_python_users_pass_read_ipu_config_as_keyword_arguments():
    from ipuflow.execution.optimum_ipu_config import read_ipu_config

    model = Encoder()
    options = read_ipu_config(fixture("t5_encoder_ipu_config.json"))
    assert options == {"executable_cache_dir": "./exe_cache", "ipus_per_replica": 1,
                       "inference_device_iterations": 1, "inference_replication_factor": 1}
    executor = PoptorchExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), **options)
    assert executor.poptorch_options.called("enableExecutableCaching") == [("./exe_cache",)]


def test_evaluate_and_predict_build_their_inference_executor_with_the_file():
    from ipuflow.evaluation.inference import inference_executor_from_config

    config = Params({"trainer": {"executor": {"type": "poptorch", "ipu_config": fixture("summarization_ipu_config.json"),
                                              "pipeline_layers": "layers", "embedding_serialization_factor": 1}}})
    executor = inference_executor_from_config(config, Encoder())
    assert not executor.training
    options = executor.poptorch_options
    assert options.called("deviceIterations") == [(5,)] and options.called("replicationFactor") == [(4,)]
    assert options.called("setAvailableMemoryProportion") == [({"IPU0": 0.05, "IPU1": 0.2, "IPU2": 0.2, "IPU3": 0.25},)]
    assert executor.batch_size_factor == 20
