"""train.py with the interpreter's thread switch interval at SWITCH_S seconds (default 0.0005; Python's own is
0.005). The decoding thread and the loop that launches the step share one interpreter lock: a thread that wants it
back waits up to the interval while the other runs Python. Usage: SWITCH_S=0.0005 python3 switch.py ARGS..."""
import os
import runpy
import sys

sys.setswitchinterval(float(os.environ.get("SWITCH_S", "0.0005")))
print(f"switch interval {sys.getswitchinterval()} s", file=sys.stderr)
sys.argv[0] = "train.py"
runpy.run_path("train.py", run_name="__main__")
