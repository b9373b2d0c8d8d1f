"""The candidate's starvation/resize.py, loaded as a module of its own (main's stays starvation.resize): run.sh
makes it in /tmp/cand by applying candidate.patch to a copy of the tree. Also, as a script, train.py with the
candidate's resize in decode_batch: the B of an A/B in one command.
usage: python cand.py ARGS... (train.py's)"""
import importlib.util
import sys

spec = importlib.util.spec_from_file_location("resize_cand", "/tmp/cand/starvation/resize.py")
resize = importlib.util.module_from_spec(spec)
spec.loader.exec_module(resize)

if __name__ == "__main__":
    import train
    from starvation import decoders

    decoders.augmented, decoders.fit_all = resize.augmented, resize.fit_all
    sys.exit(train.guarded(lambda: train.main(train.parse_config(sys.argv[1:]))))
