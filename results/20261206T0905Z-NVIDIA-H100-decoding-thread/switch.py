"""Run a script (train.py, or the previous run folder's pieces.py) with the interpreter's switch interval set to
SWITCH seconds (Python's default is 0.005): how long a thread that wants the GIL waits before it asks the
holder to let go. The decoding thread releases the GIL in every torch call and must win it back from the loop's
threads each time.
usage: SWITCH=0.0005 python switch.py SCRIPT ARGS..."""
import os
import runpy
import sys

sys.setswitchinterval(float(os.environ.get("SWITCH", "0.005")))
script, sys.argv = sys.argv[1], sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # (as running the script itself would)
runpy.run_path(script, run_name="__main__")
