"""Analysis of ridgeline HDF5 run files: reader, pure analysis functions, plots and exporters.

    from ridgeline_analysis import load
    run = load("results/ridgeline-123.h5")
"""
from .reader import Op, Run, SchemaError, Summary, load

__all__ = ["Op", "Run", "SchemaError", "Summary", "load"]
__version__ = "0.1.0"
