"""train.py with the crop kernel before this run folder's (main's starvation/resize.py at 68b30f0, written by
run.sh to $BEFORE): one program a channel, where the kernel after takes the three channels of an image in one.
usage: BEFORE=/tmp/resize_before.py python before.py ARGS... (train.py's)"""
import importlib.util
import os
import sys


def resize_before():
    spec = importlib.util.spec_from_file_location("resize_before", os.environ.get("BEFORE", "/tmp/resize_before.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    import train
    from starvation import decoders

    decoders.augmented = resize_before().augmented
    sys.exit(train.guarded(lambda: train.main(train.parse_config(sys.argv[1:]))))
