"""Segment stroke: LambdaUNet infarct segmentation of diffusion-weighted MRI in 3D Slicer.

Thin Slicer glue (Module, parameter node, Widget, Logic, Test) over the headless library
``LambdaSegmentLib``: the library does the imaging work; this file moves volumes and
segments between MRML and the library (through ``LambdaSegmentLib.slicer_bridge``), runs
the segmentation in a child process while the GUI stays responsive
(``LambdaSegmentLib.slicer_job``), and presents the result the way Slicer users expect.

The Logic imports no Qt, so it runs (and is tested) without the application. The library
and its third-party packages are imported only when first needed, after the user agreed
to install whatever is missing.

Research use only; not a medical device.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import vtk

import slicer
from slicer.i18n import tr as _
from slicer.i18n import translate
from slicer.ScriptedLoadableModule import *  # noqa: F403  (the template's convention)
from slicer.util import VTKObservationMixin
from slicer.parameterNodeWrapper import Choice, parameterNodeWrapper

from slicer import vtkMRMLScalarVolumeNode, vtkMRMLSegmentationNode


def _makeLibraryImportable() -> None:
    """Find ``LambdaSegmentLib``: installed extensions have it beside this file (CMake copies it
    into the scripted-modules folder); a source checkout has it one folder up."""
    if importlib.util.find_spec("LambdaSegmentLib") is not None:
        return
    for candidate in (Path(__file__).resolve().parent, Path(__file__).resolve().parents[1]):
        if (candidate / "LambdaSegmentLib" / "__init__.py").exists():
            sys.path.insert(0, str(candidate))
            return


_makeLibraryImportable()

#: Python packages the library needs, as in pyproject.toml's ``dependencies`` (a test keeps them equal).
LIBRARY_REQUIREMENTS = (
    "torch>=2.2,<3",
    "einops>=0.7",
    "numpy>=1.24",
    "scipy>=1.10",
    "SimpleITK>=2.3",
    "slicerio>=1.0",
    "nibabel>=5.0",
    "matplotlib>=3.7",
)
#: Import name of each requirement, where it differs from the distribution name.
IMPORT_NAMES = {"SimpleITK": "SimpleITK"}
#: Bundled with Slicer: never pip-installed over Slicer's own build.
PROVIDED_BY_SLICER = ("numpy", "SimpleITK")

SEGMENT_ID = "Infarct"
BRAIN_SEGMENT_ID = "Brain"
BRAIN_SEGMENT_COLOR = (0.35, 0.55, 0.95)
RUN_ATTRIBUTE = "LambdaSegment.Run"
DWI_REFERENCE_ROLE = "LambdaSegmentDWI"
SECOND_REFERENCE_ROLE = "LambdaSegmentADC"
PROBABILITY_REFERENCE_ROLE = "LambdaSegmentProbability"

SECOND_IMAGE_KINDS = ("auto", "adc", "eadc")
LESION_TABLE_COLUMNS = ("#", "Volume (mL)", "Core (mL)", "Confidence", "Side")
LOW_CONFIDENCE_COLOR = "#ffd8a8"
ADC_UNITS = ("auto", "mm2/s", "1e-3 mm2/s", "1e-6 mm2/s")


def requirementName(requirement: str) -> str:
    """Distribution name of a requirement string such as ``torch>=2.2,<3``."""
    for separator in "<>=!~[; ":
        requirement = requirement.split(separator)[0]
    return requirement.strip()


def torchPipArguments(system: str, hasNvidiaGpu: bool, requirement: str = "torch>=2.2,<3") -> list[str]:
    """pip arguments installing a torch build that fits the machine, when SlicerPyTorch is absent.

    Linux wheels on PyPI bundle CUDA (several GB), so a machine without an NVIDIA GPU gets
    the CPU-only build; Windows wheels on PyPI are CPU-only, so a machine with an NVIDIA GPU
    gets the CUDA build from the PyTorch index; macOS wheels support Apple GPUs (MPS).
    """
    if system == "Linux" and not hasNvidiaGpu:
        return [requirement, "--index-url", "https://download.pytorch.org/whl/cpu"]
    if system == "Windows" and hasNvidiaGpu:
        return [requirement, "--index-url", "https://download.pytorch.org/whl/cu126"]
    return [requirement]


#
# LambdaSegment
#


class LambdaSegment(ScriptedLoadableModule):  # noqa: F405
    """Module description shown in Slicer's module panel and help."""

    def __init__(self, parent):
        ScriptedLoadableModule.__init__(self, parent)  # noqa: F405
        self.parent.title = _("Segment stroke")
        self.parent.categories = [translate("qSlicerAbstractCoreModule", "Segmentation")]
        self.parent.dependencies = []
        self.parent.contributors = ["LambdaSegment developers"]
        self.parent.helpText = _(
            "Segments the acute ischemic infarct on diffusion-weighted MRI (a DWI b≈1000 trace with its ADC or "
            "eADC map) with LambdaUNet and reports its volume in mL. Select the DWI and the ADC/eADC, press "
            "<b>Segment stroke</b>, review the lesion table (volume, ADC core = ADC &lt; 620×10⁻⁶ mm²/s inside the "
            "infarct, not a perfusion measure; confidence = the model's mean probability, not a calibrated risk; click "
            "a row to jump to the lesion), edit the <i>Infarct</i> segment in the Segment Editor, then export a "
            "report. <b>Research use only, not a medical device: not for diagnosis or treatment decisions.</b>"
        )
        self.parent.acknowledgementText = _(
            "LambdaUNet: Y. Ou, Y. Yuan, X. Huang, et al., \"LambdaUNet: 2.5D Stroke Lesion Segmentation of "
            "Diffusion-weighted MR Images\", MICCAI 2021."
        )


#
# LambdaSegmentParameterNode
#


@parameterNodeWrapper
class LambdaSegmentParameterNode:
    """The module's state, saved with the scene.

    dwiVolume - DWI b≈1000 trace. adcVolume - ADC or eADC on the DWI grid.
    adcKind - "auto", "adc" or "eadc". adcUnit - unit of an ADC ("auto" = detected).
    device - "auto", "cpu", "cuda", "cuda:N" or "mps".
    model - the bundled model package that segments, by its folder's name ("" = the default).
    outputSegmentation - where the Infarct segment goes (None = a new segmentation).
    showBrainMask - also add the brain mask (no infarct is reported outside it) as a "Brain" segment.
    """

    dwiVolume: vtkMRMLScalarVolumeNode
    adcVolume: vtkMRMLScalarVolumeNode
    adcKind: Annotated[str, Choice(list(SECOND_IMAGE_KINDS))] = "auto"
    adcUnit: Annotated[str, Choice(list(ADC_UNITS))] = "auto"
    device: str = "auto"
    model: str = ""
    outputSegmentation: vtkMRMLSegmentationNode
    showBrainMask: bool = False


#
# LambdaSegmentWidget
#


