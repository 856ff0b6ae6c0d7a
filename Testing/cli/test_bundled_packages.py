"""More than one bundled model package: ``--model NAME`` selects one by its directory's name
(``lambdaunet-dwi-pair``), a directory of that name in the working directory still wins, and
``lambdasegment models`` lists them, the default first."""

from __future__ import annotations

from pathlib import Path

import pytest

from LambdaSegmentLib.errors import BadInputError
from LambdaSegmentLib.inference import package as package_module
from LambdaSegmentLib.inference.package import attach_partner_network, load_model_package, resolve_package_dir
from LambdaSegmentLib.inference.untrained import save_untrained_package


@pytest.fixture
def bundled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in resources/models folder: a default package and a second one with a partner."""
    models = tmp_path / "models"
    default = save_untrained_package(models / "lambdaunet-dwi", seed=0)
    pair = save_untrained_package(models / "lambdaunet-dwi-pair", seed=1)
    attach_partner_network(pair, save_untrained_package(tmp_path / "partner", seed=2))
    monkeypatch.setattr(package_module, "BUNDLED_MODELS", models)
    monkeypatch.setattr(package_module, "BUNDLED_PACKAGE", default)
    return models


def test_a_bundled_package_is_found_by_its_name(bundled: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path / "partner")  # a working directory without such a folder
    assert resolve_package_dir(None) == bundled / "lambdaunet-dwi"
    assert resolve_package_dir("lambdaunet-dwi-pair") == bundled / "lambdaunet-dwi-pair"
    assert load_model_package("lambdaunet-dwi-pair").partner is not None
    with pytest.raises(BadInputError, match="model package directory not found") as error:
        load_model_package("lambdaunet-dwi-trio")  # no such package: named as given
    assert "lambdaunet-dwi-trio" in str(error.value)
    # a folder of that name where the user stands is what they meant
    save_untrained_package(tmp_path / "partner" / "lambdaunet-dwi-pair", seed=3)
    assert resolve_package_dir("lambdaunet-dwi-pair") == Path("lambdaunet-dwi-pair")
    assert load_model_package("lambdaunet-dwi-pair").partner is None


def test_models_lists_the_bundled_packages_default_first(bundled: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from LambdaSegmentLib.cli import main

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    listed = out.split("bundled model packages")[1].strip().splitlines()[1:]
    assert [line.split()[0] for line in listed] == ["lambdaunet-dwi", "lambdaunet-dwi-pair"]
    assert "the default" in listed[0] and "own + partner" in listed[1]
    assert "lambda_unet" in out.split("bundled model packages")[0]  # the architectures come first
