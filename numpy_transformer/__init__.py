"""numpy-transformer: the Transformer of "The Math behind Transformers", in NumPy, on the
`autograd` engine of this repository."""
__version__ = "0.1.0"
