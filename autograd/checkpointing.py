"""Gradient checkpointing (architecture notes, §Memory and Efficiency): "Forward: store only a
subset of activations; backward: recompute the missing ones."

    y = checkpoint(fn, x, generators=[rng])

runs fn(x) without keeping its graph: only its inputs are saved. In backward, fn runs again
from the same inputs with the graph on, and the gradient flows through that graph into x and
into every parameter fn uses. Memory: fn's activations exist only while it is recomputed, one
checkpointed piece at a time; cost: fn's forward pass once more.

The recomputation must draw the same random numbers as the forward pass (dropout's masks):
`generators` are the numpy Generators fn draws from; their states are set back to those of the
forward pass for the recomputation and restored afterwards, so nothing else sees a difference
(`Module.generators()` lists a model's).

Every Tensor fn reads that is itself computed (not a parameter or other leaf) and needs a
gradient must be one of its `arguments`, not a variable fn closes over: the recomputation's
backward would otherwise run into the graph that computed it.
"""
from autograd.engine import Function, Tensor, is_grad_enabled, no_grad


def checkpoint(fn, *arguments, generators=()):
    """fn(*arguments), a Tensor, whose graph is rebuilt in backward instead of kept (see above).
    The Tensors among `arguments` are the op's inputs; the others (None, masks) go to fn as they
    are. At least one input must require grad when gradients are on: the gradients of fn's
    parameters reach them only through the recomputation that backward starts."""
    places = [i for i, argument in enumerate(arguments) if isinstance(argument, Tensor)]
    if is_grad_enabled() and not any(arguments[i].requires_grad for i in places):
        raise ValueError("checkpoint: no input requires grad, so backward would never recompute fn and its "
                         "parameters would get no gradient; pass a Tensor with requires_grad=True")

    def with_constants(*tensors):
        filled = list(arguments)
        for i, tensor in zip(places, tensors):
            filled[i] = tensor
        return fn(*filled)

    return Checkpoint.apply(*[arguments[i] for i in places], fn=with_constants, generators=tuple(generators))


class Checkpoint(Function):
    """Forward: fn on the input arrays under no_grad, keeping only the inputs and the generators'
    states. Backward: fn again on leaf copies of the inputs with the graph on, from the same
    states, then the graph's own backward from g; returns the copies' gradients."""

    def forward(self, *arrays, fn, generators):
        self.fn, self.generators = fn, generators
        self.states = [generator.bit_generator.state for generator in generators]
        self.save_for_backward(*arrays)
        with no_grad():
            out = fn(*[Tensor(array) for array in arrays])
        if not isinstance(out, Tensor):
            raise TypeError(f"checkpoint: fn must return a Tensor, got {type(out).__name__}")
        return out.data

    def backward(self, g):
        inputs = [Tensor(array, requires_grad=needed) for array, needed in zip(self.saved, self.needs_input_grad)]
        now = [generator.bit_generator.state for generator in self.generators]
        self._set_states(self.states)
        try:
            out = self.fn(*inputs)
        finally:
            self._set_states(now)
        if out.requires_grad:
            out.backward(g)
        return tuple(None if not needed else (x.grad if x.grad is not None else 0 * x.data)
                     for x, needed in zip(inputs, self.needs_input_grad))

    def _set_states(self, states):
        for generator, state in zip(self.generators, states):
            generator.bit_generator.state = state
