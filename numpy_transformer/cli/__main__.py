"""`python -m numpy_transformer.cli …` is `numpy-transformer …`."""
import sys

from numpy_transformer.cli import main

if __name__ == "__main__":
    sys.exit(main())
