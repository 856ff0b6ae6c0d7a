"""Fixtures for the Slicer-module tests; see ``lambdasegment_mrml`` for what is real and what is stood in."""

import pytest

from LambdaSegmentLib.inference.untrained import save_untrained_package
from lambdasegment_mrml import lambda_segment_module, mrml  # noqa: F401  (pytest fixtures)


@pytest.fixture(scope="session")
def untrained_package(tmp_path_factory):
    """An untrained model package: the module tests check plumbing, geometry and volumes."""
    return save_untrained_package(tmp_path_factory.mktemp("untrained-package"), seed=3)


@pytest.fixture
def logic(lambda_segment_module, untrained_package, mrml):  # noqa: F811
    """The module's Logic, pointed at the untrained package."""
    logic = lambda_segment_module.LambdaSegmentLogic()
    logic.modelPackageDir = str(untrained_package)
    return logic
