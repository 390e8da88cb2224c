"""Exporting archived models to portable formats (ONNX), checked against PyTorch.

torch.onnx, onnx and onnxruntime are imported only inside the functions that use them.
"""
