"""
The NVTX ranges the scripts write, and their colours: the study's ("Batch i" holds the others), then
part 2's. The scripts write them (profiling.Marker) and analyze.py reads them by these names.
"""
RANGES = {"Batch": "blue", "get batch": "red", "copy batch": "yellow", "Compute": "green",
          "copy output": "yellow", "process output": "red"}
