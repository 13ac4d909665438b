"""The bench scripts run on the GPU machine only, so CI runs what of them can
run here: every script's --help and, where it has one, its --dry-run (a
broken import or option shows here, not on the H200); bench/README.md's
table names every one of them; they import nothing of each other but
common.py, rec.py and their own parts (PARTS); the agent's names they use
exist; and the result files BENCHMARKS.md links to are there."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

import gputop

BENCH = REPO / "bench"
SHARED = {"common", "rec"}  # the modules bench scripts may import
# a script's own parts, split off to keep it short: imported by that script
# alone, never run
PARTS = {"leak_scenarios": "holders_scenarios", "overhead_workers": "overhead"}
# what workloads share, imported by those workloads alone, never run
WORKLOAD_SHARED = {"fitloop": {"fit_gpt", "fit_resnet"}}
HELPERS = [BENCH / "common.py", *(BENCH / f"{m}.py" for m in PARTS),
           *(BENCH / "workloads" / f"{m}.py" for m in WORKLOAD_SHARED)]
SCRIPTS = sorted(p for p in [*BENCH.glob("*.py"), *(BENCH / "workloads").glob("*.py")] if p not in HELPERS)


def _with_shared(p: Path) -> str:
    """A script's source, and that of the workload code it shares."""
    shared = [BENCH / "workloads" / f"{m}.py" for m, users in WORKLOAD_SHARED.items()
              if p.parent.name == "workloads" and p.stem in users]
    return "".join(q.read_text() for q in [p, *shared])


# those that have one (their own, or common.parts_parser's)
DRY = [p for p in SCRIPTS if '"--dry-run"' in _with_shared(p) or "parts_parser(" in _with_shared(p)]


