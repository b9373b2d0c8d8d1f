"""
How a photo is decoded: on the CPU (in the workers, or in the resized copy's builders), and a batch of
JPEG files' bytes on the device (torchvision's batched nvjpeg decoder, nvjpeg's own to JPEG's planes,
TorchCodec's, or nvImageCodec's hardware engines).

Every file passes one guard, whichever decoder reads it: its header is read first (starvation/folder.py: a
file whose header claims more than twice --max-image-pixels is refused before anything is allocated for it),
and a stream cut short or that the decoder calls corrupt stops the run naming the file (or, with
--skip-bad-images, is skipped). libjpeg only warns on fd 2 about some damage, and torchvision returns an image
anyway: decoder_warnings reads fd 2, so that the guard can name the file.
"""
import contextlib
import importlib.util
import io
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable, NamedTuple

import torch
import torchvision.transforms.v2.functional as TF
from torchvision.io import ImageReadMode, decode_jpeg

from starvation.folder import MAX_PIXELS, BadImage, Header, pil, read_checked, shown
from starvation.nvjpeg import Planes, YuvDecoder
from starvation.resize import augmented, crop_boxes, cut, fit, fit_all, from_planes

_captured = (None, None)  # (pid, file): where fd 2 points while this process decodes a file


@contextlib.contextmanager
def decoder_warnings():
    """What the C decoder prints on fd 2 while it decodes, in the list yielded (one string, after the block).
    libjpeg warns, as in 'Corrupt JPEG data: premature end of data segment', and torchvision prints it and
    returns an image anyway, naming no file: the guard reads the warning, so that the file can be named."""
    global _captured
    if _captured[0] != os.getpid():  # one temporary file per process: a forked worker makes its own
        _captured = (os.getpid(), tempfile.TemporaryFile())
    capture = _captured[1]
    capture.seek(0)
    capture.truncate()
    sys.stderr.flush()
    saved, said = os.dup(2), []
    os.dup2(capture.fileno(), 2)
    try:
        yield said
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        capture.seek(0)
        text = capture.read().decode(errors="replace").strip()
        if text and "JPEG" not in text:  # another thread's line, not the decoder's: it goes where it was going
            sys.stderr.write(text + "\n")
        said.append(text if "JPEG" in text else "")


def read_jpeg(path: Path, max_pixels: int) -> torch.Tensor:
    """A file's checked bytes (read_checked) as a 1-D uint8 tensor, as the decoders take them."""
    return torch.frombuffer(bytearray(read_checked(path, max_pixels)[0]), dtype=torch.uint8)


def decode_scaled(data: bytes, path: Path, header: Header, size: int) -> torch.Tensor:
    """A large JPEG decoded by PIL at a fraction of its size (libjpeg's DCT-domain scaling, `draft`: 1/2, 1/4
    or 1/8, as long as the shorter side stays at least `size`), to uint8 RGB: a camera's file costs a fraction
    of its full decode. libjpeg's warnings are silent here, so the guard is the header's end-marker check and
    a decode that raises on a stream that ends early."""
    Image = pil()
    scale = size / min(header.height, header.width)
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.draft("RGB" if header.components == 3 else im.mode,
                     (max(1, int(header.width * scale + 1)), max(1, int(header.height * scale + 1))))
            return TF.pil_to_tensor(im.convert("RGB"))
    except (OSError, ValueError, SyntaxError) as e:
        raise BadImage(f"{shown(path)}: does not decode as a JPEG ({str(e).splitlines()[0] if str(e) else e})") \
            from None


def decode_other(data: bytes, path: Path) -> torch.Tensor:
    """A PNG, WebP or BMP file decoded by PIL to uint8 RGB (transparency dropped, as ImageFolder's loader does)."""
    Image = pil()
    try:
        with Image.open(io.BytesIO(data)) as im:
            return TF.pil_to_tensor(im.convert("RGB"))
    except (OSError, ValueError, SyntaxError) as e:
        raise BadImage(f"{shown(path)}: does not decode ({str(e).splitlines()[0] if str(e) else e})") from None


