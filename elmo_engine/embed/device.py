"""Where and in what precision an embedder runs: the device ("auto": CUDA when present, else
the CPU), whether this CPU offers a precision (bf16 only with bf16 units,
:func:`elmo_engine.runtime.cpu_bf16`), and the dtype of each precision's name. The CLI, the app's
workspace and :class:`~elmo_engine.embed.embedder.Embedder` decide with these alike."""
from __future__ import annotations

from typing import Optional

import torch

from elmo_engine.errors import InputError
# the CPU's precision rule lives in the torch-free runtime (the CLI checks it before torch loads)
from elmo_engine.runtime import check_cpu_precision

PRECISIONS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def pick_device(device: Optional[str] = None) -> torch.device:
    """``None``/"auto" → CUDA when available, else CPU."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError("CUDA was requested but no CUDA device is available")
    return dev


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "CPU"


__all__ = ["PRECISIONS", "check_cpu_precision", "device_name", "pick_device"]
