#!/usr/bin/env bash
# Run every variant of train.py (or, with --study infer, infer.py), profile each under nsys, and
# tabulate the results.
#
# usage: ./run_all.sh [options] [-- extra train.py or infer.py flags, for every variant; a ceiling leaves
#        out, saying so, those that shape an input pipeline, such as --data-dir]
#
#   --variants LIST  comma-separated variants or groups, which the script defines (python train.py
#                    --list-variants lists them): study (default: the study's steps, then the pinned
#                    pool), beyond (faster compute, uint8, compile), photos (real JPEG photos, decoded on
#                    the CPU or the GPU), all. "ceiling" is the study's step on a batch already on the
#                    GPU; "ceiling-X" is variant X's.
#   --study NAME     train: the case study, train.py (default); infer: its sequel, device to host in
#                    batched inference, infer.py, whose group study is its every step and both ceilings
#                    ("ceiling": the forward with its outputs left on the GPU)
#   --repeat N       unprofiled runs per variant, which give the table's throughput (default: 2, each
#                    a process of its own, and a third when those two differ by more than 10%: the
#                    median of three then says which is typical; --study infer: 2 windows one after
#                    the other in one process, then output processing alone in it)
#   --steps N        measured steps per run (default: the scripts' windows, which close after 10 s, at
#                    20 to 100 steps; train.py's loader alone then takes half as many batches as its
#                    run 1 measured, and its profiled run as many steps up to 40; CPU run: 5)
#   --nsys-steps N   steps nsys records: the last N of the profiled run, after its warm-up and the
#                    steps before them, so that the trace shows the steady state (default: 10, at most
#                    --steps)
#   --no-loader      skip the loader alone of each variant (train.py --then-alone: next in run 1's
#                    process, on its workers; under --gpus, a --loader-only process of its own; with
#                    --study infer, output processing alone: infer.py --then-alone)
#   --workers N      DataLoader workers for the variants that use them, per rank (default: the preset's, 8)
#   --gpus N         one process per GPU: each run is `torchrun --standalone --nproc-per-node N`, DDP,
#                    and nsys writes one report per rank, VARIANT.rankK.nsys-rep (default: one process)
#   --out DIR        run folder (default: results/<UTC time>-<gpu>); never overwritten
#   --no-nsys        skip the profiled runs
#   --no-install     never pip install (nor fetch nsys); fail naming what is missing
#   --resume DIR     finish the run in DIR (interrupted, or cut by a time limit) with its own options:
#                    runs whose results are there are skipped. Takes no other option.
#   -h, --help       this text
#
# Without a GPU it says so and does a small CPU run (64x64 images, batch 8) that exercises every step,
# nsys included (--trace=nvtx,osrt over the whole run; fetched with tools/get_nsys.sh if it is missing).
# Each run logs to DIR/logs/ and prints its figure as it ends, with the time left. A failing variant is
# recorded and the others still run (a failed profile is tried once more first: nsys 2023.4 at times
# fails by itself on a loaded machine); the summary lists every failure and the exit status is 1.
# DIR/INCOMPLETE marks a run until it has finished: Ctrl-C stops (exit 130; the run under way gets
# SIGTERM, and is killed if it has not ended STOP_GRACE_S seconds later, 30 unless the environment sets it),
# and --resume DIR goes on from there. --gpus needs CUDA GPUs.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
failures=()
child=""
STOP_GRACE_S=${STOP_GRACE_S:-30}  # on Ctrl-C or SIGTERM, how long the run under way has to end before it is killed

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }
die() { echo "run_all: $*" >&2; exit 2; }
plan() {  # the options, the measurement policy and the records' reading, in Python (starvation/plan.py); torch-free
  PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" "${py:-python3}" -m starvation.plan "$@"
}
spawn() {  # a run, waited for in the background: bash runs a trap only once its foreground command ends, so a
  # signal would wait for the run; this way interrupted() runs at once and passes the signal on
  "$@" {to_plan}>&- {from_plan}<&- {console}>&- &
  child=$!
  local status=0
  wait "$child" || status=$?
  child=""
  return $status
}
quietly() { "$@" 2>/dev/null || true; }  # a marker or a log's tidying, which a full disk may refuse: never fatal