def decode_whole(data: torch.Tensor, path: Path) -> torch.Tensor:
    """A file's bytes decoded on the CPU to uint8 RGB (3, H, W); BadImage, naming the file, if the decoder
    fails or only warns (decoder_warnings)."""
    with decoder_warnings() as said:
        try:
            image = decode_jpeg(data, mode=ImageReadMode.RGB)
        except RuntimeError as e:  # torchvision's decoder reports a corrupt or truncated file so
            raise BadImage(f"{shown(path)}: does not decode as a JPEG ({str(e).strip().splitlines()[0]})") from None
    if said[0]:
        raise BadImage(f"{shown(path)}: corrupt JPEG data (the decoder said: {said[0].splitlines()[0]})")
    return image


def decoded(data: bytes, path: Path, header: Header, size: int) -> torch.Tensor:
    """A checked file's bytes as uint8 RGB (3, H, W), on the CPU, by the decoder that fits it: PIL for another
    format, a JPEG whose shorter side is at least twice `size` scaled (decode_scaled), any other whole."""
    if header.format != "JPEG":
        return decode_other(data, path)
    if min(header.height, header.width) >= 2 * size:
        return decode_scaled(data, path, header, size)
    return decode_whole(torch.frombuffer(bytearray(data), dtype=torch.uint8), path)


def decode(path: Path, size: int, max_pixels: int = MAX_PIXELS, augment: bool = False) -> torch.Tensor:
    """One file as uint8 RGB (3, size, size), on the CPU (decoded, then fit; with augment, a random-resized crop
    of it, flipped on a coin's throw); BadImage if it does not decode whole."""
    data, header = read_checked(path, max_pixels)
    if not augment:
        return fit(decoded(data, path, header, size), size)
    # the crop is chosen first, so that the file is decoded only as large as it needs: the crop's shorter side (in
    # the file's pixels, `short`) at least size
    crop = crop_boxes([(header.height, header.width)])[0]
    short = min(crop[2] * header.height, crop[3] * header.width)
    scaled_to = math.ceil(size * min(header.height, header.width) / max(1.0, short))
    return cut(decoded(data, path, header, scaled_to), crop, size)


