"""Every shell script in scripts/ parses (``bash -n``): the GPU and recipe scripts run where no test
can run them (a lent GPU machine, an hour of CPU), so a syntax error would surface only there."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "scripts").glob("*.sh"))


@pytest.fixture
def stage1(tmp_path: Path) -> Path:
    """A directory cv_row.sh takes for a stage-1 package (it checks only for the manifest)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "manifest.json").write_text("{}")
    return package


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("script", SCRIPTS, ids=[path.name for path in SCRIPTS])
def test_shell_script_parses(script: Path) -> None:
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert script.stat().st_mode & 0o111, f"{script.name} is not executable"


def test_the_scripts_folder_has_the_recipe_and_gpu_scripts() -> None:
    assert {"train_cv.sh", "gpu_stage1.sh", "gpu_deps.sh"} <= {path.name for path in SCRIPTS}


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_release_gate_names_a_missing_package_or_a_bad_label_before_doing_anything(tmp_path: Path) -> None:
    script = SCRIPTS[0].parent / "release_gate.sh"
    env = {"PATH": "/usr/bin:/bin", "GATE_DIR": str(tmp_path / "gate")}
    missing = subprocess.run(["bash", str(script), str(tmp_path / "nowhere"), "x"], capture_output=True, text=True, env=env, check=False)
    assert missing.returncode == 2 and f"{tmp_path / 'nowhere'}: no package there" in missing.stderr
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "manifest.json").write_text("{}")
    bad = subprocess.run(["bash", str(script), str(package), "a b/c"], capture_output=True, text=True, env=env, check=False)
    assert bad.returncode == 2 and "LABEL must be" in bad.stderr
    seeds = subprocess.run(["bash", str(script), str(package), "x"], capture_output=True, text=True,
                           env={**env, "GATE_SEEDS": "30000300 30000400"}, check=False)
    assert seeds.returncode == 2 and "GATE_SEEDS must be three seeds" in seeds.stderr
    assert not (tmp_path / "gate").exists()  # nothing synthesized


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_release_gate_reads_the_default_method_name_from_its_manifest(tmp_path: Path) -> None:
    """The line that names the default in ``lambdasegment evaluate``'s CSV, run as the script runs it."""
    import sys

    line = next(text for text in (SCRIPTS[0].parent / "release_gate.sh").read_text(encoding="utf-8").splitlines() if text.startswith("default_method="))
    (tmp_path / "manifest.json").write_text('{"name": "lambdaunet-dwi", "version": "2.1.0"}')
    result = subprocess.run(["bash", "-c", f'{line}\necho "$default_method"'], capture_output=True, text=True, check=False,
                            env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "DEFAULT_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "lambdaunet-dwi 2.1.0"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(("wise", "protocol", "message"), [("half", "u-nlbf", "WISE must be a number in (0, 1]"),
                                                           ("1.5", "u-nlbf", "WISE must be a number in (0, 1]"),
                                                           ("0.5", "seeded", "WISE needs PROTOCOL=u-nlb or u-nlbf")])
