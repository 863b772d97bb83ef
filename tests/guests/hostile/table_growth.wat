;; A `bytes` world transform that grows a table by ten million elements
;; (tens of megabytes of host memory outside any linear memory). Drops
;; every record if the sandbox lets it.
(module
  (memory (export "memory") 1)
  (table $hoard 0 funcref)
  ;; A bump allocator for the host's canonical-ABI copies into memory 0.
  (global $bump (mut i32) (i32.const 8192))
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $at i32)
    (local.set $at (i32.and (i32.add (global.get $bump) (i32.const 7)) (i32.const -8)))
    (global.set $bump (i32.add (local.get $at) (local.get 3)))
    (block $fits
      (br_if $fits (i32.le_u (global.get $bump) (i32.mul (memory.size 0) (i32.const 65536))))
      (drop (memory.grow 0 (i32.add (i32.const 1)
        (i32.div_u (i32.sub (global.get $bump) (i32.mul (memory.size 0) (i32.const 65536)))
                   (i32.const 65536))))))
    (local.get $at))
  ;; configure: the status "configured" (0x01 0x00) at 1024; its (pointer,
  ;; length) at 2048.
  (data (memory 0) (i32.const 1024) "\01\00")
  (data (memory 0) (i32.const 2048) "\00\04\00\00\02\00\00\00")
  (func (export "configure") (param i32 i32) (result i32) (i32.const 2048))
  ;; The results of a one-record batch: version 1, one result, ok with no
  ;; records (the record is dropped), at 1100; its (pointer, length) at 2064.
  (data (memory 0) (i32.const 1100) "\01\01\00\00\00\00\00\00\00\00")
  (data (memory 0) (i32.const 2064) "\4c\04\00\00\0a\00\00\00")
  (func (export "transform-batch") (param i32 i32) (result i32)
    (drop (table.grow $hoard (ref.null func) (i32.const 10000000)))
    (i32.const 2064))
)