read_options() {  # study variants gpus out use_nsys install resume help, as plan.py checked them
  local settings key value
  settings=$(plan options "$@") || exit 2  # (it said why)
  while IFS='=' read -r key value; do printf -v "$key" '%s' "$value"; done <<< "$settings"
  [ "$help" = 0 ] || { usage; exit 0; }
  [[ $STOP_GRACE_S =~ ^[0-9]+$ ]] || die "STOP_GRACE_S is seconds, a whole number: got '$STOP_GRACE_S'"
  script=$study.py
}

# ---------------------------------------------------------------------------- checks

check_python() {
  if [ -z "${PYTHON:-}" ] && [ $install = 1 ]; then
    py=$("$here/tools/setup_env.sh")
  else
    py=${PYTHON:-python3}
    # the environment tools/setup_env.sh made, when there is one and no other was named
    [ -n "${PYTHON:-}" ] || [ ! -x "$here/.venv/bin/python" ] || py="$here/.venv/bin/python"
  fi
  local found status=0 missing
  if ! missing=$(plan missing); then
    [ $install = 1 ] || die "$py lacks $missing and --no-install forbids installing them" \
      "(pip install -r requirements.txt)"
    "$py" -m pip install -q -r "$here/requirements.txt"
  fi
  # every other fact the run needs, from one start-up of the study's script (importing torch takes seconds):
  # line 1: the GPUs torch sees; 2: the first one's name; 3: what env.json records of this Python and
  # machine; then the variants, its groups expanded; exit 2 names a bad variant list
  found=$("$py" "$here/$script" --facts "$variants") || status=$?
  [ $status = 0 ] || [ $status = 2 ] || die "$py could not start the run (exit $status; its error is above)"
  [ $status = 0 ] || die "${found#error: }"
  local lines
  mapfile -t lines <<< "$found"
  gpu_count=${lines[0]} gpu_name=${lines[1]} env_facts=${lines[2]} variant_list=("${lines[@]:3}")
}

check_gpu() {
  if [ "$gpu_count" -gt 0 ]; then
    gpu=1
  else
    gpu=0
    [ -z "$gpus" ] || die "--gpus $gpus needs CUDA GPUs, and torch sees none here: drop --gpus for the small CPU run"
    echo "run_all: no CUDA GPU visible: doing a small CPU run (64x64 images, batch 8, few steps)."
    echo "run_all: its figures say nothing about a GPU; it shows that every step and the profiles work."
  fi
  launch=("$py")
  if [ -n "$gpus" ]; then
    [ "$gpus" -le "$gpu_count" ] || die "--gpus $gpus: torch sees only $gpu_count GPU(s) here" \
      "(CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}); at most --gpus $gpu_count"
    # torchrun, as its module, so that it runs this same Python; it passes the environment on
    # (NCCL settings included) and stops every rank as soon as one fails
    launch=("$py" -m torch.distributed.run --standalone --nproc-per-node "$gpus")
  fi
}

