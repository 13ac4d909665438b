"""An importable fake `jax` (fakeframeworks.FakeJax as this module), so
that `import jax` in a program `gputop run` starts goes through the import
hook as the real one does; for tests and bench dry runs only."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from fakeframeworks import FakeJax  # noqa: E402

fake = FakeJax(adopt=sys.modules[__name__])
