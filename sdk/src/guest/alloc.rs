//! The memory allocator [`export_transform!`](crate::export_transform)
//! installs in a transform component: size classes with free lists, carved
//! from chunks of the system allocator (wasi-libc's dlmalloc).
//!
//! Why: a transform allocates and frees a handful of small blocks for every
//! record (the record's fields, the result's `Vec`, every key and string of
//! a parsed JSON value), and each call into dlmalloc costs a few hundred
//! instructions in WebAssembly: callgrind counted allocation at a fifth of
//! the reference transform's instructions and over a quarter of the
//! boundary's. Here a freed block goes onto its class's list and the next
//! allocation of that class takes it back, in a few instructions.
//!
//! The cost: a block freed to one class serves only that class, so memory
//! a transform used for many blocks of one size is not reused for another
//! size. Classes stop at [`LARGEST_CLASS`] bytes; larger blocks, and blocks
//! aligned to more than [`GRANULE`], go to the system allocator as before.
//! A component's linear memory never shrinks anyway, and the sandbox's
//! `limits.memory.bytes` bounds it either way.

use std::alloc::{GlobalAlloc, Layout};
use std::ptr;

/// Every block is a multiple of this size and aligned to it.
pub const GRANULE: usize = 16;
/// Classes every 16 bytes up to this size...
const FINE_LIMIT: usize = 256;
/// ...then every power of two up to this one.
pub const LARGEST_CLASS: usize = 4096;
/// 16 fine classes (16..=256) and 4 coarse ones (512..=4096).
const CLASSES: usize = FINE_LIMIT / GRANULE + 4;
/// What is taken from the system allocator at a time for small blocks.
const CHUNK: usize = 64 * 1024;

/// The class of a block of `size` bytes, if it is small enough for one.
#[inline]
fn class_of(size: usize) -> Option<usize> {
    if size <= FINE_LIMIT {
        Some(size.saturating_sub(1) / GRANULE)
    } else if size <= LARGEST_CLASS {
        // 257..=512 is class 16, ..., 2049..=4096 is class 19.
        Some(FINE_LIMIT / GRANULE + size.next_power_of_two().trailing_zeros() as usize - 9)
    } else {
        None
    }
}

#[inline]
fn class_size(class: usize) -> usize {
    let fine = FINE_LIMIT / GRANULE;
    if class < fine {
        (class + 1) * GRANULE
    } else {
        512 << (class - fine)
    }
}

/// The allocator's state: a free list per class and the chunk being carved.
/// Not thread-safe; [`GuestAllocator`] wraps it for a single-threaded guest.
pub struct Pools {
    /// The first free block of each class; each free block's first word
    /// points to the next.
    free: [*mut u8; CLASSES],
    /// The unused part of the current chunk.
    next: usize,
    end: usize,
}

impl Pools {
    pub const fn new() -> Self {
        Pools {
            free: [ptr::null_mut(); CLASSES],
            next: 0,
            end: 0,
        }
    }

    #[inline]
    fn pooled(layout: Layout) -> Option<usize> {
        if layout.align() > GRANULE {
            return None;
        }
        class_of(layout.size())
    }

    /// # Safety
    /// As [`GlobalAlloc::alloc`]; `system` must be the allocator every
    /// other call of this `Pools` uses.
    #[inline]
    pub unsafe fn alloc(&mut self, layout: Layout, system: &impl GlobalAlloc) -> *mut u8 {
        let Some(class) = Self::pooled(layout) else {
            return unsafe { system.alloc(layout) };
        };
        let head = self.free[class];
        if !head.is_null() {
            // SAFETY: a free block of this class holds the next one's address.
            self.free[class] = unsafe { head.cast::<*mut u8>().read() };
            return head;
        }
        let size = class_size(class);
        if self.end - self.next < size {
            // The rest of this chunk is too small: start another. What is
            // left of the old one (less than this class's size) is not used.
            let chunk_layout = Layout::from_size_align(CHUNK, GRANULE).expect("a valid layout");
            let chunk = unsafe { system.alloc(chunk_layout) };
            if chunk.is_null() {
                return chunk;
            }
            self.next = chunk as usize;
            self.end = self.next + CHUNK;
        }
        let block = self.next;
        self.next += size;
        block as *mut u8
    }

    /// # Safety
    /// As [`GlobalAlloc::dealloc`]: `block` came from this `Pools` with
    /// this `layout`.
    #[inline]
    pub unsafe fn dealloc(&mut self, block: *mut u8, layout: Layout, system: &impl GlobalAlloc) {
        match Self::pooled(layout) {
            Some(class) => {
                // SAFETY: every block is at least GRANULE bytes and aligned
                // to it, so it can hold a pointer.
                unsafe { block.cast::<*mut u8>().write(self.free[class]) };
                self.free[class] = block;
            }
            None => unsafe { system.dealloc(block, layout) },
        }
    }

    /// # Safety
    /// As [`GlobalAlloc::realloc`].
    pub unsafe fn realloc(
        &mut self,
        block: *mut u8,
        layout: Layout,
        new_size: usize,
        system: &impl GlobalAlloc,
    ) -> *mut u8 {
        let new_layout = match Layout::from_size_align(new_size, layout.align()) {
            Ok(l) => l,
            Err(_) => return ptr::null_mut(),
        };
        match (Self::pooled(layout), Self::pooled(new_layout)) {
            (Some(old), Some(new)) if old == new => return block,
            (None, None) => return unsafe { system.realloc(block, layout, new_size) },
            _ => {}
        }
        let moved = unsafe { self.alloc(new_layout, system) };
        if !moved.is_null() {
            unsafe {
                ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                self.dealloc(block, layout, system);
            }
        }
        moved
    }
}

