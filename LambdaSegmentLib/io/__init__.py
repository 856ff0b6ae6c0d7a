"""Images with their geometry: reading, checking, converting and writing."""

from .volume import Volume

__all__ = ["Volume"]
