"""Every tutorial runs end to end (in its fast mode) as a script, as a user would run it."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TUTORIALS = sorted(f for f in os.listdir(os.path.join(ROOT, "tutorials"))
                   if f.endswith(".py") and f[:2].isdigit())


def test_all_tutorials_present():
    assert [t[:2] for t in TUTORIALS] == ["01", "02", "03", "04", "05", "06", "07", "08"]


@pytest.mark.parametrize("name", TUTORIALS)
def test_tutorial_runs(name):
    env = dict(os.environ, TRACER_TUTORIAL_FAST="1", MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tutorials", name)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
