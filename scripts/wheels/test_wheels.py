"""The wheels scripts/build-wheels.sh wrote to dist/, installed and run the
way a user installs and runs them: pip into a fresh venv from dist/ alone
(no index), the installed `gputop` binary as a command and in a real
terminal (tmux), the agent imported from the venv, and each binary's glibc
symbol versions (objdump -T) held to its wheel's manylinux tag.

Run scripts/build-wheels.sh first (scripts/test.sh does).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "dist"
TOOLS = ROOT / ".wheel-tools"
VERSION = re.search(r'^const version = "(.*)"$', (ROOT / "main.go").read_text(), re.M).group(1)
ARCHES = {"x86_64": 62, "aarch64": 183}  # the wheel's arch: ELF e_machine (EM_X86_64, EM_AARCH64)


def wheel(platform: str) -> Path:
    found = sorted(DIST.glob(f"gputop_profiler-{VERSION}-py3-none-{platform}.whl"))
    assert len(found) == 1, (f"want one gputop_profiler {VERSION} wheel for {platform} in {DIST}, "
                             f"found {found}: run scripts/build-wheels.sh")
    return found[0]


def wheel_tags(whl: Path) -> list[str]:
    with zipfile.ZipFile(whl) as z:
        text = z.read(f"gputop_profiler-{VERSION}.dist-info/WHEEL").decode()
    return re.findall(r"^Tag: (.*)$", text, re.M)


def run(*cmd: str | Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120, **kw)


def clean_env() -> dict[str, str]:
    """The environment without anything pointing at this checkout's agent."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "GPUTOP_BIN")}


