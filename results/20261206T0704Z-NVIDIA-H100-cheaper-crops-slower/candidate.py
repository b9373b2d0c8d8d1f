"""The candidate (resize_candidate.py: starvation/resize.py as main held it at 3567711, before it went back),
loaded as a module of its own beside main's starvation.resize. As a script, train.py with it in decode_batch.
usage: python candidate.py ARGS... (train.py's)"""
import importlib.util
import sys
from pathlib import Path

spec = importlib.util.spec_from_file_location("resize_candidate", Path(__file__).with_name("resize_candidate.py"))
resize = importlib.util.module_from_spec(spec)
spec.loader.exec_module(resize)

if __name__ == "__main__":
    import train
    from starvation import decoders

    decoders.augmented, decoders.fit_all = resize.augmented, resize.fit_all
    sys.exit(train.guarded(lambda: train.main(train.parse_config(sys.argv[1:]))))
