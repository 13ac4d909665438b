"""cleanup() for the frameworks beside torch (JAX, CuPy): gc.collect(),
then each framework's own release steps (CuPy: its pools'
free_all_blocks(); JAX: jax.clear_caches()), each measured by the
framework's own figures read before and after it, and what is still live
afterwards (JAX: its live arrays by count and bytes, grouped as an end
row's verdict groups them). Nothing here drops an array of the user's:
what is still referenced stays, and the report says so.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from . import _backend

MB = 1024 ** 2  # as cleanup()'s own line writes MB


def _figures(f: dict[str, Any]) -> tuple[dict[str, int], dict[str, str]]:
    """A framework reading's figures by native name, and gputop's figure
    (in_use, reserved) -> the native name it is read from."""
    vals: dict[str, int] = {}
    of: dict[str, str] = {}
    for g in f.get("figures", ()):
        vals[g["native"]] = int(g["value"])
        if g.get("of"):
            of.setdefault(g["of"], g["native"])
    return vals, of


class Run:
    """One cleanup of the frameworks on devices fwdevs (device -> the
    frameworks there, as _backend.framework_devices() gives them)."""

    def __init__(self, fwdevs: dict[int, list[_backend.FrameworkBackend]]) -> None:
        self.targets = [(fb, d) for d, fbs in sorted(fwdevs.items()) for fb in fbs]
        self.names: dict[tuple[str, int], dict[str, str]] = {}
        self.first = self._read()
        self.steps: dict[tuple[str, int], list[dict[str, Any]]] = {k: [] for k in self.first}

    def __bool__(self) -> bool:
        return bool(self.targets)

    def _read(self, only: str = "") -> dict[tuple[str, int], dict[str, int]]:
        out: dict[tuple[str, int], dict[str, int]] = {}
        for fb, d in self.targets:
            if only and fb.name != only:
                continue
            try:
                vals, of = _figures(fb.read(d))
            except Exception:
                continue
            out[(fb.name, d)] = vals
            self.names.setdefault((fb.name, d), of)
        return out

    def _released(self, key: tuple[str, int], a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
        of = self.names.get(key, {})
        out = {}
        for fig in ("in_use", "reserved"):
            n = of.get(fig)
            if n is not None and n in a and n in b:
                out[f"released_{fig}_bytes"] = a[n] - b[n]
        return out

    def measured(self, name: str, fn: Callable[[], Any], only: str = "") -> Callable[[], Any]:
        """fn, with what it released from each framework (only: that one)
        recorded as step name; a step whose fn returns False did not run."""

        def run() -> Any:
            a = self._read(only)
            got = fn()
            if got is False:
                return got
            b = self._read(only)
            for key in a:
                if key in b:
                    self.steps.setdefault(key, []).append({"step": name, **self._released(key, a[key], b[key])})
            return got

        return run

    def release(self) -> None:
        """Each framework's own steps, in order, measured."""
        devs: dict[str, list[int]] = {}
        fbs: dict[str, _backend.FrameworkBackend] = {}
        for fb, d in self.targets:
            devs.setdefault(fb.name, []).append(d)
            fbs[fb.name] = fb
        for name, fb in fbs.items():
            try:
                steps: Sequence[_backend.Step] = fb.cleanup_steps(devs[name])
            except Exception:
                continue
            for s in steps:
                try:
                    self.measured(f"{name}: {s.name}", s.run, only=name)()
                except Exception as e:
                    for d in devs[name]:
                        self.steps.setdefault((name, d), []).append(
                            {"step": f"{name}: {s.name}", "error": f"{type(e).__name__}: {e}"})

    def report(self) -> list[dict[str, Any]]:
        """Per framework and device: its figures before and after (its own
        names), what the cleanup released by them, each step's share, and
        what is still live."""
        last = self._read()
        fbs = {(fb.name, d): fb for fb, d in self.targets}
        out = []
        for key, before in self.first.items():
            after = last.get(key)
            if after is None:
                continue
            name, d = key
            of = self.names.get(key, {})
            r: dict[str, Any] = {"framework": name, "device": d, "before": before, "after": after,
                                 "in_use": of.get("in_use", ""), "reserved": of.get("reserved", ""),
                                 **self._released(key, before, after), "steps": self.steps.get(key, [])}
            if r["in_use"]:
                r["in_use_bytes"] = after[r["in_use"]]
            if r["reserved"]:
                r["reserved_bytes"] = after[r["reserved"]]
            try:
                r.update(fbs[key].still_live(d))
            except Exception as e:
                r["still_live_error"] = f"{type(e).__name__}: {e}"
            out.append(r)
        return out


def line(r: dict[str, Any], several: bool) -> str:
    """cleanup()'s printed line of one framework's report."""
    head = f"{r['framework']}" + (f" cuda:{r['device']}" if several else "")
    parts = []
    if "released_in_use_bytes" in r or "released_reserved_bytes" in r:
        parts.append(f"released {r.get('released_in_use_bytes', 0) / MB:.2f} MB in use ({r['in_use'] or '?'}), "
                     f"{r.get('released_reserved_bytes', 0) / MB:.2f} MB held ({r['reserved'] or '?'})")
    still = []
    if "in_use_bytes" in r:
        still.append(f"{r['in_use']} {r['in_use_bytes'] / MB:.2f} MB")
    if "reserved_bytes" in r:
        still.append(f"{r['reserved']} {r['reserved_bytes'] / MB:.2f} MB")
    if "live_arrays" in r:
        n = int(r["live_arrays"])
        names = ", ".join(f"{g['name']} {int(g['bytes']) / MB:.2f} MB" for g in r.get("held", [])[:3])
        still.append(f"{n} live array{'s' if n != 1 else ''} {int(r['live_array_bytes']) / MB:.2f} MB"
                     + (f" ({names})" if names and n else ""))
    if still:
        parts.append("still " + ", ".join(still))
    return head + ": " + "; ".join(parts)
