# Written by `gputop run` into a private directory at the front of
# PYTHONPATH, so every Python process the command starts (torchrun's and
# accelerate's ranks included) runs it. It waits for torch to be imported
# and then hands over to gputop's agent (gputop._autorun), which attaches at
# the first CUDA use; then it runs the sitecustomize it hides, if any.
# Nothing here raises into the process or imports anything heavy.


def _gputop_run():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    events = os.path.join(os.environ.get("GPUTOP_RUN_DIR", here), "events")

    def note(kind, detail=""):
        # one line per write, appended: many processes share the file
        try:
            line = "%d %s %s\n" % (os.getpid(), kind, " ".join(str(detail).split()))
            fd = os.open(events, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode("utf-8", "replace")[:4000])
            finally:
                os.close(fd)
        except Exception:
            pass

    # the process sees sys.path as it would without gputop run
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    note("python", sys.executable)

    def load_agent():
        mod = sys.modules.get("gputop")
        if mod is None:
            # the agent that came with this gputop binary, without putting
            # the rest of its directory (a site-packages) on sys.path
            where = os.environ.get("GPUTOP_AGENT_PATH", "")
            init = os.path.join(where, "gputop", "__init__.py")
            if where and os.path.isfile(init):
                import importlib.util

                spec = importlib.util.spec_from_file_location(
                    "gputop", init, submodule_search_locations=[os.path.dirname(init)])
                mod = importlib.util.module_from_spec(spec)
                sys.modules["gputop"] = mod
                try:
                    spec.loader.exec_module(mod)
                except BaseException:
                    del sys.modules["gputop"]
                    raise
            else:
                import gputop as mod
        try:
            from gputop import _autorun
        except ImportError:
            note("noagent", "the gputop module this Python imports (%s) is not gputop's agent, "
                 "or too old for gputop run" % getattr(mod, "__file__", "?"))
            return None
        return _autorun

    def torch_imported(torch):
        note("torch", getattr(torch, "__version__", ""))
        try:
            run = load_agent()
        except Exception as e:
            note("noagent", "gputop's agent could not be imported: %s: %s" % (type(e).__name__, e))
            return
        if run is not None:
            run.on_torch(torch, note)

    def framework_imported(name, module):
        # JAX or CuPy: the agent attaches now and reads the framework
        # once it has a GPU (JAX's backend created, CuPy's pool in use)
        note(name, getattr(module, "__version__", ""))
        try:
            run = load_agent()
        except Exception as e:
            note("noagent", "gputop's agent could not be imported: %s: %s" % (type(e).__name__, e))
            return
        if run is not None and hasattr(run, "on_framework"):
            run.on_framework(name, module, note)

    imported = {"torch": torch_imported,
                "jax": lambda m: framework_imported("jax", m),
                "cupy": lambda m: framework_imported("cupy", m)}

    class WatchImports(object):
        """Finds nothing itself: for torch, jax and cupy it asks the other
        finders and wraps the loader, so their hook runs once each is
        imported."""

        def __init__(self, names):
            self.names = set(names)

        def find_spec(self, name, path=None, target=None):
            if name not in self.names:
                return None
            self.names.discard(name)
            try:
                sys.meta_path.remove(self)  # the other finders answer; so no recursion
            except ValueError:
                pass
            try:
                import importlib.util

                spec = importlib.util.find_spec(name)
            finally:
                if self.names:
                    sys.meta_path.insert(0, self)
            loader = getattr(spec, "loader", None)
            if loader is None or not hasattr(loader, "exec_module"):
                return spec
            inner = loader.exec_module
            hook = imported[name]

            def exec_module(module):
                inner(module)
                try:
                    hook(module)
                except Exception:
                    pass

            loader.exec_module = exec_module
            return spec

    if os.environ.get("GPUTOP", "").strip().lower() not in ("0", "false", "no", "off"):
        waiting = []
        for name in ("torch", "jax", "cupy"):
            if name in sys.modules:
                imported[name](sys.modules[name])
            else:
                waiting.append(name)
        if waiting:
            sys.meta_path.insert(0, WatchImports(waiting))

    # the sitecustomize this one hides
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as err:
        # as site.py reports its own sitecustomize's errors
        if sys.flags.verbose:
            sys.excepthook(*sys.exc_info())
        else:
            sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                             "%s: %s\n" % (err.__class__.__name__, err))


try:
    _gputop_run()
except Exception:
    pass
del _gputop_run
