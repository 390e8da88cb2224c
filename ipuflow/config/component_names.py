"""The registered name of a built component, for reports that show objects as a config writes them."""

from __future__ import annotations

from typing import Any, Optional

from ipuflow.config.registrable import Registrable


def registered_name_of(component: Any) -> Optional[str]:
    """The name `type(component)` is registered under in one of its families, or None."""
    for base in type(component).__mro__:
        if base in Registrable._registry:
            name = base.registered_name(type(component))  # type: ignore[attr-defined]
            if name is not None:
                return name
    return None
