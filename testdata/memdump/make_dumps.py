"""Make real torch memory dumps (the pickles memory_viz opens) on a GPU.

Writes, under the directory given as argv[1]:
  labelled.pickle   a snapshot taken while a `losses` list grows (history on)
  oom.pickle        a snapshot taken in the OOM observer at a real OOM (history on)
  plain.pickle      a snapshot with history off (no frames)
  info.json         what was done, torch's version, metadata support
"""
import json, os, pickle, sys, time
import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
info = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0)}
mem = torch.cuda.memory
info["has_set_memory_metadata"] = hasattr(mem, "_set_memory_metadata")
dev = "cuda:0"

def dump(name):
    t = time.perf_counter()
    s = mem._snapshot()
    t1 = time.perf_counter()
    with open(os.path.join(out, name), "wb") as f:
        pickle.dump(s, f)
    info[name] = {"snapshot_s": t1 - t, "bytes": os.path.getsize(os.path.join(out, name)),
                  "segments": len(s.get("segments", [])),
                  "traces": sum(len(x) for x in s.get("device_traces", []))}

# plain: no history
x = torch.randn(1024, 1024, device=dev)
dump("plain.pickle")
del x

mem._record_memory_history(max_entries=2000, stacks="python")
if info["has_set_memory_metadata"]:
    mem._set_memory_metadata("Epoch 1")

model = torch.nn.Linear(512, 512).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
losses = []
for step in range(60):
    if info["has_set_memory_metadata"] and step == 30:
        mem._set_memory_metadata("Epoch 2")
    xb = torch.randn(256, 512, device=dev)
    loss = model(xb).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    losses.append(loss)  # the leak: keeps every graph's output alive
dump("labelled.pickle")

# OOM: snapshot taken in the OOM observer
if info["has_set_memory_metadata"]:
    mem._set_memory_metadata("OOM")
got = {}
def on_oom(device, alloc, device_alloc, device_free):
    got["args"] = [device, alloc, device_alloc, device_free]
    dump("oom.pickle")
torch._C._cuda_attach_out_of_memory_observer(on_oom)
hold = []
try:
    while True:
        hold.append(torch.empty(8 << 30, dtype=torch.uint8, device=dev))  # 8 GiB each
except torch.OutOfMemoryError as e:
    info["oom_message"] = str(e).splitlines()[0]
info["oom_observer_args"] = got.get("args")
info["held_blocks"] = len(hold)
mem._record_memory_history(enabled=None)
with open(os.path.join(out, "info.json"), "w") as f:
    json.dump(info, f, indent=1)
print(json.dumps(info, indent=1))
