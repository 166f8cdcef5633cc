//! Test-only: the allocator of the crate's test binary counts, per thread, the allocations
//! made and the bytes live, so that tests can bound what a path allocates: how often
//! ([`allocations_in`]: the hot paths) and how much at most ([`peak_of`]: decoders fed lying
//! length fields).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn note(delta: isize, allocation: bool) {
    if allocation {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    }
    let _ = LIVE.try_with(|l| {
        let now = (l.get() as isize + delta).max(0) as usize;
        l.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

// SAFETY: every call is passed to the system allocator unchanged; the counts are thread-local
// cells with const initializers, which allocate nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize, true);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(-(layout.size() as isize), false);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size() as isize, true);
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size as isize - layout.size() as isize, true);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// What `f` returns, and the allocations (and reallocations) this thread made in it.
pub fn allocations_in<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = ALLOCATIONS.with(|c| c.get());
    let out = f();
    (out, ALLOCATIONS.with(|c| c.get()) - before)
}

/// Peak bytes allocated by this thread while `f` runs, above what was live before.
pub fn peak_of(f: impl FnOnce()) -> usize {
    let base = LIVE.with(|l| l.get());
    PEAK.with(|p| p.set(base));
    f();
    PEAK.with(|p| p.get()) - base
}
