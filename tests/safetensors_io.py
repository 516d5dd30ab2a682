"""The .safetensors format, read and written by the Python tests (one copy, imported from
every test folder: sys.path gets tests/).

Layout: u64 little-endian header length, a JSON header {name: {"dtype", "shape",
"data_offsets": [begin, end]}, "__metadata__"?: {...}} padded with spaces to 8 bytes, then
the data area the offsets point into, the tensors back to back, little-endian.

    write_safetensors(path, tensors, dtype="F32")   torch tensors or numpy arrays
    read_header(data) -> (header, base)             the tensors' entries; data[base + begin]
    read_safetensors(path) -> {name: float32 ndarray}   F32, F16 and BF16 (exactly)
"""
import json
from pathlib import Path

import numpy as np

NP_DTYPE = {"F32": "<f4", "F16": "<f2"}


def write_safetensors(path, tensors, dtype="F32"):
    """Write tensors {name: torch tensor or numpy array} as dtype (F32, F16, BF16; BF16
    needs torch tensors), with timm's {"format": "pt"} metadata."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        if isinstance(t, np.ndarray):
            if dtype == "BF16":
                raise ValueError(f"{name}: BF16 from a numpy array (numpy has no bfloat16)")
            raw = np.ascontiguousarray(t, dtype=NP_DTYPE[dtype]).tobytes()
            shape = list(t.shape)
        else:
            import torch
            tdt = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[dtype]
            t = t.to(tdt).contiguous()
            # bfloat16 has no numpy dtype: take the raw 16-bit words
            raw = (t.view(torch.int16) if dtype == "BF16" else t).numpy().astype(
                "<i2" if dtype == "BF16" else NP_DTYPE[dtype]).tobytes()
            shape = list(t.shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    Path(path).write_bytes(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def read_header(data):
    """(header without "__metadata__", base): tensor name's bytes are
    data[base + begin : base + end] for its data_offsets [begin, end]."""
    n = int.from_bytes(bytes(data[:8]), "little")
    header = json.loads(bytes(data[8:8 + n]))
    header.pop("__metadata__", None)
    return header, 8 + n


def read_safetensors(path):
    """{name: float32 ndarray of its shape}; F16 and BF16 are upcast exactly (both are
    subsets of float32). Another dtype: ValueError naming the file and the tensor."""
    data = Path(path).read_bytes()
    header, base = read_header(data)
    out = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        buf = data[base + begin:base + end]
        if t["dtype"] in NP_DTYPE:
            a = np.frombuffer(buf, NP_DTYPE[t["dtype"]]).astype(np.float32)
        elif t["dtype"] == "BF16":
            # bfloat16 is the top half of a float32: shift the bits into place
            a = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: tensor {name}: dtype {t['dtype']} not supported")
        out[name] = a.reshape(t["shape"]).copy()
    return out
