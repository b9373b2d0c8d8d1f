"""train.py with --augment's crops cut by torchvision, one image at a time, as before the crop kernel: the A of an
A/B in one command. usage: python .device49/crops_old.py ARGS... (train.py's)"""
import functools
import sys

import train
from starvation import decoders, resize

decoders.augmented = functools.partial(resize.augmented, kernel=False)
sys.exit(train.guarded(lambda: train.main(train.parse_config(sys.argv[1:]))))