check_nsys() {
  nsys=${NSYS:-}
  if [ -z "$nsys" ] && command -v nsys >/dev/null; then nsys=$(command -v nsys); fi
  local local_nsys="$here/tools/nsys/usr/lib/nsight-systems/bin/nsys"
  if [ -z "$nsys" ] && [ ! -x "$local_nsys" ] && [ $use_nsys = 1 ] && [ $install = 1 ]; then
    echo "run_all: nsys not found: fetching Debian's build into tools/nsys (tools/get_nsys.sh)"
    "$here/tools/get_nsys.sh" > "$here/tools/get_nsys.log" 2>&1 \
      || echo "run_all: tools/get_nsys.sh failed (see tools/get_nsys.log)"
  fi
  if [ -z "$nsys" ] && [ -x "$local_nsys" ]; then
    nsys=$local_nsys
    export LD_LIBRARY_PATH="$here/tools/nsys/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  if [ $use_nsys = 1 ] && [ -z "$nsys" ]; then
    echo "run_all: ************************************************************************"
    echo "run_all: nsys not found (not on PATH, not in \$NSYS, not in tools/nsys): NO PROFILES."
    echo "run_all: get it with tools/get_nsys.sh (Debian/Ubuntu) or NVIDIA's installer; see docs/profiling.md."
    [ $install = 1 ] || echo "run_all: (--no-install: not fetched)"
    echo "run_all: ************************************************************************"
    use_nsys=0
  fi
  if [ $use_nsys = 1 ]; then
    nsys_version=$("$nsys" --version | awk '{print $NF}')
    # the reports nsys stats writes, by this nsys's names for them (it exits 1 after listing them)
    reports=$("$nsys" stats --help-reports 2>&1 | plan reports "$gpu" || true)
  fi
}

# ---------------------------------------------------------------------------- the runs

fail() {  # variant, what, log
  failures+=("$1: $2 (log: $3)")
  printf '%s\t%s\t%s\n' "$1" "$2" "$3" 2>/dev/null >> "$out/failures.tsv" || echo "    (failures.tsv cannot be written)"
  echo "    FAILED: $2 (log: $3)"
}

last_bars() {  # nsys redraws its progress bars with carriage returns: a log keeps each bar's last state
  quietly sed -i 's/.*\r//' "$1"
}

profile() {  # variant, log, the script's flags: the run under nsys, then nsys stats and analyze.py --check on its
  # report (under --gpus, one report a rank); a failure is recorded here, by what failed
  local v=$1 log=$2 nsys_args=(profile --force-overwrite=true -o "$out/$v") wrap=() base bases=("$v")
  shift 2
  if [ -n "$gpus" ]; then
    # one nsys per rank, each with its own capture range: VARIANT.rank0.nsys-rep, VARIANT.rank1...
    nsys_args=(profile --force-overwrite=true -o "$out/$v.rank%q{RANK}")
    wrap=("${launch[@]}" --no-python)
    mapfile -t bases < <(seq -f "$v.rank%g" 0 $((gpus - 1)))
  fi
  if [ $gpu = 1 ]; then
    nsys_args+=(--capture-range=cudaProfilerApi --capture-range-end=stop --trace=cuda,nvtx,osrt)
  else
    nsys_args+=(--trace=nvtx,osrt)
  fi
  local attempt status said base missing
  for attempt in 1 2; do
    # (a report left by an earlier attempt, or by the run a --resume goes on from, would pass for this one's)
    for base in "${bases[@]}"; do rm -f "$out/$base.nsys-rep"; done
    # nsys starts the program with umask 0: the profiled run gets the user's back, so its files are not world-writable
    if TMPDIR=$nsys_tmp spawn "${wrap[@]}" "$nsys" "${nsys_args[@]}" sh -c "umask $(umask); exec \"\$@\"" sh \
      "$py" "$here/$script" "$@" > "$log" 2>&1; then
      missing=""
      for base in "${bases[@]}"; do [ -s "$out/$base.nsys-rep" ] || missing+=" $base.nsys-rep"; done
      [ -z "$missing" ] && break
      status=0 said="it wrote no report$missing"
    else
      status=$?
      said=$(grep -v '^[[:space:]]*$' "$log" 2>/dev/null | tail -n 1 | tr '\t' ' ') || true
    fi
    last_bars "$log"
    # the same flags have just run without nsys, so a first failure here is more likely nsys's own: 2023.4
    # at times fails by itself on a loaded machine, in words that vary (it loses its agent, for one), or exits
    # 0 with no report. The run is profiled once more, and the first attempt's log is kept beside the second's.
    if [ $attempt = 1 ]; then
      quietly mv "$log" "${log%.log}.first.log"
      echo "    nsys       exited $status (${said:-its log is empty}): profiling the run once more (log: ${log%.log}.first.log)"
      continue
    fi
    fail "$v" "nsys profile exited $status${said:+: $said}" "$log"
    return 1
  done
  last_bars "$log"
  for base in "${bases[@]}"; do
    TMPDIR=$nsys_tmp spawn "$nsys" stats --force-export=true --force-overwrite=true --report "$reports" --format csv -o "$out/$base" \
      "$out/$base.nsys-rep" > "$out/logs/$base.stats.log" 2>&1 \
      || { fail "$v" "nsys stats exited $? on $base" "$out/logs/$base.stats.log"; return 1; }
    last_bars "$out/logs/$base.stats.log"
    # an empty or partial report is a failure with a name, never a blank in the table
    PATH="$(dirname "$nsys"):$PATH" spawn "$py" "$here/analyze.py" --check "$out/$base.nsys-rep" \
      >> "$out/logs/$base.stats.log" 2>&1 \
      || { fail "$v" "$(tail -n 1 "$out/logs/$base.stats.log")" "$out/logs/$base.stats.log"; return 1; }
  done
}

