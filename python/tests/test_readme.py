"""The README's Python example is examples/quickstart.py, and it runs as written."""
import subprocess
import sys

from conftest import ROOT


def test_readme_example_runs():
    example = (ROOT / "examples" / "quickstart.py").read_text()
    assert "```python\n" + example + "```" in (ROOT / "README.md").read_text()
    out = subprocess.run([sys.executable, "examples/quickstart.py"], cwd=ROOT, check=True, capture_output=True,
                         text=True, timeout=120)
    lines = out.stdout.splitlines()
    assert lines[0] == ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw"
    assert len(lines) >= 4