impl Default for Pools {
    fn default() -> Self {
        Self::new()
    }
}

/// [`Pools`] as the global allocator of a single-threaded WebAssembly
/// guest (`wasm32-wasip2` has no threads).
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
pub struct GuestAllocator(std::cell::UnsafeCell<Pools>);

#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
impl GuestAllocator {
    pub const fn new() -> Self {
        GuestAllocator(std::cell::UnsafeCell::new(Pools::new()))
    }
}

#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
impl Default for GuestAllocator {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: without the `atomics` feature a WebAssembly module has one
// thread, so the pools are never touched by two at once.
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
unsafe impl Sync for GuestAllocator {}

#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
unsafe impl GlobalAlloc for GuestAllocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { (*self.0.get()).alloc(layout, &std::alloc::System) }
    }

    #[inline]
    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        unsafe { (*self.0.get()).dealloc(block, layout, &std::alloc::System) }
    }

    #[inline]
    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe { (*self.0.get()).realloc(block, layout, new_size, &std::alloc::System) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::System;
    use std::cell::Cell;

    /// The system allocator, counting the calls that reach it.
    #[derive(Default)]
    struct Counted {
        allocs: Cell<usize>,
        frees: Cell<usize>,
    }

    unsafe impl GlobalAlloc for Counted {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            self.allocs.set(self.allocs.get() + 1);
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
            self.frees.set(self.frees.get() + 1);
            unsafe { System.dealloc(block, layout) }
        }
    }

    #[test]
    fn classes_cover_every_small_size_with_room_to_spare() {
        for size in 1..=LARGEST_CLASS {
            let class = class_of(size).unwrap();
            assert!(class < CLASSES, "size {size}");
            assert!(class_size(class) >= size, "size {size} in class {class}");
            assert_eq!(class_size(class) % GRANULE, 0);
            if class > 0 {
                assert!(
                    class_size(class - 1) < size,
                    "size {size} fits a smaller class"
                );
            }
        }
        assert_eq!(class_of(LARGEST_CLASS + 1), None);
    }

    #[test]
    fn a_freed_block_serves_the_next_allocation_of_its_class_without_the_system() {
        let system = Counted::default();
        let mut pools = Pools::new();
        let layout = Layout::from_size_align(40, 8).unwrap();
        unsafe {
            let a = pools.alloc(layout, &system);
            let b = pools.alloc(layout, &system);
            assert_ne!(a, b);
            assert_eq!(a as usize % GRANULE, 0);
            a.write_bytes(0xAB, 40);
            b.write_bytes(0xCD, 40);
            pools.dealloc(a, layout, &system);
            let c = pools.alloc(Layout::from_size_align(33, 1).unwrap(), &system);
            assert_eq!(c, a, "the same class reuses the freed block");
            assert_eq!(*b.add(39), 0xCD, "the other block is untouched");
            pools.dealloc(c, layout, &system);
            pools.dealloc(b, layout, &system);
        }
        assert_eq!(system.allocs.get(), 1, "one chunk for all of it");
        assert_eq!(system.frees.get(), 0);
    }

    #[test]
    fn large_and_overaligned_blocks_go_to_the_system() {
        let system = Counted::default();
        let mut pools = Pools::new();
        let big = Layout::from_size_align(LARGEST_CLASS + 1, 8).unwrap();
        let aligned = Layout::from_size_align(64, 64).unwrap();
        unsafe {
            let a = pools.alloc(big, &system);
            let b = pools.alloc(aligned, &system);
            assert_eq!(b as usize % 64, 0);
            pools.dealloc(a, big, &system);
            pools.dealloc(b, aligned, &system);
        }
        assert_eq!((system.allocs.get(), system.frees.get()), (2, 2));
    }

    #[test]
    fn realloc_keeps_the_contents_across_classes_and_into_the_system() {
        let system = Counted::default();
        let mut pools = Pools::new();
        unsafe {
            let mut layout = Layout::from_size_align(1, 1).unwrap();
            let mut block = pools.alloc(layout, &system);
            block.write(0);
            // Grow a byte at a time past every class, as a Vec<u8> pushed
            // to would (only more often), checking every byte survives.
            for size in 2..=(LARGEST_CLASS * 3) {
                block = pools.realloc(block, layout, size, &system);
                assert!(!block.is_null());
                layout = Layout::from_size_align(size, 1).unwrap();
                block.add(size - 1).write((size % 251) as u8);
            }
            for i in 1..layout.size() {
                assert_eq!(*block.add(i), ((i + 1) % 251) as u8, "byte {i}");
            }
            // And shrink back into a class.
            let small = pools.realloc(block, layout, 100, &system);
            assert_eq!(*small.add(99), 100);
            pools.dealloc(small, Layout::from_size_align(100, 1).unwrap(), &system);
        }
    }

    #[test]
    fn a_chunk_too_small_for_a_class_starts_another() {
        let system = Counted::default();
        let mut pools = Pools::new();
        let layout = Layout::from_size_align(LARGEST_CLASS, 8).unwrap();
        let per_chunk = CHUNK / LARGEST_CLASS;
        let blocks: Vec<*mut u8> = (0..per_chunk + 1)
            .map(|_| unsafe { pools.alloc(layout, &system) })
            .collect();
        assert_eq!(system.allocs.get(), 2);
        let mut sorted = blocks.clone();
        sorted.sort();
        for pair in sorted.windows(2) {
            assert!(
                pair[1] as usize - pair[0] as usize >= LARGEST_CLASS,
                "blocks overlap"
            );
        }
        // The chunks are the test's to leak: a guest never returns them.
    }
}
