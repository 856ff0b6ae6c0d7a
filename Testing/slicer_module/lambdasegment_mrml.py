"""Test support: a real MRML scene without the Slicer application, for the LambdaSegment module's Logic.

``slicer-core`` (the test extra) provides MRML, the Segmentations core and the module
logics as compiled wheels; it lacks everything Qt: ``slicer.app``, ``slicer.modules``,
``qt``, ``ctk``, ``slicer.ScriptedLoadableModule``, ``slicer.parameterNodeWrapper``,
``slicer.i18n`` and the Segment Editor. The ``mrml`` fixture builds a real scene with the
application, Colors, Volumes, Segmentations and Subject Hierarchy logics (three slice
composite nodes stand for the Red/Yellow/Green views) and points ``slicer.mrmlScene``,
``slicer.app`` and ``slicer.modules`` at it. The Qt-only names get minimal stand-ins,
the only things mocked: base classes that do nothing and an identity
``@parameterNodeWrapper`` (the Logic under test uses neither the GUI nor the parameter node).

Import gotcha handled here: ``slicer/__init__.py`` extends its package path with every
``slicer/`` folder on ``sys.path`` and imports all modules found there. pytest puts
``Testing/`` on ``sys.path``, which would make this very folder part of the ``slicer``
package and import the tests as ``slicer.*``; so ``slicer`` is imported with ``Testing/``
hidden from ``sys.path``.
"""

from __future__ import annotations

import importlib.util
import sys
import types
import unittest
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
MODULE_FILE = REPO_ROOT / "LambdaSegment" / "LambdaSegment.py"
THIS_FOLDER = Path(__file__).resolve().parent


def _import_slicer_core() -> types.ModuleType:
    """``import slicer`` resolving to slicer-core's package only (see the module docstring)."""
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if (Path(p or ".").resolve() / "slicer") != THIS_FOLDER]
    try:
        import slicer
    finally:
        sys.path[:] = saved
    assert str(THIS_FOLDER) not in list(slicer.__path__), "the tests leaked into the slicer package"
    return slicer


slicer = _import_slicer_core()
import slicer.util  # noqa: E402  (after the guarded import above)


def _install_qt_only_stand_ins() -> None:
    """Minimal stand-ins for the names that exist only inside the Slicer application."""

    class ScriptedLoadableModule:
        def __init__(self, parent=None):
            self.parent = parent

    class ScriptedLoadableModuleWidget:
        def __init__(self, parent=None):
            self.parent = parent

    class ScriptedLoadableModuleLogic:
        def __init__(self, parent=None):
            self.moduleName = type(self).__name__.removesuffix("Logic")

    class ScriptedLoadableModuleTest(unittest.TestCase):
        def delayDisplay(self, message, msec=None):
            pass

    scripted = types.ModuleType("slicer.ScriptedLoadableModule")
    for cls in (ScriptedLoadableModule, ScriptedLoadableModuleWidget, ScriptedLoadableModuleLogic, ScriptedLoadableModuleTest):
        setattr(scripted, cls.__name__, cls)
    scripted.__all__ = [name for name in vars(scripted) if name.startswith("Scripted")]

    i18n = types.ModuleType("slicer.i18n")
    i18n.tr = lambda text: text
    i18n.translate = lambda context, text: text

    wrapper = types.ModuleType("slicer.parameterNodeWrapper")
    wrapper.parameterNodeWrapper = lambda cls: cls

    class _Annotation:
        def __init__(self, *args, **kwargs):
            self.args = args

    for name in ("Choice", "Default", "WithinRange", "Minimum", "Maximum"):
        setattr(wrapper, name, type(name, (_Annotation,), {}))

    for name, module in (
        ("slicer.ScriptedLoadableModule", scripted),
        ("slicer.i18n", i18n),
        ("slicer.parameterNodeWrapper", wrapper),
    ):
        sys.modules[name] = module
        setattr(slicer, name.split(".")[1], module)


