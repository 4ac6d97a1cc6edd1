"""Atomic writes: all or nothing, and the file mode a plain write would give."""

import os
import stat

import pytest

from trainclock.storage import (atomic_write_text, atomic_writer, build_once, cache_key, files_fingerprint, prepared_path,
                                staged_folder)


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


@pytest.mark.parametrize("umask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_are_never_executable(tmp_path, umask, expected):
    old = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "result.txt", "x")
        with atomic_writer(tmp_path / "plot.png", "wb") as f:
            f.write(b"\x89PNG")
    finally:
        os.umask(old)
    for name in ("result.txt", "plot.png"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == expected


def test_writing_leaves_the_process_umask_alone(tmp_path, monkeypatch):
    """Reading the umask means setting it for a moment: a file another thread creates in that
    moment (a checkpoint, a log) would get mode 0666 or 0777. The kernel applies it instead."""
    def no_umask(_mask):
        raise AssertionError("atomic writes must not set the process umask")

    monkeypatch.setattr(os, "umask", no_umask)
    atomic_write_text(tmp_path / "report.html", "x")
    assert (tmp_path / "report.html").read_text() == "x"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_a_staged_folder_appears_whole_or_not_at_all(tmp_path):
    folder = tmp_path / "prepared" / "tier"
    with pytest.raises(RuntimeError):
        with staged_folder(folder, "meta.json") as staging:
            (staging / "data.bin").write_text("half")
            raise RuntimeError("crash mid-build")
    assert not folder.exists() and list(folder.parent.iterdir()) == []
    with pytest.raises(FileNotFoundError, match="meta.json was not written"):
        with staged_folder(folder, "meta.json") as staging:
            (staging / "data.bin").write_text("no marker")
    assert not folder.exists()


def test_a_folder_another_process_published_first_is_kept(tmp_path):
    """Two processes preparing the same data: the second must not delete what the first's reader uses."""
    folder = tmp_path / "tier"
    with staged_folder(folder, "meta.json") as first:
        with staged_folder(folder, "meta.json") as second:
            (second / "meta.json").write_text("second")
        (first / "meta.json").write_text("first")
    assert (folder / "meta.json").read_text() == "second"
    assert [p.name for p in tmp_path.iterdir()] == ["tier"]


def test_a_stale_folder_without_its_marker_is_replaced(tmp_path):
    folder = tmp_path / "tier"
    folder.mkdir()
    (folder / "old.bin").write_text("an older layout")
    with staged_folder(folder, "meta.json") as staging:
        (staging / "meta.json").write_text("new")
    assert sorted(p.name for p in folder.iterdir()) == ["meta.json"]


def test_a_discard_killed_mid_delete_leaves_no_cache_and_the_next_prepare_clears_it(tmp_path, monkeypatch):
    """data prepare --force: killed while deleting the old cache, it used to leave a folder whose
    ready marker outlived half its data, and the next run trained on that half."""
    import shutil

    from trainclock import storage

    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "meta.json").write_text("{}")
    (cache / "part").write_text("x")

    def killed(path, *args, **kwargs):
        raise KeyboardInterrupt  # the kill lands during the deletion

    monkeypatch.setattr(shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        storage.discard_folder(cache)
    monkeypatch.undo()
    assert not cache.exists()  # a reader finds no cache, so it prepares a new one
    (left,) = [p for p in tmp_path.iterdir()]
    # as a dead process would have left it: the same name with a pid that is no longer running
    dead = left.with_name(left.name.replace(f"-{os.getpid()}.", "-999999999."))
    left.rename(dead)
    with staged_folder(cache, "meta.json") as staging:
        (staging / "meta.json").write_text("{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]
    storage.discard_folder(tmp_path / "never-made")  # nothing to discard: nothing happens


def test_a_live_process_staging_folder_is_left_alone(tmp_path):
    with staged_folder(tmp_path / "cache", "meta.json") as staging:
        with staged_folder(tmp_path / "cache", "meta.json") as twin:  # the same live pid: kept
            (twin / "meta.json").write_text("{}")
        assert staging.exists()
        (staging / "meta.json").write_text("{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


def test_a_cache_key_is_the_hash_every_prepare_module_used_so_existing_caches_stay_valid(tmp_path, monkeypatch):
    """The modules hashed f"{a}\\0{b}..." themselves; a user's prepared folders keep their names."""
    import hashlib

    monkeypatch.setenv("TRAINCLOCK_HOME", str(tmp_path))
    parts = (1, "coco", (32, 32, 32), 3e-3, tmp_path / "raw")
    by_hand = hashlib.sha256(f"{1}\0{'coco'}\0{(32, 32, 32)}\0{3e-3}\0{tmp_path / 'raw'}".encode()).hexdigest()
    assert cache_key(*parts) == by_hand[:12] and cache_key(*parts, digits=10) == by_hand[:10]
    assert cache_key(1, 2, 3) == hashlib.sha256(b"1\x002\x003").hexdigest()[:12]
    assert prepared_path("tier", *parts) == tmp_path / "prepared" / f"tier-{by_hand[:12]}"
    assert prepared_path("index", 7, digits=16, suffix=".npz").name == f"index-{hashlib.sha256(b'7').hexdigest()[:16]}.npz"
    text = tmp_path / "a.txt"
    text.write_text("words")
    st = text.stat()
    assert files_fingerprint([text]) == hashlib.sha256(f"{text}\0{st.st_size}\0{st.st_mtime_ns}\n".encode()).hexdigest()
    os.utime(text, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert files_fingerprint([text]) != hashlib.sha256(f"{text}\0{st.st_size}\0{st.st_mtime_ns}\n".encode()).hexdigest()


def test_build_once_builds_a_missing_cache_once_and_again_only_when_forced(tmp_path):
    folder, builds = tmp_path / "prepared" / "tier", []

    def build(staging):
        builds.append(staging)
        (staging / "data.bin").write_text(str(len(builds)))
        (staging / "meta.json").write_text("{}")

    assert build_once(folder, "meta.json", build) == folder
    assert build_once(folder, "meta.json", build) == folder and len(builds) == 1  # cached
    assert build_once(folder, "meta.json", build, force=True) == folder and len(builds) == 2
    assert (folder / "data.bin").read_text() == "2" and builds[1] != folder
    assert [p.name for p in folder.parent.iterdir()] == ["tier"]  # no staging or discarded copy left


def test_build_once_that_fails_or_forgets_its_marker_leaves_no_cache(tmp_path):
    folder = tmp_path / "tier"

    def crash(staging):
        (staging / "data.bin").write_text("half")
        raise RuntimeError("killed mid-build")

    with pytest.raises(RuntimeError):
        build_once(folder, "meta.json", crash)
    with pytest.raises(FileNotFoundError, match="meta.json was not written"):
        build_once(folder, "meta.json", lambda staging: (staging / "data.bin").write_text("no marker"))
    assert list(tmp_path.iterdir()) == []
