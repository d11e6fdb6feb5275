"""Process-wide settings, in one place, set once at start-up.

Three things in this project change the whole process rather than one object; they are all set
here, by :func:`configure`, and nowhere else:

* **torch's float32 matmul mode**: strict float32 — no TF32 on CUDA (``matmul`` and cuDNN), and
  ``set_float32_matmul_precision("highest")``. The conformance bounds (docs/checkpoint-format.md
  §13) need true float32; fp16/bf16 stay available as an explicit ``Embedder`` precision.
* **torch's intra-op thread count**: left to torch unless a caller asks (``--threads`` of
  ``probe`` and ``train-lm``; the app keeps one core for its GUI thread).
* **Python's GIL switch interval** (the app only): the app's worker thread runs pure-Python
  stretches (tokenizing a big file) that would otherwise keep the GUI thread waiting for the GIL
  for up to 5 ms at a time (see ``elmo_explorer.startup``).

The C heap is the process's too, and is also handled only here: :func:`reuse_freed_blocks`
(``train-lm`` alone: each step's freed buffers kept for the next) and
:func:`release_free_memory` (the streaming commands, between chunks).

It also answers, once per process, whether the CPU has bf16 units (:func:`cpu_bf16`: Intel AMX or
AVX512_BF16, from torch's checks and the CPU flags): the one place that decides whether
``--precision bf16`` is offered on the CPU.

Who calls it: :func:`elmo_engine.cli.main` (every headless command, through
:func:`configure_on_import`: a command that answers before it needs torch — ``--help``, a usage
error, an output that exists — never loads it), ``elmo_explorer.startup``
(the app), ``python -m elmo_engine.train`` (through its CLI module), the test suite
(``tests/conftest.py``) and the benchmarks. A library user who builds an ``Embedder`` in their
own program calls ``configure()`` once first to get the same numbers.
"""
from __future__ import annotations

import functools
import importlib.abc
import sys
from dataclasses import dataclass
from typing import Callable, Optional, Tuple


#: the intra-op thread count a caller of :func:`configure` asked for (None: torch's own)
_threads: Optional[int] = None


def configure(threads: Optional[int] = None, gil_switch_s: Optional[float] = None) -> None:
    """Set the process-wide settings (safe to call again: later calls only change what they name).

    Parameters
    ----------
    threads : torch's intra-op threads; None keeps the current count
    gil_switch_s : the longest GIL switch interval to allow (seconds); None keeps Python's
    """
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    if threads is not None:
        global _threads
        _threads = int(threads)
        torch.set_num_threads(threads)
    if gil_switch_s is not None:
        sys.setswitchinterval(min(sys.getswitchinterval(), gil_switch_s))


def adopt_thread_count() -> None:
    """Give the calling thread the count :func:`configure` set (nothing when none was set).

    torch starts a new thread from its process-wide default, which the direction threads of a
    running forward pass lower to half for a moment (``elmo_engine.model.cpu_fast``); a
    long-lived thread that will run the model (the app's job lanes) calls this once, so that it
    never keeps a count picked up in that moment."""
    if _threads is not None:
        import torch

        if torch.get_num_threads() != _threads:
            torch.set_num_threads(_threads)


