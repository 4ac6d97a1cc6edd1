"""Atomic writes: all or nothing, and the file mode a plain write would give."""

import os
import stat

import pytest

from trainclock.storage import atomic_write_text, atomic_writer


def test_a_failed_write_leaves_the_last_good_file_and_no_temporary(tmp_path):
    path = tmp_path / "report.html"
    atomic_write_text(path, "good")
    with pytest.raises(RuntimeError):
        with atomic_writer(path) as f:
            f.write("half")
            raise RuntimeError("crash mid-write")
    assert path.read_text() == "good"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_the_written_file_is_readable_by_others_as_the_umask_allows(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "shared.html", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "shared.html").stat().st_mode) == 0o644
