"""cuda_core.nccl: collectives through nccl4py on cuda_core's Buffers, views and Streams.

CPU tier: data types and ops, the argument checks that need no GPU, the errors (missing nccl4py
or libnccl, in a subprocess), and that nccl4py reads our views through DLPack (the unique-id
rendezvous has its own file, test_rendezvous.py). GPU tier (two GPUs, skipped with the reason elsewhere):
every collective across two processes, nccl4py's own communicator on our objects, one process
driving two GPUs in a group, and the example in both launch modes.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest

from cuda_core import CUDAError, nccl
from cuda_core.nccl import _args
from tests.helpers import nccl_ranks

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "nccl_allreduce.py"
REMEDY = 'pip install "cudacore[nccl]"'
HAVE_NCCL = nccl.is_available()
needs_nccl4py = pytest.mark.skipif(
    not HAVE_NCCL, reason=f"nccl4py or libnccl is not installed ({REMEDY})"
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


# -- data types, ops, argument checks (CPU) ---------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "code"),
    [("int8", 0), ("uint8", 1), ("int32", 2), ("uint32", 3), ("int64", 4), ("uint64", 5),
     ("float16", 6), ("float32", 7), ("float64", 8), (np.float32, 7), (np.dtype("<f8"), 8)],
)  # fmt: skip
def test_dtypes_map_to_nccl(dtype, code):
    assert _args.nccl_dtype(dtype) == (code, np.dtype(dtype).itemsize)


def test_ml_dtypes_map_to_nccl():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert _args.nccl_dtype(ml_dtypes.bfloat16) == (9, 2)
    assert _args.nccl_dtype(np.dtype(ml_dtypes.float8_e4m3fn)) == (10, 1)
    assert _args.nccl_dtype(ml_dtypes.float8_e5m2) == (11, 1)


@pytest.mark.parametrize(
    "bad", [np.complex64, np.bool_, ">f4", np.int16, "not a type", [("a", "f4")]]
)
def test_unsupported_dtypes_are_refused_by_name(bad):
    with pytest.raises(
        TypeError, match=r"dtype must be a data type NCCL reduces and moves: int8, .* \(got "
    ):
        _args.nccl_dtype(bad)


def test_reduction_ops():
    assert [_args.reduction_op(o) for o in ("sum", "prod", "max", "min", "avg", "SUM")] == [
        0,
        1,
        2,
        3,
        4,
        0,
    ]
    assert _args.reduction_op(np.int32(2)) == 2
    with pytest.raises(
        ValueError, match=r"op must be one of 'sum', 'prod', 'max', 'min', 'avg' .*\(got 'mean'\)"
    ):
        _args.reduction_op("mean")
    for bad in (True, 1.5, np.float32(1), None):
        with pytest.raises(TypeError, match="op must be one of"):
            _args.reduction_op(bad)


@needs_nccl4py
def test_nccl4py_ops_and_custom_ops_are_taken_as_ints():
    import nccl.core as nc

    assert [_args.reduction_op(o) for o in (nc.SUM, nc.PROD, nc.MAX, nc.MIN, nc.AVG)] == [
        0,
        1,
        2,
        3,
        4,
    ]

    class CustomOp:  # what nccl4py's CustomRedOp offers: __int__ giving the ncclRedOp_t
        def __int__(self) -> int:
            return 5

    assert _args.reduction_op(CustomOp()) == 5


def _resolve(obj, dtype=None, typed=False, dest=False):
    return _args.resolve(obj, dtype, "sendbuf", 0, 0, typed, dest)


def test_buffer_arguments_are_checked_before_the_driver_is_asked():
    from cuda_core import Buffer

    buf = Buffer.from_handle(0x10000, 100)
    with pytest.raises(
        TypeError, match=r"dtype must be given when sendbuf is a Buffer .*pass dtype=numpy.float32"
    ):
        _resolve(buf, typed=True)
    with pytest.raises(
        ValueError, match=r"sendbuf must be a whole number of float64 elements \(8 bytes each\)"
    ):
        _resolve(buf, dtype=np.float64)
    with pytest.raises(TypeError, match="dtype must be a data type NCCL"):
        _resolve(buf, dtype=np.complex128)
    buf.close()
    with pytest.raises(RuntimeError, match="sendbuf is a closed Buffer"):
        _resolve(buf)


def test_array_arguments_must_be_device_memory_dense_and_typed():
    from cuda_core.utils import StridedMemoryView

    host = np.arange(16, dtype=np.float32)
    with pytest.raises(
        ValueError, match=r"sendbuf must be a view of device or managed memory .*host memory"
    ):
        _resolve(host)  # any array: viewed first
    with pytest.raises(ValueError, match="sendbuf must be a view of device or managed memory"):
        _resolve(StridedMemoryView.from_array_interface(host))
    with pytest.raises(ValueError, match=r"sendbuf must be C-contiguous"):
        _resolve(host[::2])
    with pytest.raises(
        ValueError, match=r"dtype must be None or sendbuf's own dtype float32 \(got"
    ):
        _resolve(host, dtype=np.int32)
    with pytest.raises(TypeError, match=r"sendbuf\.dtype must be a data type NCCL"):
        _resolve(np.zeros(4, np.complex64))
    with pytest.raises(
        TypeError,
        match=r"sendbuf must be a Buffer, a StridedMemoryView or a device array \(got None\)",
    ):
        _resolve(None)
    with pytest.raises(
        TypeError, match=r"sendbuf must be a Buffer, a StridedMemoryView or a device array"
    ):
        _resolve(object())


def test_communicator_comes_from_its_factories_and_checks_its_arguments():
    with pytest.raises(
        RuntimeError, match=r"use Communicator.init\(\) .* or Communicator.init_all\(\)"
    ):
        nccl.Communicator()
    uid = bytes(128)
    with pytest.raises(TypeError, match=r"nranks must be an int \(got 2.0\)"):
        nccl.Communicator.init(2.0, 0, uid)
    with pytest.raises(TypeError, match=r"rank must be an int \(got True\)"):
        nccl.Communicator.init(2, True, uid)
    with pytest.raises(ValueError, match=r"nranks must be at least 1 \(got 0\)"):
        nccl.Communicator.init(0, 0, uid)
    with pytest.raises(ValueError, match=r"rank must be in 0..1 \(nranks is 2\) \(got 2\)"):
        nccl.Communicator.init(2, 2, uid)


@needs_nccl4py
def test_unique_id_argument_is_checked():
    with pytest.raises(
        ValueError,
        match=r"unique_id must be the 128 bytes from get_unique_id\(\) \(got '3 bytes'\)",
    ):
        nccl.Communicator.init(2, 0, b"abc")
    with pytest.raises(TypeError, match=r"unique_id must be the bytes from get_unique_id\(\)"):
        nccl.Communicator.init(2, 0, "abc")


# -- what NCCL is, and errors ---------------------------------------------------------------


@needs_nccl4py
def test_library_info_and_unique_ids():
    info = nccl.library_info()
    assert set(info) == {"nccl4py", "version", "path"}
    major, minor, _patch = (int(p) for p in info["version"].split("."))
    assert major == 2 and minor >= 18
    if info["path"] is not None:
        assert "libnccl.so" in info["path"] and os.path.exists(info["path"])
    a, b = nccl.get_unique_id(), nccl.get_unique_id()
    assert isinstance(a, bytes) and len(a) == 128 and a != b


@needs_nccl4py
def test_nccl_errors_name_the_call_and_status_and_pickle():
    from nccl.bindings import nccl as bindings

    from cuda_core.nccl._errors import nccl_error

    err = nccl_error("ncclAllReduce", bindings.NCCLError(4), bindings)
    assert isinstance(err, nccl.NCCLError) and isinstance(err, CUDAError)
    assert (err.api, err.name, err.code) == ("ncclAllReduce", "ncclInvalidArgument", 4)
    assert str(err).startswith("ncclAllReduce: ncclInvalidArgument: invalid argument")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is nccl.NCCLError and str(back) == str(err) and back.code == 4


def test_not_found_error_is_an_import_error_and_pickles():
    err = nccl.NCCLNotFoundError(
        "nccl4py (NVIDIA's Python bindings for NCCL)", "nccl4py", "No module named 'nccl'"
    )
    assert (
        isinstance(err, ImportError)
        and isinstance(err, RuntimeError)
        and isinstance(err, CUDAError)
    )
    assert REMEDY in str(err) and err.remedy == REMEDY and "No module named 'nccl'" in str(err)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is nccl.NCCLNotFoundError and str(back) == str(err) and back.remedy == REMEDY


def test_remedy_names_an_extra_that_brings_nccl4py_and_the_library():
    import re

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    remedy = nccl.NCCLNotFoundError("the NCCL library", "libnccl.so.2").remedy
    extra = re.fullmatch(r'pip install "cudacore\[([\w-]+)\]"', remedy)
    assert extra is not None, remedy
    names = [re.split(r"[<>=!~\[ ]", req)[0] for req in extras[extra.group(1)]]
    assert "nccl4py" in names and "nvidia-nccl-cu13" in names
    assert [re.split(r"[<>=!~\[ ]", req)[0] for req in extras["nccl-cu12"]] == [
        "nccl4py",
        "nvidia-nccl-cu12",
    ]


_BLOCK_NCCL4PY = """
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name == "nccl" or name.startswith("nccl."):
            raise ImportError(f"No module named {name!r} (hidden by the test)")
        return None
