from trainclock.mllog import RunLog
from trainclock.mllog.reader import read_events
from trainclock.mllog.time_to_train import time_to_train_ms


def test_writer_emits_official_lines_and_renames_on_finish(tmp_path):
    path = tmp_path / "result_0.txt"
    log = RunLog(path)
    log.start("run_start", time_ms=1000)
    log.event("eval_accuracy", 3.5, metadata={"epoch_num": 4096})
    assert not path.exists() and log.partial.exists()
    log.end("run_stop", metadata={"status": "success"}, time_ms=61000)
    assert log.finish() == path and not log.partial.exists()
    lines = path.read_text().splitlines()
    assert all(line.startswith(":::MLLOG {") for line in lines)
    events, problems = read_events(path)
    assert not problems
    assert [e.key for e in events] == ["run_start", "eval_accuracy", "run_stop"]
    assert events[1].metadata["epoch_num"] == 4096
    assert events[1].metadata["file"].endswith("test_mllog.py")  # the caller, not the wrapper
    assert time_to_train_ms(events) == 60000


def test_discard_leaves_nothing(tmp_path):
    log = RunLog(tmp_path / "result_0.txt")
    log.start("init_start")
    log.discard()
    assert list(tmp_path.iterdir()) == []


def test_reader_strips_prefixes_and_reports_bad_lines(tmp_path):
    path = tmp_path / "log.txt"
    path.write_text(
        'Processing :::MLLOG {"namespace": "", "time_ms": 5, "event_type": "POINT_IN_TIME", "key": "a", "value": 1, "metadata": {}}\n'
        "plain output\n"
        '0: :::MLLOG {"namespace": "", "time_ms": 3, "event_type": "POINT_IN_TIME", "key": "b", "value": 2, "metadata": {}}\n'
        ":::MLLOG {broken\n"
    )
    events, problems = read_events(path)
    assert [e.key for e in events] == ["a", "b"]
    assert len(problems) == 1 and problems[0].lineno == 4 and str(path) in str(problems[0])


def test_an_evaluation_scored_while_training_goes_on_ends_where_training_resumed():
    """NVIDIA's v3.1 maskrcnn log (Dell's XE9680 result_0): eval_start of epoch 14, block_start of
    epoch 15 3.8 s later, eval_stop 14.6 s after the start: the evaluation took 3.8 s from training."""
    from trainclock.mllog.reader import Event
    from trainclock.mllog.time_to_train import eval_spans

    def event(key: str, ms: int, **metadata) -> Event:
        return Event(key, None, ms, "", metadata, 0)

    starts = [event("eval_start", 1000, epoch_num=13), event("eval_start", 206696, epoch_num=14)]
    stops = [event("eval_stop", 1500, epoch_num=13), event("eval_stop", 221339, epoch_num=14)]
    resumes = [event("block_start", 0, first_epoch_num=0), event("block_start", 2000, first_epoch_num=14),
               event("block_start", 210533, first_epoch_num=15)]
    assert eval_spans(starts, stops, resumes) == [(13.0, 1000, 1500), (14.0, 206696, 210533)]
    assert eval_spans(starts, stops) == [(13.0, 1000, 1500), (14.0, 206696, 221339)]  # inline: to eval_stop


# the progress codec: a count written into the log reads back as the same progress

def test_progress_codec_writes_counts_and_reads_them_back_in_units():
    from trainclock.mllog.progress import ProgressCodec

    codecs = [ProgressCodec("tokens", 2048, "units"), ProgressCodec("samples", 1, "samples"),
              ProgressCodec("images", 1, "epochs", samples_per_epoch=1000),
              ProgressCodec("images", 1, "steps", samples_per_step=512)]
    for codec in codecs:
        count = codec.count(4096)
        key, value, metadata = codec.header()
        read = ProgressCodec.read(value, metadata, 512)
        assert read.units(count) == codec.units_in(4096)  # the same units, whatever the log counts in
        assert read.samples(read.units(count)) == 4096
    assert [c.count(4096) for c in codecs] == [4096 * 2048, 4096, 4.096, 8]
    assert ProgressCodec("tokens", 2048).header() == (
        "trainclock_progress_unit", "tokens", {"per_sample": 2048, "logged_in": "units", "samples_per_epoch": None})


def test_progress_codec_reads_what_it_cannot_use_as_unknown():
    from trainclock.mllog.progress import ProgressCodec, count_field, logged_count

    odd = ProgressCodec.read(7, {"per_sample": -1, "logged_in": "fortnights", "samples_per_epoch": float("inf")}, None)
    assert (odd.unit, odd.units_per_sample, odd.logged_in, odd.samples_per_epoch) == (None, None, "units", None)
    assert odd.units_per_count == 1.0 and odd.samples(10) is None
    assert ProgressCodec.read("images", {"logged_in": "steps"}, None).units_per_count == 1.0  # no batch size
    assert ProgressCodec.read("tokens", {}, None).logged_in == "units"  # trainclock's first logs said nothing
    assert ProgressCodec(unit="steps", units_per_sample=None, samples_per_unit=256).samples(3) == 768
    assert logged_count({"epoch_num": 2.5, "samples_count": 100}) == 100  # the summarizer's preference
    assert count_field({"samples_count": float("nan"), "step_num": 4}) == "step_num"
