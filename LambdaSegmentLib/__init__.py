"""LambdaSegmentLib: LambdaUNet stroke-lesion segmentation of diffusion-weighted MRI.

Research use only; not a medical device.
"""

__version__ = "0.1.0"
