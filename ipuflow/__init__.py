"""ipuflow: config-driven training with registrable components, on CPU, CUDA and Graphcore IPUs.

Importing the package is cheap: subpackages (and torch) load only when they are used.
"""

from ipuflow.version import VERSION as __version__

__all__ = ["__version__"]
