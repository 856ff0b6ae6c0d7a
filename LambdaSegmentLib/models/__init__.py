"""Segmentation models, reachable by name.

``create_model(name, **config)`` builds one; ``available_models()`` lists them. Every
model maps (batch, channels, slices, height, width) to logits (batch, 1, slices, height, width).
"""

from . import attention_unet, lambda_unet, transunet, unet, unet_3d  # noqa: F401  (registration)
from .lambda_plus import LambdaPlus
from .lambda_unet import batch_norms
from .registry import available_models, create_model, register_model

__all__ = ["LambdaPlus", "available_models", "batch_norms", "create_model", "register_model"]
