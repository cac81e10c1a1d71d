"""Import SGLang on a CPU torch: the workaround the pinned environment needs.

Kept apart from the adapter so tests can use it without the testing harness.
"""

from __future__ import annotations


def prepare_sglang_import() -> None:
    """Let ``import sglang`` run on a CPU torch with the pinned torchvision.

    ``import sglang`` reaches ``torchvision`` (through transformers' image
    processors); the pinned torchvision's compiled operators do not load
    with the CPU torch build, and its Python side then fails registering
    fake kernels for ``torchvision::nms``/``qnms``.  Declaring the two
    operator schemas first is enough: nothing here runs them.  Where they
    exist already (a torchvision whose compiled part loaded), this does nothing.
    """
    import importlib.util

    if importlib.util.find_spec("torchvision") is None:
        return
    import torch

    for op in ("nms", "qnms"):
        try:
            torch.library.define(f"torchvision::{op}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        except RuntimeError:
            pass  # already defined
