"""Test-only: makes `import poptorch` give the stand-in (tests/execution/fake_poptorch.py).

Only tests put this folder on PYTHONPATH (with the repository root, so that `tests` imports) for
the `ipuflow` subprocesses they start; it is not part of the installed package.
"""

import sys

from tests.execution import fake_poptorch

sys.modules[__name__] = fake_poptorch
