"""The harness: a trusted supervisor, an untrusted worker, checks, timing and statistics.

Its modules sit on floors by the process their code runs in (docs/harness.md, "The harness's
floors"): `device/` (backends and their timing), `inside/` (the untrusted worker's own code),
`launch/` (starting, containing, freezing and stopping workers), `profile/` (profile mode), and
at the root the supervisor's side and the contracts both sides share (records, messages).

Modules moved to a floor stay importable under their old flat names (`gpuarena.harness.timing`
is `gpuarena.harness.device.timing`, the same module object): material written against the
old layout, a red-team case that patches a harness module among it, keeps meaning the same.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

MOVED = {
    **{
        m: f"device.{m}"
        for m in (
            "backend",
            "backend_base",
            "block",
            "nvidia",
            "cupti_timing",
            "cupti_build",
            "range_timer",
            "icache_sweep",
            "peaks",
            "environment",
            "device_audit",
            "timing",
        )
    },
    **{m: f"inside.{m}" for m in ("worker", "sandbox", "triton_key")},
    **{
        m: f"launch.{m}"
        for m in (
            "process",
            "started",
            "ahead",
            "freeze",
            "cgroup",
            "containment",
            "gpu_view",
            "schedstat",
            "build_cache",
            "allocator",
        )
    },
    "profile_child": "profile.child",
    "ncu_report": "profile.ncu_report",
    "roofline": "profile.roofline",
}
"""Old flat name -> its place on a floor (harness/profile.py became the package profile/, whose
run.py holds what it had)."""


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves an old flat name to the module on its floor: one module, two names."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        prefix, _, name = fullname.rpartition(".")
        if prefix != __name__ or name not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(f"{__name__}.{MOVED[spec.name.rpartition('.')[2]]}")
        spec.loader_state = module.__spec__  # the import machinery sets the alias's spec on it next
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = module.__spec__.loader_state if module.__spec__ is not None else None


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())
