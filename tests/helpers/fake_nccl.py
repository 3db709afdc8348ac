"""Fakes of NCCL's side of a communicator (nccl.bindings, nccl4py's Communicator, streams and
their events) for the CPU tests of cuda_core.nccl's lifetime, groups and hot path.

What NCCL would do is what the test sets: ``Fake.state`` is the asynchronous status answered
(a list is answered item by item, the last one for ever), ``Fake.log`` records the NCCL calls
in order, ``block_on`` names calls that hang until the communicator is aborted.
"""

from __future__ import annotations

import threading
from typing import Any


class NCCLError(Exception):
    def __init__(self, status: int = 3) -> None:
        super().__init__(f"NCCL status {status}")
        self.status = status


class Fake:
    """NCCL for one or more communicators, with a log of every call."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.state: list[int] = [0]
        self.polls = 0
        self.block_on: set[str] = set()
        self.aborted = threading.Event()
        self.fail_rank_of: set[int] = set()  # comm ptrs whose ncclCommUserRank fails
        self.on_group_end: Any = None
        self.bindings = Bindings(self)
        self.core = Core(self)

    def answer(self) -> int:
        self.polls += 1
        return self.state.pop(0) if len(self.state) > 1 else self.state[0]

    def hang(self, api: str) -> None:
        if api in self.block_on:
            assert self.aborted.wait(30), f"{api} hung and was never aborted"
            raise NCCLError(3)


class Bindings:
    """``nccl.bindings.nccl``: the calls cuda_core.nccl makes."""

    def __init__(self, fake: Fake) -> None:
        self.fake = fake
        self.NCCLError = NCCLError

    def Comm(self, ptr: int) -> int:
        return ptr

    def comm_get_async_error(self, comm: int) -> int:
        return self.fake.answer()

    def comm_user_rank(self, comm: int) -> int:
        if comm in self.fake.fail_rank_of:
            raise NCCLError(4)
        return comm % 100

    def comm_count(self, comm: int) -> int:
        return 2

    def comm_cu_device(self, comm: int) -> int:
        return 0

    def group_start(self) -> None:
        self.fake.log.append("ncclGroupStart")

    def group_end(self) -> None:
        self.fake.log.append("ncclGroupEnd")
        if self.fake.on_group_end is not None:
            self.fake.on_group_end()
        self.fake.hang("ncclGroupEnd")

    def get_last_error(self, comm: Any) -> str:
        return ""

    def get_error_string(self, code: int) -> str:
        return "from the fake"

    class Result:  # nccl4py's enum of statuses
        def __init__(self, code: int) -> None:
            self.name = f"Status{code}"


class N4P:
    """nccl4py's Communicator."""

    def __init__(self, fake: Fake, ptr: int) -> None:
        self.fake, self.ptr = fake, ptr

    def finalize(self) -> None:
        self.fake.log.append(f"ncclCommFinalize {self.ptr}")
        self.fake.hang("ncclCommFinalize")

    def destroy(self) -> None:
        self.fake.log.append(f"ncclCommDestroy {self.ptr}")
        self.fake.hang("ncclCommDestroy")

    def abort(self) -> None:
        self.fake.log.append(f"ncclCommAbort {self.ptr}")
        self.fake.aborted.set()

    def split(self, color: int, key: int, config: Config) -> N4P:
        self.fake.log.append(f"ncclCommSplit {self.ptr} color={color} key={key} {config}")
        return N4P(self.fake, self.ptr + 100)


class Config:
    """nccl4py's NCCLConfig (the one field cuda_core sets)."""

    def __init__(self, blocking: bool) -> None:
        self.blocking = blocking

    def __repr__(self) -> str:
        return f"blocking={int(self.blocking)}"


class UniqueId:
    @classmethod
    def from_bytes(cls, data: bytes) -> UniqueId:
        return cls()


class Core:
    """``nccl.core``: init (as nccl4py's, non-blocking: the handle is there at once) and
    init_all."""

    NCCLConfig = Config
    UniqueId = UniqueId

    def __init__(self, fake: Fake) -> None:
        self.fake = fake
        self.Communicator = self

    def init(self, nranks: int, rank: int, uid: UniqueId, config: Config) -> N4P:
        self.fake.log.append(f"ncclCommInitRank {nranks} {rank} {config}")
        return N4P(self.fake, 200 + rank)

    def init_all(self, ids: list[int]) -> list[N4P]:
        return [N4P(self.fake, 100 + i) for i in range(len(ids))]


class Event:
    """A cuda_core Event: done when the test says so; recorded only on its own context."""

    def __init__(self, ctx: int) -> None:
        self.ctx = ctx
        self.is_done = False
        self.closed = False

    def close(self) -> None:
        self.closed = True


class _Handle:
    def __init__(self, address: int, ctx: Any) -> None:
        self.address, self.ctx = address, ctx


class _Ctx:
    def __init__(self, address: int) -> None:
        self.address = address


class Stream:
    """A cuda_core Stream of context ``ctx`` (``None``: unknown): ``record`` as the driver
    would, refusing an event of another context."""

    def __init__(self, address: int, ctx: int | None = 1) -> None:
        self._h = _Handle(address, None if ctx is None else _Ctx(ctx))
        self.ctx = ctx
        self.events: list[Event] = []

    def record(self, event: Event | None = None) -> Event:
        if event is None:
            event = Event(self.ctx if self.ctx is not None else -self._h.address)
        elif event.ctx != self.ctx:
            raise RuntimeError("cuEventRecord: CUDA_ERROR_INVALID_HANDLE: event of another context")
        event.is_done = False
        self.events.append(event)
        return event


def communicator(monkeypatch: Any, fake: Fake, timeout: float = 5.0, ptr: int = 100) -> Any:
    """A cuda_core Communicator over the fake (its watchdog's thread makes no context current)."""
    from cuda_core.nccl import _communicator

    monkeypatch.setattr(_communicator, "_make_current", lambda device_id: None)
    return _communicator.Communicator._adopt(N4P(fake, ptr), fake.bindings, timeout)


class Device:
    """cuda_core's Device as Communicator.init uses it: an ordinal and a scope."""

    def __init__(self, device: Any = None) -> None:
        self._id = 0 if device is None else int(device)

    def _scope(self) -> Any:
        import contextlib

        return contextlib.nullcontext()


def use_fake(monkeypatch: Any, fake: Fake) -> None:
    """Make cuda_core.nccl load the fake instead of nccl4py."""
    from cuda_core.nccl import _communicator, _group

    monkeypatch.setattr(_group, "load", lambda: (fake.core, fake.bindings))
    monkeypatch.setattr(_communicator, "load", lambda: (fake.core, fake.bindings))
    monkeypatch.setattr(_communicator, "_make_current", lambda device_id: None)
