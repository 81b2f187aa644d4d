"""Encoded image bytes -> uint8 C×H×W tensor: every decoder, behind one contract.

Import rule: labkit.decode may import labkit.core, nothing else.

The order of the layers, and what each may import, is the package's own docstring (``labkit``).
"""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "DecodeError": "backends",
    "DecompressionBombError": "backends",
    "DECODERS": "registry",
    "DecoderInfo": "registry",
    "decoder_info": "registry",
    "decode_image": "registry",
    "get_decoder": "registry",
    "preferred_decoder": "registry",
    "decode_simplejpeg": "simplejpeg_decoder",
    "decode_pil": "backends",
    "decode_pil_reduced": "backends",
    "decode_torchvision": "backends",
    "decode_torchcodec": "backends",
    "torchcodec_available": "backends",
    "decode_jpeg_batch": "backends",
    "check_decodable": "backends",
    "describe_failure": "backends",
    "open_image": "backends",
    "target_hw": "backends",
    "psnr": "backends",
    "RandomResizedCrop": "random_crop",
    "CenterCrop": "center_crop",
    "CropBox": "crop_box",
    "CropBoxes": "crop_box",
    "draw_boxes": "crop_box",
    "counter_uniforms": "crop_box",
    "decode_box": "random_crop",
    "crop_resize_flip": "crop_box",
    "crops_in_decode": "registry",
    "NO_DECODE": "registry",
    "decoder_label": "registry",
    "exif_orientation": "jpeg_orientation",
})
