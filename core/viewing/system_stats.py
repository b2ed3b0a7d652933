"""What the machine is doing while a model trains: GPU utilisation and memory through NVML
(the ``nvidia-ml-py`` package) when a GPU driver is present, CPU and RAM through psutil always.

Everything degrades quietly: no ``pynvml`` module, no driver, or no GPU all give an empty GPU
list with a note in plain words for the page ("No NVIDIA GPU found: showing CPU and memory"),
never an exception or its class name; the technical reason goes to the log.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

import psutil


@dataclass(frozen=True)
class GpuStats:
    index: int
    name: str
    utilization_pct: float        # share of the last sample period a kernel was running
    memory_used_bytes: int
    memory_total_bytes: int

    @property
    def memory_pct(self) -> float:
        return 100.0 * self.memory_used_bytes / self.memory_total_bytes \
            if self.memory_total_bytes else 0.0


@dataclass(frozen=True)
class SystemStats:
    cpu_percent: float            # all cores, 0..100
    cpu_count: int
    ram_used_bytes: int
    ram_total_bytes: int
    gpus: list[GpuStats] = field(default_factory=list)
    gpu_note: str = ""            # why no GPU is listed, when none is

    @property
    def ram_pct(self) -> float:
        return 100.0 * self.ram_used_bytes / self.ram_total_bytes if self.ram_total_bytes else 0.0


@dataclass(frozen=True)
class ProcessTreeStats:
    processes: int
    rss_bytes: int


NO_GPU = "No NVIDIA GPU found: showing CPU and memory."
NO_MONITORING = "GPU monitoring is not available on this machine: showing CPU and memory."
GPU_STOPPED = "A GPU stopped answering: showing what could still be read, with CPU and memory."

log = logging.getLogger(__name__)
_nvml_lock = threading.Lock()
_nvml_state: dict = {}            # module -> ready: NVML is initialised once per module
_cpu_lock = threading.Lock()
_cpu_last_call = 0.0


def _load_nvml():
    try:
        import pynvml  # the nvidia-ml-py package
    except ImportError:
        return None
    return pynvml


def _nvml_ready(nvml) -> bool:
    with _nvml_lock:
        if nvml not in _nvml_state:
            try:
                nvml.nvmlInit()
                _nvml_state[nvml] = True
            except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
                log.info("no GPU monitoring: NVML did not start (%s: %s)",
                         type(exc).__name__, exc)
                _nvml_state[nvml] = False
        return _nvml_state[nvml]


def _text(value) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def gpu_stats(nvml=None) -> tuple[list[GpuStats], str]:
    """Every GPU NVML reports, with a plain note for the page when there is none (or one stopped
    answering). ``nvml`` is the pynvml module (default: imported when installed)."""
    nvml = nvml if nvml is not None else _load_nvml()
    if nvml is None:
        return [], NO_MONITORING
    if not _nvml_ready(nvml):
        return [], NO_GPU
    gpus = []
    try:
        for i in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            util = nvml.nvmlDeviceGetUtilizationRates(handle)
            mem = nvml.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(GpuStats(i, _text(nvml.nvmlDeviceGetName(handle)), float(util.gpu),
                                 int(mem.used), int(mem.total)))
    except Exception as exc:  # a GPU fell off the bus, permissions, ...
        log.warning("NVML stopped answering (%s: %s)", type(exc).__name__, exc)
        return gpus, GPU_STOPPED
    return gpus, "" if gpus else NO_GPU


def cpu_percent() -> float:
    """CPU use of the whole machine since the previous call; the very first call (or one right
    after another) measures over a short 0.1 s window instead of returning psutil's
    meaningless first 0.0."""
    global _cpu_last_call
    with _cpu_lock:
        now = time.monotonic()
        fresh = _cpu_last_call == 0.0 or now - _cpu_last_call < 0.1
        value = psutil.cpu_percent(interval=0.1 if fresh else None)
        _cpu_last_call = time.monotonic()
        return float(value)


def system_stats(nvml=None) -> SystemStats:
    mem = psutil.virtual_memory()
    gpus, note = gpu_stats(nvml)
    return SystemStats(cpu_percent(), psutil.cpu_count() or 1, int(mem.total - mem.available),
                       int(mem.total), gpus, note)


def process_tree(pid: int | None) -> ProcessTreeStats | None:
    """Processes and resident memory of a job's worker and its children (the training
    process); None when the worker is gone."""
    if not pid:
        return None
    try:
        root = psutil.Process(int(pid))
        if root.status() == psutil.STATUS_ZOMBIE:
            return None
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    rss = 0
    for proc in procs:
        try:
            rss += proc.memory_info().rss
        except psutil.Error:
            continue
    return ProcessTreeStats(len(procs), rss)


def fmt_bytes(n: int | float) -> str:
    """Bytes in the largest unit that keeps the number at least 1: '3.2 GiB'."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"
