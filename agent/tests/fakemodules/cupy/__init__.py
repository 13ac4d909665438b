"""An importable fake `cupy` (fakeframeworks.FakeCuPy as this module); for
tests and bench dry runs only."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from fakeframeworks import FakeCuPy  # noqa: E402

fake = FakeCuPy(adopt=sys.modules[__name__])
