"""Makes a platform wheel out of the agent-only wheel: the same agent and
metadata, plus the gputop binary as the wheel's script, which pip installs
into the environment's bin/ as `gputop`, executable, the way it installs a
console script (no Python shim stands between the user and the binary).
An agent-only wheel with a `gputop` script of its own is refused: the two
would collide.

usage: platform_wheel.py PURE_WHEEL BINARY PLATFORM_TAG OUT_DIR

PLATFORM_TAG is a compressed tag set such as
manylinux_2_17_x86_64.manylinux2014_x86_64. Entries are written in order
with one fixed timestamp (SOURCE_DATE_EPOCH, else 1980-01-01), so the same
inputs give the same bytes. Stdlib only.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import sys
import time
import zipfile
from pathlib import Path


def record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def main(argv: list[str]) -> int:
    if len(argv) != 5:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    pure, binary, plat, out_dir = Path(argv[1]), Path(argv[2]), argv[3], Path(argv[4])
    name, version, py, abi, any_ = pure.name[: -len(".whl")].split("-")
    if (py, abi, any_) != ("py3", "none", "any"):
        print(f"platform_wheel.py: {pure}: not a py3-none-any wheel", file=sys.stderr)
        return 2
    info, data_dir = f"{name}-{version}.dist-info", f"{name}-{version}.data"
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    stamp = max(time.gmtime(epoch)[:6], (1980, 1, 1, 0, 0, 0))

    files: list[tuple[str, bytes, int]] = []  # path, bytes, mode
    with zipfile.ZipFile(pure) as src:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == f"{info}/RECORD":
                continue
            if item.filename == f"{info}/WHEEL":
                kept = [l for l in data.decode().splitlines()
                        if l.strip() and not l.startswith(("Tag:", "Root-Is-Purelib:"))]
                kept.append("Root-Is-Purelib: false")
                kept += [f"Tag: py3-none-{p}" for p in plat.split(".")]
                data = ("\n".join(kept) + "\n").encode()
            if item.filename == f"{info}/entry_points.txt" and re.search(r"^gputop\s*=", data.decode(), re.M):
                print(f"platform_wheel.py: {pure} has a gputop script, which the binary would collide with",
                      file=sys.stderr)
                return 2
            files.append((item.filename, data, 0o644))
    files.append((f"{data_dir}/scripts/gputop", binary.read_bytes(), 0o755))

    out = out_dir / f"{name}-{version}-py3-none-{plat}.whl"
    record = [record_line(p, d) for p, d, _ in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))
    # dist-info last, as wheel tools write it
    files.sort(key=lambda f: (f[0].startswith(info), f[0] == f"{info}/RECORD"))
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for path, data, mode in files:
            zi = zipfile.ZipInfo(path, date_time=stamp)
            zi.external_attr = (0o100000 | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(zi, data)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
