#!/usr/bin/env bash
# The reliability runs of the GPU tests on a Hopper machine: the GPU fuzz at one million cases,
# then compute-sanitizer's tools over every SM90 kernel of the `gpu-tests` preset (each kernel on
# one problem of its family's sweep: CUTLASS_RS_GPU_TESTS_QUICK=1), the quantizers, the staging
# copies, the numerics and thread tests and a short fuzz.
#
# Usage: tools/reliability.sh GPU_TEST_BINARY [TOOL...]
#   GPU_TEST_BINARY  the `gpu` test executable, built with
#                    CUTLASS_RS_KERNELS=gpu-tests cargo test -p cutlass-gemm --release \
#                      --features candle,weight-only --test gpu --no-run
#   TOOL             fuzz, memcheck, racecheck, synccheck, initcheck (default: all of them)
# Environment: CUTLASS_RS_TEST_SEED (default 20261126), CUTLASS_RS_GPU_FUZZ_CASES (the fuzz run's
# cases, default 1000000), LOG_DIR (default .). Each run writes LOG_DIR/TOOL.log and prints its
# summary lines; the exit status is 1 if any run failed.
#
# How each tool runs, and why:
# - memcheck, synccheck: one process over every test below.
# - initcheck: the same, with the staging copy-back kernel (`copy_back_kernel`) left out. It reads
#   the padded D that a GEMM's epilogue wrote by TMA stores, which initcheck does not record as
#   writes: `staged_d_after_register_and_tma_stores` shows 0 reports after a kernel that stores D
#   from registers and exactly m x n after one that stores it by TMA, with D exact both ways.
# - racecheck: one process per test, and the weight-only kernels one per process
#   (CUTLASS_RS_GPU_TESTS_KERNEL), because racecheck's host memory grows with every kernel it
#   checks and one process over all of them passes the machine's 128 GiB. The thread tests
#   (thousands of launches) are left out for the same reason; their kernels are checked by the
#   other tests.
set -u
gpu=${1:?usage: tools/reliability.sh GPU_TEST_BINARY [TOOL...]}
shift
tools=("$@")
[ ${#tools[@]} -eq 0 ] && tools=(fuzz memcheck racecheck synccheck initcheck)
logs=${LOG_DIR:-.}
export CUTLASS_RS_TEST_SEED=${CUTLASS_RS_TEST_SEED:-20261126}

# The tests the sanitizers run. Left out: the multi-GPU tests, the out-of-memory test (it holds
# the whole device), the large-problem tests (hours under a sanitizer), and
# a_captured_wait_on_an_outside_event_invalidates_the_capture, which makes CUDA fail on purpose
# (memcheck counts that as an API error).
tests=(every_built_kernel_by_name s8_to_s8 fp8_tensorwise_every fp8_blockwise_every fp8_any_shape
  fp8_overlapped fused_epilogues_on_every_kernel fp8_blockwise_with_bias unfused_pass
  every_grouped_kernel masked_groups a_list_of_problems weight_only_kernels_match
  quantizer_matches fp8_blockwise_is_bit_exact mx_formats_are_bit_exact nvfp4_is_bit_exact
  any_shape_in_all_layouts tf32_any_shape cuda_graph_replay fuzzed_launches workspace_garbage
  staged_d_after numerics capture_on_a_second_stream one_plan_shared launch_cache_with)
fuzz_cases=${CUTLASS_RS_GPU_FUZZ_CASES:-1000000}
export CUTLASS_RS_GPU_TESTS_QUICK=1 CUTLASS_RS_GPU_FUZZ_CASES=300 CUTLASS_RS_GPU_FUZZ_THREADS=2

# compute-sanitizer TOOL [OPTION...] -- TEST...: one process, its output appended to $log.
sanitize() {
  local tool=$1
  shift
  local opts=()
  while [ "$1" != -- ]; do
    opts+=("$1")
    shift
  done
  shift
  compute-sanitizer --tool "$tool" --error-exitcode 9 "${opts[@]}" \
    "$gpu" --include-ignored --test-threads=1 --nocapture "$@" >>"$log" 2>&1
}

status=0
for tool in "${tools[@]}"; do
  log=$logs/$tool.log
  : >"$log"
  start=$SECONDS
  rc=0
  case $tool in
    fuzz)
      CUTLASS_RS_GPU_TESTS_QUICK=0 CUTLASS_RS_GPU_FUZZ_THREADS=8 \
        CUTLASS_RS_GPU_FUZZ_CASES=$fuzz_cases \
        "$gpu" --include-ignored --test-threads=1 --nocapture fuzzed_launches >"$log" 2>&1 || rc=$?
      ;;
    initcheck)
      sanitize initcheck --kernel-name-exclude kns=copy_back_kernel -- "${tests[@]}" || rc=$?
      ;;
    racecheck)
      for t in "${tests[@]}"; do
        case $t in
          weight_only_kernels_match | one_plan_shared | launch_cache_with) continue ;;
        esac
        sanitize racecheck -- "$t" || rc=$?
      done
      for k in $("$gpu" --include-ignored --test-threads=1 --nocapture weight_only_kernels_match |
        sed -n 's/: .* problems as the reference$//p' | sort -u); do
        CUTLASS_RS_GPU_TESTS_KERNEL=$k sanitize racecheck -- weight_only_kernels_match || rc=$?
      done
      ;;
    *)
      sanitize "$tool" -- "${tests[@]}" || rc=$?
      ;;
  esac
  [ $rc -eq 0 ] || status=1
  echo "== $tool: exit $rc, $((SECONDS - start)) s"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^test result|cases in .* s:|process didn't terminate" "$log" |
    sort | uniq -c
done
exit $status