run_plan() {  # the plan (starvation/plan.py: Schedule) names each run in turn; this runs it and answers its status
  local request kind v what log status plan_pid
  coproc PLAN { plan schedule "$out" "$gpu" "$use_nsys" "${variant_list[@]}" -- "${run_argv[@]}" {console}>&-; }
  plan_pid=$PLAN_PID
  # copies of the coprocess's pipes: bash closes its own as soon as the coprocess ends, its last lines unread
  exec {from_plan}<&"${PLAN[0]}" {to_plan}>&"${PLAN[1]}"
  while IFS=$'\t' read -r -u "$from_plan" -a request; do
    kind=${request[0]}
    case $kind in
      say) echo "${request[*]:1}"; continue ;;
      env) export "${request[1]}=${request[2]}"; continue ;;
    esac
    v=${request[1]} what=${request[2]} log=$out/${request[3]} status=0
    case $kind in
      run) spawn "${launch[@]}" "$here/$script" "${request[@]:4}" > "$log" 2>&1 || status=$? ;;
      py) spawn "$py" "$here/$script" "${request[@]:4}" > "$log" 2>&1 || status=$? ;;
      nsys) profile "$v" "$log" "${request[@]:4}" || status=$? ;;
    esac
    [ $status = 0 ] || [ $kind = nsys ] || fail "$v" "$what exited $status" "$log"
    echo $status >&"$to_plan"
  done
  exec {from_plan}<&- {to_plan}>&-
  wait "$plan_pid" || failures+=("starvation/plan.py exited $? (its error is above)")
}

# ---------------------------------------------------------------------------- main

interrupted() {  # exit status: 130 for Ctrl-C, 143 for SIGTERM; the run under way gets SIGTERM and ends first
  # the trap runs inside the run's call, whose output goes to the run's log: these lines are the user's
  exec >&"$console"
  echo
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null || true
    # bounded: a run whose shutdown hangs (it takes one signal, the rest only say it is stopping) must not
    # keep run_all.sh from ending; a killed train.py's workers die with it
    local tenths=0
    while kill -0 "$child" 2>/dev/null && [ $tenths -lt $((STOP_GRACE_S * 10)) ]; do
      sleep 0.1
      tenths=$((tenths + 1))
    done
    if kill -KILL "$child" 2>/dev/null; then
      echo "run_all: the run under way had not ended ${STOP_GRACE_S} s after SIGTERM: killed"
    fi
    wait "$child" 2>/dev/null || true
  fi
  if [ ! -s "$out/env.json" ]; then  # stopped while starting: nothing is recorded, so the folder goes
    rm -rf "$out"
    echo "run_all: interrupted before the run began: $out removed, so the same --out starts anew"
    exit "$1"
  fi
  echo "run_all: interrupted: $out is incomplete; ./run_all.sh --resume $out goes on from there"
  quietly mark "interrupted"
  exit "$1"
}

mark() {  # INCOMPLETE says how far the run is, until the very end, whatever stops it
  echo "$1 $(date -u +%FT%TZ)" 2>/dev/null > "$out/INCOMPLETE"
}