class LambdaSegmentWidget(ScriptedLoadableModuleWidget, VTKObservationMixin):  # noqa: F405
    """The module panel: binds the GUI to the parameter node and runs the Logic.

    The segmentation runs in a child process (``LambdaSegmentLib.slicer_job``) polled by a
    QTimer, so Slicer stays responsive and Cancel stops it at once.
    """

    POLL_MILLISECONDS = 200

    def __init__(self, parent=None) -> None:
        ScriptedLoadableModuleWidget.__init__(self, parent)  # noqa: F405
        VTKObservationMixin.__init__(self)
        self.logic = None
        self._parameterNode = None
        self._parameterNodeGuiTag = None
        self._job = None
        self._jobOutputNode = None
        self._pollTimer = None
        self._resultSegmentation = None
        self._lesionRows = []  # the rows shown in the lesion table (dicts of lesions.lesion_table)
        self._updatingGui = False

    def setup(self) -> None:
        import qt

        ScriptedLoadableModuleWidget.setup(self)  # noqa: F405
        uiWidget = slicer.util.loadUI(self.resourcePath("UI/LambdaSegment.ui"))
        self.layout.addWidget(uiWidget)
        self.ui = slicer.util.childWidgetVariables(uiWidget)
        uiWidget.setMRMLScene(slicer.mrmlScene)
        self.logic = LambdaSegmentLogic()

        for kind, label in (("auto", _("Auto-detect")), ("adc", _("ADC")), ("eadc", _("eADC (exp(−b·ADC))"))):
            self.ui.adcKindComboBox.addItem(label, kind)
        for unit, label in (
            ("auto", _("Auto-detect")),
            ("mm2/s", "mm²/s"),
            ("1e-3 mm2/s", "10⁻³ mm²/s"),
            ("1e-6 mm2/s", "10⁻⁶ mm²/s"),
        ):
            self.ui.adcUnitComboBox.addItem(label, unit)
        self.populateDevices()
        for name, label in self.logic.bundledModelPackages():
            self.ui.modelComboBox.addItem(label, name)
        self.ui.progressBar.hide()
        self.ui.cancelButton.hide()

        self._pollTimer = qt.QTimer()
        self._pollTimer.setInterval(self.POLL_MILLISECONDS)
        self._pollTimer.connect("timeout()", self.onPollJob)
        self._volumeRefreshTimer = qt.QTimer()
        self._volumeRefreshTimer.setSingleShot(True)
        self._volumeRefreshTimer.setInterval(500)
        self._volumeRefreshTimer.connect("timeout()", self.showResult)

        self.addObserver(slicer.mrmlScene, slicer.mrmlScene.StartCloseEvent, self.onSceneStartClose)
        self.addObserver(slicer.mrmlScene, slicer.mrmlScene.EndCloseEvent, self.onSceneEndClose)
        self.ui.adcKindComboBox.connect("currentIndexChanged(int)", self.onChoiceChanged)
        self.ui.adcUnitComboBox.connect("currentIndexChanged(int)", self.onChoiceChanged)
        self.ui.deviceComboBox.connect("currentIndexChanged(int)", self.onChoiceChanged)
        self.ui.modelComboBox.connect("currentIndexChanged(int)", self.onChoiceChanged)
        self.ui.segmentButton.connect("clicked(bool)", self.onSegmentButton)
        self.ui.cancelButton.connect("clicked(bool)", self.onCancelButton)
        self.ui.editButton.connect("clicked(bool)", self.onEditButton)
        self.ui.exportButton.connect("clicked(bool)", self.onExportButton)
        self.ui.refreshButton.connect("clicked(bool)", self.showResult)
        self.ui.lesionTableWidget.setColumnCount(len(LESION_TABLE_COLUMNS))
        self.ui.lesionTableWidget.setHorizontalHeaderLabels([_(title) for title in LESION_TABLE_COLUMNS])
        self.ui.lesionTableWidget.verticalHeader().setVisible(False)
        self.ui.lesionTableWidget.connect("cellClicked(int,int)", self.onLesionClicked)
        self.initializeParameterNode()

    def populateDevices(self) -> None:
        """Device choices, saying which GPU was found (refreshed after PyTorch is installed)."""
        self._updatingGui = True
        try:
            self.ui.deviceComboBox.clear()
            for device, label in self.logic.availableDevices():
                self.ui.deviceComboBox.addItem(label, device)
        finally:
            self._updatingGui = False
        if self._parameterNode is not None:
            self.updateGuiFromParameterNode()

    def cleanup(self) -> None:
        if self._job is not None:
            self._job.cancel()
            self._job = None
        if self._pollTimer is not None:
            self._pollTimer.stop()
        self.removeObservers()

    def enter(self) -> None:
        self.initializeParameterNode()

    def exit(self) -> None:
        if self._parameterNode:
            self._parameterNode.disconnectGui(self._parameterNodeGuiTag)
            self._parameterNodeGuiTag = None
            self.removeObserver(self._parameterNode, vtk.vtkCommand.ModifiedEvent, self.updateGuiFromParameterNode)

    def onSceneStartClose(self, caller, event) -> None:
        if self._job is not None:
            self.onCancelButton()
        self.setParameterNode(None)
        self.setResultSegmentation(None)

    def onSceneEndClose(self, caller, event) -> None:
        if self.parent.isEntered:
            self.initializeParameterNode()

    def initializeParameterNode(self) -> None:
        self.setParameterNode(self.logic.getParameterNode())
        if not self._parameterNode.dwiVolume:
            firstVolume = slicer.mrmlScene.GetFirstNodeByClass("vtkMRMLScalarVolumeNode")
            if firstVolume:
                self._parameterNode.dwiVolume = firstVolume

    def setParameterNode(self, inputParameterNode: Optional[LambdaSegmentParameterNode]) -> None:
        if self._parameterNode:
            self._parameterNode.disconnectGui(self._parameterNodeGuiTag)
            self.removeObserver(self._parameterNode, vtk.vtkCommand.ModifiedEvent, self.updateGuiFromParameterNode)
        self._parameterNode = inputParameterNode
        if self._parameterNode:
            # The node selectors carry the "SlicerParameterName" property in the .ui file; the
            # combo boxes hold codes as item data, so they are synchronised here.
            self._parameterNodeGuiTag = self._parameterNode.connectGui(self.ui)
            self.addObserver(self._parameterNode, vtk.vtkCommand.ModifiedEvent, self.updateGuiFromParameterNode)
            self.updateGuiFromParameterNode()

    def updateGuiFromParameterNode(self, caller=None, event=None) -> None:
        if self._parameterNode is None or self._updatingGui:
            return
        self._updatingGui = True
        try:
            for comboBox, value in (
                (self.ui.adcKindComboBox, self._parameterNode.adcKind),
                (self.ui.adcUnitComboBox, self._parameterNode.adcUnit),
                (self.ui.deviceComboBox, self._parameterNode.device),
                (self.ui.modelComboBox, self._parameterNode.model),
            ):
                index = comboBox.findData(value)
                comboBox.setCurrentIndex(max(index, 0))
            self.ui.adcUnitComboBox.enabled = self._parameterNode.adcKind != "eadc"
        finally:
            self._updatingGui = False
        output = self._parameterNode.outputSegmentation
        if output is not self._resultSegmentation and (output is None or output.GetAttribute(RUN_ATTRIBUTE)):
            self.setResultSegmentation(output)  # e.g. a saved scene reopened: show its result again
        self.updateInputStatus()

    def onChoiceChanged(self, index=None) -> None:
        if self._parameterNode is None or self._updatingGui:
            return
        with slicer.util.NodeModify(self._parameterNode):
            self._parameterNode.adcKind = self.ui.adcKindComboBox.currentData
            self._parameterNode.adcUnit = self.ui.adcUnitComboBox.currentData
            self._parameterNode.device = self.ui.deviceComboBox.currentData
            self._parameterNode.model = self.ui.modelComboBox.currentData or ""

    def updateInputStatus(self) -> None:
        """Enable Segment stroke only for valid inputs; say what was detected or what is wrong."""
        running = self._job is not None
        parameters = self._parameterNode
        if parameters is None:
            return
        problem, detected = self.logic.describeInputs(
            parameters.dwiVolume, parameters.adcVolume, parameters.adcKind, parameters.adcUnit
        )
        self.ui.inputStatusLabel.text = problem or detected
        self.ui.inputStatusLabel.styleSheet = "color: #b00020;" if problem else ""
        self.ui.segmentButton.enabled = not problem and not running
        self.ui.segmentButton.toolTip = problem or _("Segment the infarct on the selected DWI")

    def onSegmentButton(self) -> None:
        parameters = self._parameterNode
        outputNode = parameters.outputSegmentation
        if outputNode is not None and outputNode.GetSegmentation().GetNumberOfSegments() > 0:
            if not slicer.util.confirmOkCancelDisplay(
                _("The segmentation '{name}' already has segments. Its '{segment}' segment will be replaced by the new "
                  "result (other segments are kept). Continue?").format(name=outputNode.GetName(), segment=SEGMENT_ID),
                windowTitle=_("Replace segment?"),
            ):
                return
        if not self.ensureDependencies():
            return
        try:
            with slicer.util.tryWithErrorDisplay(_("Cannot start the segmentation."), waitCursor=True):
                self.logic.modelPackageDir = self.logic.bundledModelPackageDir(parameters.model)
                self._job = self.logic.startSegmentStroke(
                    parameters.dwiVolume, parameters.adcVolume, parameters.adcKind, parameters.device,
                    adcUnit=parameters.adcUnit,
                )
                self._job.showBrainMask = bool(parameters.showBrainMask)
                self._jobOutputNode = outputNode
                self.ui.progressBar.value = 0
                self.ui.progressBar.show()
                self.ui.cancelButton.show()
                self.ui.statusLabel.text = _("Starting…")
                self._pollTimer.start()
        finally:
            self.updateInputStatus()

    def ensureDependencies(self) -> bool:
        """One confirmation, then install what the library lacks; False if the user declined or it failed."""
        missing = self.logic.missingPythonPackages()
        if not missing:
            return True
        if not slicer.util.confirmOkCancelDisplay(
            _("Segment stroke needs these Python packages, which are not installed yet:\n\n{packages}\n\n"
              "Install them now? This downloads them from the internet and may take several minutes.").format(
                packages="\n".join(missing)),
            windowTitle=_("Install Python packages"),
        ):
            return False
        self.ui.statusLabel.text = _("Installing Python packages…")
        slicer.app.processEvents()
        try:
            with slicer.util.tryWithErrorDisplay(_("Installing the Python packages failed."), waitCursor=True):
                self.logic.installPythonPackages(missing)
        finally:
            self.ui.statusLabel.text = ""
        self.populateDevices()
        return True

    def onPollJob(self) -> None:
        if self._job is None:
            self._pollTimer.stop()
            return
        status = self._job.poll()
        self.ui.progressBar.value = int(round(100 * status.fraction))
        self.ui.statusLabel.text = status.stage
        if status.running:
            return
        self._pollTimer.stop()
        job, outputNode, self._job = self._job, self._jobOutputNode, None
        self.ui.progressBar.hide()
        self.ui.cancelButton.hide()
        self.ui.statusLabel.text = ""
        try:
            with slicer.util.tryWithErrorDisplay(_("Segmentation failed."), waitCursor=True):
                segmentationNode, _volumeMl = self.logic.finishSegmentStroke(
                    job, outputNode, showBrainMask=getattr(job, "showBrainMask", False)
                )
                self._parameterNode.outputSegmentation = segmentationNode
                self.setResultSegmentation(segmentationNode)
        finally:
            self.updateInputStatus()

    def onCancelButton(self) -> None:
        if self._job is not None:
            self._job.cancel()
            self._job = None
        self._pollTimer.stop()
        self.ui.progressBar.hide()
        self.ui.cancelButton.hide()
        self.ui.statusLabel.text = _("Cancelled.")
        self.updateInputStatus()

    def setResultSegmentation(self, segmentationNode) -> None:
        """Show (and keep up to date while it is edited) the result of this segmentation node."""
        if self._resultSegmentation is not None:
            self.removeObserver(
                self._resultSegmentation.GetSegmentation(), slicer.vtkSegmentation.RepresentationModified, self.onSegmentEdited
            )
        self._resultSegmentation = segmentationNode
        if segmentationNode is not None:
            self.addObserver(
                segmentationNode.GetSegmentation(), slicer.vtkSegmentation.RepresentationModified, self.onSegmentEdited
            )
        self.showResult()

    def onSegmentEdited(self, caller=None, event=None) -> None:
        self._volumeRefreshTimer.start()  # coalesce the many events of one Segment Editor stroke

    def showResult(self) -> None:
        node = self._resultSegmentation
        hasResult = node is not None and node.GetSegmentation().GetSegment(SEGMENT_ID) is not None
        self.ui.editButton.enabled = hasResult
        self.ui.exportButton.enabled = hasResult
        self.ui.refreshButton.enabled = hasResult
        if not hasResult:
            self.ui.volumeLabel.text = "–"
            self.ui.coreVolumeLabel.text = "–"
            self.ui.lesionCountLabel.text = "–"
            self.ui.runInfoLabel.text = ""
            self.showLesionRows([])
            return
        summary = self.logic.resultSummary(node)
        self.ui.volumeLabel.text = volumeBesideAi(summary["infarct_volume_ml"], summary["predicted_volume_ml"])
        self.ui.coreVolumeLabel.text = volumeBesideAi(summary["adc_core_ml"], summary["predicted_adc_core_ml"])
        self.ui.lesionCountLabel.text = str(summary["lesion_count"])
        self.ui.runInfoLabel.text = summary["run_text"]
        self.showLesionRows(summary["lesions"])

    def showLesionRows(self, rows: list[dict]) -> None:
        """Fill the lesion table (``lesionTableCells``); low-confidence rows get an amber background."""
        import qt

        self._lesionRows = list(rows)
        table = self.ui.lesionTableWidget
        table.setRowCount(len(rows))
        for rowIndex, row in enumerate(rows):
            for column, text in enumerate(lesionTableCells(row)):
                item = qt.QTableWidgetItem(text)
                if row.get("low_confidence"):
                    item.setBackground(qt.QBrush(qt.QColor(LOW_CONFIDENCE_COLOR)))
                    item.setToolTip(_("Low confidence: the model's mean probability over this lesion is below its threshold."))
                table.setItem(rowIndex, column, item)
        table.resizeColumnsToContents()

    def onLesionClicked(self, row: int, column: int) -> None:
        if 0 <= row < len(self._lesionRows):
            self.logic.centreSliceViewsOn(self._lesionRows[row]["jump_lps_mm"])

    def onEditButton(self) -> None:
        node = self._resultSegmentation
        dwiNode = node.GetNodeReference(DWI_REFERENCE_ROLE) if node else None
        slicer.util.selectModule("SegmentEditor")
        editor = slicer.modules.SegmentEditorWidget.editor
        editor.setSegmentationNode(node)
        if dwiNode is not None:
            setSource = getattr(editor, "setSourceVolumeNode", None) or editor.setMasterVolumeNode
            setSource(dwiNode)
        editor.setCurrentSegmentID(SEGMENT_ID)

    def onExportButton(self) -> None:
        import qt

        node = self._resultSegmentation
        startPath = os.path.join(qt.QDir.homePath(), f"{node.GetName()} report.pdf")
        path = qt.QFileDialog.getSaveFileName(
            slicer.util.mainWindow(), _("Export report"), startPath,
            _("PDF report (*.pdf);;PNG report (*.png);;JSON (*.json);;CSV (*.csv)"),
        )
        if not path:
            return
        with slicer.util.tryWithErrorDisplay(_("Exporting the report failed."), waitCursor=True):
            written = self.logic.exportReport(node, path, overwrite=True)  # the file dialog asked before overwriting
            self.ui.statusLabel.text = _("Report written: {path}").format(path=str(written))


