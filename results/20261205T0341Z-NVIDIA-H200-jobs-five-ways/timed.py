"""python3 .device/timed.py LABEL CMD...: run CMD, print LABEL, its wall time and the children's peak RSS."""
import resource, subprocess, sys, time
t0 = time.perf_counter()
rc = subprocess.run(sys.argv[2:]).returncode
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"{sys.argv[1]}: {time.perf_counter() - t0:.2f} s, peak RSS {rss:.0f} MB, exit {rc}", flush=True)
