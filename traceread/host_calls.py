"""Which host calls and markers are what: one table for the gap engine and the rules.

The CUDA/HIP runtime and driver calls the diagnosis recognises (launch, sync, allocator, copy,
graph capture, module loading, context setup) and the framework markers (data loader, optimizer,
profiler step), each defined once. ``traceread.engine.lanes`` flags every distinct name with them for the
gap engine (``launch_count``, ``sync_ns``, ``alloc_ns``...), and the rules test the same patterns,
so a call is a sync for both or for neither. Imports nothing of traceread.

Every call pattern matches a whole name, with or without nsys's version suffix
(``cudaLaunchKernel_v7000``).

Drift decided here: ``cudaFree``/``hipFree`` (and ``cudaFreeHost``, ``cudaFreeArray``, ``cuMemFree``,
``cuMemFreeHost``) synchronize the device implicitly, so they are syncs for both the gap engine and
the rules (the engine's copy once lacked them, so ``sync_ns`` left out time the rules called a sync).
``hipMemcpyWithStream`` enqueues a copy and waits for it: both a launch and a sync.
"""

from __future__ import annotations

import re
from typing import cast

import numpy as np
import pandas as pd


def _calls(*alternatives: str) -> re.Pattern[str]:
    """A pattern matching a whole call name (optionally version-suffixed) against any alternative."""
    return re.compile(r"^(?:" + "|".join(alternatives) + r")(?:_v\d+)?$")


# --- launches: host calls that submit work to a GPU stream -------------------------------------------
_KERNEL_LAUNCH = (r"(cuda|hip)(Launch(Cooperative)?Kernel\w*|ExtLaunchKernel\w*|ModuleLaunchKernel\w*|"
                  r"ExtModuleLaunchKernel\w*)",
                  r"cuLaunch(Cooperative)?Kernel\w*")
_GRAPH_LAUNCH = (r"(cuda|hip|cu)GraphLaunch",)
# Copies and memsets queued on a stream (the host does not wait for them).
_ASYNC_COPY = (r"(cuda|hip)(Memcpy\w*Async|Memset\w*Async|MemcpyWithStream)",
               r"cu(Memcpy\w*Async|MemsetD\w*Async)")
KERNEL_LAUNCH = _calls(*_KERNEL_LAUNCH)
GRAPH_LAUNCH = _calls(*_GRAPH_LAUNCH)
ASYNC_COPY = _calls(*_ASYNC_COPY)
LAUNCH = _calls(*_KERNEL_LAUNCH, *_GRAPH_LAUNCH, *_ASYNC_COPY)

# --- syncs: host calls that block until the device (or a stream or event on it) has drained -------------
_EXPLICIT_SYNC = (r"(cuda|hip)(StreamSynchronize|DeviceSynchronize|EventSynchronize|ThreadSynchronize)",
                  r"cu(StreamSynchronize|CtxSynchronize|EventSynchronize)")
# Copies without Async return when the copy is done.
_BLOCKING_COPY = (r"(cuda|hip)(Memcpy|Memcpy2D|Memcpy3D|MemcpyPeer|MemcpyToSymbol|MemcpyFromSymbol|MemcpyDtoH|"
                  r"MemcpyHtoD|MemcpyWithStream)",
                  r"cu(Memcpy|MemcpyHtoD|MemcpyDtoH|MemcpyDtoD|MemcpyPeer)")
# Freeing device or pinned memory synchronizes the device implicitly.
_SYNCING_FREE = (r"(cuda|hip)(Free|FreeHost|FreeArray)", r"cu(MemFree|MemFreeHost)")
BLOCKING_COPY = _calls(*_BLOCKING_COPY)
SYNC = _calls(*_EXPLICIT_SYNC, *_BLOCKING_COPY, *_SYNCING_FREE)

# --- memory: the device allocator, and every allocation / registration call ---------------------------
# Device-memory allocator calls: the caching allocator's growth, or its thrash when they recur.
# The driver's ``cuMem*`` calls include the virtual-memory API that PyTorch's expandable segments
# (and other pool allocators) grow and shrink device memory with: reserve an address range, create a
# physical allocation, map it, set its access, and the reverse; newer Kineto records them as
# ``cuda_driver`` rows. ``cuMemGetInfo`` (a query) and ``cuMemset*`` (a fill) are not allocator work.
_DEVICE_ALLOCATOR = (r"(cuda|hip)(Malloc|MallocAsync|MallocManaged|ExtMallocWithFlags|Free|FreeAsync)",
                     r"cuMem(Alloc|Free|Create|Release|Map|Unmap)\w*",
                     r"cuMem(AddressReserve|AddressFree|SetAccess|GetAllocationGranularity|RetainAllocationHandle|"
                     r"GetAllocationPropertiesFromHandle|ExportToShareableHandle|ImportFromShareableHandle|Pool\w+)")
