"""The target's view of the device, while a deviceless compile imports, builds the arguments of and traces user code.

Self-contained (standard library + JAX): `aot` uses it, and a repro script carries its source
before aot's (harness/fp8_check/compile/_render.py).
"""


# ---- the target's view of the device, while user code is traced
#
# A deviceless compile traces on the CPU backend, so code that asks JAX for the device (qwix picks its MXFP8
# path from `jax.devices()[0].platform`, MaxText builds its mesh from `jax.devices()`) would see the CPU and take
# a path the GPU never runs. While tracing, these answer with the compile target's devices instead.

DEVICE_QUESTIONS = ("devices", "local_devices", "device_count", "local_device_count", "default_backend")
# Questions the view cannot answer with the target (a backend object is a live client; compile-only devices have
# none): recorded in `asked` and always answered by this machine (`local`), so the result says so.
BACKEND_QUESTIONS = ("extend.backend.get_backend",)


def not_representative(questions, target):
    """The one warning, for `check` and `run` alike, when the checked code asked questions this machine answered, not
    `target` (`target_view.local`, at import or while traced): '' when none."""
    if not questions:
        return ""
    return (f"the checked code asked JAX for the device ({', '.join(f'jax.{q}()' for q in questions)}) and saw this "
            f"machine's CPU, not {target}'s devices: the signature may not be what {target} runs")


def _aliases(platform):
    """The other names JAX accepts for `platform` as a backend (a GPU's vendor platforms for 'gpu', and 'gpu' for
    each of them), as JAX itself lists them."""
    try:
        from jax._src import xla_bridge

        table = dict(getattr(xla_bridge, "_platform_aliases", {}))
    except ImportError:
        table = {}
    return tuple({alias for alias, canonical in table.items() if canonical == platform}
                 | ({table[platform]} if platform in table else set()))


class target_view:
    """`with target_view(devices):` jax.devices(), local_devices(), device_count(), local_device_count() and
    default_backend() answer with `devices` (the compile target's compile-only devices: platform 'gpu', their
    device_kind and compute_capability), or, with `devices=None`, as usual. `devices` may also be a function
    returning them (or None), called at the first question only: code that never asks costs nothing. Either
    way `asked` lists the questions the traced code asked, and `answered` whether the target answered them.
    An explicit other backend (`jax.devices('cpu')`) is answered as usual."""

    def __init__(self, devices):
        self._source = devices if callable(devices) else None
        self.devices = None if devices is None or callable(devices) else self._listed(devices)
        self.asked = []
        self._saved = {}

    @staticmethod
    def _listed(devices):
        return None if devices is None else (list(devices) if isinstance(devices, (list, tuple)) else [devices])

    @property
    def answered(self):
        return bool(self.asked) and self.devices is not None

    @property
    def local(self):
        """The questions this machine answered (not the target): every one without target devices, else the
        backend questions."""
        return [q for q in self.asked if self.devices is None or q in BACKEND_QUESTIONS]

    def _record(self, name, original):
        def asked(*args, **kwargs):
            if name not in self.asked:
                self.asked.append(name)
            return original(*args, **kwargs)

        asked.__name__ = asked.__qualname__ = name.rsplit(".", 1)[-1]
        asked.__doc__ = original.__doc__
        return asked

    def _target(self):
        if self._source is not None:
            self.devices, self._source = self._listed(self._source()), None
        return self.devices

    def _answer(self, name, original):
        def answer(*args, **kwargs):
            if name not in self.asked:
                self.asked.append(name)
            devices = self._target()
            if devices is None:
                return original(*args, **kwargs)
            platform = devices[0].platform
            positional = ("process_index", "backend") if name == "local_devices" else ("backend",)
            given = dict(zip(positional, args), **kwargs)
            if given.get("backend") not in (None, platform, *_aliases(platform)) or given.get("process_index") not in (None, 0) \
                    or set(given) - {"backend", "process_index"}:
                return original(*args, **kwargs)
            if name in ("devices", "local_devices"):
                return list(devices)
            if name in ("device_count", "local_device_count"):
                return len(devices)
            return platform

        answer.__name__ = answer.__qualname__ = name
        answer.__doc__ = original.__doc__
        return answer

    def __enter__(self):
        import jax

        if self.devices is not None and self.devices[0].platform == jax.devices()[0].platform:
            self.devices = None  # a compile on the local GPU: the answers are already the target's
        for name in DEVICE_QUESTIONS:
            original = getattr(jax, name, None)
            if original is not None:
                self._saved[name] = original
                setattr(jax, name, self._answer(name, original))
        import importlib

        try:
            backend_module = importlib.import_module("jax.extend.backend")
        except ImportError:  # a JAX without jax.extend.backend
            return self
        if hasattr(backend_module, "get_backend"):
            self._saved_backend = (backend_module, backend_module.get_backend)
            vars(backend_module)["get_backend"] = self._record(BACKEND_QUESTIONS[0], backend_module.get_backend)
        return self

    def __exit__(self, *exc):
        import jax

        for name, original in self._saved.items():
            setattr(jax, name, original)
        self._saved = {}
        saved = self.__dict__.pop("_saved_backend", None)
        if saved is not None:
            vars(saved[0])["get_backend"] = saved[1]
        return False
