;; A `bytes` world transform that spreads its memory over nine linear
;; memories (multi-memory): each within limits.memory.bytes, together
;; twice over it. Drops every record if the sandbox lets it.
(module
  (memory (export "memory") 1)
  (memory $m1 0)
  (memory $m2 0)
  (memory $m3 0)
  (memory $m4 0)
  (memory $m5 0)
  (memory $m6 0)
  (memory $m7 0)
  (memory $m8 0)
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
    (drop (memory.grow $m1 (i32.const 16)))
    (drop (memory.grow $m2 (i32.const 16)))
    (drop (memory.grow $m3 (i32.const 16)))
    (drop (memory.grow $m4 (i32.const 16)))
    (drop (memory.grow $m5 (i32.const 16)))
    (drop (memory.grow $m6 (i32.const 16)))
    (drop (memory.grow $m7 (i32.const 16)))
    (drop (memory.grow $m8 (i32.const 16)))
    (i32.const 2064))
)
