"""iolab: can this storage keep these GPUs busy, and which vendor does it best?"""

__version__ = "0.1.0"
