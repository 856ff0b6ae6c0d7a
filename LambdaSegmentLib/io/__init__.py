"""Images with their geometry: reading, checking, converting and writing."""

from .reading import read_volume
from .study import Study, load_study
from .volume import Volume
from .writing import write_mask, write_volume

__all__ = ["Study", "Volume", "load_study", "read_volume", "write_mask", "write_volume"]
