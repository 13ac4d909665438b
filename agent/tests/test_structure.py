"""The agent's shape, read from its source: no import circles, no module
reaching into another's private names, and torch reached only through its
backend (so that another framework is a module beside _torch, not edits
across the agent)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import AGENT

PKG = AGENT / "gputop"
# the modules that speak torch's own API: its backend, the direct reading of
# its allocator, the walk over its tensors, the notebook magics
TORCH_SIDE = {"gputop._torch", "gputop._direct", "gputop._magics"}
TORCH_SIDE_PACKAGES = ("gputop._holders",)
# the other frameworks' backends: their own APIs have a .cuda (cupy.cuda);
# they never import torch (test_other_frameworks_never_import_torch)
FRAMEWORK_SIDE = {"gputop._cupy", "gputop._jax"}


def modules() -> dict[str, ast.Module]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = list(p.relative_to(AGENT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = ast.parse(p.read_text(), str(p))
    return out


def is_package(name: str) -> bool:
    return (AGENT / Path(*name.split(".")) / "__init__.py").exists()


def resolve(name: str, node: ast.ImportFrom) -> str:
    """The absolute module an import names, from module name."""
    base = name.split(".") if is_package(name) else name.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))
    return node.module or ""


def imports(name: str, tree: ast.Module, known: set[str]) -> dict[str, set[str]]:
    """gputop modules that name imports (anywhere in it, functions too) ->
    the names it takes from each (empty: the module itself)."""
    out: dict[str, set[str]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                if a.name in known:
                    out.setdefault(a.name, set())
        elif isinstance(n, ast.ImportFrom):
            mod = resolve(name, n)
            for a in n.names:
                sub = f"{mod}.{a.name}"
                if sub in known:
                    out.setdefault(sub, set())
                elif mod in known:
                    out.setdefault(mod, set()).add(a.name)
    out.pop(name, None)
    return out


def test_no_import_circles() -> None:
    mods = modules()
    known = set(mods)
    # a package's __init__ is run by importing any of its modules: not an arrow
    graph = {m: {d for d in imports(m, t, known) if not m.startswith(d + ".")} for m, t in mods.items()}
    circles = []
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                circles.append(path[path.index(d):] + [d])
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert circles == [], "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def private(attr: str) -> bool:
    return attr.startswith("_") and not attr.startswith("__")


def test_no_module_reaches_into_anothers_private_names() -> None:
    """module._name (a private module-level name of another gputop module)
    and obj._attr (an attribute private to another module's classes)."""
    mods = modules()
    known = set(mods)
    # the private attributes each module's classes define (self._x = ..., def _x)
    owned: dict[str, set[str]] = {}
    for m, tree in mods.items():
        mine = owned.setdefault(m, set())
        for n in ast.walk(tree):
            if isinstance(n, ast.ClassDef):
                for c in ast.walk(n):
                    if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef)) and private(c.name):
                        mine.add(c.name)
                    elif (isinstance(c, ast.Attribute) and isinstance(c.value, ast.Name)
                          and c.value.id == "self" and private(c.attr) and isinstance(c.ctx, ast.Store)):
                        mine.add(c.attr)
    found = []
    for m, tree in mods.items():
        # names bound to gputop modules here: import x / from . import x
        bound = {}
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom):
                mod = resolve(m, n)
                for a in n.names:
                    if f"{mod}.{a.name}" in known:
                        bound[a.asname or a.name] = f"{mod}.{a.name}"
        others = set().union(*(v for k, v in owned.items() if k != m)) - owned[m]
        for n in ast.walk(tree):
            if not (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and private(n.attr)):
                continue
            who = n.value.id
            if who in bound and bound[who] != m:
                found.append(f"{m}:{n.lineno}: {who}.{n.attr} (module {bound[who]})")
            elif who not in ("self", "cls") and who not in bound and n.attr in others:
                found.append(f"{m}:{n.lineno}: {who}.{n.attr}")
    assert found == [], "private names reached from another module:\n" + "\n".join(found)


def test_torch_is_reached_through_its_backend() -> None:
    """Outside torch's side of the agent, no torch._C, no _cuda_* call, no
    torch.cuda: the rest reads any framework through _backend.Backend."""
    found = []
    for m, tree in modules().items():
        if m in TORCH_SIDE or m.startswith(TORCH_SIDE_PACKAGES):
            continue
        for n in ast.walk(tree):
            if m in FRAMEWORK_SIDE and isinstance(n, ast.Attribute) and n.attr == "cuda":
                continue
            if isinstance(n, ast.Attribute) and (n.attr in ("_C", "cuda", "_lazy_call") or n.attr.startswith("_cuda")):
                found.append(f"{m}:{n.lineno}: .{n.attr}")
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("_cuda_"):
                found.append(f"{m}:{n.lineno}: {n.value!r}")
    assert found == [], "torch's API outside its backend:\n" + "\n".join(found)


def test_other_frameworks_never_import_torch() -> None:
    mods = modules()
    assert FRAMEWORK_SIDE <= set(mods), FRAMEWORK_SIDE - set(mods)
    for m in sorted(FRAMEWORK_SIDE):
        for n in ast.walk(mods[m]):
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
                [n.module or ""] if isinstance(n, ast.ImportFrom) else []
            assert not any(x == "torch" or x.startswith("torch.") for x in names), (m, n.lineno)