class _ModuleStandIn:
    """``slicer.modules.<name>``: only ``logic()`` exists without the app."""

    def __init__(self, logic: object) -> None:
        self._logic = logic

    def logic(self) -> object:
        return self._logic


class _AppStandIn:
    """``slicer.app``: the application logic and scene, no GUI (layoutManager() is None)."""

    def __init__(self, application_logic: object, scene: object) -> None:
        self._application_logic = application_logic
        self._scene = scene
        self.commandOptions = types.SimpleNamespace(noMainWindow=True)

    def applicationLogic(self) -> object:
        return self._application_logic

    def mrmlScene(self) -> object:
        return self._scene

    def layoutManager(self) -> None:
        return None


@pytest.fixture
def mrml(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """A real MRML scene with the module logics, installed as ``slicer.mrmlScene``/``app``/``modules``."""
    scene = slicer.vtkMRMLScene()
    application_logic = slicer.vtkSlicerApplicationLogic()
    application_logic.SetMRMLScene(scene)
    logics = {}
    for name, module_name, cls in (
        ("colors", "Colors", slicer.vtkSlicerColorLogic),
        ("volumes", "Volumes", slicer.vtkSlicerVolumesLogic),
        ("segmentations", "Segmentations", slicer.vtkSlicerSegmentationsModuleLogic),
        ("subjecthierarchy", "SubjectHierarchy", slicer.vtkSlicerSubjectHierarchyModuleLogic),
    ):
        logic = cls()
        logic.SetMRMLApplicationLogic(application_logic)
        application_logic.SetModuleLogic(module_name, logic)
        logic.SetMRMLScene(scene)  # registers the segmentation converter rules, among others
        logics[name] = logic
    application_logic.SetColorLogic(logics["colors"])
    for view in ("Red", "Yellow", "Green"):
        composite = scene.AddNewNodeByClass("vtkMRMLSliceCompositeNode")
        composite.SetLayoutName(view)
    monkeypatch.setattr(slicer, "mrmlScene", scene, raising=False)
    monkeypatch.setattr(slicer, "app", _AppStandIn(application_logic, scene), raising=False)
    monkeypatch.setattr(
        slicer, "modules", types.SimpleNamespace(**{n: _ModuleStandIn(l) for n, l in logics.items()}), raising=False
    )
    yield types.SimpleNamespace(scene=scene, application_logic=application_logic, **logics)
    scene.Clear(True)


@pytest.fixture(scope="session")
def lambda_segment_module() -> types.ModuleType:
    """The scripted module file ``LambdaSegment/LambdaSegment.py``, imported with the Qt-only stand-ins."""
    _install_qt_only_stand_ins()
    spec = importlib.util.spec_from_file_location("LambdaSegment", MODULE_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["LambdaSegment"] = module
    spec.loader.exec_module(module)
    return module


def oblique_direction(degrees_about_z: float = 20.0, degrees_about_x: float = 12.0) -> np.ndarray:
    """A proper rotation (columns = axis directions), oblique to every scanner axis."""
    a, b = np.radians(degrees_about_z), np.radians(degrees_about_x)
    about_z = np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])
    about_x = np.array([[1.0, 0.0, 0.0], [0.0, np.cos(b), -np.sin(b)], [0.0, np.sin(b), np.cos(b)]])
    return about_z @ about_x


def add_volume_node(scene: object, name: str, array: np.ndarray, spacing_ras_ijk, origin_ras, direction_ras) -> object:
    """A scalar volume node built the way Slicer's readers do: array [k, j, i] + IJKToRAS geometry."""
    node = scene.AddNewNodeByClass("vtkMRMLScalarVolumeNode", name)
    node.SetSpacing(*spacing_ras_ijk)
    node.SetOrigin(*origin_ras)
    node.SetIJKToRASDirections(np.asarray(direction_ras, dtype=float).tolist())
    slicer.util.updateVolumeFromArray(node, np.ascontiguousarray(array))
    node.CreateDefaultDisplayNodes()
    return node
