"""The example of README.md's "Use from Python" runs as it is written."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_example_runs(tmp_path, monkeypatch):
    text = README.read_text()
    section = text[text.index("## Use from Python") :]
    example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(example, str(README), "exec"), {})
    assert any(tmp_path.joinpath("sorted").iterdir())
