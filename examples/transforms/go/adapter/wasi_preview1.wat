;; A minimal WASI preview1 for the Go transform, in place of the standard
;; preview1-to-preview2 adapter.
;;
;; Why: the standard adapter allocates its stack and state with memory.grow
;; (`--realloc-via-memory-grow`) before and while Go's runtime starts, and
;; Go's runtime takes every page up to the memory size it sees at start as
;; its own heap (runtime/os_wasm.go, mem_wasm.go): the two write over each
;; other and the adapter traps on its own corrupted state. Without that flag
;; the adapter calls Go's cabi_realloc before Go's runtime is initialised.
;;
;; So the Go module gets only what its runtime calls, with no state and no
;; allocation, and the component imports no WASI at all:
;;   - no arguments, no environment, no preopened files (EBADF);
;;   - clocks: a counter that advances 1 µs per read (the runtime needs time
;;     to move; a transform has no use for the real time of day);
;;   - random_get: a xorshift sequence (hash seeds);
;;   - fd_write: accepted and discarded (stdout and stderr go nowhere: report
;;     problems through the error result instead);
;;   - poll_oneoff: ENOTSUP (a transform does not sleep); proc_exit: a trap.
(module
  (import "env" "memory" (memory 0))
  (global $clock (mut i64) (i64.const 1700000000000000000))
  (global $rand (mut i64) (i64.const 0x2545F4914F6CDD1D))
  (func (export "sched_yield") (result i32) (i32.const 0))
  (func (export "proc_exit") (param i32) (unreachable))
  (func (export "args_get") (param i32 i32) (result i32) (i32.const 0))
  (func (export "args_sizes_get") (param $argc i32) (param $size i32) (result i32)
    (i32.store (local.get $argc) (i32.const 0))
    (i32.store (local.get $size) (i32.const 0))
    (i32.const 0))
  (func (export "environ_get") (param i32 i32) (result i32) (i32.const 0))
  (func (export "environ_sizes_get") (param $n i32) (param $size i32) (result i32)
    (i32.store (local.get $n) (i32.const 0))
    (i32.store (local.get $size) (i32.const 0))
    (i32.const 0))
  (func (export "clock_time_get") (param i32) (param i64) (param $out i32) (result i32)
    (global.set $clock (i64.add (global.get $clock) (i64.const 1000)))
    (i64.store (local.get $out) (global.get $clock))
    (i32.const 0))
  (func (export "fd_write") (param $fd i32) (param $iovs i32) (param $n i32) (param $out i32) (result i32)
    (local $total i32)
    (block $done (loop $next
      (br_if $done (i32.eqz (local.get $n)))
      (local.set $total (i32.add (local.get $total) (i32.load offset=4 (local.get $iovs))))
      (local.set $iovs (i32.add (local.get $iovs) (i32.const 8)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br $next)))
    (i32.store (local.get $out) (local.get $total))
    (i32.const 0))
  (func (export "random_get") (param $buf i32) (param $len i32) (result i32)
    (local $x i64)
    (block $done (loop $next
      (br_if $done (i32.eqz (local.get $len)))
      (local.set $x (global.get $rand))
      (local.set $x (i64.xor (local.get $x) (i64.shl (local.get $x) (i64.const 13))))
      (local.set $x (i64.xor (local.get $x) (i64.shr_u (local.get $x) (i64.const 7))))
      (local.set $x (i64.xor (local.get $x) (i64.shl (local.get $x) (i64.const 17))))
      (global.set $rand (local.get $x))
      (i32.store8 (local.get $buf) (i32.wrap_i64 (local.get $x)))
      (local.set $buf (i32.add (local.get $buf) (i32.const 1)))
      (local.set $len (i32.sub (local.get $len) (i32.const 1)))
      (br $next)))
    (i32.const 0))
  (func (export "poll_oneoff") (param i32) (param i32) (param i32) (param $out i32) (result i32)
    (i32.store (local.get $out) (i32.const 0))
    (i32.const 58))
  (func (export "fd_close") (param i32) (result i32) (i32.const 8))
  (func (export "fd_read") (param i32 i32 i32 i32) (result i32) (i32.const 8))
  (func (export "fd_fdstat_get") (param i32 i32) (result i32) (i32.const 8))
  (func (export "fd_fdstat_set_flags") (param i32 i32) (result i32) (i32.const 8))
  (func (export "fd_prestat_get") (param i32 i32) (result i32) (i32.const 8))
  (func (export "fd_prestat_dir_name") (param i32 i32 i32) (result i32) (i32.const 8))
)
