"""The config system: Params, Registrable, FromParams, Lazy and ConfigurationError.

This package does not import torch.
"""

from ipuflow.config.errors import ConfigurationError
from ipuflow.config.from_params import FromParams
from ipuflow.config.lazy import Lazy
from ipuflow.config.params import Params
from ipuflow.config.registrable import Registrable

__all__ = ["ConfigurationError", "FromParams", "Lazy", "Params", "Registrable"]