sys.meta_path.insert(0, _Block())
"""

_HIDE_LIBNCCL = """
import cuda.pathfinder as _pf
_real = _pf.load_nvidia_dynamic_lib
def _fake(name):
    if name == "nccl":
        raise _pf.DynamicLibNotFoundError("Failure finding libnccl.so: simulated by the test")
    return _real(name)
_pf.load_nvidia_dynamic_lib = _fake
"""

_PROBE = """
import json
from cuda_core import CUDAError, nccl
out = {"available": nccl.is_available()}
for what, fn in (("uid", nccl.get_unique_id), ("info", nccl.library_info),
                 ("init", lambda: nccl.Communicator.init(2, 0, bytes(128))),
                 ("group", lambda: nccl.group().__enter__())):
    try:
        fn()
        out[what] = None
    except nccl.NCCLNotFoundError as exc:
        out[what] = {"msg": str(exc), "library": exc.library, "import": isinstance(exc, ImportError),
                     "runtime": isinstance(exc, RuntimeError), "cuda": isinstance(exc, CUDAError)}
print(json.dumps(out))
"""


def _probe(prelude: str) -> dict:
    import json

    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(prelude) + _PROBE], capture_output=True,
                          text=True, timeout=120, env=_env(), cwd=ROOT)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_without_nccl4py_import_works_and_use_names_the_extra():
    out = _probe(_BLOCK_NCCL4PY)
    assert out["available"] is False
    for what in ("uid", "info", "init", "group"):
        got = out[what]
        assert got is not None, f"{what}: no NCCLNotFoundError"
        assert got["import"] and got["runtime"] and got["cuda"]
        assert (
            REMEDY in got["msg"]
            and "nccl4py" in got["msg"]
            and got["library"].startswith("nccl4py")
        )


@needs_nccl4py
def test_without_libnccl_the_error_names_the_library_and_the_extra():
    out = _probe(_HIDE_LIBNCCL)
    assert out["available"] is False
    got = out["uid"]
    assert got is not None and got["import"] and got["runtime"]
    assert got["msg"].startswith("libnccl.so.2: LIBRARY_NOT_FOUND: the NCCL library was not found")
    assert REMEDY in got["msg"] and "simulated by the test" in got["msg"]


def test_example_says_nccl_is_missing_with_one_line():
    script = (
        _BLOCK_NCCL4PY
        + f"\nimport runpy; sys.argv = [{str(EXAMPLE)!r}]; sys.path.insert(0, {str(EXAMPLE.parent)!r})\n"
    )
    script += f"runpy.run_path({str(EXAMPLE)!r}, run_name='__main__')\n"
    env = _env()
    for k in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK"):
        env.pop(k, None)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines() == [
        f"missing requirement [nccl]: nccl4py and the NCCL library ({REMEDY})"
    ]


@needs_nccl4py
def test_nccl4py_reads_our_views_through_dlpack():
    from nccl.core.buffer import NcclBuffer  # nccl4py's resolver behind every collective

    from cuda_core.utils import StridedMemoryView

    a = np.arange(24, dtype=np.float64)
    got = NcclBuffer(StridedMemoryView.from_array_interface(a))
    assert (got.ptr, got.count, int(got.dtype), got.device_id) == (a.ctypes.data, 24, 8, -1)


# -- GPU tier: two GPUs --------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("world", [2, 4])
def test_collectives_in_one_process_per_gpu(world):
    nccl_ranks.need_gpus(world)
    assert nccl_ranks.run_ranks(nccl_ranks.rank_collectives, world) == ["ok"] * world


@pytest.mark.gpu
def test_nccl4py_takes_our_buffers_views_and_streams_directly():
    nccl_ranks.need_gpus()
    assert nccl_ranks.run_ranks(nccl_ranks.rank_nccl4py_direct, 2) == ["ok", "ok"]


@pytest.mark.gpu
@pytest.mark.parametrize("world", [2, 4])
def test_one_process_drives_several_gpus_in_a_group(world):
    nccl_ranks.need_gpus(world)
    assert nccl_ranks.run_ranks(nccl_ranks.rank_group_two_devices, world, procs=1) == ["ok"]


@pytest.mark.gpu
def test_example_spawns_one_rank_per_gpu():
    nccl_ranks.need_gpus()
    env = _env()
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK"):
        env.pop(k, None)
    env["NCCL_NVLS_ENABLE"] = "0"
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from tests.helpers import gpu_count

    assert f"{gpu_count()} ranks on {gpu_count()} GPUs agree with NumPy" in proc.stdout


def _load_example():
    import importlib.util

    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        spec = importlib.util.spec_from_file_location("nccl_allreduce_example", EXAMPLE)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(EXAMPLE.parent))
    return mod


def test_example_reads_torchrun_and_mpirun_variables():
    launcher_env = _load_example().launcher_env
    assert launcher_env({}) is None
    torchrun = {
        "RANK": "3",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "MASTER_ADDR": "node0",
        "MASTER_PORT": "29500",
    }
    assert launcher_env(torchrun) == (3, 8, 1, "node0", 29500)
    # started by torchrun itself: its agent holds MASTER_PORT, rank 0 listens on the next one
    assert launcher_env({**torchrun, "TORCHELASTIC_RUN_ID": "job"}) == (3, 8, 1, "node0", 29501)
    mpirun = {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "16", "OMPI_COMM_WORLD_LOCAL_RANK": "5",
              "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "4000"}  # fmt: skip
    assert launcher_env(mpirun) == (5, 16, 5, "10.0.0.1", 4000)
    with pytest.raises(SystemExit, match="WORLD_SIZE is not"):
        launcher_env({"RANK": "0"})


def _two_free_ports() -> int:
    import socket

    for _ in range(50):
        port = nccl_ranks.free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise AssertionError("no two consecutive free ports")


@pytest.mark.gpu
def test_example_under_launcher_variables_as_torchrun_sets_them():
    import socket

    nccl_ranks.need_gpus()
    port = _two_free_ports()
    procs = []
    # torchrun's agent serves its store on MASTER_PORT while the ranks run: hold it the same way
    with socket.create_server(("127.0.0.1", port)):
        for rank in range(2):
            env = _env()
            env["NCCL_NVLS_ENABLE"] = "0"
            env.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), TORCHELASTIC_RUN_ID="test")  # fmt: skip
            procs.append(subprocess.Popen([sys.executable, str(EXAMPLE)], stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT))  # fmt: skip
        outs = []
        try:
            for p in procs:
                outs.append(p.communicate(timeout=300)[0])
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.communicate()
    for rank, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {rank}:\n{out}"
        assert f"rank {rank} (GPU {rank}): all-reduce of" in out
    assert "NCCL 2." in outs[0]


class _Ranks:
    """Stand-ins for rank processes that all end right after the waiter's first is_alive() call
    (whichever process it asks): the race of ranks ending between two looks, made certain. A
    sentinel is the read end of a pipe whose write end is closed, as a dead process's is."""

    def __init__(self, n: int) -> None:
        self.looks = 0
        self.procs = [self._Proc(self) for _ in range(n)]

    class _Proc:
        def __init__(self, ranks: _Ranks) -> None:
            self.ranks = ranks
            self.exitcode: int | None = None
            self.sentinel, w = os.pipe()
            os.close(w)

        def is_alive(self) -> bool:
            self.ranks.looks += 1
            if self.ranks.looks > 1:
                self.exitcode = 0
            return self.exitcode is None

    def close(self) -> None:
        for p in self.procs:
            os.close(p.sentinel)


def test_example_waiter_returns_when_ranks_end_between_its_looks():
    # The waiter once asked any(is_alive) and then is_alive again to build the list to wait on:
    # ranks ending in between left an empty list, and it waited out the whole timeout.
    mod = _load_example()
    ranks = _Ranks(2)
    try:
        t0 = time.monotonic()
        mod.wait_for(ranks.procs, timeout=30.0)
        assert time.monotonic() - t0 < 5.0
    finally:
        ranks.close()


def test_example_waiter_with_real_processes():
    import multiprocessing

    mod = _load_example()
    ctx = multiprocessing.get_context("spawn")
    for _ in range(3):
        procs = [ctx.Process(target=time.sleep, args=(0.2 * r,)) for r in range(3)]
        for p in procs:
            p.start()
        t0 = time.monotonic()
        mod.wait_for(procs, timeout=60.0)
        assert time.monotonic() - t0 < 30.0
        assert [p.exitcode for p in procs] == [0, 0, 0]