#
# LambdaSegmentLogic
#


class LambdaSegmentLogic(ScriptedLoadableModuleLogic):  # noqa: F405
    """Segment stroke without a GUI: usable from scripts, the self-test and the tests.

    The entry point is ``segmentStroke``; the widget uses ``startSegmentStroke`` /
    ``finishSegmentStroke`` to run the same segmentation in a child process. Bad inputs
    raise ``ValueError`` (the library's ``BadInputError``) with a message for the user.
    """

    def __init__(self) -> None:
        ScriptedLoadableModuleLogic.__init__(self)  # noqa: F405
        #: Model package folder; None = the model bundled with the extension.
        self.modelPackageDir: str | None = None

    def getParameterNode(self):
        return LambdaSegmentParameterNode(super().getParameterNode())

    # -- inputs ---------------------------------------------------------------------------

    def readInputs(self, dwiVolumeNode, adcVolumeNode) -> tuple[Any, Any]:
        """The two images as ``Volume``s (exact geometry), after checking they can be segmented together.

        Raises:
            ValueError: a missing node, the same node twice, a 4D/vector/label volume, a
                volume under a transform, or the ADC on another grid than the DWI.
        """
        from LambdaSegmentLib.errors import BadInputError
        from LambdaSegmentLib.io.grid import grid_differences
        from LambdaSegmentLib.slicer_bridge import volume_from_node

        dwi = volume_from_node(dwiVolumeNode, role="DWI")
        if adcVolumeNode is not None and adcVolumeNode is dwiVolumeNode:
            raise BadInputError(dwiVolumeNode.GetName(), "was selected both as DWI and as ADC/eADC; select the ADC or eADC map")
        second = volume_from_node(adcVolumeNode, role="ADC/eADC")
        differences = grid_differences(dwi, second)
        if differences:
            raise BadInputError(
                adcVolumeNode.GetName(),
                f"is not on the voxel grid of the DWI '{dwiVolumeNode.GetName()}' ({'; '.join(differences)}); "
                "resample it onto the DWI first (e.g. Resample Scalar/Vector/DWI Volume with the DWI as reference)",
            )
        return dwi, second

    def describeInputs(self, dwiVolumeNode, adcVolumeNode, adcKind: str = "auto", adcUnit: str = "auto") -> tuple[str, str]:
        """(problem, what was detected) for the widget; problem is "" when the inputs can be segmented."""
        if dwiVolumeNode is None:
            return _("Select the DWI (b≈1000 trace)."), ""
        if adcVolumeNode is None:
            return _("Select the ADC or eADC map."), ""
        if self.missingPythonPackages():
            return "", _("Python packages will be installed on the first run.")
        import LambdaSegmentLib.inference as inference
        from LambdaSegmentLib.slicer_job import build_study

        if self.modelPackageDir is None and not (inference.BUNDLED_PACKAGE / "manifest.json").exists():
            return _("No trained model is installed with this extension ({path}).").format(path=inference.BUNDLED_PACKAGE), ""
        try:
            dwi, second = self.readInputs(dwiVolumeNode, adcVolumeNode)
            study = build_study(dwi, second, kind=adcKind, adc_unit=adcUnit, second_name=adcVolumeNode.GetName())
        except ValueError as error:
            return str(error), ""
        return "", _("Detected: {what}, b = {b:g} s/mm².").format(what=describeAdcUnit(study.adc_unit_detected), b=study.b_value)

    # -- segmentation ---------------------------------------------------------------------

    def segmentStroke(
        self,
        dwiVolumeNode,
        adcVolumeNode,
        adcKind: str = "auto",
        device: str = "auto",
        outputSegmentationNode=None,
        *,
        adcUnit: str = "auto",
        progress=None,
        showBrainMask: bool = False,
    ) -> tuple[Any, float]:
        """Segment the infarct in this process; returns (segmentation node, infarct volume in mL).

        Args:
            dwiVolumeNode: DWI b≈1000 trace (vtkMRMLScalarVolumeNode).
            adcVolumeNode: ADC (mm²/s, 10⁻³ or 10⁻⁶ mm²/s) or eADC on the DWI grid.
            adcKind: "auto" (eADC if the node name says so or the values lie in 0-1, else ADC), "adc" or "eadc".
            device: "auto", "cpu", "cuda", "cuda:N" or "mps".
            outputSegmentationNode: segmentation whose "Infarct" segment is replaced; None = a
                new "<DWI name> infarct" segmentation.
            adcUnit: unit of an ADC, "auto" = detected from the brain median.
            progress: optional ``progress(fraction, stage)``.
            showBrainMask: also put the brain mask (outside which no infarct is reported) into a
                "Brain" segment; otherwise a "Brain" segment of an earlier run is removed.

        Raises:
            ValueError: bad inputs (message names the node and the problem).
        """
        from LambdaSegmentLib.slicer_job import result_info, segment_volumes

        dwi, second = self.readInputs(dwiVolumeNode, adcVolumeNode)
        study, segmentation, package = segment_volumes(
            dwi, second, kind=adcKind, adc_unit=adcUnit, second_name=adcVolumeNode.GetName(), device=device,
            package_dir=self.modelPackageDir, progress=progress,
        )
        node = self.writeSegmentation(
            dwiVolumeNode, adcVolumeNode, segmentation.mask, result_info(study, segmentation, package), outputSegmentationNode,
            probability=segmentation.probability,
            brainMask=segmentation.brain if showBrainMask else None,
        )
        return node, self.infarctVolumeMl(node)

    def startSegmentStroke(self, dwiVolumeNode, adcVolumeNode, adcKind: str = "auto", device: str = "auto", *, adcUnit: str = "auto"):
        """Start the segmentation in a child process; returns the job (``poll()``, ``cancel()``)."""
        from LambdaSegmentLib.slicer_job import SegmentationJob

        dwi, second = self.readInputs(dwiVolumeNode, adcVolumeNode)
        job = SegmentationJob.start(
            dwi, second, kind=adcKind, adc_unit=adcUnit, second_name=adcVolumeNode.GetName(), device=device,
            package_dir=self.modelPackageDir, python=self.pythonExecutable(),
        )
        job.dwiNodeID, job.adcNodeID = dwiVolumeNode.GetID(), adcVolumeNode.GetID()
        return job

    def finishSegmentStroke(self, job, outputSegmentationNode=None, *, showBrainMask: bool = False) -> tuple[Any, float]:
        """Collect a finished job into the scene; returns (segmentation node, infarct volume in mL).
        ``showBrainMask``: as in ``segmentStroke``."""
        mask, probability, info = job.result()
        dwiNode = slicer.mrmlScene.GetNodeByID(job.dwiNodeID)
        adcNode = slicer.mrmlScene.GetNodeByID(job.adcNodeID)
        if dwiNode is None or adcNode is None:
            raise ValueError("the DWI or ADC/eADC was removed from the scene while it was being segmented")
        node = self.writeSegmentation(dwiNode, adcNode, mask, info, outputSegmentationNode, probability=probability,
                                      brainMask=job.brain if showBrainMask else None)
        return node, self.infarctVolumeMl(node)

    @staticmethod
    def pythonExecutable() -> str:
        """Slicer's stand-alone Python (PythonSlicer) for child processes; this interpreter elsewhere."""
        return shutil.which("PythonSlicer") or sys.executable

    def writeSegmentation(self, dwiVolumeNode, adcVolumeNode, mask, runInfo: dict, outputSegmentationNode=None, *,
                          probability=None, brainMask=None):
        """Put ``mask`` (a ``Volume`` on the DWI grid) into the "Infarct" segment; returns the segmentation node.

        ``brainMask`` (a ``Volume`` on the DWI grid, or None) goes into a "Brain" segment shown
        as an outline only; with None a "Brain" segment of an earlier run is removed.

        A new node is named "<DWI name> infarct". The segment gets its colour and SNOMED CT
        terminology; the node's reference geometry is the DWI; it is shown over the DWI in
        the slice views and placed beside the DWI in the subject hierarchy. ``probability``
        (the model's, on the DWI grid) is kept as the volume "<name> AI probability",
        referenced by the segmentation, for the lesion table's confidence after edits.
        The run's record keeps the AI's total and core volumes beside later edits.
        """
        from LambdaSegmentLib.io.writing import SEGMENT_COLOR, SEGMENT_NAME
        from LambdaSegmentLib.lesions import total_adc_core_ml
        from LambdaSegmentLib.slicer_bridge import set_segment_from_mask, slicer_terminology_entry

        scene = slicer.mrmlScene
        node = outputSegmentationNode
        if node is None:
            node = scene.AddNewNodeByClass("vtkMRMLSegmentationNode", scene.GenerateUniqueName(f"{dwiVolumeNode.GetName()} infarct"))
        node.SetReferenceImageGeometryParameterFromVolumeNode(dwiVolumeNode)
        segmentation = node.GetSegmentation()
        previous = segmentation.GetSegmentIdBySegmentName(SEGMENT_NAME) or (
            SEGMENT_ID if segmentation.GetSegment(SEGMENT_ID) else ""
        )
        if previous:
            segmentation.RemoveSegment(previous)
        segmentId = segmentation.AddEmptySegment(SEGMENT_ID, SEGMENT_NAME, list(SEGMENT_COLOR))
        if not segmentId:
            raise RuntimeError("the segmentation could not add a segment (Segmentations module logic not initialised)")
        segment = segmentation.GetSegment(segmentId)
        segment.SetNameAutoGenerated(False)
        segment.SetColorAutoGenerated(False)
        if hasattr(segment, "SetTerminology"):
            segment.SetTerminology(slicer_terminology_entry())
        else:  # Slicer before SetTerminology: the same string under the terminology tag
            segment.SetTag(segment.GetTerminologyEntryTagName(), slicer_terminology_entry())
        set_segment_from_mask(node, segmentId, mask, dwiVolumeNode)
        self._writeBrainSegment(node, brainMask, dwiVolumeNode)

        node.SetNodeReferenceID(DWI_REFERENCE_ROLE, dwiVolumeNode.GetID())
        node.SetNodeReferenceID(SECOND_REFERENCE_ROLE, adcVolumeNode.GetID())
        if probability is not None:
            self._keepProbability(node, probability, dwiVolumeNode)
        else:
            node.RemoveNodeReferenceIDs(PROBABILITY_REFERENCE_ROLE)
        node.SetAttribute(RUN_ATTRIBUTE, json.dumps(runInfo))  # what lesionTable reads (ADC unit, threshold)
        predicted = {"predicted_volume_ml": self.infarctVolumeMl(node, segmentId),
                     "predicted_adc_core_ml": total_adc_core_ml(self.lesionTable(node))}
        node.SetAttribute(RUN_ATTRIBUTE, json.dumps({**runInfo, **predicted}))
        self._showOverDwi(node, dwiVolumeNode)
        self._placeBesideInSubjectHierarchy(node, dwiVolumeNode)
        return node

    def _keepProbability(self, segmentationNode, probability, dwiVolumeNode) -> None:
        from LambdaSegmentLib.slicer_bridge import update_node_from_volume

        scene = slicer.mrmlScene
        node = segmentationNode.GetNodeReference(PROBABILITY_REFERENCE_ROLE)
        if node is None:
            node = scene.AddNewNodeByClass("vtkMRMLScalarVolumeNode", scene.GenerateUniqueName(f"{segmentationNode.GetName()} AI probability"))
        update_node_from_volume(node, probability)
        node.CreateDefaultDisplayNodes()
        segmentationNode.SetNodeReferenceID(PROBABILITY_REFERENCE_ROLE, node.GetID())
        self._placeBesideInSubjectHierarchy(node, dwiVolumeNode)

    @staticmethod
    def _writeBrainSegment(node, brainMask, dwiVolumeNode) -> None:
        from LambdaSegmentLib.slicer_bridge import set_segment_from_mask

        segmentation = node.GetSegmentation()
        if segmentation.GetSegment(BRAIN_SEGMENT_ID):
            segmentation.RemoveSegment(BRAIN_SEGMENT_ID)
        if brainMask is None:
            return
        segmentId = segmentation.AddEmptySegment(BRAIN_SEGMENT_ID, BRAIN_SEGMENT_ID, list(BRAIN_SEGMENT_COLOR))
        set_segment_from_mask(node, segmentId, brainMask, dwiVolumeNode)
        node.CreateDefaultDisplayNodes()
        node.GetDisplayNode().SetSegmentVisibility2DFill(segmentId, False)  # an outline: the DWI stays readable

    @staticmethod
    def _showOverDwi(segmentationNode, dwiVolumeNode) -> None:
        segmentationNode.CreateDefaultDisplayNodes()
        display = segmentationNode.GetDisplayNode()
        display.SetVisibility(True)
        display.SetVisibility2DFill(True)
        display.SetVisibility2DOutline(True)
        slicer.util.setSliceViewerLayers(background=dwiVolumeNode, fit=True)

    @staticmethod
    def _placeBesideInSubjectHierarchy(node, besideNode) -> None:
        hierarchy = slicer.mrmlScene.GetSubjectHierarchyNode()
        besideItem = hierarchy.GetItemByDataNode(besideNode)
        parent = hierarchy.GetItemParent(besideItem) if besideItem else hierarchy.GetSceneItemID()
        item = hierarchy.GetItemByDataNode(node)
        if not item:
            item = hierarchy.CreateItem(parent, node)
        hierarchy.SetItemParent(item, parent)

    # -- results --------------------------------------------------------------------------

    @staticmethod
    def infarctVolumeMl(segmentationNode, segmentId: str = SEGMENT_ID) -> float:
        """Volume (mL) of the segment's own binary labelmap, as Segment Statistics reports it."""
        from LambdaSegmentLib.slicer_bridge import segment_labelmap_volume_ml

        return segment_labelmap_volume_ml(segmentationNode, segmentId)

    def currentMask(self, segmentationNode):
        """The Infarct segment as it is now (after any edits), as a ``Volume`` on the DWI grid."""
        from LambdaSegmentLib.slicer_bridge import segment_mask_on_grid

        dwiNode = segmentationNode.GetNodeReference(DWI_REFERENCE_ROLE)
        if dwiNode is None:
            raise ValueError(f"'{segmentationNode.GetName()}' was not made by Segment stroke (no DWI reference)")
        return segment_mask_on_grid(segmentationNode, SEGMENT_ID, dwiNode)

    def lesionTable(self, segmentationNode) -> list:
        """The library's per-lesion table (``lesions.lesion_table``) of the Infarct segment as it is
        now (edits included), with the AI's probability and the ADC in 10⁻³ mm²/s; largest first."""
        from LambdaSegmentLib.lesions import lesion_table

        return lesion_table(self.currentMask(segmentationNode), **self.reviewMaps(segmentationNode))

    @staticmethod
    def reviewMaps(segmentationNode) -> dict[str, Any]:
        """What the lesion table needs beside the mask: ``probability`` (the kept AI probability
        volume), ``adc`` (the referenced ADC/eADC in 10⁻³ mm²/s, converted as the run read it)
        and ``low_confidence_below`` (the model's threshold); None where absent."""
        from LambdaSegmentLib.slicer_bridge import volume_from_node
        from LambdaSegmentLib.slicer_job import canonical_adc

        run = json.loads(segmentationNode.GetAttribute(RUN_ATTRIBUTE) or "{}")
        probabilityNode = segmentationNode.GetNodeReference(PROBABILITY_REFERENCE_ROLE)
        adcNode = segmentationNode.GetNodeReference(SECOND_REFERENCE_ROLE)
        adc = None
        if adcNode is not None and run.get("adc_unit_detected"):
            adc = canonical_adc(volume_from_node(adcNode, role="ADC/eADC"), run["adc_unit_detected"], float(run.get("b_value") or 1000.0))
        return {
            "probability": volume_from_node(probabilityNode, role="AI probability") if probabilityNode is not None else None,
            "adc": adc,
            "low_confidence_below": run.get("low_confidence_mean_probability"),
        }

    @staticmethod
    def centreSliceViewsOn(pointLps, sliceNodes=None) -> list[float]:
        """Centre every slice view (default: all slice nodes of the scene) on an LPS point, e.g. a
        lesion row's ``jump_lps_mm``; returns the views' new slice offsets (mm)."""
        from LambdaSegmentLib.slicer_bridge import centre_slice_views_on, lps_to_ras_point

        if sliceNodes is None:
            scene = slicer.mrmlScene
            sliceNodes = [scene.GetNthNodeByClass(n, "vtkMRMLSliceNode") for n in range(scene.GetNumberOfNodesByClass("vtkMRMLSliceNode"))]
        return centre_slice_views_on(lps_to_ras_point(pointLps), sliceNodes)

    def resultSummary(self, segmentationNode) -> dict[str, Any]:
        """For the widget, from the segment as it is now: volume (mL) beside the AI's, ADC core
        (mL) beside the AI's, the lesion table (rows as dicts) and a line about the run."""
        from LambdaSegmentLib.lesions import total_adc_core_ml

        run = json.loads(segmentationNode.GetAttribute(RUN_ATTRIBUTE) or "{}")
        lesions = self.lesionTable(segmentationNode)
        model = run.get("model", {})
        runText = _("{model} {version} on {device} in {seconds:.1f} s; ADC: {unit}").format(
            model=model.get("name", "?"), version=model.get("version", "?"), device=run.get("device", "?"),
            seconds=float(run.get("seconds", 0.0)), unit=describeAdcUnit(run.get("adc_unit_detected", "?")),
        )
        if model.get("partner_network"):
            runText += _("; averaged with partner network {partner}").format(partner=model["partner_network"].get("name", "?"))
        if model.get("seed_network"):
            runText += _("; lesions kept where seed network {seed} detects one").format(seed=model["seed_network"].get("name", "?"))
        if "UNTRAINED" in str(model.get("training_data", "")).upper():
            runText = _("UNTRAINED model, for plumbing only: the result means nothing. ") + runText
        return {
            "infarct_volume_ml": self.infarctVolumeMl(segmentationNode),
            "predicted_volume_ml": run.get("predicted_volume_ml"),
            "adc_core_ml": total_adc_core_ml(lesions),
            "predicted_adc_core_ml": run.get("predicted_adc_core_ml"),
            "lesion_count": len(lesions),
            "lesions": [lesion.as_dict() for lesion in lesions],
            "low_confidence_mean_probability": run.get("low_confidence_mean_probability"),
            "run_text": runText,
        }

    def exportReport(self, segmentationNode, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write the report of the segment as it is now: .json, .csv, .pdf or .png (by suffix); returns the path.

        Numbers come from the library's report code (``LambdaSegmentLib.reports``) applied to
        the current, possibly edited, segment; inputs are named by their scene node names.
        """
        from LambdaSegmentLib.errors import BadInputError
        from LambdaSegmentLib.reports import build_report, write_report_csv, write_report_figure, write_report_json
        from LambdaSegmentLib.slicer_bridge import volume_from_node

        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in (".json", ".csv", ".pdf", ".png"):
            raise BadInputError(path, "a report ends in .pdf, .png, .json or .csv")
        run = json.loads(segmentationNode.GetAttribute(RUN_ATTRIBUTE) or "{}")
        if not run:
            raise BadInputError(segmentationNode.GetName(), "was not made by Segment stroke; there is no run to report")
        dwiNode = segmentationNode.GetNodeReference(DWI_REFERENCE_ROLE)
        adcNode = segmentationNode.GetNodeReference(SECOND_REFERENCE_ROLE)
        mask = self.currentMask(segmentationNode)
        secondRole = "eadc" if run.get("adc_unit_detected") == "eadc" else "adc"
        sources = {"dwi": f"Slicer node '{dwiNode.GetName()}'"}
        if adcNode is not None:
            sources[secondRole] = f"Slicer node '{adcNode.GetName()}'"
        currentMl = self.infarctVolumeMl(segmentationNode)
        report = build_report(
            case=dwiNode.GetName(),
            mask=mask,
            sources=sources,
            model=run["model"],
            device=run["device"],
            seconds=run["seconds"],
            threshold=run["threshold"],
            study_info={
                "b_value": run.get("b_value"),
                "adc_unit_detected": run.get("adc_unit_detected"),
                "segmentation_node": segmentationNode.GetName(),
                "predicted_volume_ml": run.get("predicted_volume_ml"),
                "predicted_adc_core_ml": run.get("predicted_adc_core_ml"),
                "edited_after_prediction": abs(currentMl - float(run.get("predicted_volume_ml", currentMl))) > 1e-9,
            },
            **self.reviewMaps(segmentationNode),
        )
        if suffix == ".json":
            return write_report_json(report, path, overwrite=overwrite)
        if suffix == ".csv":
            return write_report_csv(report, path, overwrite=overwrite)
        return write_report_figure(report, volume_from_node(dwiNode, role="DWI"), mask, path, overwrite=overwrite)

    # -- environment ----------------------------------------------------------------------

    @staticmethod
    def missingPythonPackages() -> list[str]:
        """Requirements (pip strings) whose package cannot be imported in this Python."""
        return [
            requirement
            for requirement in LIBRARY_REQUIREMENTS
            if importlib.util.find_spec(IMPORT_NAMES.get(requirementName(requirement), requirementName(requirement))) is None
        ]

    def installPythonPackages(self, requirements: list[str]) -> None:
        """Install ``requirements`` into Slicer's Python (the caller has asked the user once).

        torch comes from the SlicerPyTorch extension when it is installed (it picks the CUDA
        build that fits the GPU driver), otherwise from pip with ``torchPipArguments``.
        numpy and SimpleITK are Slicer's own and are never replaced.
        """
        bundled = [r for r in requirements if requirementName(r) in PROVIDED_BY_SLICER]
        if bundled:
            raise RuntimeError(f"Slicer's own {', '.join(bundled)} cannot be imported; reinstall 3D Slicer")
        torchRequirements = [r for r in requirements if requirementName(r) == "torch"]
        others = [r for r in requirements if requirementName(r) != "torch"]
        if torchRequirements:
            self._installTorch(torchRequirements[0])
        if others:
            slicer.util.pip_install(" ".join(f'"{r}"' if "<" in r or ">" in r else r for r in others))
        importlib.invalidate_caches()

    @staticmethod
    def _installTorch(requirement: str) -> None:
        try:
            import PyTorchUtils  # the SlicerPyTorch extension
        except ModuleNotFoundError:
            PyTorchUtils = None
        if PyTorchUtils is not None:
            torch = PyTorchUtils.PyTorchUtilsLogic().installTorch(
                askConfirmation=False, torchVersionRequirement=requirement.removeprefix("torch")
            )
            if torch is None:
                raise RuntimeError("PyTorch could not be installed by the PyTorch extension")
            return
        arguments = torchPipArguments(platform.system(), shutil.which("nvidia-smi") is not None, requirement)
        slicer.util.pip_install(" ".join(f'"{a}"' if "<" in a or ">" in a else a for a in arguments))

    @staticmethod
    def bundledModelsDir() -> Path:
        """Where the bundled model packages are (LambdaSegmentLib/resources/models), found without importing torch."""
        return Path(importlib.util.find_spec("LambdaSegmentLib").submodule_search_locations[0]) / "resources" / "models"

    @classmethod
    def bundledModelPackages(cls, modelsDir: Optional[Path] = None) -> list[tuple[str, str]]:
        """(name, label) choices for the model selector: "" for the default package
        (lambdaunet-dwi), then every other bundled package by its folder's name, read from the
        manifests alone (the weights are verified when a package is loaded)."""
        modelsDir = Path(modelsDir or cls.bundledModelsDir())
        choices = []
        for folder in sorted(path for path in modelsDir.glob("*/") if (path / "manifest.json").is_file()):
            manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
            networks = 1 + sum(f"{role}_network" in manifest for role in ("partner", "seed"))
            label = f"{manifest.get('name', folder.name)} {manifest.get('version', '?')}"
            if networks > 1:
                label += _(" ({count} networks)").format(count=networks)
            if folder.name == "lambdaunet-dwi":
                choices.insert(0, ("", label + _(", the default")))
            else:
                choices.append((folder.name, label))
        return choices

    @classmethod
    def bundledModelPackageDir(cls, name: str, modelsDir: Optional[Path] = None) -> Optional[str]:
        """The folder of the bundled package ``name`` ("" = the default: None, which the library
        resolves itself); ValueError naming the package when it is not bundled."""
        if not name:
            return None
        folder = Path(modelsDir or cls.bundledModelsDir()) / name
        if not (folder / "manifest.json").is_file():
            raise ValueError(_("the model package {name!r} is not installed with this extension ({folder})").format(name=name, folder=folder))
        return str(folder)

    @staticmethod
    def availableDevices() -> list[tuple[str, str]]:
        """(device, label) choices for the device selector, saying what was found."""
        choices = [("cpu", _("CPU"))]
        try:
            import torch
        except ImportError:
            return [("auto", _("Auto (PyTorch not installed yet)"))] + choices
        found = []
        for index in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):
            name = torch.cuda.get_device_name(index)
            choices.append((f"cuda:{index}", _("GPU {index}: {name}").format(index=index, name=name)))
            found.append(name)
        backend = getattr(torch.backends, "mps", None)
        if backend is not None and backend.is_available():
            choices.append(("mps", _("Apple GPU (MPS)")))
            found.append("Apple GPU")
        auto = _("Auto: {device}").format(device=found[0] if found else _("CPU (no GPU found)"))
        return [("auto", auto)] + choices


def volumeBesideAi(currentMl, predictedMl) -> str:
    """ "12.30 mL", or "12.30 mL (AI: 14.00 mL)" once the segment was edited; "n/a" when unknown."""
    if currentMl is None:
        return _("n/a")
    text = _("{volume:.2f} mL").format(volume=currentMl)
    if predictedMl is not None and abs(float(predictedMl) - float(currentMl)) > 1e-9:
        text += " " + _("(AI: {volume:.2f} mL)").format(volume=float(predictedMl))
    return text


def lesionTableCells(row: dict) -> list[str]:
    """The widget's cells of one ``lesion_table`` row (as a dict): #, volume, core, confidence, side."""
    confidence = "n/a" if row.get("mean_probability") is None else f"{row['mean_probability']:.2f}"
    if row.get("low_confidence"):
        confidence += " " + _("(low)")
    core = "n/a" if row.get("adc_core_ml") is None else f"{row['adc_core_ml']:.2f}"
    return [str(row["label"]), f"{row['volume_ml']:.2f}", core, confidence, _(row["hemisphere"])]


def describeAdcUnit(code: str) -> str:
    """Readable form of ``Study.adc_unit_detected``."""
    return {
        "mm2/s": "ADC in mm²/s",
        "1e-3 mm2/s": "ADC in 10⁻³ mm²/s",
        "1e-6 mm2/s": "ADC in 10⁻⁶ mm²/s",
        "eadc": "eADC",
        "b0+b1000": "ADC from b0 and b1000",
    }.get(code, code)


#
# Synthetic study for the self-test
#


def makeSyntheticStudyNodes(scene=None, *, lesion: bool = True):
    """A small synthetic DWI + ADC (10⁻³ mm²/s) pair as volume nodes, on an oblique 0.9×0.9×6 mm grid.

    An ellipsoidal "brain" (DWI 500, ADC 0.8) inside a CSF rim (DWI 80, ADC 3.0), with an
    optional ellipsoidal infarct (DWI 1300, ADC 0.45) in one hemisphere. Returns
    (dwiNode, adcNode, lesion voxel count).
    """
    import numpy as np

    scene = scene or slicer.mrmlScene
    shape = (10, 96, 96)  # (k, j, i): 10 slices of 6 mm, 86 mm in plane
    k, j, i = np.meshgrid(*(np.arange(n, dtype=float) for n in shape), indexing="ij")
    centre = [(n - 1) / 2 for n in shape]
    radius = ((k - centre[0]) * 6.0 / 27.0) ** 2 + ((j - centre[1]) * 0.9 / 40.0) ** 2 + ((i - centre[2]) * 0.9 / 34.0) ** 2
    head, brain = radius <= 1.0, radius <= 0.8
    infarct = np.zeros(shape, bool)
    if lesion:
        infarct = ((k - 5) * 6.0 / 9.0) ** 2 + ((j - 40) * 0.9 / 9.0) ** 2 + ((i - 30) * 0.9 / 8.0) ** 2 <= 1.0
        infarct &= brain
    rng = np.random.default_rng(2021)
    dwi = np.where(head, 80.0, 0.0) + np.where(brain, 420.0, 0.0) + np.where(infarct, 800.0, 0.0)
    adc = np.where(head, 3.0, 0.0) - np.where(brain, 2.2, 0.0) - np.where(infarct, 0.35, 0.0)
    dwi = np.clip(dwi + rng.normal(0.0, 15.0, shape) * head, 0.0, None).astype(np.float32)
    adc = np.clip(adc + rng.normal(0.0, 0.05, shape) * head, 0.0, None).astype(np.float32)
    a, b = np.radians(15.0), np.radians(10.0)
    rotation = np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]]) @ np.array(
        [[1.0, 0.0, 0.0], [0.0, np.cos(b), -np.sin(b)], [0.0, np.sin(b), np.cos(b)]]
    )
    nodes = []
    for name, array in (("Synthetic DWI", dwi), ("Synthetic ADC", adc)):
        node = scene.AddNewNodeByClass("vtkMRMLScalarVolumeNode", name)
        node.SetSpacing(0.9, 0.9, 6.0)
        node.SetOrigin(-40.0, -45.0, -25.0)
        node.SetIJKToRASDirections(rotation.tolist())
        slicer.util.updateVolumeFromArray(node, array)
        node.CreateDefaultDisplayNodes()
        nodes.append(node)
    return nodes[0], nodes[1], int(infarct.sum())


