"""The resize before this run's change (resize_before.py: main's starvation/resize.py at f0c5e57, its crops by
the tiled kernel alone, a batch first copied into one buffer, the table sent from pageable memory, ten draws
of Python an image), loaded as a module of its own beside main's starvation.resize. As a script, train.py
with it in decode_batch: the A of an A/B in one command.
usage: python before.py ARGS... (train.py's)"""
import importlib.util
import sys
from pathlib import Path

spec = importlib.util.spec_from_file_location("resize_before", Path(__file__).with_name("resize_before.py"))
resize = importlib.util.module_from_spec(spec)
spec.loader.exec_module(resize)

if __name__ == "__main__":
    import train
    from starvation import decoders

    decoders.augmented, decoders.fit_all = resize.augmented, resize.fit_all
    sys.exit(train.guarded(lambda: train.main(train.parse_config(sys.argv[1:]))))
