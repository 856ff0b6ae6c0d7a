"""The measurement scripts' JSON options: a malformed value is argparse's usage error (exit 2)
naming the option, before any study is made or read, as in the product's CLI."""

from __future__ import annotations

import sys

import pytest


@pytest.mark.parametrize("script, option", [
    ("benchmarks/bright_dots.py", "--synthesis"),
    ("benchmarks/lesion_adc.py", "--synthesis"),
    ("benchmarks/synthesis_edge_realism.py", "--ranges"),
    ("benchmarks/foreground_split.py", "--synthesis"),
])
@pytest.mark.parametrize("text, reason", [("{bad", "not valid JSON"), ("[0.4, 0.7]", "must be a JSON object")])
def test_a_bad_json_option_is_a_usage_error(load_script, monkeypatch, capsys, script: str, option: str,
                                            text: str, reason: str) -> None:
    main = load_script(script).main
    monkeypatch.setattr(sys, "argv", [script, option, text])
    with pytest.raises(SystemExit) as stopped:
        main()
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert option in error and reason in error
