"""FromParams: building objects from config dicts by reading constructor annotations.

(Being written: the resolver lands here shortly. The class exists so that components can
subclass it already.)
"""

from __future__ import annotations


class FromParams:
    """Mixin for classes that can be built from a `Params` object."""
