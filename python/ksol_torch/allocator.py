"""The CUDA caching allocator's settings for ksol's own PyTorch processes (the evaluation worker,
the Inductor path), applied before their first CUDA allocation. No PyTorch import here."""
import os
from importlib import metadata

# Problems whose tensors are gigabytes each (KernelBench's) hold a float64 reference, the case's
# inputs and the candidate's outputs at once; with fixed-size segments the allocator strands
# gigabytes between them and a GPU that has the room fails an allocation. Growable segments
# (PyTorch 2.1 and later: earlier ones refuse the option) let freed space be reused whatever its
# size. Eager, torch.compile and every candidate run under the same allocator.
SETTING = "expandable_segments:True"


def set_default(env=os.environ) -> bool:
    """Sets PYTORCH_CUDA_ALLOC_CONF to SETTING in `env` unless it is set already or the installed
    PyTorch is older than 2.1 (or its version cannot be read); True where it set it."""
    if "PYTORCH_CUDA_ALLOC_CONF" in env:
        return False
    try:
        major, minor = (int(p) for p in metadata.version("torch").split(".")[:2])
    except Exception:
        return False
    if (major, minor) < (2, 1):
        return False
    env["PYTORCH_CUDA_ALLOC_CONF"] = SETTING
    return True