def configure_on_import() -> None:
    """:func:`configure` once torch is loaded: now if it is, else the moment its import ends.

    The headless commands call this instead of :func:`configure`: the settings only exist in
    torch, so applying them as torch finishes loading gives every command the same numbers as
    calling :func:`configure` first, while a command that answers before it needs torch
    (``--version``, a usage error, ``embed … -o EXISTING``) does not pay the second that importing
    torch takes (docs/performance.md, "Start-up")."""
    if "torch" in sys.modules:
        configure()
    elif not any(isinstance(f, _AfterTorchImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterTorchImport())


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    """A finder that answers for ``torch`` only: it finds it with the other finders and wraps its
    loader so that :func:`configure` runs once ``torch/__init__`` has run; then it removes
    itself."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _ConfigureAfter(spec.loader)
                return spec
        return None


class _ConfigureAfter(importlib.abc.Loader):
    """``loader`` (torch's own), with :func:`configure` after the module has run."""

    def __init__(self, loader) -> None:
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        configure()

    def __getattr__(self, name):                 # get_resource_reader, is_package, …
        return getattr(self._loader, name)


# ---- bf16 units of the CPU -----------------------------------------------------------------------
#: CPU flags (Linux ``/proc/cpuinfo``) of the units that run bf16 matrix products natively
BF16_FLAGS = ("amx_bf16", "avx512_bf16")


@dataclass(frozen=True)
class CpuBf16:
    """Whether this CPU multiplies bf16 matrices in hardware, and with which units.

    Attributes
    ----------
    units : "AMX" (Intel AMX tiles), "AVX512_BF16" (AVX-512 bf16 dot products), or None
    model : the CPU's model name ("" when the platform does not say)
    capability : torch's SIMD level (``torch.backends.cpu.get_cpu_capability()``)
    flags : the CPU flags seen among ``amx_bf16``, ``avx512_bf16``, ``avx512f``
    """

    units: Optional[str]
    model: str
    capability: str
    flags: Tuple[str, ...]

    @property
    def offered(self) -> bool:
        """bf16 is offered on the CPU (``--precision bf16``) only where it has the units."""
        return self.units is not None

    def describe(self) -> str:
        """One line for ``info`` and the benchmarks."""
        name = self.model or "CPU"
        have = ", ".join(self.flags) or "none of avx512f/avx512_bf16/amx_bf16"
        torch_says = f"torch capability {self.capability}; " if self.capability else ""
        if self.offered:
            return (f"{name}; {torch_says}flags {have}; bf16 units: "
                    f"{self.units} (--precision bf16 offered)")
        return f"{name}; {torch_says}flags {have}; no bf16 units (float32 only)"

    def refusal(self) -> str:
        """The one line that says why bf16 is not offered here, and what it would cost."""
        what = ", ".join(p for p in (self.model or "CPU", self.capability) if p)
        return (f"bf16 needs a CPU with bf16 units (AMX or AVX512_BF16) and this one "
                f"({what}) has none: bf16 would be emulated, "
                "slower than float32 and less exact; use --precision fp32 (the default)")


#: why ``--precision fp16`` is refused on the CPU
FP16_ON_CPU = ("fp16 is only offered on a GPU; on the CPU use fp32, or bf16 where the CPU has "
               "bf16 units")


def usable_precision(precision: str, on_gpu: bool) -> Tuple[str, str]:
    """The precision a remembered choice (a workspace's, the app's setting) runs in here, and
    the warning when it cannot: ``(precision, "")`` on a GPU or where the CPU offers it, else
    ``("fp32", why)``: bf16 without bf16 units, fp16 on a CPU. The app's model load and
    ``export report`` of a workspace alike (a command's own ``--precision`` is refused instead,
    :func:`check_cpu_precision`)."""
    if precision == "fp32" or on_gpu:
        return precision, ""
    if precision == "bf16":
        cpu = cpu_bf16()
        if cpu.offered:
            return precision, ""
        return "fp32", cpu.refusal().split(";")[0] + "; running in fp32"
    return "fp32", f"{precision} needs a GPU; running in fp32 on the CPU"


def check_cpu_precision(precision: str, units: Optional[Callable[[], CpuBf16]] = None) -> None:
    """Raise :class:`~elmo_engine.errors.InputError` (one line) unless ``precision`` is offered
    on this CPU: fp32 always, bf16 where the CPU has bf16 units (AMX or AVX512_BF16), fp16
    never. ``units`` says which units the CPU has: :func:`cpu_bf16` (torch's checks, the
    default) or, before torch is imported, :func:`cpu_bf16_from_flags`."""
    from elmo_engine.errors import InputError

    if precision == "fp32":
        return
    if precision == "fp16":
        raise InputError(FP16_ON_CPU)
    cpu = (units or cpu_bf16)()
    if not cpu.offered:
        raise InputError(cpu.refusal())


def gpu_possible() -> bool:
    """Whether torch may find a GPU here, asked without importing it: False only when the
    installed torch is a CPU-only build (its version ends ``+cpu``) or, on Linux, when no GPU
    driver shows a device (NVIDIA's ``/dev/nvidia0`` … or ``/proc/driver/nvidia/gpus``,
    WSL2's ``/dev/dxg``, ROCm's ``/dev/kfd``). Where it cannot tell it says True, and torch
    decides."""
    from importlib import metadata

    try:
        if metadata.version("torch").endswith("+cpu"):
            return False
    except metadata.PackageNotFoundError:
        pass
    if not sys.platform.startswith("linux"):
        return True
    import glob
    import os

    return bool(glob.glob("/dev/nvidia[0-9]*") or glob.glob("/proc/driver/nvidia/gpus/*")
                or os.path.exists("/dev/dxg") or os.path.exists("/dev/kfd"))


def _cpu_flags_and_model() -> Tuple[set, str]:
    """The CPU's flags and model name from ``/proc/cpuinfo`` (empty where there is none)."""
    flags: set = set()
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "flags" and not flags:
                    flags = set(value.split())
                elif key == "model name" and not model:
                    model = value.strip()
                if flags and model:
                    break
    except OSError:
        pass
    if not model:
        import platform
        model = platform.processor()
    return flags, model


def cpu_bf16_from_flags() -> CpuBf16:
    """This CPU's bf16 units read from its flags alone, without importing torch (``info``
    answers in well under a second): ``amx_bf16`` → AMX, ``avx512_bf16`` → AVX512_BF16. The
    capability is left empty; :func:`cpu_bf16` adds torch's own checks, which decide what
    ``--precision bf16`` accepts."""
    flags, model = _cpu_flags_and_model()
    seen = tuple(f for f in ("avx512f", "avx512_bf16", "amx_bf16") if f in flags)
    units = ("AMX" if "amx_bf16" in flags else
             "AVX512_BF16" if "avx512_bf16" in flags else None)
    return CpuBf16(units, model, "", seen)


@functools.lru_cache(maxsize=None)
def cpu_bf16() -> CpuBf16:
    """This CPU's bf16 units, found once: torch's own checks (``torch.cpu``, the same ones its
    oneDNN kernels use) or, where torch has none, the CPU flags."""
    import torch

    flags, model = _cpu_flags_and_model()
    seen = tuple(f for f in ("avx512f", "avx512_bf16", "amx_bf16") if f in flags)
    capability = torch.backends.cpu.get_cpu_capability()

    def check(name: str, flag: str) -> bool:
        fn = getattr(torch.cpu, name, None)
        try:
            return bool(fn()) if fn is not None else flag in flags
        except RuntimeError:
            return flag in flags

    mkldnn_bf16 = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    try:
        onednn = bool(mkldnn_bf16()) if mkldnn_bf16 is not None else True
    except RuntimeError:
        onednn = False
    units = None
    if onednn and check("_is_amx_tile_supported", "amx_bf16"):
        units = "AMX"
    elif onednn and check("_is_avx512_bf16_supported", "avx512_bf16"):
        units = "AVX512_BF16"
    return CpuBf16(units, model, capability, seen)


@functools.lru_cache(maxsize=1)
def _glibc():
    """The C library when it is glibc on Linux, with ``malloc_trim`` and ``mallopt`` (None
    elsewhere: macOS, Windows, musl)."""
    import ctypes
    import ctypes.util

    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        libc.gnu_get_libc_version                      # glibc's own symbol: not musl
    except (OSError, AttributeError):
        return None
    return libc


#: glibc's ``mallopt`` parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: the largest block glibc lets its heaps hold rather than map (its bound: half of a heap)
REUSED_BLOCK_BYTES = 32 << 20
#: the freed memory kept at a heap's top before it is given back
KEPT_FREE_BYTES = 1 << 30


def reuse_freed_blocks() -> bool:
    """Let the C heap reuse freed blocks of up to :data:`REUSED_BLOCK_BYTES` instead of mapping
    fresh pages for each, and keep up to :data:`KEPT_FREE_BYTES` of freed memory (glibc
    ``mallopt``: ``M_MMAP_THRESHOLD``, ``M_TRIM_THRESHOLD``; nothing elsewhere). True when set.

    For a loop whose every step allocates and frees the same large buffers — the trainer: about
    25 MB per LSTM layer and direction at the demo size, in the direction threads' own arenas —
    glibc's defaults map many of them afresh and give freed heap tops back, so each step faults
    its pages in again (a layer's forward and backward at the demo size: about 6,000 minor
    faults against 1,000 with this; docs/performance.md, "The trainer's buffers"). The cost:
    freed memory stays with the process, up to its peak for a loop that reaches the peak every
    step. Process-wide and for good: only ``train-lm`` calls it, not the app and not the
    streaming commands, which give freed memory back between chunks
    (:func:`release_free_memory`)."""
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, REUSED_BLOCK_BYTES)
                and libc.mallopt(_M_TRIM_THRESHOLD, KEPT_FREE_BYTES))


def release_free_memory() -> None:
    """Give the C heap's free pages back to the system (glibc ``malloc_trim(0)``; nothing
    elsewhere). A streaming command calls it between chunks: freed activations otherwise stay
    resident as heap fragments, and the peak creeps up with the input's length although no
    chunk holds more than the last."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