def installed(module: str) -> bool:
    """Whether a package is installed (found, not imported: nvImageCodec's and TorchCodec's load CUDA libraries)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # no such namespace package at all
        return False


def before_nvjpeg_writes(device: torch.device) -> None:
    """Wait until the current stream has done what it still reads. nvjpeg writes its images when it is called,
    not in this stream's order (its hardware engines; torchvision's decoder, from a stream of its own), into
    memory that the caching allocator hands out on this stream, maybe while a kernel queued on it still reads
    that memory. Called before torchvision's decoder and TorchCodec's (0.16 does not wait)."""
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()  # note: a CPU-GPU sync point


def torchcodec_decoder():
    """TorchCodec's batched JPEG decoder (nvjpeg: the hardware engines where the GPU has them), which decodes on
    the current stream. It turns a photo upright by its EXIF orientation, as torchvision's decoder here does
    not. Returns decode(list of 1-D uint8 tensors, device) -> list of CHW images."""
    from torchcodec.decoders import decode_jpeg as batch_decode

    def decode(encoded: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
        before_nvjpeg_writes(device)  # (its call waits for the stream anyway before it returns)
        return batch_decode(list(encoded), mode="RGB", device=device)
    return decode


def planes_decoder():
    """nvjpeg's batched decode to each file's own planes (Y, Cb, Cr: starvation/nvjpeg.py), on the hardware
    engines where the GPU has them, with no colour conversion on the SMs: decode_batch fits or cuts the planes,
    then converts the colours at the training size (resize.from_planes). Returns decode(list of 1-D uint8
    tensors, device) -> Planes."""
    decoder = YuvDecoder()

    def decode(encoded: list[torch.Tensor], device: torch.device) -> Planes:
        before_nvjpeg_writes(device)
        return decoder(encoded, device)
    decode.calls = decoder.calls  # (its own calls' times, for the decoding thread's record)
    return decode


def hardware_decoder():
    """nvImageCodec's batched decoder: the GPU's hardware JPEG engines (nvjpeg's hardware backend: A100, H100,
    H200 and later), which leave the SMs to the step, and its CUDA decoder for a file they do not take.
    Returns decode(list of 1-D uint8 tensors, device) -> list of CHW images, None for a file it refused."""
    with decoder_warnings() as said:  # its start-up says on fd 2 which of its codecs' libraries are missing
        from nvidia import nvimgcodec
        decoder = nvimgcodec.Decoder(backends=[nvimgcodec.Backend(nvimgcodec.BackendKind.HW_GPU_ONLY),
                                               nvimgcodec.Backend(nvimgcodec.BackendKind.GPU_ONLY)])
    for line in said[0].splitlines():  # JPEG 2000 and TIFF, which this never reads, go unsaid
        if not any(other in line.lower() for other in ("jpeg2k", "jpeg2000", "tiff")):
            sys.stderr.write(line + "\n")
    params = nvimgcodec.DecodeParams(color_spec=nvimgcodec.ColorSpec.SRGB, apply_exif_orientation=False)

    def decode(encoded: list[torch.Tensor], device: torch.device) -> list:
        stream = getattr(torch.get_device_module(device.type).current_stream(), "cuda_stream", None)
        return [None if m is None else torch.as_tensor(m, device=device).permute(2, 0, 1)
                for m in decoder.decode([nvimgcodec.CodeStream(t.numpy()) for t in encoded], params=params,
                                        cuda_stream=stream or 0)]
    return decode


class GpuDecoder(NamedTuple):
    """A --gpu-decoder choice: the package it needs, its module, how to install it (nothing: the project's own
    requirements hold it), and what makes its decoder for decode_batch (None: torchvision's own)."""
    package: str
    module: str
    install: str
    make: Callable


GPU_DECODERS = {"torchvision": GpuDecoder("torchvision", "torchvision", "", lambda: None),
                "nvjpeg": GpuDecoder("Triton", "triton", "pip install triton", planes_decoder),
                "torchcodec": GpuDecoder("TorchCodec", "torchcodec", "pip install torchcodec", torchcodec_decoder),
                "nvimgcodec": GpuDecoder("nvImageCodec", "nvidia.nvimgcodec",
                                         "pip install nvidia-nvimgcodec-cu13 nvidia-nvjpeg", hardware_decoder)}


def decode_batch(encoded: list[torch.Tensor], size: int, device: torch.device,
                 decoder=None, augment: bool = False) -> tuple[torch.Tensor, list]:
    """A batch of JPEG files' bytes (1-D uint8 tensors on the CPU) decoded on the device, on the current
    stream, to uint8 RGB (k, 3, size, size), fitted or with augment cropped at random (resize.augmented):
    by `decoder` (planes_decoder(), torchcodec_decoder() or hardware_decoder()) where given, else by
    torchvision (nvjpeg's batched decode, which torchvision asks of the GPU's hardware engines where it has
    them; a file they do not take goes to nvjpeg's CUDA decoder, one at a time); a file the decoder refuses goes
    to torchvision's, and so does a batch it fails on. Also returns the images as decoded, which the caller
    keeps until the stream is past its reads of them. BadImage names which sample of the batch does not decode
    (the workers read bytes only, so no file name is at hand here)."""
    if not encoded:  # the workers decoded the whole batch
        return torch.empty((0, 3, size, size), dtype=torch.uint8, device=device), []
    images = [None] * len(encoded)
    if decoder is not None:
        try:
            images = decoder(encoded, device)
        except RuntimeError:  # a file it cannot decode, in the batch: torchvision's decoder, below, names it
            images = [None] * len(encoded)
        if isinstance(images, Planes):
            return from_planes(images.flat, images.planes, size, augment), [images.flat]
    left = [j for j, m in enumerate(images) if m is None]
    if left:
        before_nvjpeg_writes(device)
    try:
        for j, m in zip(left, decode_jpeg([encoded[j] for j in left], mode=ImageReadMode.RGB, device=device)
                        if left else []):
            images[j] = m
    except RuntimeError as e:
        for j in left:  # find it: each on the CPU, whose decoder says which
            try:
                decode_jpeg(encoded[j], mode=ImageReadMode.RGB)
            except RuntimeError:
                raise BadImage(f"sample {j} of a batch does not decode as a JPEG on the {device.type} ("
                               f"{str(e).strip().splitlines()[0]}); decoding on the CPU names the file") from None
        raise
    return (augmented(images, size) if augment else fit_all(images, size)), images
