"""train.py with --augment's crops as before this change (crop_box drawn an image at a time, the kernel's loops
rows first): the A of an A/B in one command. usage: python .device49/aug_old.py ARGS... (train.py's)"""
import sys

sys.path.insert(0, ".device49")
import resize_old  # noqa: E402
import train  # noqa: E402
from starvation import decoders  # noqa: E402

decoders.augmented = resize_old.augmented
sys.exit(train.guarded(lambda: train.main(train.parse_config(sys.argv[1:]))))
