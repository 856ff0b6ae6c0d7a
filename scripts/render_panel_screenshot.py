"""Renders Resources/Screenshot.png from LambdaSegment/Resources/UI/LambdaSegment.ui with plain Qt, offscreen.

The Slicer-only widgets do not exist outside Slicer, so they are substituted before
loading: ``qMRMLWidget`` -> ``QWidget``, ``ctkCollapsibleButton`` -> ``QGroupBox`` (its text
as the title), ``qMRMLNodeComboBox`` -> ``QComboBox`` showing what an empty scene shows
(nothing, or the selector's "none" text). The combo boxes get the items the widget's
``setup()`` adds on a machine without a GPU, and the progress bar and Cancel button are
hidden, as ``setup()`` does. Everything else is the .ui file as Slicer loads it.

Needs PySide6 (not a project dependency); for example:
    python -m venv /tmp/qt && /tmp/qt/bin/pip install PySide6-Essentials
    QT_QPA_PLATFORM=offscreen /tmp/qt/bin/python scripts/render_panel_screenshot.py
"""

import os
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QBuffer, QByteArray, QIODevice  # noqa: E402
from PySide6.QtUiTools import QUiLoader  # noqa: E402
from PySide6.QtWidgets import QApplication, QComboBox, QLabel, QProgressBar, QPushButton  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
UI_FILE = ROOT / "LambdaSegment" / "Resources" / "UI" / "LambdaSegment.ui"
OUTPUT = ROOT / "Resources" / "Screenshot.png"
SUBSTITUTES = {"qMRMLWidget": "QWidget", "ctkCollapsibleButton": "QGroupBox", "qMRMLNodeComboBox": "QComboBox"}
SLICER_ONLY_PROPERTIES = {"nodeTypes", "showChildNodeTypes", "addEnabled", "removeEnabled", "noneEnabled", "noneDisplay",
                          "collapsed", "SlicerParameterName"}
# What LambdaSegmentWidget.setup() puts in the combo boxes (device: no GPU found).
COMBO_ITEMS = {
    "adcKindComboBox": ["Auto-detect", "ADC", "eADC (exp(−b·ADC))"],
    "adcUnitComboBox": ["Auto-detect", "mm²/s", "10⁻³ mm²/s", "10⁻⁶ mm²/s"],
    "deviceComboBox": ["Auto: CPU (no GPU found)", "CPU"],
}


def substituted_ui() -> tuple[bytes, dict[str, str]]:
    tree = ElementTree.parse(UI_FILE)
    none_texts = {}
    for widget in tree.iter("widget"):
        original = widget.get("class")
        if original == "qMRMLNodeComboBox":
            for prop in widget.findall("property"):
                if prop.get("name") == "noneDisplay":
                    none_texts[widget.get("name")] = prop.find("string").text
        if original == "ctkCollapsibleButton":
            for prop in widget.findall("property"):
                if prop.get("name") == "text":
                    prop.set("name", "title")
        for prop in list(widget.findall("property")):
            if prop.get("name") in SLICER_ONLY_PROPERTIES:
                widget.remove(prop)
        widget.set("class", SUBSTITUTES.get(original, original))
    root = tree.getroot()
    for element in (root.find("customwidgets"), root.find("connections")):
        if element is not None:
            root.remove(element)
    return ElementTree.tostring(root, encoding="utf-8"), none_texts


def main() -> int:
    application = QApplication(sys.argv)
    data, none_texts = substituted_ui()
    buffer = QBuffer()
    buffer.setData(QByteArray(data))
    buffer.open(QIODevice.ReadOnly)
    panel = QUiLoader().load(buffer)
    if panel is None:
        raise SystemExit("the .ui file could not be loaded")
    for name, text in none_texts.items():
        panel.findChild(QComboBox, name).addItem(text)
    for name, items in COMBO_ITEMS.items():
        panel.findChild(QComboBox, name).addItems(items)
    panel.findChild(QProgressBar, "progressBar").hide()
    panel.findChild(QPushButton, "cancelButton").hide()
    panel.findChild(QLabel, "inputStatusLabel").setText("Select the DWI (b≈1000 trace).")  # describeInputs() on an empty scene
    panel.findChild(QLabel, "inputStatusLabel").setStyleSheet("color: #b00020;")
    panel.resize(420, 620)
    panel.show()
    application.processEvents()
    if not panel.grab().save(str(OUTPUT)):
        raise SystemExit(f"could not write {OUTPUT}")
    print(OUTPUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
