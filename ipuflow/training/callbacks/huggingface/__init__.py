"""Hugging Face `transformers.TrainerCallback`s run unchanged on ipuflow's events (the `huggingface`
callback type); transformers is imported only when one is built."""

from ipuflow.training.callbacks.huggingface.callback import HuggingFaceCallback

__all__ = ["HuggingFaceCallback"]
