"""The machinery that train.py, infer.py, analyze.py and compare.py share; each module one concern."""