def test_cv_row_refuses_a_bad_wise_before_training(stage1: Path, wise: str, protocol: str, message: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "STAGE1": str(stage1), "NAME": "never-made", "WISE": wise, "PROTOCOL": protocol}
    result = subprocess.run(["bash", str(SCRIPTS[0].parent / "cv_row.sh"), "51000005"], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 2 and message in result.stderr
    assert not (SCRIPTS[0].parents[1] / "runs" / "never-made-gentle-massive-r5").exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(("wise", "protocol", "message"), [("", "seeded", "PARTNER needs PROTOCOL=u-nlb or u-nlbf"),
                                                           ("0.7", "u-nlbf", "no package there (run row never-made-partner first)")])
def test_cv_row_refuses_a_partner_row_it_cannot_use_before_training(stage1: Path, wise: str, protocol: str, message: str) -> None:
    """Issue 13's rule 119: an ensemble row needs the partner row's fold networks for every seed, and
    finding one missing after a seed's hour of training would waste it."""
    env = {"PATH": "/usr/bin:/bin", "STAGE1": str(stage1), "NAME": "never-made", "WISE": wise, "PROTOCOL": protocol,
           "PARTNER": "never-made-partner"}
    result = subprocess.run(["bash", str(SCRIPTS[0].parent / "cv_row.sh"), "51000005"], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 2 and message in result.stderr
    assert not (SCRIPTS[0].parents[1] / "runs" / "never-made-gentle-massive-r5").exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(("protocol", "message"), [("seeded", "TEACHERS needs PROTOCOL=u-nlb or u-nlbf"),
                                                   ("u-nlbf", "no package there (run row never-made-teacher first)")])
def test_cv_row_refuses_a_teacher_row_it_cannot_use_before_training(stage1: Path, protocol: str, message: str) -> None:
    """Issue 13's rule 120: a distilled row's teachers are checked for every seed before any training."""
    env = {"PATH": "/usr/bin:/bin", "STAGE1": str(stage1), "NAME": "never-made", "WISE": "0.7" if protocol != "seeded" else "",
           "PROTOCOL": protocol, "TEACHERS": "never-made-teacher"}
    result = subprocess.run(["bash", str(SCRIPTS[0].parent / "cv_row.sh"), "51000005"], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 2 and message in result.stderr
    assert not (SCRIPTS[0].parents[1] / "runs" / "never-made-gentle-massive-r5").exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("soup_of", ["", "runs/only-one"])
def test_train_cv_soup_refuses_fewer_than_two_runs_folders_before_writing(tmp_path: Path, soup_of: str) -> None:
    runs = tmp_path / "soup"
    env = {"PATH": "/usr/bin:/bin", "SOUP_OF": soup_of, "RUNS": str(runs)}
    result = subprocess.run(["bash", str(SCRIPTS[0].parent / "train_cv.sh"), "soup"], capture_output=True, text=True, env=env, check=False)
    assert result.returncode != 0 and "SOUP_OF must name two or more runs folders" in result.stderr
    assert not runs.exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("widths", ["[24, 48]", "24,48", "wide"])
def test_train_cv_refuses_widths_that_are_not_a_list_of_channels_before_writing(tmp_path: Path, widths: str) -> None:
    runs = tmp_path / "wide"
    env = {"PATH": "/usr/bin:/bin", "WIDTHS": widths, "RUNS": str(runs)}
    result = subprocess.run(["bash", str(SCRIPTS[0].parent / "train_cv.sh"), "pretrain"], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 2 and "WIDTHS must read like" in result.stderr
    assert not runs.exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("fold", ["A", "B"])
def test_cv_row_refuses_a_missing_fold_stage1_before_training(stage1: Path, tmp_path: Path, fold: str) -> None:
    """Issue 13's rule 138: a fold's own stage 1 is checked, as STAGE1 is, before any training."""
    missing = tmp_path / "no-such-stage1"
    env = {"PATH": "/usr/bin:/bin", "STAGE1": str(stage1), "NAME": "never-made", "WISE": "0.7", "PROTOCOL": "u-nlbf",
           f"STAGE1_{fold}": str(missing)}
    result = subprocess.run(["bash", str(SCRIPTS[0].parent / "cv_row.sh"), "51000005"], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 2 and f"{missing}: no package there" in result.stderr
    assert not (SCRIPTS[0].parents[1] / "runs" / "never-made-gentle-massive-r5").exists()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_train_cv_wise_pulls_each_fold_back_towards_its_own_stage1(tmp_path: Path) -> None:
    """Issue 13's rule 138: a fold with its own stage 1 ($RUNS/pretrain-foldA/pkg) is averaged with
    that one, the other fold with the shared pretrain. The Python the script calls is replaced by
    one that records its arguments: what is tested is which packages the script hands over."""
    runs = tmp_path / "runs"
    for stage in ("pretrain", "pretrain-foldA"):
        (runs / stage / "pkg").mkdir(parents=True)
        (runs / stage / "pkg" / "manifest.json").write_text("{}")
    calls = tmp_path / "calls.txt"
    recorder = tmp_path / "python"
    recorder.write_text(f'#!/usr/bin/env bash\necho "$@" >> {calls}\n')
    recorder.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "RUNS": str(runs), "ALPHA": "0.7", "PYTHON": str(recorder)}
    result = subprocess.run(["bash", str(SCRIPTS[0].parent / "train_cv.sh"), "wise"], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stderr
    lines = calls.read_text().splitlines()
    assert len(lines) == 2
    assert lines[0].split()[1:3] == [f"{runs}/pretrain-foldA/pkg", f"{runs}/foldA/pkg"]
    assert lines[1].split()[1:3] == [f"{runs}/pretrain/pkg", f"{runs}/foldB/pkg"]
