"""train.py with DecodeAhead's knobs set. usage: tr.py PRIORITY SWITCH_S [train.py's arguments]"""
import runpy, sys
from starvation import photos
photos.DECODE_PRIORITY, photos.SWITCH_INTERVAL_S = int(sys.argv[1]), float(sys.argv[2])
sys.argv = ["train.py"] + sys.argv[3:]
runpy.run_path("train.py", run_name="__main__")