DEVICE_ALLOCATOR = _calls(*_DEVICE_ALLOCATOR)
# Any memory management call (device allocator, pitched/array/pinned host memory, registration):
# what the gap engine measures as ``alloc_ns``.
MEMORY = _calls(*_DEVICE_ALLOCATOR, r"(cuda|hip)(Malloc\w*|Free\w*|HostAlloc|HostRegister|HostUnregister)",
                r"cuMem(HostAlloc|HostRegister)\w*")

# --- one-time work: graph capture, module loading, context setup, compilation ---------------------------
CAPTURE = _calls(r"(cuda|hip|cu)(Graph(Exec)?Instantiate\w*|GraphUpload\w*|StreamBeginCapture\w*|StreamEndCapture\w*)")
CAPTURE_BEGIN = _calls(r"(cuda|hip|cu)StreamBeginCapture\w*")
CAPTURE_END = _calls(r"(cuda|hip|cu)StreamEndCapture\w*")
MODULE_LOAD = _calls(r"cu(Library|Module)Load\w*", r"hipModuleLoad\w*", r"cuLink(Create|AddData|AddFile|Complete)\w*",
                     r"cuGetProcAddress\w*", r"cudaGetDriverEntryPoint\w*", r"cuModuleGetLoadingMode",
                     r"nvrtc\w+", r"nvJitLink\w+", r"__(cuda|hip)RegisterFatBinary\w*")
# Calls that load a function's module when CUDA lazy loading (``CUDA_MODULE_LOADING=LAZY``, the default
# since CUDA 12.2) meets the function for the first time: attribute and occupancy queries and function
# look-ups. Microseconds when the module is resident, milliseconds when the call loads it: only the long
# ones are loading (``rules.one_time_cost``: longer than ``launch_call_max_ns``).
LAZY_LOAD_QUERY = _calls(r"(cuda|hip)Func(Get|Set)Attributes?", r"(cuda|hip)FuncSetCacheConfig", r"cudaFuncGetName",
                         r"cudaGetFuncBySymbol", r"(cuda|hip|cu)Occupancy\w+", r"cu(Func|Kernel)(Get|Set)Attribute",
                         r"cu(Func|Kernel)SetCacheConfig", r"cuFuncLoad", r"cu(Module|Library)GetFunction",
                         r"cuLibraryGetKernel", r"cuKernelGetFunction", r"hipModuleGetFunction")
# Pinned (page-locked) host memory: allocated and freed at set-up and teardown; ``cudaFreeHost``
# also synchronizes the device (it is in SYNC too).
PINNED_MEMORY = _calls(r"(cuda|hip)(HostAlloc|MallocHost|HostMalloc|FreeHost|HostFree|HostRegister|HostUnregister)",
                       r"cuMem(HostAlloc|AllocHost|FreeHost|HostRegister|HostUnregister)\w*")
# Stream and event teardown (their creation is in CONTEXT_SETUP).
TEARDOWN = _calls(r"(cuda|hip)(StreamDestroy|EventDestroy|GraphExecDestroy|GraphDestroy|DeviceReset)",
                  r"cu(StreamDestroy|EventDestroy|CtxDestroy|ModuleUnload|LibraryUnload)\w*")
CONTEXT_SETUP = _calls(r"(cuda|hip)(SetDevice\w*|GetDeviceCount|DeviceGetStreamPriorityRange|StreamGetPriority|"
                       r"StreamCreate\w*|EventCreate\w*|GetDeviceProperties\w*|DeviceGetAttribute|InitDevice|"
                       r"DeviceReset|DriverGetVersion|RuntimeGetVersion|HostRegister|HostAlloc|MallocHost|HostMalloc)",
                       r"cu(CtxCreate\w*|DevicePrimaryCtx\w*|StreamCreate\w*|EventCreate\w*|MemHostAlloc\w*|"
                       r"MemHostRegister\w*)")
# CUDA and math-library lazy start-up: driver/runtime initialization and the creation of the first
# cuDNN/cuBLAS/MIOpen/rocBLAS handle (by name: nsys library tracing, NVTX or record_function ranges).
LAZY_INIT = _calls(r"cuInit", r"hipInit", r"(cuda|hip)(GetDeviceCount|InitDevice)", r"cuDevicePrimaryCtx\w*",
                   r"cuCtxCreate\w*", r"cudnnCreate", r"cublas(Lt)?Create\w*", r"cusparseCreate", r"cusolver(Dn|Sp)Create",
                   r"miopenCreate\w*", r"rocblas_create_handle", r"hipblas(Lt)?Create", r"hipsparseCreate")