#
# LambdaSegmentTest
#


class LambdaSegmentTest(ScriptedLoadableModuleTest):  # noqa: F405
    """Self-test: segment a synthetic study with the bundled model and check the result in the scene."""

    #: Model package folder for the test; None = the bundled model.
    modelPackageDir: str | None = None

    def setUp(self) -> None:
        slicer.mrmlScene.Clear()

    def runTest(self) -> None:
        self.setUp()
        self.test_SegmentStroke1()

    def test_SegmentStroke1(self) -> None:
        import numpy as np

        from LambdaSegmentLib.slicer_bridge import segment_mask_on_grid, volume_from_node

        self.delayDisplay("Building a synthetic DWI/ADC study")
        dwiNode, adcNode, lesionVoxels = makeSyntheticStudyNodes()
        logic = LambdaSegmentLogic()
        logic.modelPackageDir = self.modelPackageDir
        self.delayDisplay("Segment stroke")
        segmentationNode, volumeMl = logic.segmentStroke(dwiNode, adcNode, adcKind="auto", device="auto")

        self.assertEqual(segmentationNode.GetName(), "Synthetic DWI infarct")
        segment = segmentationNode.GetSegmentation().GetSegment(SEGMENT_ID)
        self.assertIsNotNone(segment)
        self.assertEqual(segment.GetName(), "Infarct")
        self.assertIn("SCT^55641003^Infarct", segment.GetTerminology())
        dwi = volume_from_node(dwiNode)
        mask = segment_mask_on_grid(segmentationNode, SEGMENT_ID, dwiNode)
        self.assertEqual(mask.size_ijk, dwi.size_ijk)
        self.assertTrue(np.allclose(mask.ijk_to_lps_matrix(), dwi.ijk_to_lps_matrix()))
        voxelMl = float(np.prod(dwi.spacing_mm)) / 1000.0
        self.assertAlmostEqual(volumeMl, int(mask.array.sum()) * voxelMl, places=9)
        run = json.loads(segmentationNode.GetAttribute(RUN_ATTRIBUTE))
        self.assertEqual(run["adc_unit_detected"], "1e-3 mm2/s")
        if "UNTRAINED" in str(run["model"].get("training_data", "")).upper():
            self.delayDisplay("Untrained model package: plausibility of the volume not checked")
        else:
            lesionMl = lesionVoxels * voxelMl  # a trained model finds the bright, low-ADC infarct
            self.assertGreater(volumeMl, 0.3 * lesionMl)
            self.assertLess(volumeMl, 3.0 * lesionMl)
        self.delayDisplay("Test passed")
