"""Make the hostile memory dumps in hostile/ (python3 make_hostile.py): files
that once made `gputop dump-info` die or spin, kept as tests and fuzz seeds.

  frame-100g.pickle        13 bytes: a protocol-4 FRAME declaring 100 GiB
  binunicode8-100g.pickle  a BINUNICODE8 string declaring 100 GiB
  binbytes8-1t.pickle      a BINBYTES8 declaring 1 TiB
  bytearray8-1t.pickle     a BYTEARRAY8 declaring 1 TiB
  shared-refs.pickle       82 KB: 20,000 segments x 20,000 blocks x 1000 frames,
                           every segment, block and frame the same object
"""
import os, pickle, struct, sys

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile")
os.makedirs(out, exist_ok=True)


def write(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


write("frame-100g.pickle", b"\x80\x04\x95" + struct.pack("<Q", 100 << 30) + b"}.")
write("binunicode8-100g.pickle", b"\x80\x04\x8d" + struct.pack("<Q", 100 << 30) + b".")
write("binbytes8-1t.pickle", b"\x80\x04\x8e" + struct.pack("<Q", 1 << 40) + b".")
write("bytearray8-1t.pickle", b"\x80\x05\x96" + struct.pack("<Q", 1 << 40) + b".")

frame = {"filename": "train.py", "line": 1, "name": "step"}
block = {"size": 1 << 20, "state": "active_allocated", "frames": [frame] * 1000}
segment = {"device": 0, "total_size": 1 << 30, "blocks": [block] * 20000}
write("shared-refs.pickle", pickle.dumps({"segments": [segment] * 20000}, protocol=4))
