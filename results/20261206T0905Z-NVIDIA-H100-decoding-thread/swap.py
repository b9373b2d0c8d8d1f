"""train.py with --augment's crops from another copy of starvation/resize.py, the file $RESIZE names (run.sh
part 2 writes the three-channel kernel's there, main's resize with channels.patch applied).
usage: RESIZE=/tmp/resize_channels.py python swap.py ARGS... (train.py's)"""
import importlib.util
import os
import sys


def resize_from_file():
    spec = importlib.util.spec_from_file_location("resize_swapped", os.environ["RESIZE"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    import train
    from starvation import decoders

    decoders.augmented = resize_from_file().augmented
    sys.exit(train.guarded(lambda: train.main(train.parse_config(sys.argv[1:]))))
