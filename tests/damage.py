"""Damage to a file's bytes, for the readers' fuzz tests: cut at a fraction of its length, or
overwritten at a few places; `DAMAGE` draws one such change, `damage` applies it."""

from __future__ import annotations

from hypothesis import strategies as st

DAMAGE = st.one_of(
    st.tuples(st.just("cut"), st.floats(0, 1)),
    st.tuples(st.just("overwrite"), st.lists(st.tuples(st.floats(0, 1), st.binary(min_size=1, max_size=8)),
                                             min_size=1, max_size=6)),
)


def damage(data: bytes, how) -> bytes:
    kind, detail = how
    if kind == "cut":
        return data[:int(len(data) * detail)]
    data = bytearray(data)
    for where, new in detail:
        at = int(where * max(0, len(data) - 1))
        data[at:at + len(new)] = new
    return bytes(data)
