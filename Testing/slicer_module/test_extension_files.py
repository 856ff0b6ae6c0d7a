"""The extension's files agree with each other: CMake and .s4ext metadata, the .ui and the widget code.

Qt is not available outside Slicer, so the widget is checked statically here: every
``self.ui.<name>`` the widget uses exists in the .ui file, and every GUI-bound parameter
(``SlicerParameterName``) exists in the parameter node. The widget's behaviour is left to
the in-app self-test.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

from lambdasegment_mrml import REPO_ROOT

MODULE_DIR = REPO_ROOT / "LambdaSegment"
UI_FILE = MODULE_DIR / "Resources" / "UI" / "LambdaSegment.ui"


def _s4ext() -> dict[str, str]:
    fields = {}
    for line in (REPO_ROOT / "LambdaSegment.s4ext").read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition(" ")
        fields[key] = value.strip()
    return fields


def _cmake_extension_fields() -> dict[str, str]:
    text = (REPO_ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    return dict(re.findall(r'set\(EXTENSION_(\w+) "([^"]*)"\)', text))


def test_cmake_and_s4ext_describe_the_same_extension():
    s4ext, cmake = _s4ext(), _cmake_extension_fields()
    pairs = {
        "homepage": "HOMEPAGE",
        "category": "CATEGORY",
        "contributors": "CONTRIBUTORS",
        "description": "DESCRIPTION",
        "iconurl": "ICONURL",
        "screenshoturls": "SCREENSHOTURLS",
        "depends": "DEPENDS",
    }
    for s4ext_key, cmake_key in pairs.items():
        assert s4ext[s4ext_key] == cmake[cmake_key], s4ext_key
    assert s4ext["category"] == "Segmentation" and s4ext["depends"] == "PyTorch"
    assert "not a medical device" in s4ext["description"]


def test_the_icon_and_the_module_resources_exist():
    assert (REPO_ROOT / "Resources" / "LambdaSegment.png").is_file()
    assert _cmake_extension_fields()["ICONURL"].endswith("/main/Resources/LambdaSegment.png")
    module_cmake = (MODULE_DIR / "CMakeLists.txt").read_text(encoding="utf-8")
    for resource in re.findall(r"(Resources/\S+)", module_cmake):
        assert (MODULE_DIR / resource.replace("${MODULE_NAME}", "LambdaSegment")).is_file(), resource


def test_every_widget_the_code_uses_is_in_the_ui_file():
    names = {element.get("name") for element in ElementTree.parse(UI_FILE).iter("widget")}
    used = set(re.findall(r"self\.ui\.(\w+)", (MODULE_DIR / "LambdaSegment.py").read_text(encoding="utf-8")))
    assert used and used <= names, sorted(used - names)


def test_gui_bound_parameters_exist_in_the_parameter_node(lambda_segment_module):
    bound = {
        element.find("string").text
        for element in ElementTree.parse(UI_FILE).iter("property")
        if element.get("name") == "SlicerParameterName"
    }
    assert bound == {"dwiVolume", "adcVolume", "outputSegmentation", "showBrainMask"}
    assert bound <= set(lambda_segment_module.LambdaSegmentParameterNode.__annotations__)
