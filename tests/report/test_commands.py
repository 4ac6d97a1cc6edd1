"""`trainclock report` and `trainclock serve` through the CLI: what they write, and one-line
errors for bad input."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from trainclock import cli


def test_report_command_writes_the_report(db_url, own_runs, planner_curve_file, tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["report", "--db", db_url, "--out", str(out), "--runs", str(own_runs),
                     "--plan", str(planner_curve_file)]) == 0
    html = (out / "trainclock-report.html").read_text()
    assert "10.940" in html and "311.945" in html
    assert (out / "scaling.png").stat().st_size > 0 and (out / "planner-0.svg").stat().st_size > 0
    assert "report written to" in capsys.readouterr().out


@pytest.mark.parametrize("extra, said", [
    (["--plan", "curve.csv"], "give the .json file"),
    (["--plan", "missing.json"], "cannot read --plan"),
    (["--runs", "nowhere"], "--runs nowhere is not a folder"),
])
def test_report_bad_input_is_one_line(db_url, tmp_path, monkeypatch, capsys, extra, said):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["report", "--db", db_url, "--out", "out", *extra]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_report_out_that_is_a_file(db_url, tmp_path, capsys):
    (tmp_path / "taken").write_text("x")
    assert cli.main(["report", "--db", db_url, "--out", str(tmp_path / "taken")]) == 2
    assert "is a file" in capsys.readouterr().err


def test_serve_command_answers_on_localhost(db_url):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "trainclock.cli", "serve", "--db", db_url, "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/entries?benchmark=gpt3", timeout=5) as r:
                    body = r.read().decode()
                break
            except OSError:
                assert server.poll() is None, server.stdout.read()
                assert time.monotonic() < deadline, "the server did not answer in 30 s"
                time.sleep(0.2)
        assert '"benchmark":"gpt3"' in body.replace(" ", "")
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert "serving" in server.stdout.read()


def test_serve_bad_port(capsys):
    assert cli.main(["serve", "--port", "70000"]) == 2
    assert "--port 70000" in capsys.readouterr().err