# Host ops that create a math-library handle on their first call in a thread (cuDNN/MIOpen
# convolutions, cuBLAS GEMMs): in Kineto the creation shows only as the runtime calls inside that
# first op (``cudaFree(0)``, workspace ``cudaMalloc``, ``cudaStreamCreate``). Searched in op names.
LIBRARY_OP = re.compile(r"(?i)cudnn|miopen|cublas|hipblas|rocblas|^aten::(addmm|mm|bmm|baddbmm|matmul|linear|_scaled_mm)$")
# Ranges (NVTX, record_function) around compilation and autotuning: searched anywhere in the name.
COMPILE_RANGE = re.compile(r"(?i)compil(e(?!d)|ing|ation)|nvrtc|nvjitlink|ptxas|GpuLower|generateCudaKernel|codegen")
# Set-up and teardown ranges (NVTX, record_function): a word like init_data, setup, clean_up,
# teardown, finalize in the range's own name (the last ``->`` component of a nested NVTX path).
# Not Python frames: every ``__init__`` would match.
SETUP_RANGE = re.compile(r"(?i)(?:^|[^a-z_]|(?<=[a-z0-9])_)(?:init(?:iali[sz]e|iali[sz]ation)?|set_?up|tear_?down|clean_?up|"
                         r"finali[sz]e|shut_?down|destroy|free_(?:data|buffers?|memory)|alloc(?:ate)?_(?:data|buffers?|"
                         r"memory))(?:[^a-z]|$)")
AUTOTUNE_RANGE = re.compile(r"(?i)autotun|benchmark_all_configs|cudnnFind|precompil")

# --- framework markers ---------------------------------------------------------------------------------
DATALOADER_PREFIX = "enumerate(DataLoader)#"
OPTIMIZER_PREFIX = "Optimizer.step#"
PROFILER_STEP_PREFIX = "ProfilerStep#"
PROFILER_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
# The profiler's own range around the whole capture (Kineto's ``PyTorch Profiler (0)``): never a step.
PROFILER_RANGE_RE = re.compile(r"^PyTorch Profiler \(\d+\)$")
# A user range named for an iteration (``step[12]``, ``iteration_3``, ``train_step 7``, ``iter-4``): with
# its numbers taken out (:func:`numbered_stem`) the occurrences are the loop's steps, one name each.
ITERATION_RANGE_RE = re.compile(r"(?i)(?<![a-z])(?:step|iter|iteration|batch)(?![a-z])")
_DIGITS = re.compile(r"\d+")


def numbered_stem(name: str) -> str | None:
    """``name`` with its numbers replaced by ``#`` when it names a numbered iteration, else None."""
    if not ITERATION_RANGE_RE.search(name) or not _DIGITS.search(name):
        return None
    return _DIGITS.sub("#", name)


# --- host-side input work: producing the batch on the training thread -----------------------------------
# Frames and ranges whose name says they read, decode, transform or collate input (searched anywhere).
INPUT_WORK = re.compile(r"(?i)preprocess|read_video|video_reader|decode_(video|image|jpeg)|imdecode|imread|"
                        r"load_image|collate|__getitem__|tokeniz|augment|torchvision/(io|transforms)|"
                        r"(^|[/.])datasets?[/.]|PIL/|cv2")

# --- Python frames: how a with_stack frame is named ---------------------------------------------------
_PY_FRAME = re.compile(r"^(?:.*/)?(?P<file>[^/()]+)\((?P<line>\d+)\): (?P<func>.+)$")
_BUILTIN = re.compile(r"^<built-in (?P<kind>method|function) (?P<name>[^ >]+)(?: of (?P<owner>\S+) object)?[^>]*>$")


def frame_label(name: str) -> str:
    """A Python frame as a reader names it: ``path/to/video.py(129): preprocess`` -> ``preprocess
    (video.py:129)``, ``<built-in method to of Tensor object at 0x7f..>`` -> ``built-in method to (Tensor)``;
    other names unchanged. (Angle brackets and directories are what a table would otherwise cut.)"""
    m = _PY_FRAME.match(name)
    if m:
        return f"{m['func']} ({m['file']}:{m['line']})"
    m = _BUILTIN.match(name)
    if m:
        owner = f" ({m['owner']})" if m["owner"] else ""
        return f"built-in {m['kind']} {m['name']}{owner}"
    return name


def calls_matching(names: pd.Series, rx: re.Pattern[str]) -> np.ndarray:
    """Rows whose name ``rx`` finds (``search``: anchored patterns match whole names), tested once
    per distinct name and spread to the rows (no regex per event)."""
    c = names.astype("category")
    hit = _category_hits(cast(pd.CategoricalDtype, c.dtype), rx)
    codes = c.cat.codes.to_numpy()
    return (codes >= 0) & hit[np.maximum(codes, 0)]


def _category_hits(dtype: pd.CategoricalDtype, rx: re.Pattern[str]) -> np.ndarray:
    """Per category of ``dtype``: ``rx`` finds it. Not kept between calls: its callers (the sanity notes once
    per trace, data-starved's labels made afresh per call) never ask twice for the same categories."""
    return np.array([bool(rx.search(str(x))) for x in dtype.categories], dtype=bool)
