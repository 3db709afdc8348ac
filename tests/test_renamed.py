"""Names earlier cuda.core releases used, still taken with a DeprecationWarning naming the new one.

Code written for ``cuda.core`` 0.x, 1.0 or 1.1 (often chosen by ``cuda.core.__version__``) uses
them. CPU tier: the options, the module attributes, the table of old names (each one absent
from ``cuda.core`` 1.2, so it cannot clash with 1.2's meaning, and its new name present in both);
GPU tier: each method and property on real objects.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import warnings

import pytest

import cuda_core
import cuda_core.graph as G
from cuda_core import EventOptions
from cuda_core._kernel_attributes import _CallableInt
from cuda_core._utils import check_or_create_options
from cuda_core._utils._renamed import renamed_method

HAVE_PEER = importlib.util.find_spec("cuda.core") is not None

# (where in cuda_core, where in cuda.core 1.2, old name, new name)
RENAMED = [
    ("EventOptions", "EventOptions", "enable_timing", "timing_enabled"),
    ("EventOptions", "EventOptions", "busy_waited_sync", "blocking_sync"),
    ("EventOptions", "EventOptions", "support_ipc", "ipc_enabled"),
    ("Event", "Event", "is_timing_disabled", "is_timing_enabled"),
    ("Event", "Event", "is_sync_busy_waited", "is_blocking_sync"),
    ("Event", "Event", "get_ipc_descriptor", "ipc_descriptor"),
    ("Buffer", "Buffer", "get_ipc_descriptor", "ipc_descriptor"),
    ("DeviceMemoryResource", "DeviceMemoryResource", "get_allocation_handle", "allocation_handle"),
    ("PinnedMemoryResource", "PinnedMemoryResource", "get_allocation_handle", "allocation_handle"),
    ("LaunchConfig", "LaunchConfig", "cooperative_launch", "is_cooperative"),
    ("graph.GraphDefinition", "graph.GraphDefinition", "alloc", "allocate"),
    ("graph.GraphDefinition", "graph.GraphDefinition", "free", "deallocate"),
    ("graph.GraphDefinition", "graph.GraphDefinition", "record_event", "record"),
    ("graph.GraphDefinition", "graph.GraphDefinition", "wait_event", "wait"),
    ("graph.GraphDefinition", "graph.GraphDefinition", "if_cond", "if_then"),
    ("graph.GraphNode", "graph.GraphNode", "alloc", "allocate"),
    ("graph.GraphNode", "graph.GraphNode", "free", "deallocate"),
    ("graph.GraphNode", "graph.GraphNode", "record_event", "record"),
    ("graph.GraphNode", "graph.GraphNode", "wait_event", "wait"),
    ("graph.GraphNode", "graph.GraphNode", "if_cond", "if_then"),
    ("graph.GraphBuilder", "graph.GraphBuilder", "add_child", "embed"),
    ("graph.GraphBuilder", "graph.GraphBuilder", "create_conditional_handle", "create_condition"),
    ("graph.GraphBuilder", "graph.GraphBuilder", "if_cond", "if_then"),
    ("graph.HostCallbackNode", "graph.HostCallbackNode", "callback_fn", "callback"),
]


def _resolve(root, path):
    obj = root
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize(("ours", "theirs", "old", "new"), RENAMED)
def test_each_old_name_is_documented_as_the_new_one(ours, theirs, old, new):
    cls = _resolve(cuda_core, ours)
    assert hasattr(cls, new)
    doc = inspect.getdoc(inspect.getattr_static(cls, old)) or ""
    assert "Deprecated spelling of :" in doc and f"`{new}`" in doc, (old, doc)


@pytest.mark.parametrize(("ours", "theirs", "old", "new"), RENAMED)
def test_old_names_mean_nothing_else_in_cuda_core_1_2(ours, theirs, old, new):
    if not HAVE_PEER:
        pytest.skip("NVIDIA's cuda.core is not installed here")
    import cuda.core

    ref = _resolve(cuda.core, theirs)
    if dataclasses.is_dataclass(ref):
        names = {f.name for f in dataclasses.fields(ref)}
        assert new in names and old not in names
    else:
        assert hasattr(ref, new) and not hasattr(ref, old), (theirs, old)


# -- options ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("enable_timing", "timing_enabled"),
        ("busy_waited_sync", "blocking_sync"),
        ("support_ipc", "ipc_enabled"),
    ],
)
def test_event_options_take_the_old_field_names(old, new):
    with pytest.warns(DeprecationWarning, match=rf"EventOptions\({old}=\.\.\.\).*{new}") as rec:
        opts = EventOptions(**{old: True})
    assert rec[0].filename == __file__
    assert getattr(opts, new) is True and opts == EventOptions(**{new: True})
    with pytest.warns(DeprecationWarning, match=new):
        assert check_or_create_options(EventOptions, {old: True}, "Event options") == opts
    with pytest.warns(DeprecationWarning, match=rf"EventOptions\.{old} .*EventOptions\.{new}"):
        assert getattr(opts, old) is True
    with pytest.warns(DeprecationWarning):
        setattr(opts, old, False)
    assert getattr(opts, new) is False
    with pytest.raises(TypeError, match=f"both '{old}' and its new name '{new}'"):
        EventOptions(**{old: True, new: True})


def test_event_options_keep_their_fields_repr_and_checks():
    assert [f.name for f in dataclasses.fields(EventOptions)] == [
        "timing_enabled",
        "blocking_sync",
        "ipc_enabled",
    ]
    with pytest.warns(DeprecationWarning):
        opts = EventOptions(enable_timing=True)
    assert repr(opts) == repr(EventOptions(timing_enabled=True))
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="timing_enabled"):
        EventOptions(enable_timing=1)  # exactly a bool, as for the new name
    with pytest.raises(TypeError, match="enable_timings"):
        EventOptions(enable_timings=True)
    with pytest.raises(TypeError, match="unknown EventOptions field"):
        check_or_create_options(EventOptions, {"enable_timings": True}, "options")


def test_new_names_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        EventOptions(timing_enabled=True, blocking_sync=True)
        cuda_core.LaunchConfig(grid=1, block=1, is_cooperative=True).is_cooperative  # noqa: B018
        G.GraphDefinition  # noqa: B018


# -- module attributes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"), [("GraphDef", "GraphDefinition"), ("Condition", "GraphCondition")]
)
def test_graph_module_names_of_0_7(old, new):
    with pytest.warns(
        DeprecationWarning, match=rf"cuda_core\.graph\.{old} .*cuda_core\.graph\.{new}"
    ):
        assert getattr(G, old) is getattr(G, new)
    assert old not in G.__all__
    with pytest.raises(AttributeError, match="no_such_name"):
        G.no_such_name  # noqa: B018


# -- the helpers, on a class of this test ----------------------------------------------------


class _Widget:
    def grow(self, by, *, twice=False):
        return by * (2 if twice else 1)

    enlarge = renamed_method("_Widget", "enlarge", "grow")


def test_renamed_method_passes_every_argument_and_warns_at_the_caller():
    with pytest.warns(DeprecationWarning, match=r"_Widget\.enlarge\(\) .*_Widget\.grow\(\)") as rec:
        assert _Widget().enlarge(3, twice=True) == 6
    assert rec[0].filename == __file__
    assert _Widget.enlarge.__name__ == "enlarge"


def test_kernel_attribute_values_are_ints():
    assert issubclass(_CallableInt, int)


# -- GPU: each old name on real objects ------------------------------------------------------


@pytest.mark.gpu
def test_event_names_before_1_0(dev):
    s = dev.create_stream()
    with pytest.warns(DeprecationWarning):
        timed = dev.create_event(options={"enable_timing": True, "busy_waited_sync": False})
    assert timed.is_timing_enabled
    with pytest.warns(DeprecationWarning, match="is_timing_enabled"):
        assert timed.is_timing_disabled is False
    with pytest.warns(DeprecationWarning, match="is_blocking_sync"):
        assert timed.is_sync_busy_waited is True
    ipc = s.record(options=EventOptions(ipc_enabled=True))
    with pytest.warns(DeprecationWarning, match=r"Event\.ipc_descriptor"):
        assert ipc.get_ipc_descriptor() is ipc.ipc_descriptor
    ipc.close()
    timed.close()
    s.close()


@pytest.mark.gpu
def test_ipc_getters_before_1_0(dev):
    from cuda_core import DeviceMemoryResource, DeviceMemoryResourceOptions

    mr = DeviceMemoryResource(dev, DeviceMemoryResourceOptions(ipc_enabled=True, max_size=1 << 22))
    buf = mr.allocate(256, stream=dev.default_stream)
    with pytest.warns(DeprecationWarning, match=r"Buffer\.ipc_descriptor"):
        assert buf.get_ipc_descriptor() == buf.ipc_descriptor
    with pytest.warns(DeprecationWarning, match=r"DeviceMemoryResource\.allocation_handle"):
        assert mr.get_allocation_handle() is mr.allocation_handle
    buf.close()
    mr.close()


@pytest.mark.gpu
def test_graph_definition_and_node_names_before_1_0(dev):
    ev = dev.create_event()
    g = G.GraphDefinition()
    with pytest.warns(DeprecationWarning, match=r"GraphDefinition\.alloc\(\) .*\.allocate\(\)"):
        a = g.alloc(1024)
    assert isinstance(a, G.AllocNode)
    with pytest.warns(DeprecationWarning, match=r"GraphNode\.alloc\(\)"):
        a2 = a.alloc(512)
    with pytest.warns(DeprecationWarning, match=r"GraphNode\.free\(\) .*\.deallocate\(\)"):
        f = a2.free(a.dptr)
    assert isinstance(f, G.FreeNode) and f.pred == {a2}
    with pytest.warns(DeprecationWarning, match=r"GraphDefinition\.free\(\)"):
        assert isinstance(g.free(a2.dptr), G.FreeNode)
    with pytest.warns(DeprecationWarning, match=r"GraphNode\.record_event\(\) .*\.record\(\)"):
        r = f.record_event(ev)
    with pytest.warns(DeprecationWarning, match=r"GraphNode\.wait_event\(\) .*\.wait\(\)"):
        w = r.wait_event(ev)
    assert isinstance(r, G.EventRecordNode) and isinstance(w, G.EventWaitNode)
    with pytest.warns(DeprecationWarning, match=r"GraphDefinition\.record_event\(\)"):
        assert isinstance(g.record_event(ev), G.EventRecordNode)
    with pytest.warns(DeprecationWarning, match=r"GraphDefinition\.wait_event\(\)"):
        assert isinstance(g.wait_event(ev), G.EventWaitNode)
    cond = g.create_condition(default_value=0)
    with pytest.warns(DeprecationWarning, match=r"GraphDefinition\.if_cond\(\) .*\.if_then\(\)"):
        assert isinstance(g.if_cond(cond), G.IfNode)
    cond2 = g.create_condition(default_value=0)  # (one conditional node per condition)
    with pytest.warns(DeprecationWarning, match=r"GraphNode\.if_cond\(\)"):
        assert isinstance(w.if_cond(cond2), G.IfNode)
    cb = g.callback(lambda: None)
    with pytest.warns(DeprecationWarning, match=r"HostCallbackNode\.callback_fn .*\.callback"):
        assert cb.callback_fn is cb.callback
    ev.close()


@pytest.mark.gpu
def test_graph_builder_names_before_1_0(dev):
    s = dev.create_stream()
    child = s.create_graph_builder().begin_building()
    child.end_building()
    b = s.create_graph_builder().begin_building()
    with pytest.warns(DeprecationWarning, match=r"GraphBuilder\.create_conditional_handle\(\)"):
        cond = b.create_conditional_handle(default_value=0)
    assert isinstance(cond, G.GraphCondition)  # 0.x gave the raw handle; this goes where it went
    with pytest.warns(DeprecationWarning, match=r"GraphBuilder\.if_cond\(\) .*\.if_then\(\)"):
        body = b.if_cond(cond)
    body.begin_building()
    body.end_building()
    with pytest.warns(DeprecationWarning, match=r"GraphBuilder\.add_child\(\) .*\.embed\(\)"):
        b.add_child(child)
    graph = b.end_building().complete()
    graph.launch(s)
    s.sync()
    graph.close()
    body.close()
    b.close()
    child.close()
    s.close()
