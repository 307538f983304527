"""A job slot's long-lived process (bench.sweep.serve): the points of a slot run one after another in one
interpreter, each with its own log and exit code; a failed point ends the slot's process, the next gets a new one."""

from __future__ import annotations

import os
from pathlib import Path

from bench.sweep.worker import SlotProcesses

REPO = Path(__file__).resolve().parent.parent


def test_a_slot_runs_several_commands_in_one_process_and_a_failure_ends_it(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               HF_HUB_OFFLINE="1")  # fmt: skip
    slots = SlotProcesses()
    try:
        first = slots.get(env, str(tmp_path))
        assert first.run(["methods"], tmp_path / "a.log") == 0
        assert slots.get(env, str(tmp_path)) is first  # the same process: started once, imports paid once
        assert first.run(["methods"], tmp_path / "b.log") == 0
        for log in ("a.log", "b.log"):  # each command's output in its own log, fds 1 and 2 alike
            assert "simcse" in (tmp_path / log).read_text()
        assert first.run(["run", "--no-such-option"], tmp_path / "c.log") == 2  # argparse's exit, in the log
        assert "unrecognized arguments: --no-such-option" in (tmp_path / "c.log").read_text()
        slots.drop()  # what run_point does after a failure
        assert first.child.poll() is not None
        second = slots.get(env, str(tmp_path))
        assert second is not first and second.child.pid != first.child.pid
        second.child.kill()  # a slot killed meanwhile: no exit code, and get() replaces it
        second.child.wait()
        assert second.run(["methods"], tmp_path / "d.log") is None
        assert slots.get(env, str(tmp_path)) is not second
    finally:
        slots.close_all()