open_folder() {  # the run folder (new, or resumed), its lock, its INCOMPLETE marker and (new) env.json: all
  # written, or one line and exit 2, and a folder this run made is removed again
  [ -n "$resume" ] || plan make-folder "$out" || exit 2
  if ! command -v flock > /dev/null; then
    echo "run_all: warning: no flock here (util-linux): nothing stops a second run_all.sh on $out" >&2
  elif { exec 9> "$out/logs/run_all.lock"; } 2>/dev/null; then  # one run_all.sh per run folder: two would
    flock -n 9 || die "$out is in use by another run_all.sh (its lock: $out/logs/run_all.lock); wait for it to end"
  fi  # (a lock file that cannot be made: the marker that follows cannot either, and says why)
  # what the facts said (no second import of torch), and this run's own options
  plan start-folder "$out" $([ -n "$resume" ] && echo 0 || echo 1) "$env_facts" "${nsys_version:-}" "$gpu_name" \
    "${gpus:-1}" "$study" "${variant_list[@]}" -- "${run_argv[@]}" || exit 2
}

main() {
  run_argv=("$@")
  exec {console}>&1  # run_all.sh's own output, for interrupted(); no run inherits it
  read_options "$@"
  check_python
  check_gpu
  check_nsys
  if [ -z "$out" ]; then
    out="$here/results/$(date -u +%Y%m%dT%H%M%SZ)-$(tr -c 'A-Za-z0-9.\n-' '-' <<< "$gpu_name")${gpus:+-x$gpus}"
  fi
  if [ -n "$resume" ]; then
    local why
    why=$(plan resumable "$out" "$study" "${gpus:-1}" "$gpu_name" "${variant_list[@]}") || die "--resume $out: $why"
  fi
  open_folder
  if [ -n "$resume" ]; then
    rm -f "$out/failures.tsv"  # every failed run has left no result, so it runs again
    echo "run_all: resuming $out"
  fi
  trap 'interrupted 130' INT
  trap 'interrupted 143' TERM
  # nsys keeps its session lock and temporary reports under TMPDIR (else a world-writable /tmp/nvidia)
  nsys_tmp=$(mktemp -d "${TMPDIR:-/tmp}/run_all-nsys.XXXXXX")
  trap 'rm -rf "$nsys_tmp"' EXIT
  run_plan
  if [ $use_nsys = 1 ]; then
    echo "run_all: diagnosing the traces (analyze.py)"
    PATH="$(dirname "$nsys"):$PATH" "$py" "$here/analyze.py" "$out" > "$out/logs/analyze.log" 2>&1 \
      || fail analyze.py "exited $?" "$out/logs/analyze.log"
    cat "$out/logs/analyze.log"
  fi
  [ "$(dirname "$out")" != "$here/results" ] || quietly ln -sfn "$(basename "$out")" "$here/results/latest"
  # INCOMPLETE goes only once the table is written; compare.py reads "finishing" as a finished run
  quietly mark finishing
  if "$py" "$here/compare.py" "$out" > "$out/logs/compare.log" 2>&1; then rm -f "$out/INCOMPLETE"
  else
    local status=$? said
    said=$(tail -n 1 "$out/logs/compare.log" 2>/dev/null) || true
    failures+=("compare.py exited $status${said:+: ${said#compare.py: }} (log: $out/logs/compare.log)")
  fi
  trap - INT TERM
  rm -f "$out/logs/run_all.lock"  # (the run holds it open until it exits; an interrupted run keeps it for --resume)
  echo
  if [ ${#failures[@]} -gt 0 ]; then
    echo "run_all: ${#failures[@]} failure(s):"
    printf '  %s\n' "${failures[@]}"
    if [ -s "$out/results.md" ]; then echo "run_all: results (with gaps) in $out/results.md"
    else echo "run_all: no results.md: $out holds the records that were written"; fi
    exit 1
  fi
  echo "run_all: results in $out/results.md"
}

main "$@"
