"""CPU tier: the arguments of ranges and marks, and the forms they take (context manager,
decorator, nesting, exceptions), which behave the same whether or not anything records them
(tests/profiler/test_ranges_nvtx.py checks what reaches NVTX)."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from cuda_core import profiler


@pytest.mark.parametrize(
    "name, exc, rule",
    [
        (5, TypeError, "a non-empty str"),
        (b"step", TypeError, "a non-empty str"),
        (["step"], TypeError, "a non-empty str"),  # unhashable: refused, not a KeyError
        ("", ValueError, "a non-empty str without NUL characters"),
        ("st\0ep", ValueError, "a non-empty str without NUL characters"),
    ],
)
def test_name_must_be_a_non_empty_str(name, exc, rule):
    for call in (
        lambda: profiler.range(name),
        lambda: profiler.range(name, color="red"),
        lambda: profiler.mark(name),
        lambda: profiler.mark(name, domain="d"),
    ):
        with pytest.raises(exc) as info:
            call()
        assert str(info.value) == f"name must be {rule} (got {name!r})"


def test_mark_needs_a_name():
    with pytest.raises(TypeError, match=r"^name must be a non-empty str \(got None\)$"):
        profiler.mark(None)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"^name must be a non-empty str \(got <built-in function print>\)$"
    ):
        profiler.mark(print)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "color",
    ["red", "RED", "DarkGreen", "#ff8000", "#80FF8000", 0, 0xFF8000, 0x80FF8000, 0xFFFFFFFF],
)
def test_colours_accepted(color):
    with profiler.range("colour", color=color) as r:
        assert isinstance(r, profiler.Range)
    profiler.mark("colour", color=color)


def test_a_value_equal_to_an_accepted_one_is_still_checked():
    # 1 == True and 1.0 == 1: the ranges kept for 1 and "d" must not answer for these.
    for _ in range(2):
        assert profiler.range("eq", color=1, domain="d") is profiler.range(
            "eq", color=1, domain="d"
        )
        with pytest.raises(TypeError, match=r"^color must be .* \(got True\)$"):
            profiler.range("eq", color=True, domain="d")
        with pytest.raises(TypeError, match=r"^color must be .* \(got 1\.0\)$"):
            profiler.mark("eq", color=1.0, domain="d")


def test_numpy_integers_are_colours():
    assert profiler.range("c", color=np.uint32(0xFF0000)) is profiler.range("c", color=0xFF0000)


@pytest.mark.parametrize(
    "color, exc",
    [
        ("reddish", ValueError),
        ("#ff80", ValueError),
        ("#ff800000ff", ValueError),
        ("ff8000", ValueError),
        (-1, ValueError),
        (2**32, ValueError),
        (True, TypeError),
        (1.5, TypeError),
        ((255, 0, 0), TypeError),
    ],
)
def test_bad_colours_are_refused_naming_the_forms(color, exc):
    for call in (
        lambda: profiler.range("c", color=color),
        lambda: profiler.mark("c", color=color),
    ):
        with pytest.raises(exc) as info:
            call()
        text = str(info.value)
        assert text.startswith("color must be a colour name, '#RRGGBB', '#AARRGGBB' or an int")
        assert f"(got {color!r})" in text
    if exc is ValueError and isinstance(color, str):
        assert "the names are black, blue, cyan" in text


@pytest.mark.parametrize("domain, exc", [(3, TypeError), ("", ValueError), (b"d", TypeError)])
def test_domain_must_be_a_non_empty_str(domain, exc):
    with pytest.raises(exc, match=r"^domain must be a non-empty str"):
        profiler.range("x", domain=domain)
    with pytest.raises(exc, match=r"^domain must be a non-empty str"):
        profiler.mark("x", domain=domain)


def test_range_is_made_by_the_factory_only():
    with pytest.raises(TypeError, match=r"use cuda_core\.profiler\.range\(name"):
        profiler.Range()


def test_the_same_arguments_give_the_same_range():
    assert profiler.range("same") is profiler.range("same")
    assert profiler.range("same", color="red") is profiler.range("same", color=0xFF0000)
    assert profiler.range("same", domain="d") is profiler.range("same", domain="d")


def test_context_manager_nests_and_never_hides_an_exception():
    outer = profiler.range("outer")
    with outer as a, profiler.range("inner", color="blue") as b, outer as c:
        assert a is outer and c is outer and isinstance(b, profiler.Range)
    with pytest.raises(KeyError, match="inside"):
        with profiler.range("raises"):
            raise KeyError("inside")
    with outer:  # still usable after the exception
        pass


def test_a_range_without_a_name_only_decorates():
    r = profiler.range(color="red", domain="d")
    with pytest.raises(TypeError, match=r"a range without a name can only decorate a function"):
        with r:
            pass
    with pytest.raises(TypeError, match="can only decorate"):
        with profiler.range():
            pass


class _Model:
    @profiler.range
    def step(self, x, *, scale=1):
        """Step the model."""
        return x * scale

    @profiler.range("named", color="green")
    def fails(self):
        raise RuntimeError("from the method")

    @profiler.range(domain="cuda_core_test")
    def unnamed(self):
        return "unnamed"


def test_decorators_keep_the_function_its_result_and_its_exceptions():
    m = _Model()
    assert m.step(3, scale=2) == 6
    assert m.unnamed() == "unnamed"
    assert _Model.step.__name__ == "step" and _Model.step.__qualname__ == "_Model.step"
    assert _Model.step.__doc__ == "Step the model."
    with pytest.raises(RuntimeError, match="from the method"):
        m.fails()


def test_decorated_functions_run_on_many_threads():
    @profiler.range("threaded")
    def work(i):
        with profiler.range("inner"):
            return i * i

    out = [0] * 8

    def run(i):
        out[i] = work(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == [i * i for i in range(8)]


async def _coroutine():
    await asyncio.sleep(0)


async def _async_generator():
    yield 1


def _generator():
    yield 1


@pytest.mark.parametrize("fn", [_coroutine, _async_generator, _generator])
@pytest.mark.parametrize(
    "decorate",
    [profiler.range, profiler.range("x"), profiler.range(color="red")],
    ids=["bare", "named", "unnamed"],
)
def test_coroutine_and_generator_functions_are_refused(fn, decorate):
    with pytest.raises(TypeError) as info:
        decorate(fn)
    text = str(info.value)
    assert text.startswith(f"a range cannot decorate {fn.__qualname__!r}: calling it returns")
    assert "use 'with cuda_core.profiler.range(...)'" in text


def test_a_static_or_class_method_is_decorated_under_its_decorator():
    for kind in (staticmethod, classmethod):
        for decorate in (profiler.range, profiler.range("x"), profiler.range(domain="d")):
            with pytest.raises(TypeError, match=rf"put the range under @{kind.__name__}"):

                class Model:
                    @decorate
                    @kind
                    def f(*args):
                        pass

    class Model:
        @staticmethod
        @profiler.range("static")
        def s(x):
            return x

        @classmethod
        @profiler.range
        def c(cls):
            return cls

    assert Model.s(3) == 3 and Model().c() is Model


def test_the_name_may_be_given_by_keyword():
    assert profiler.range(name="kw", color="red") is profiler.range("kw", color="red")


@pytest.mark.parametrize("obj", [5, "text", _Model])
def test_only_functions_are_decorated(obj):
    for decorate in (profiler.range("x"), profiler.range(color="red")):
        with pytest.raises(TypeError, match=r"^the decorated object must be a function \(got "):
            decorate(obj)
    if not isinstance(obj, str):  # range("text") is a name, not a decoration
        with pytest.raises(TypeError):
            profiler.range(obj)
