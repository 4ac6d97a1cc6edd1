"""The sbatch script of `trainclock launch slurm`: its directives, and what every node really runs,
found by executing the script with stand-ins for scontrol, srun and trainclock."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from trainclock.distributed import slurm
from trainclock.errors import UsageError

from .helpers import fake_program, parse, run_command

# srun stand-in: starts its command once per node with that node's SLURM_NODEID, as srun does
# with --ntasks-per-node=1, and records the srun flags it was given
FAKE_SRUN = """
nodes=1
while [[ "$1" == --* ]]; do
  [[ "$1" == --nodes=* ]] && nodes=${1#--nodes=}
  echo "$1" >> "$CALLS/srun_flags"
  shift
done
for ((i = 0; i < nodes; i++)); do SLURM_NODEID=$i "$@" || exit $?; done
"""
FAKE_SCONTROL = 'echo "scontrol $*" >> "$CALLS/scontrol"; printf "gpu-node-07\\ngpu-node-08\\ngpu-node-09\\n"\n'
# the trainclock stand-in writes its arguments, one JSON list per node
FAKE_TRAINCLOCK = """python3 -c 'import json, os, sys; print(json.dumps(sys.argv[1:]))' "$@" > "$CALLS/node_$SLURM_NODEID.json"\n"""


def directives(script: str) -> dict[str, str]:
    return dict(re.match(r"#SBATCH --([\w-]+)(?:=(.*))?", line).groups("") for line in script.splitlines()
                if line.startswith("#SBATCH"))


def write_script(tmp_path: Path, *extra: str) -> Path:
    out = tmp_path / "results_tree"
    code = run_command(["launch", "slurm", "gpt3-tiny", "--nodes", "3", "--gpus-per-node", "8", "--out", str(out),
                        "--partition", "gpu", "--time", "1-02:00:00", "--account", "perf", *extra])
    assert code == 0
    return out / "slurm" / "trainclock-gpt3-tiny.sbatch"


def execute(script: Path, tmp_path: Path, venv: Path | None = None) -> tuple[Path, subprocess.CompletedProcess]:
    calls = tmp_path / "calls"
    calls.mkdir()
    bin_dir = tmp_path / "bin"
    fake_program(bin_dir, "srun", FAKE_SRUN)
    fake_program(bin_dir, "scontrol", FAKE_SCONTROL)
    fake_program(venv / "bin" if venv else bin_dir, "trainclock", FAKE_TRAINCLOCK)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(calls),
           "SLURM_JOB_NODELIST": "gpu-node-[07-09]", "SLURM_JOB_ID": "4242", "SLURM_CPUS_ON_NODE": "96"}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
    return calls, done


def test_directives_ask_for_the_nodes_and_gpus(tmp_path):
    script = write_script(tmp_path)
    d = directives(script.read_text())
    assert d["nodes"] == "3" and d["ntasks-per-node"] == "1" and d["gpus-per-node"] == "8"
    assert (d["partition"], d["time"], d["account"]) == ("gpu", "1-02:00:00", "perf")
    assert d["job-name"] == "trainclock-gpt3-tiny" and "exclusive" in d
    # console output beside the results, in a folder that exists before Slurm opens the file
    assert d["output"] == f"{script.parent}/%x-%j.out" and script.parent.is_dir()
    assert script.read_text().startswith("#!/bin/bash\n")


def test_every_node_runs_trainclock_with_its_own_rank(tmp_path):
    script = write_script(tmp_path, "--", "--max-samples", "4096", "--fsdp", "--data", "/data/c4 train")
    calls, done = execute(script, tmp_path)
    assert done.returncode == 0, done.stderr
    out = str(tmp_path / "results_tree")
    for node in range(3):
        argv = json.loads((calls / f"node_{node}.json").read_text())
        assert argv == ["run", "gpt3-tiny", "--nproc", "8", "--nnodes", "3", "--node-rank", str(node),
                        "--rdzv", "gpu-node-07:29500", "--run-id", "4242", "--device", "cuda", "--out", out,
                        "--max-samples", "4096", "--fsdp", "--data", "/data/c4 train"]
    assert not (calls / "node_3.json").exists()
    flags = (calls / "srun_flags").read_text().split()
    assert flags == ["--nodes=3", "--ntasks-per-node=1", "--cpus-per-task=96", "--kill-on-bad-exit=1"]
    assert "show hostnames gpu-node-[07-09]" in (calls / "scontrol").read_text()


def test_venv_and_cpu_nodes(tmp_path):
    venv = tmp_path / "venv"
    script = write_script(tmp_path, "--venv", str(venv), "--device", "cpu", "--port", "31000")
    d = directives(script.read_text())
    assert "gpus-per-node" not in d  # CPU nodes: no GPUs requested
    calls, done = execute(script, tmp_path, venv=venv)
    assert done.returncode == 0, done.stderr
    argv = json.loads((calls / "node_2.json").read_text())
    assert argv[argv.index("--rdzv") + 1] == "gpu-node-07:31000"
    assert argv[argv.index("--device") + 1] == "cpu"


def test_container_image_goes_to_pyxis(tmp_path):
    text = write_script(tmp_path, "--image", "nvcr.io/acme/trainclock:1.0").read_text()
    out = tmp_path / "results_tree"
    assert f"--container-image=nvcr.io/acme/trainclock:1.0 --container-mounts={out}:{out}" in text


def test_writing_again_replaces_the_script_whole(tmp_path):
    first = write_script(tmp_path).read_text()
    script = write_script(tmp_path, "--", "--max-samples", "64")
    assert script.read_text() != first and "--max-samples 64" in script.read_text()
    assert [p.name for p in script.parent.iterdir()] == [script.name]  # no temporary files left


@pytest.mark.parametrize("flags, problem", [
    (["--nodes", "0"], "--nodes must be at least 1, got 0"),
    (["--gpus-per-node", "-2"], "--gpus-per-node must be at least 1"),
    (["--time", "2h"], "--time must be HH:MM:SS or D-HH:MM:SS"),
    (["--time", "1:60:00"], "--time must be HH:MM:SS"),
    (["--partition", "gpu; rm -rf /"], "--partition 'gpu; rm -rf /' has characters Slurm does not accept"),
    (["--port", "70000"], "--port must be between 1 and 65535"),
    (["--out", "/scratch/my results"], "cannot go into an #SBATCH line; choose a path without spaces"),
    (["--", "--nproc", "4"], "--nproc is set by this command"),
    (["--", "--out=/x"], "--out is set by this command"),
    (["--", "--max-sample", "4"], "bad arguments for `trainclock run` after `--`: unrecognized arguments: --max-sample"),
    (["--", "--gbs", "many"], "argument --gbs: invalid int value: 'many'"),
])
def test_bad_input_is_one_line_naming_the_problem(tmp_path, flags, problem):
    base = {"--nodes": "2", "--gpus-per-node": "4"}
    cut = flags.index("--") if "--" in flags else len(flags)
    mine = dict(zip(flags[:cut:2], flags[1:cut:2]))
    argv = ["launch", "slurm", "gpt3-tiny", "--out", str(tmp_path / "o")]
    for flag, value in {**base, **mine}.items():
        argv += [flag, value]
    with pytest.raises(UsageError) as raised:
        run_command(argv + flags[cut:])
    assert problem in str(raised.value) and "\n" not in str(raised.value)
    assert not (tmp_path / "o" / "slurm").exists()  # nothing written


def test_unknown_benchmark_and_image_with_venv(tmp_path):
    with pytest.raises(UsageError, match="unknown benchmark 'gpt9'"):
        run_command(["launch", "slurm", "gpt9", "--nodes", "1", "--gpus-per-node", "1"])
    with pytest.raises(UsageError, match="--image and --venv are alternatives"):
        slurm.check(slurm.SlurmJob("gpt3-tiny", 1, 1, tmp_path, image="img", venv=tmp_path))
    with pytest.raises(SystemExit):  # argparse's own refusal, before anything runs
        parse(["launch", "slurm", "gpt3-tiny", "--nodes", "1", "--gpus-per-node", "1", "--image", "i", "--venv", "v"])


def test_submit_without_sbatch_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(UsageError) as raised:
        write_script(tmp_path, "--submit")
    message = str(raised.value)
    assert message.startswith("sbatch is not on PATH") and "sbatch " + str(tmp_path) in message
    assert (tmp_path / "results_tree" / "slurm" / "trainclock-gpt3-tiny.sbatch").exists()  # written, for later


def test_submit_prints_the_job_id(tmp_path, monkeypatch, capsys):
    bin_dir = tmp_path / "bin"
    fake_program(bin_dir, "sbatch", 'echo "$@" > "$(dirname "$0")/args"; echo "977;cluster-a"\n')
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    script = write_script(tmp_path, "--submit")
    assert (bin_dir / "args").read_text().split() == ["--parsable", str(script)]
    assert "submitted Slurm job 977;" in capsys.readouterr().out


def test_a_rejected_submission_names_the_reason(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    fake_program(bin_dir, "sbatch", 'echo "sbatch: error: invalid partition specified: gpu" >&2; exit 1\n')
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    with pytest.raises(Exception, match=r"sbatch rejected .*: sbatch: error: invalid partition specified: gpu$"):
        write_script(tmp_path, "--submit")
