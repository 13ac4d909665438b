"""pip install ./agent installs every package of the agent: setuptools takes
only the packages pyproject.toml lists, so a subpackage left off that list
would be missing from the installed agent."""

from __future__ import annotations

import ast
import re

from conftest import AGENT


def test_pyproject_lists_every_package_of_the_agent():
    text = (AGENT / "pyproject.toml").read_text()
    m = re.search(r"^\[tool\.setuptools\]\npackages = (\[.*\])$", text, re.M)
    assert m, "agent/pyproject.toml: no packages = [...] line under [tool.setuptools]"
    listed = set(ast.literal_eval(m.group(1)))
    on_disk = {".".join(p.parent.relative_to(AGENT).parts)
               for p in (AGENT / "gputop").rglob("__init__.py")}
    assert "gputop._holders" in on_disk
    assert listed == on_disk, (f"agent/pyproject.toml packages: missing {sorted(on_disk - listed)}, "
                               f"not on disk {sorted(listed - on_disk)}")
