"""Encoded image bytes -> uint8 C×H×W tensor: every decoder, behind one contract.

Import rule: labkit.decode may import labkit.core, nothing else.

The layers run core -> decode -> storage -> datasets -> samplers -> collate -> workers -> device ->
distributed, and each imports only those to its left. measure reads every layer; diagnose reads every layer
and measure; course and tools may use everything; nothing imports course or tools.
"""

from labkit.core.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(__name__, {
    "DecodeError": "decoders",
    "DecompressionBombError": "decoders",
    "DECODERS": "registry",
    "DecoderInfo": "registry",
    "decoder_info": "registry",
    "decode_image": "registry",
    "get_decoder": "registry",
    "preferred_decoder": "registry",
    "decode_simplejpeg": "simplejpeg_decoder",
    "decode_pil": "decoders",
    "decode_pil_reduced": "decoders",
    "decode_torchvision": "decoders",
    "decode_torchcodec": "decoders",
    "torchcodec_available": "decoders",
    "decode_jpeg_batch": "decoders",
    "check_decodable": "decoders",
    "describe_failure": "decoders",
    "open_image": "decoders",
    "target_hw": "decoders",
    "psnr": "decoders",
    "RandomResizedCrop": "random_crop",
    "CenterCrop": "center_crop",
    "CropBox": "crop_box",
    "draw_box": "crop_box",
    "decode_box": "random_crop",
    "crop_resize_flip": "crop_box",
    "crops_in_decode": "registry",
    "NO_DECODE": "registry",
    "decoder_label": "registry",
    "exif_orientation": "jpeg_orientation",
})
