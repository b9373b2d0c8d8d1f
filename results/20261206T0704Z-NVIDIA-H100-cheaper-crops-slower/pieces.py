"""resize_pieces.py, its pieces named by PIECES (draws, pinned, pointers: a comma list), loaded as a module of its
own beside main's starvation.resize. As a script, train.py with its augmented in decode_batch.
usage: PIECES=draws python pieces.py ARGS... (train.py's)"""
import importlib.util
import sys
from pathlib import Path

spec = importlib.util.spec_from_file_location("resize_pieces", Path(__file__).with_name("resize_pieces.py"))
resize = importlib.util.module_from_spec(spec)
spec.loader.exec_module(resize)

if __name__ == "__main__":
    import train
    from starvation import decoders

    decoders.augmented = resize.augmented
    sys.exit(train.guarded(lambda: train.main(train.parse_config(sys.argv[1:]))))
