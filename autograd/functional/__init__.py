"""Neural-network functions in their plain forms: the formula in each docstring, and composite
versions built from the engine's primitives (autograd derives their gradients) or small
primitives whose VJP is written out. By default the functions run the optimised forms of
autograd/engine_room; inside `autograd.plain()` they run the plain forms.

    import autograd.functional as F
"""
from autograd.functional.softmax import (softmax, log_softmax, softmax_composite, log_softmax_composite,
                                         softmax_jacobian)
from autograd.functional.segment_softmax import segment_softmax, segment_softmax_composite
from autograd.functional.activations import relu, gelu, sigmoid, leaky_relu, elu
from autograd.functional.linear import linear, linear_composite
from autograd.functional.layer_norm import layer_norm, layer_norm_composite
from autograd.functional.losses import cross_entropy
from autograd.functional.dropout import dropout
from autograd.functional.embedding import embedding

__all__ = ["softmax", "log_softmax", "softmax_composite", "log_softmax_composite", "softmax_jacobian", "segment_softmax",
           "segment_softmax_composite", "relu", "gelu", "sigmoid", "leaky_relu", "elu", "linear",
           "linear_composite", "layer_norm", "layer_norm_composite", "cross_entropy", "dropout", "embedding"]
