"""`numpy-transformer` under mpiexec with the workers reporting their processor time every
millisecond instead of every ALIVE_SECONDS (tests/test_mpi.py), so that reports are still in
flight when rank 0 ends MPI:

    mpiexec -n P python tests/mpi_reporting_often.py numpy-transformer-arguments…"""
import sys

from numpy_transformer.cli import main
from numpy_transformer.training import mpi

mpi.ALIVE_SECONDS = 0.001
sys.exit(main(sys.argv[1:]))
