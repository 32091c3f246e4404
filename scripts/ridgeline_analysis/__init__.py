"""Analysis of ridgeline HDF5 run and sweep files: reader, pure analysis functions, plots and
exporters.

    from ridgeline_analysis import load
    run = load("results/ridgeline-123.h5")
"""
from .reader import Op, Roofs, Run, SchemaError, Serving, Summary, Sweep, load
from . import tidy as _tidy  # registers the Run's *_dataframe() makers (reader.register_frames)

__all__ = ["Op", "Roofs", "Run", "SchemaError", "Serving", "Summary", "Sweep", "load"]
__version__ = "0.1.0"
