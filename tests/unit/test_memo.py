"""``mnnpy.memo.Memo``: the bounded table creation's planners remember their answers in."""

from __future__ import annotations

import threading

import pytest

from mnnpy.memo import Memo


def test_remembers_each_answer_once_none_included() -> None:
    memo: Memo[int | None] = Memo(8)
    calls: list[str] = []

    def compute(key: str, value: int | None) -> int | None:
        calls.append(key)
        return value

    assert memo.get("a", lambda: compute("a", 1)) == 1
    assert memo.get("b", lambda: compute("b", None)) is None
    assert memo.get("a", lambda: compute("a", 2)) == 1
    assert memo.get("b", lambda: compute("b", 3)) is None
    assert calls == ["a", "b"] and len(memo) == 2


def test_drops_the_least_recently_used() -> None:
    memo: Memo[int] = Memo(2)
    memo.get("a", lambda: 1)
    memo.get("b", lambda: 2)
    memo.get("a", lambda: -1)  # a used again: b is now the oldest
    memo.get("c", lambda: 3)
    assert len(memo) == 2
    assert memo.get("a", lambda: -1) == 1
    assert memo.get("b", lambda: 20) == 20  # b was dropped, so computed again


def test_an_error_is_not_remembered() -> None:
    memo: Memo[int] = Memo(4)
    calls = []

    def fail() -> int:
        calls.append(1)
        raise ValueError("bad")

    for _ in range(2):
        with pytest.raises(ValueError, match="bad"):
            memo.get("k", fail)
    assert calls == [1, 1] and len(memo) == 0
    memo.clear()
    assert memo.get("k", lambda: 5) == 5


def test_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Memo(0)


def test_threads_get_the_first_stored_answer() -> None:
    memo: Memo[object] = Memo(4)
    start = threading.Barrier(4)
    got: list[object] = []

    def worker() -> None:
        start.wait()
        got.append(memo.get("k", object))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(g is got[0] for g in got)


class _SameHash:
    """A key whose hash collides with every other's: only equality tells them apart."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __hash__(self) -> int:
        return 7

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _SameHash) and other.name == self.name


def test_keys_of_one_hash_never_share_an_answer() -> None:
    memo: Memo[str] = Memo(4)
    assert memo.get(_SameHash("a"), lambda: "A") == "A"
    assert memo.get(_SameHash("b"), lambda: "B") == "B"  # not a's answer
    assert memo.get(_SameHash("b"), lambda: "wrong") == "B"
    assert memo.get(_SameHash("a"), lambda: "A again") == "A again"  # replaced: computed again
    assert memo.get((1, (2, 3)), lambda: "t") == "t"
    assert memo.get((1, (2, 3)), lambda: "wrong") == "t"  # an equal key built anew