def fresh_venv(path: Path, *pip_args: str | Path) -> Path:
    r = run(sys.executable, "-m", "venv", path)
    assert r.returncode == 0, r.stderr
    r = run(path / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check",
            "--no-index", *pip_args, env=clean_env())
    assert r.returncode == 0, f"pip install {pip_args}: {r.stdout}\n{r.stderr}"
    return path


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A venv where pip chose, from everything in dist/, what it installs
    for `pip install gputop-profiler` on this machine (Linux x86_64)."""
    return fresh_venv(tmp_path_factory.mktemp("venv"), "--find-links", DIST, f"gputop-profiler=={VERSION}")


def test_pip_installs_the_x86_64_wheel_and_gputop_is_its_binary(venv):
    infos = list(venv.glob("lib/python*/site-packages/gputop_profiler-*.dist-info"))
    assert len(infos) == 1, infos
    tags = re.findall(r"^Tag: (.*)$", (infos[0] / "WHEEL").read_text(), re.M)
    assert tags == wheel_tags(wheel("manylinux_*_x86_64.*")), tags
    gputop = venv / "bin" / "gputop"
    assert gputop.read_bytes()[:4] == b"\x7fELF", f"{gputop} is not the binary"
    assert os.access(gputop, os.X_OK)


# The aarch64 binary runs under qemu-user with Debian's aarch64 glibc
# (packages qemu-user and libc6-arm64-cross; .ci/run installs them).
QEMU_AARCH64 = ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]


# Debian 11's glibc 2.31 (Ubuntu 20.04's release), unpacked by
# scripts/wheels/old-glibc.sh, which scripts/test.sh runs.
GLIBC_2_31 = TOOLS / "glibc-2.31" / "lib"


@pytest.fixture(scope="module", params=[*ARCHES, "x86_64 on glibc 2.31"])
def gputop(request, venv, tmp_path_factory) -> tuple[str, list[str]]:
    """(arch, the command that runs that arch's installed gputop): x86_64's
    from the venv, on this machine's glibc or on 2.31 (its loader run with
    its libraries, LD_LIBRARY_PATH after them); aarch64's installed by pip
    for that platform into a directory of its own (--platform --target) and
    run under qemu-user."""
    arch = request.param
    if arch == "x86_64":
        return arch, [str(venv / "bin" / "gputop")]
    if arch == "x86_64 on glibc 2.31":
        loader = GLIBC_2_31 / "ld-linux-x86-64.so.2"
        if not loader.exists():
            pytest.fail(f"no {loader}: run scripts/wheels/old-glibc.sh {GLIBC_2_31.parent}")
        wrapper = tmp_path_factory.mktemp("glibc-2.31") / "gputop"
        wrapper.write_text(f'#!/bin/sh\nexec "{loader}" --library-path "{GLIBC_2_31}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}" '
                           f'"{venv / "bin" / "gputop"}" "$@"\n')
        wrapper.chmod(0o755)
        r = run(loader, "--library-path", GLIBC_2_31, GLIBC_2_31 / "libc.so.6")
        assert "release version 2.31" in r.stdout, r.stdout
        return "x86_64", [str(wrapper)]
    if not shutil.which(QEMU_AARCH64[0]) or not Path(QEMU_AARCH64[2], "lib", "ld-linux-aarch64.so.1").exists():
        pytest.fail("running the aarch64 binary needs qemu-user and libc6-arm64-cross (apt-get install them)")
    target = tmp_path_factory.mktemp("aarch64")
    r = run(sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-index",
            "--find-links", DIST, "--only-binary=:all:", "--platform", "manylinux_2_17_aarch64",
            "--target", target, f"gputop-profiler=={VERSION}", env=clean_env())
    assert r.returncode == 0, r.stdout + r.stderr
    binary = target / "bin" / "gputop"
    assert binary.read_bytes()[:4] == b"\x7fELF" and os.access(binary, os.X_OK), binary
    return arch, [*QEMU_AARCH64, str(binary)]


def test_gputop_version_is_the_wheels(gputop):
    arch, cmd = gputop
    r = run(*cmd, "version", env=clean_env())
    assert (r.returncode, r.stdout) == (0, f"gputop {VERSION}\n"), (arch, r)


def test_import_gputop_comes_from_the_venv(venv, tmp_path):
    r = run(venv / "bin" / "python", "-c", "import gputop; print(gputop.__file__); print(gputop.__version__)",
            cwd=tmp_path, env=clean_env())
    assert r.returncode == 0, r.stderr
    where, version = r.stdout.split("\n")[:2]
    assert Path(where).is_relative_to(venv) and version == VERSION, r.stdout


def test_gputop_demo_in_a_terminal(gputop):
    arch, cmd = gputop
    name = f"wheel-{arch}-{uuid.uuid4().hex[:8]}"

    sock = Path(tempfile.mkdtemp(prefix="gputop-tmux-")) / "tmux"

    def tmux(*args: str | Path) -> subprocess.CompletedProcess:
        # a tmux server of its own (-S), never the user's default one
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
        return run("tmux", "-S", sock, "-f", "/dev/null", *args, env=env)

    r = tmux("new-session", "-d", "-s", name, "-x", "160", "-y", "50", "--", *cmd, "--demo")
    assert r.returncode == 0, r.stderr
    try:
        deadline, screen = time.monotonic() + 60, ""
        while time.monotonic() < deadline:
            screen = tmux("capture-pane", "-p", "-t", name).stdout
            if "NVIDIA H200" in screen and "demo" in screen:
                break
            time.sleep(0.1)
        assert "NVIDIA H200" in screen and "demo" in screen, f"{arch}: the demo never showed; last screen:\n{screen}"
        tmux("send-keys", "-t", name, "q")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and tmux("has-session", "-t", name).returncode == 0:
            time.sleep(0.1)
        assert tmux("has-session", "-t", name).returncode != 0, f"{arch}: gputop did not quit on q"
    finally:
        tmux("kill-server")
        shutil.rmtree(sock.parent, ignore_errors=True)


FAKE_NVML = """
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int *count) { return 999; } /* NVML_ERROR_UNKNOWN */
"""


def test_nvml_is_bound_when_the_library_is_loaded(gputop, tmp_path):
    """NVML is left unbound in the binary (weak symbols, lazy binding): with
    no libnvidia-ml.so.1 it starts and says there is no driver; with one,
    the calls reach the library dlopen found (a stand-in, built for the
    binary's arch by the build's zig, whose nvmlDeviceGetCount_v2 fails)."""
    arch, cmd = gputop
    r = run(*cmd, "record", "-o", tmp_path / "none.jsonl", "--source", "nvml", "--duration", "1s",
            env=clean_env())
    assert r.returncode == 1 and "no NVIDIA driver" in r.stderr and "libnvidia-ml.so.1" in r.stderr, (arch, r)

    lib = tmp_path / "lib"
    lib.mkdir()
    (tmp_path / "nvml.c").write_text(FAKE_NVML)
    cc = run(TOOLS / "bin" / "python", "-m", "ziglang", "cc", "-target", f"{arch}-linux-gnu.2.17",
             "-shared", "-fPIC", "-o", lib / "libnvidia-ml.so.1", tmp_path / "nvml.c",
             env={**clean_env(), "ZIG_GLOBAL_CACHE_DIR": str(TOOLS / "zig-cache")})
    assert cc.returncode == 0, cc.stderr
    r = run(*cmd, "record", "-o", tmp_path / "fake.jsonl", "--source", "nvml", "--duration", "1s",
            env={**clean_env(), "LD_LIBRARY_PATH": str(lib)})
    assert r.returncode == 1, (arch, r)
    assert "cannot list GPUs: nvml DeviceGetCount: unknown NVML error" in r.stderr, (arch, r.stderr)


# pip --platform matches the tags given, without the older manylinux ones a
# pip on that machine would also accept, so each case names one tag.
@pytest.mark.parametrize("platform, takes", [
    ("manylinux_2_17_x86_64", "manylinux_2_17_x86_64.manylinux2014_x86_64"),
    ("manylinux2014_x86_64", "manylinux_2_17_x86_64.manylinux2014_x86_64"),  # pip before PEP 600 (20.3)
    ("manylinux_2_17_aarch64", "manylinux_2_17_aarch64.manylinux2014_aarch64"),
    ("manylinux2010_x86_64", "any"),  # glibc 2.12: older than the binaries need
    ("musllinux_1_2_x86_64", "any"),
    ("macosx_11_0_arm64", "any"),
])
def test_pip_takes_the_wheel_that_fits_the_platform(platform, takes, tmp_path):
    r = run(sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-index",
            "--find-links", DIST, "--only-binary=:all:", "--platform", platform, "--no-deps",
            "--dest", tmp_path, f"gputop-profiler=={VERSION}", env=clean_env())
    assert r.returncode == 0, r.stdout + r.stderr
    got = [p.name for p in tmp_path.iterdir()]
    assert got == [f"gputop_profiler-{VERSION}-py3-none-{takes}.whl"], (platform, got)


def glibc_needs(binary: Path) -> tuple[int, int]:
    r = run("objdump", "-T", binary)
    assert r.returncode == 0, r.stderr
    versions = {tuple(map(int, v.split("."))) for v in re.findall(r"\bGLIBC_(\d+\.\d+)\b", r.stdout)}
    assert versions, f"objdump -T {binary}: no GLIBC_ symbol versions"
    return max(versions)


@pytest.mark.parametrize("arch", ARCHES)
def test_binary_needs_no_newer_glibc_than_its_tag(arch, tmp_path):
    whl = wheel(f"manylinux_*_{arch}.*")
    tags = wheel_tags(whl)
    allowed = []
    for t in tags:
        m = re.fullmatch(rf"py3-none-manylinux_(\d+)_(\d+)_{arch}", t)
        if m:
            allowed.append((int(m[1]), int(m[2])))
    assert len(allowed) == 1, f"{whl.name}: want one manylinux_X_Y_{arch} tag, have {tags}"
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        binary = tmp_path / "gputop"
        binary.write_bytes(z.read(f"gputop_profiler-{VERSION}.data/scripts/gputop"))
    assert not [n for n in names if re.search(r"lib(nvidia|cuda)", n)], names

    head = binary.read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == ARCHES[arch], head
    needs = glibc_needs(binary)
    assert needs <= allowed[0], f"{arch}: the binary needs GLIBC_{needs}, its tag allows {allowed[0]}"
    dynamic = run("objdump", "-p", binary).stdout
    assert not re.search(r"NEEDED\s+\S*(nvidia|cuda)", dynamic), dynamic
    # auditwheel's own reading of the manylinux policy (libraries and symbols)
    r = run(TOOLS / "bin" / "auditwheel", "show", whl)
    assert f'"manylinux_{allowed[0][0]}_{allowed[0][1]}_{arch}"' in r.stdout, r.stdout + r.stderr


def test_agent_only_wheel_installs_and_imports_and_has_no_gputop_command(tmp_path):
    whl = wheel("any")
    with zipfile.ZipFile(whl) as z:
        assert not [n for n in z.namelist() if ".data/" in n or n.endswith("entry_points.txt")], z.namelist()
        assert not any(z.read(n)[:4] == b"\x7fELF" for n in z.namelist())
    venv = fresh_venv(tmp_path / "venv", whl)
    r = run(venv / "bin" / "python", "-c", "import gputop; print(gputop.__file__)", cwd=tmp_path, env=clean_env())
    assert r.returncode == 0 and Path(r.stdout.strip()).is_relative_to(venv), r
    assert not (venv / "bin" / "gputop").exists()


def test_gputop_run_no_tui_passes_output_and_exit_code_through(venv, tmp_path):
    """`gputop run` from the wheel starts CMD (the venv's Python, where the
    wheel's agent is importable), passes its output through and exits with
    its code, saying how CMD ended."""
    r = run(venv / "bin" / "gputop", "run", "--no-tui", "--", venv / "bin" / "python", "-c",
            "import sys, gputop; print('CMD says hello'); sys.exit(3)", cwd=tmp_path, env=clean_env())
    assert r.returncode == 3, r
    assert r.stdout.startswith("CMD says hello\n"), r.stdout
    assert "exited with code 3" in r.stderr, r.stderr
