"""Features newer than torch 2.0.1 (poptorch 3.3/3.4's torch) are refused with one sentence naming the
config key and the torch they need, never an AttributeError. The newest torch is made to look like
torch 2.0 by lowering `ipuflow.torch_features.TORCH_RELEASE`; the CI's torch 2.0.1 leg runs the same
refusals for real."""

from __future__ import annotations

import sys

import pytest
import torch

from ipuflow import torch_features
from ipuflow.config import ConfigurationError, Params
from ipuflow.distributed.data_parallel import require_sharding
from ipuflow.execution import NativeExecutor, StepExecutor, ipu_ops
from tests.execution.executor_test_models import Regression, regression_batch


@pytest.fixture
def torch_2_0(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ipuflow's version checks see torch 2.0 (what poptorch 3.3 and 3.4 are built for)."""
    monkeypatch.setattr(torch_features, "TORCH_RELEASE", (2, 0))


def test_the_installed_release_is_parsed_from_local_and_dev_versions():
    assert torch_features.release_of("2.0.1+cu117") == (2, 0)
    assert torch_features.release_of("2.13.0.dev20260101+cpu") == (2, 13)
    assert torch_features.torch_at_least((2, 0))


def test_a_missing_feature_is_one_sentence_naming_the_key_and_the_torch_it_needs(torch_2_0):
    with pytest.raises(ConfigurationError) as raised:
        torch_features.require_torch((2, 6), "sharding 'fsdp'", key="sharding")
    error = raised.value.locate("trainer.executor.")
    assert str(error) == (f"trainer.executor.sharding: sharding 'fsdp' needs torch>=2.6; this environment has "
                          f"torch {torch.__version__}.")


def test_fsdp_sharding_is_refused_before_torchrun_on_torch_2_0(torch_2_0):
    assert require_sharding("ddp") == "ddp"
    with pytest.raises(ConfigurationError, match=r"^trainer\.executor\.sharding: .*needs torch>=2\.6"):
        require_sharding("fsdp")


@pytest.mark.skipif(sys.version_info < (3, 11), reason="torch 2.0 compiles on Python 3.10 and older")
def test_torch_compile_is_refused_on_torch_2_0_under_python_3_11(torch_2_0):
    model = Regression()
    with pytest.raises(ConfigurationError, match=r"torch\.compile on Python 3\.\d+ needs torch>=2\.1") as raised:
        StepExecutor.from_params(Params({"type": "native", "device": "cpu", "compile": True}),
                                 model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    assert raised.value.location == "compile"
    NativeExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), device="cpu", compile=False)  # eager is fine


def test_dynamic_loss_scaling_on_the_cpu_is_refused_on_torch_2_0(torch_2_0):
    model = Regression()
    with pytest.raises(ConfigurationError, match=r"dynamic loss scaling on device type 'cpu' needs torch>=2\.3") as raised:
        NativeExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), device="cpu", auto_loss_scaling=True)
    assert raised.value.key == "auto_loss_scaling"


def test_fp16_autocast_where_torch_cannot_is_refused_naming_precision(monkeypatch):
    monkeypatch.setattr(torch_features, "autocast_available", lambda device_type, dtype: False)
    model = Regression()
    with pytest.raises(ConfigurationError, match=r"'fp16' on device type 'cpu' needs a newer torch.*use 'bf16'") as raised:
        NativeExecutor(model, torch.optim.SGD(model.parameters(), lr=0.1), device="cpu", precision="fp16")
    assert raised.value.key == "precision"


def test_bf16_autocasts_on_the_cpu_on_every_supported_torch():
    assert torch_features.autocast_available("cpu", torch.bfloat16)


def test_identity_loss_marks_the_loss_without_torch_compiler(monkeypatch):
    # torch 2.0 has no torch.compiler; identity_loss called torch.compiler.is_compiling().
    monkeypatch.setattr(torch, "compiler", None, raising=False)
    monkeypatch.delitem(sys.modules, "torch._dynamo", raising=False)  # as in torch 2.0 before anything compiles
    loss = ipu_ops.identity_loss(torch.ones(3, requires_grad=True), "sum")
    assert getattr(loss, ipu_ops.IDENTITY_LOSS_ATTRIBUTE) is True
    assert not torch_features.is_compiling()


def test_the_dynamo_onnx_exporter_is_refused_on_torch_2_0(torch_2_0, tmp_path):
    pytest.importorskip("onnx")
    from ipuflow.exporting.onnx_export import export_model

    with pytest.raises(ConfigurationError, match=r"torch\.export-based ONNX exporter \(--exporter dynamo\) needs torch>=2\.6"):
        export_model(Regression().eval(), regression_batch(2), tmp_path / "model.onnx", exporter="dynamo")
    assert not (tmp_path / "model.onnx").exists()


def test_the_hugging_face_callback_is_refused_on_transformers_4_29(monkeypatch):
    transformers = pytest.importorskip("transformers")
    from ipuflow.training.callbacks.huggingface.callback import hugging_face_callback_class

    monkeypatch.setattr(transformers, "__version__", "4.29.2")
    with pytest.raises(ConfigurationError, match=r"^callback: the 'huggingface' callback needs transformers>=4\.40; "
                                                 r"this environment has transformers 4\.29\.2\.$"):
        hugging_face_callback_class("PrinterCallback")
