"""Fixtures for the Slicer-module tests; see ``lambdasegment_mrml`` for what is real and what is stood in."""

from lambdasegment_mrml import lambda_segment_module, mrml  # noqa: F401  (pytest fixtures)
