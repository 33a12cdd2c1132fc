"""What fits in this machine's memory: commands estimate the largest arrays a run will hold and
refuse, in one line, what cannot fit, before they allocate it (as `train` always did).

    machine_memory()                                   # bytes of physical memory, or None
    model_memory(config)                               # a model, its gradients and Adam's moments
    decoding_memory(config, rows, source_length, output_length)      # a greedy or beam search run
"""
import os

import numpy as np

from numpy_transformer.model import analytic_parameter_count

# the Python objects of one parameter array, whatever its size: the Tensor and the NumPy array
# headers of the weight, its gradient and Adam's moments, and their entries in the module's,
# the optimizer's and the archive's dicts (the weights of a model with very many thin layers
# take less than these)
ARRAY_OVERHEAD = 1024


def machine_memory():
    """This machine's physical memory in bytes, or None where the system does not say."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else None


def model_memory(config):
    """The bytes a model of `config` takes before its first batch: four arrays of the parameters'
    size (the weights, their gradients and Adam's two moments; when a checkpoint is loaded, the
    weights, the archive's copy of them and Adam's two moments), the Python objects around every
    parameter array (`ARRAY_OVERHEAD` each: 16 arrays per block, 10 more per cross-attention),
    and the sinusoidal table P (max_len, d_model) of each stack, built in float64
    (numpy_transformer.positional)."""
    parameters = 4 * analytic_parameter_count(config)["total"] * np.dtype(config.dtype).itemsize
    n_cross = config.n_decoder_layers if config.kind == "encoder-decoder" else 0
    arrays = 16 * (config.n_encoder_layers + config.n_decoder_layers) + 10 * n_cross
    return parameters + arrays * ARRAY_OVERHEAD + 2 * config.max_len * config.d_model * np.dtype(np.float64).itemsize


def decoding_memory(config, rows, source_length, output_length):
    """The bytes of the largest arrays of one decoding run (`numpy_transformer.decoding`) over
    `rows` = sentences × beams, with L decoder layers, d = d_model, n = source_length,
    T = output_length, V = tgt_vocab_size, per row:

        self-attention cache     2 L T d      keys and values of every step
        cross-attention          (2 L + 1) n d   the memory Z repeated per beam, its keys and values
        scores                   V (1 + 3 · 2)   log p in the model's dtype, three float64 copies
        hypotheses               6 T             token arrays (live, extended, finished), int64

    (the first three in units of the model's itemsize, the last of 8 bytes). A config without
    decoder layers or d_model (a stand-in model that has no cache) counts the last two only."""
    itemsize = np.dtype(getattr(config, "dtype", np.float32)).itemsize
    layers, d = getattr(config, "n_decoder_layers", 0), getattr(config, "d_model", 0)
    per_row = ((2 * layers * output_length + (2 * layers + 1) * source_length) * d + 7 * config.tgt_vocab_size) \
        * itemsize + 6 * output_length * 8
    return rows * per_row


def check_fits(needed, what, advice):
    """A ValueError when `needed` bytes are more than this machine's memory: "`what` would need
    … GiB, more than this machine's … GiB: `advice`"."""
    memory = machine_memory()
    if memory and needed > memory:
        raise ValueError(f"{what} would need {needed / 2**30:,.1f} GiB, more than this machine's "
                         f"{memory / 2**30:,.1f} GiB: {advice}")