def run(script: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "agent"), GPUTOP_HOLDERS_DEVICE="cpu", CUDA_VISIBLE_DEVICES="")
    return subprocess.run([sys.executable, str(script), *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def name(p: Path) -> str:
    return str(p.relative_to(BENCH))


@pytest.fixture(scope="module")
def help_texts() -> dict[str, str]:
    return {name(p): run(p, "--help").stdout for p in SCRIPTS}


def test_scripts_found():
    assert {"check.py", "overhead.py", "rec.py", "workloads/train_mlp.py"} <= {name(p) for p in SCRIPTS}
    assert len(SCRIPTS) >= 17


@pytest.mark.parametrize("script", SCRIPTS, ids=name)
def test_help(script: Path):
    p = run(script, "--help")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("usage: "), p.stdout
    # subcommands too (check.py train, nvml_compare.py smi, ...)
    m = re.search(r"^usage: \S+ .*?\{([\w,-]+)\}", p.stdout, re.M | re.S)
    for sub in (m.group(1).split(",") if m else []):
        q = run(script, sub, "--help")
        assert q.returncode == 0 and q.stdout.startswith("usage: "), (sub, q.stdout + q.stderr)


@pytest.mark.parametrize("script", DRY, ids=name)
def test_dry_run(script: Path):
    # holders_scenarios.py --dry-run runs all twelve scenario runs on CPU tensors
    p = run(script, "--dry-run", timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip(), p.stderr


def test_dry_runs_exist_where_the_readme_says(help_texts: dict[str, str]):
    rows = readme_rows()
    with_dry = {n for n, text in help_texts.items() if "--dry-run" in text}
    assert with_dry == {name(p) for p in DRY} and len(with_dry) >= 9
    said = {n for n in help_texts if "`--dry-run`" in rows[n]}
    assert said == with_dry


def readme_rows() -> dict[str, str]:
    """bench/README.md's table: each file its first column names -> its row."""
    out = {}
    for line in (BENCH / "README.md").read_text().splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split(" | ")[0]
        for f in re.findall(r"`([^`]+)`", first):
            out[f] = line
    return out


def test_readme_table_names_every_file():
    rows = readme_rows()
    files = {name(p) for p in [*SCRIPTS, *HELPERS]}
    files |= {name(p) for p in BENCH.glob("*.go")} | {name(p) for p in (BENCH / "probe").iterdir()}
    files |= {name(p) for p in (BENCH / "cmd").iterdir()}
    assert files - set(rows) == set(), "files of bench/ the README's table does not name"
    assert {f for f in rows if not (BENCH / f).exists()} == set(), "names in the table that are not in bench/"


def imported(tree: ast.AST) -> set[str]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out |= {a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
            out.add(n.module.split(".")[0])
    return out


def test_scripts_import_only_common_and_rec():
    local = {p.stem for p in BENCH.glob("*.py")} | {p.stem for p in (BENCH / "workloads").glob("*.py")}
    for p in [*SCRIPTS, *HELPERS]:
        mine = imported(ast.parse(p.read_text())) & local
        allowed = set() if p.parent.name == "workloads" or p.stem in SHARED else SHARED
        allowed = allowed | {part for part, owner in PARTS.items() if owner == p.stem}
        if p.parent.name == "workloads":
            allowed = allowed | {m for m, users in WORKLOAD_SHARED.items() if p.stem in users}
        assert mine <= allowed, f"{name(p)} imports {sorted(mine - allowed)}"
    for part, owner in PARTS.items():
        owner_imports = imported(ast.parse((BENCH / f"{owner}.py").read_text()))
        assert part in owner_imports, f"{owner}.py does not import its part {part}"
    for m, users in WORKLOAD_SHARED.items():
        for u in users:
            assert m in imported(ast.parse((BENCH / "workloads" / f"{u}.py").read_text())), f"{u}.py does not import {m}"
    assert imported(ast.parse((BENCH / "common.py").read_text())) <= set(sys.stdlib_module_names) | {"__future__"}
    assert imported(ast.parse((BENCH / "rec.py").read_text())) <= set(sys.stdlib_module_names) | {"__future__"}


def test_agent_names_the_scripts_use_exist():
    # the scripts reach into the agent (its private modules too), often in
    # code that only runs on a GPU or in a child's source string
    seen = 0
    for p in [*SCRIPTS, *HELPERS]:
        text = p.read_text()
        for mod, names in re.findall(r"from (gputop(?:\.\w+)?) import ([\w, ]+)", text):
            m = importlib.import_module(mod)
            for n in (x.strip() for x in names.split(",")):
                assert hasattr(m, n) or importlib.util.find_spec(f"{mod}.{n}"), f"{name(p)}: {mod}.{n}"
                seen += 1
        for mod, attr in re.findall(r"(?<![\w.])(_(?:agent|backend|torch|direct|holders|wire|tracker|lifecycle))\.(\w+)", text):
            m = importlib.import_module(f"gputop.{mod}")
            assert hasattr(m, attr), f"{name(p)}: gputop.{mod}.{attr}"
            seen += 1
        for attr in re.findall(r"(?<![\w./\"'])gputop\.(\w+)", text):
            assert hasattr(gputop, attr) or importlib.util.find_spec(f"gputop.{attr}"), f"{name(p)}: gputop.{attr}"
            seen += 1
    assert seen >= 80


def test_result_links_resolve():
    links = 0
    for doc, base in ((REPO / "BENCHMARKS.md", REPO), (BENCH / "README.md", BENCH)):
        for target in re.findall(r"\]\(([^)#\s]+)\)", doc.read_text()):
            if "://" in target:
                continue
            assert (base / target).exists(), f"{doc.name} links to {target}, which is not there"
            links += 1
        for target in re.findall(r"`(results/[^`]+)`", doc.read_text()):
            assert (BENCH / target).exists(), f"{doc.name} names {target}, which is not there"
            links += 1
    assert links >= 20


def test_resource_reads_a_go_profile():
    """resource.py --tools prints the TUI's profile on the GPU machine, where
    Go is missing: its reader gives what `go tool pprof -top` gave for the
    stored profiles (bench/results/2026-12-02-tuiload-*.pprof)."""
    sys.path.insert(0, str(BENCH))
    try:
        from common import pprof_top
    finally:
        sys.path.remove(str(BENCH))
    # go tool pprof -top: "Total samples = 430ms", first "90ms ... linux.Syscall6";
    # "Total samples = 280ms", flat 30ms for ingest.(*Ingest).Apply
    total, top = pprof_top(str(BENCH / "results" / "2026-12-02-tuiload-main.pprof"), 15)
    assert round(total, 2) == 0.43 and len(top) == 15
    assert top[0][0] == "internal/runtime/syscall/linux.Syscall6" and round(top[0][1], 2) == 0.09
    assert any(fn == "main.feed" and round(cum, 2) == 0.09 for fn, _, cum in top)
    total, top = pprof_top(str(BENCH / "results" / "2026-12-02-tuiload-perf.pprof"), 3)
    assert round(total, 2) == 0.28 and len(top) == 3
    assert ("github.com/gputop/gputop/ingest.(*Ingest).Apply", 0.03) in [(f, round(x, 2)) for f, x, _ in top]
    p = run(BENCH / "resource.py", "--profile", str(BENCH / "results" / "2026-12-02-tuiload-main.pprof"), "--top", "2")
    assert p.returncode == 0 and "linux.Syscall6" in p.stdout, p.stdout + p.stderr
